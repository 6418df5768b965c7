"""Scenarios a NumPy or PyTorch user runs on day one (QA): each test is a silent failure or an
unclear error that was found and fixed; it fails on the code before its fix."""

import numpy as np
import pytest
import scipy.special

import tinytensor as tt


# ----- cross_entropy: labels, the softmax fusion, retained and hand-made leaves -------------------
@pytest.mark.parametrize("labels", [[0, -1], [0, 3], [-4, 1]])
@pytest.mark.parametrize("fused", [False, True])
def test_cross_entropy_rejects_out_of_range_class_indices(labels, fused):
    z = tt.tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    p = tt.softmax(z) if fused else tt.tensor(scipy.special.softmax(z.data, axis=-1), requires_grad=True)
    with pytest.raises(IndexError, match=r"class indices must lie in \[0, 3\)"):
        tt.cross_entropy(p, np.array(labels))


def test_cross_entropy_of_softmax_on_plain_arrays_is_finite():
    z = np.array([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]])
    y = np.array([2, 0])
    expected = -np.mean(scipy.special.log_softmax(z, axis=-1)[[0, 1], y])
    assert np.isclose(tt.crossEntropy(tt.softmax(z), y), expected)
    assert np.isclose(tt.cross_entropy(tt.softmax(z), np.eye(3)[y]), expected)


def test_retained_softmax_output_gets_its_gradient():
    z0 = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    y = np.array([2, 0])
    z = tt.tensor(z0, requires_grad=True)
    p = tt.softmax(z)
    p.retain_grad()
    tt.crossEntropy(p, y).backward()
    P = scipy.special.softmax(z0, axis=-1)
    onehot = np.eye(3)[y]
    np.testing.assert_allclose(p.grad, -onehot / P / 2)
    np.testing.assert_allclose(z.grad, (P - onehot) / 2)


@pytest.mark.parametrize("how", ["attribute", "method"])
def test_softmax_output_made_a_leaf_gets_its_gradient(how):
    z0 = np.array([[1.0, 2.0, 3.0]])
    p = tt.softmax(tt.tensor(z0))           # nothing requires grad: off the tape
    if how == "attribute":
        p.requires_grad = True
    else:
        p.requires_grad_()
    assert p.is_leaf
    tt.crossEntropy(p, np.array([2])).backward()
    np.testing.assert_allclose(p.grad, [[0, 0, -1 / scipy.special.softmax(z0)[0, 2]]])


def test_softmax_output_changed_in_place_is_used_as_it_is_now():
    p = tt.softmax(tt.tensor([[1.0, 2.0, 3.0]]))
    p[...] = np.array([[0.5, 0.25, 0.25]])
    assert np.isclose(tt.crossEntropy(p, np.array([0])).item(), np.log(2))


def test_cross_entropy_of_softmax_under_no_grad_is_finite():
    z = tt.tensor([[1000.0, 0.0, -1000.0]], requires_grad=True)
    with tt.no_grad():
        loss = tt.crossEntropy(tt.softmax(z), np.array([2]))
    assert np.isclose(loss.item(), 2000.0)


# ----- tt.save / tt.load ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["model.pt", "checkpoint", "ck.npz"])
def test_load_reads_back_the_path_given_to_save(tmp_path, name):
    path = str(tmp_path / name)
    tt.save({"epoch": 3, "w": np.arange(3.0)}, path)
    back = tt.load(path)
    assert back["epoch"] == 3 and np.array_equal(back["w"], np.arange(3.0))


# ----- function transforms ----------------------------------------------------------------------
def test_hvp_with_arrays_instead_of_tuples_names_the_fix():
    with pytest.raises(TypeError, match=r"hvp: primals and tangents must be tuples"):
        tt.hvp(lambda x: (x ** 3).sum(), np.ones(3), np.ones(3))
    np.testing.assert_allclose(tt.hvp(lambda x: (x ** 3).sum(), (np.ones(3),), (np.ones(3),)), 6.0)


# ----- nn -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [[1.5, 0.5], [-0.1, 0.5]])
def test_bce_loss_rejects_probabilities_outside_0_1(p):
    with pytest.raises(ValueError, match=r"between 0 and 1"):
        tt.nn.BCELoss()(tt.tensor(p, requires_grad=True), np.array([1.0, 0.0]))


# ----- .grad set by hand ------------------------------------------------------------------------
@pytest.mark.parametrize("grad", [np.zeros((3, 2)), [1.0, 2.0], tt.tensor([1.0, 1.0])])
def test_backward_into_a_hand_set_grad_of_another_kind_or_shape_raises(grad):
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    a.grad = grad
    with pytest.raises(TypeError, match=r"\.grad"):
        (a * 2).sum().backward()


def test_backward_accumulates_into_a_hand_set_grad_array():
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    a.grad = np.array([1.0, 1.0])
    (a * 2).sum().backward()
    np.testing.assert_array_equal(a.grad, [3.0, 3.0])


# ----- NumPy functions that carry no gradient ---------------------------------------------------
@pytest.mark.parametrize("call, expected", [
    (lambda t: np.full_like(t, 3.0), np.full(2, 3.0)),
    (lambda t: np.empty_like(t).shape, (2,)),
    (lambda t: np.result_type(t), np.float64),
    (lambda t: np.count_nonzero(t), 1),
    (lambda t: np.any(t), True),
    (lambda t: np.all(t), False),
])
def test_numpy_functions_without_gradient_work_on_tensors_that_require_grad(call, expected):
    t = tt.tensor([0.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(call(t), expected)


@pytest.mark.parametrize("logits", [[[2.0, 1.0, 3.0]], [[-2.0, 0.5, 0.5]]])
def test_cross_entropy_given_logits_instead_of_probabilities_says_so(logits):
    # PyTorch's F.cross_entropy takes logits; tt.cross_entropy takes probabilities
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\].*softmax_cross_entropy"):
        tt.cross_entropy(tt.tensor(logits, requires_grad=True), np.array([2]))


def test_cross_entropy_accepts_probabilities_at_the_bounds():
    p = np.array([[0.0, 0.0, 1.0], [0.5, 0.5, 0.0]])
    assert np.isclose(tt.cross_entropy(p, np.array([2, 0])), np.log(2) / 2)


def test_cross_entropy_gradcheck_at_a_one_hot_probability():
    p = np.array([[0.2, 0.8], [0.0, 1.0]])
    assert tt.gradcheck(lambda p: tt.cross_entropy(p, np.array([1, 1])), p)


# ----- tt.compile ---------------------------------------------------------------------------------
def _add_in_place(a):
    b = a * 2
    b += 1.0
    b *= a
    return b


def _write_into_buffer(a):
    out = tt.zeros(a.shape)
    out[0] = a[1] * 3
    out[1:] = a[:1]
    return out


def _write_into_traced(a):
    b = a * 1
    b[0] = 0.0
    return b.sum()


@pytest.mark.parametrize("f", [_add_in_place, _write_into_buffer, _write_into_traced])
def test_compiled_in_place_operations_are_part_of_the_program(f):
    x1, x2 = np.array([1.0, 2.0]), np.array([3.0, -4.0])
    compiled = tt.compile(f)
    for x in (x1, x2, x1):
        np.testing.assert_allclose(compiled(x), np.asarray(f(tt.tensor(x)).data))
    g = tt.compile(tt.grad(lambda a: tt.sum(f(a))))
    for x in (x1, x2):
        np.testing.assert_allclose(g(x), tt.grad(lambda a: tt.sum(f(a)))(x))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_loss_gradient_on_class_axis_1_images(reduction):
    # (N, C, H, W) logits are moved to class-last: a non-contiguous array for the fused rule
    rng = np.random.default_rng(1)
    z = rng.standard_normal((2, 4, 3, 2))
    y = rng.integers(0, 4, (2, 3, 2))
    loss = tt.nn.CrossEntropyLoss(reduction=reduction)
    assert tt.gradcheck(lambda z: loss(z, y), z)
    assert tt.gradcheck(lambda z: tt.softmax_cross_entropy(np.moveaxis(z, 1, -1), y, reduction), z)


@pytest.mark.parametrize("how", ["attribute", "method", "after_a_walk"])
def test_a_frozen_parameter_stays_in_named_parameters_and_state_dict(how, tmp_path):
    model = tt.nn.Sequential(tt.nn.Linear(3, 4, rng=0), tt.nn.ReLU(), tt.nn.Linear(4, 2, rng=1))
    if how == "after_a_walk":
        list(model.parameters())
    if how == "method":
        model[0].weight.requires_grad_(False)
    else:
        model[0].weight.requires_grad = False
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert "0.weight" in model.state_dict()
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    before = model[0].weight.data.copy()
    tt.nn.MSELoss()(model(np.ones((2, 3))), np.zeros((2, 2))).backward()
    opt.step()
    np.testing.assert_array_equal(model[0].weight.data, before)      # frozen: no gradient, no update
    assert model[0].weight.grad is None and model[0].bias.grad is not None
    other = tt.nn.Sequential(tt.nn.Linear(3, 4, rng=5), tt.nn.ReLU(), tt.nn.Linear(4, 2, rng=6))
    other.load_state_dict(model.state_dict())
    np.testing.assert_array_equal(other[0].weight.data, before)
    assert model.to(np.float64)[0].W.dtype == np.float64


def test_a_constant_tensor_attribute_is_not_a_parameter():
    class Scaled(tt.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = tt.tensor(2.0)
            self.w = tt.tensor([1.0], requires_grad=True)

        def forward(self, x):
            return x * self.scale * self.w

    assert [n for n, _ in Scaled().named_parameters()] == ["w"]


@pytest.mark.parametrize("requires_grad", [False, True])
def test_softmax_input_changed_in_place_afterwards_is_not_used_for_the_loss(requires_grad):
    z = tt.tensor([[1.0, 2.0, 3.0]], requires_grad=requires_grad)
    p = tt.softmax(z)
    expected = -np.log(scipy.special.softmax([1.0, 2.0, 3.0])[0])
    with tt.no_grad():
        z *= 10.0
    assert np.isclose(tt.crossEntropy(p, np.array([0])).item(), expected)


# ----- PyTorch's spellings of backward ----------------------------------------------------------
def test_backward_takes_pytorchs_keywords():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x ** 3
    y.backward(gradient=np.ones(2), retain_graph=True)
    y.sum().backward(retain_graph=False)
    np.testing.assert_allclose(x.grad, 6 * x.data ** 2)
    with pytest.raises(TypeError, match="both"):
        y.backward(np.ones(2), gradient=np.ones(2))
    with pytest.raises(NotImplementedError, match=r"tt\.grad"):
        y.sum().backward(create_graph=True)


def test_sequential_from_an_ordered_dict_keeps_the_names_and_order():
    from collections import OrderedDict
    model = tt.nn.Sequential(OrderedDict([("fc", tt.nn.Linear(2, 3, rng=0)), ("act", tt.nn.ReLU()),
                                          ("out", tt.nn.Linear(3, 1, rng=1))]))
    assert [n for n, _ in model.named_parameters()] == ["fc.weight", "fc.bias", "out.weight", "out.bias"]
    assert len(model) == 3 and isinstance(model[1], tt.nn.ReLU) and model.fc is model[0]
    x = np.ones((4, 2))
    expected = model.out(model.act(model.fc(x)))
    np.testing.assert_array_equal(model(x).data, expected.data)
    model.append(tt.nn.Tanh())
    assert len(model) == 4 and isinstance(model[3], tt.nn.Tanh)


def test_retain_grad_after_the_fused_loss_was_computed_says_when_to_call_it():
    z = tt.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    p = tt.softmax(z)
    loss = tt.crossEntropy(p, np.array([2]))
    with pytest.raises(RuntimeError, match=r"retain_grad\(\) before"):
        p.retain_grad()
    loss.backward()
    q = tt.softmax(z)
    q.retain_grad()                         # before the loss: fine, and q gets its gradient
    tt.crossEntropy(q, np.array([2])).backward()
    assert q.grad is not None

"""Issue 20: the cases a differential fuzzer and a fault battery found inside the engine, each
as a plain regression test (negative axes, piecewise rules that select, complex refused, size-0
edges, small traps)."""

import io
import json
import zipfile

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


# ----- negative axes ------------------------------------------------------------------------------
def test_transpose_with_a_negative_axis_has_the_transposed_vjp():
    W = np.arange(9.0).reshape(3, 3)
    x = tt.tensor(np.zeros((3, 3)), requires_grad=True)
    (tt.transpose(x, (-1, 0)) * W).sum().backward()
    np.testing.assert_array_equal(x.grad, W.T)


@pytest.mark.parametrize("spell", [
    lambda x: tt.transpose(x, (0, -1, 1)), lambda x: np.transpose(x, (0, -1, 1)),
    lambda x: x.transpose(0, -1, 1), lambda x: tt.transpose(x, (-3, -1, -2))])
def test_every_spelling_of_a_negative_transpose(spell):
    rng = np.random.default_rng(0)
    x0, W = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 3))
    expected = np.transpose(W, (0, 2, 1))
    g = tt.grad(lambda x: (spell(x) * W).sum())(x0)
    np.testing.assert_allclose(g, expected)
    _, back = tt.vjp(lambda x: spell(x), x0)
    np.testing.assert_allclose(back(W)[0], expected)
    np.testing.assert_allclose(tt.compile(tt.grad(lambda x: (spell(x) * W).sum()))(x0), expected)


def test_moveaxis_and_swapaxes_with_negative_axes_match_numpy_in_both_modes():
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((2, 3, 4))
    for f, ref in [(lambda x: tt.moveaxis(x, -1, 0), lambda x: np.moveaxis(x, -1, 0)),
                   (lambda x: tt.swapaxes(x, -1, -3), lambda x: np.swapaxes(x, -1, -3))]:
        W = rng.standard_normal(ref(x0).shape)
        out, back = tt.vjp(f, x0)
        t = rng.standard_normal(x0.shape)
        _, tangent = tt.jvp(f, (x0,), (t,))
        np.testing.assert_allclose(np.sum(back(W)[0] * t), np.sum(W * tangent))
        np.testing.assert_allclose(tangent, ref(t))


# ----- piecewise rules select: an unchosen branch gives an exact 0 --------------------------------
def test_grad_of_sqrt_of_relu_is_zero_where_relu_is_flat():
    g = tt.grad(lambda x: tt.sqrt(tt.relu(x)).sum())(np.array([-1.0, 4.0]))
    np.testing.assert_array_equal(g, [0.0, 0.25])


def test_the_double_where_pattern_gives_zero_not_nan():
    f = lambda x: tt.where(x > 0, tt.sqrt(tt.relu(x)), 0.0).sum()   # noqa: E731
    np.testing.assert_array_equal(tt.grad(f)(np.array([-1.0, 4.0])), [0.0, 0.25])


def test_abs_of_relu_to_a_half_and_log_of_relu():
    g = tt.grad(lambda x: (tt.abs(tt.relu(x)) ** 0.5).sum())(np.array([-1.0, 4.0]))
    np.testing.assert_array_equal(g, [0.0, 0.25])
    g = tt.grad(lambda x: (tt.log(tt.relu(x)) * np.array([0.0, 1.0])).sum())(np.array([-1.0, 4.0]))
    np.testing.assert_array_equal(g, [0.0, 0.25])


def test_abs_at_zero_selects():
    g = tt.grad(lambda x: tt.sqrt(tt.abs(x)).sum())(np.array([0.0, 4.0, -4.0]))
    np.testing.assert_array_equal(g, [0.0, 0.25, -0.25])


@pytest.mark.parametrize("op", [tt.maximum, tt.minimum, tt.fmax, tt.fmin])
def test_maximum_minimum_select(op):
    # where a loses, the output is b and sqrt(out - b) has an infinite slope: a's share is an exact 0
    a, b = np.array([0.0, 4.0]), np.array([1.0, -1.0])
    upper = op in (tt.maximum, tt.fmax)
    a, b = (a, b) if upper else (-a, -b)
    g = tt.grad(lambda a: (tt.sqrt(op(a, b) - b) if upper else tt.sqrt(b - op(a, b))).sum())(a)
    np.testing.assert_allclose(g, [0.0, (0.5 if upper else -0.5) / np.sqrt(5.0)])
    assert g[0] == 0.0


def test_clip_and_leaky_relu_select():
    g = tt.grad(lambda x: tt.sqrt(tt.clip(x, 0.0, 10.0)).sum())(np.array([-1.0, 4.0]))
    np.testing.assert_array_equal(g, [0.0, 0.25])
    g = tt.grad(lambda x: tt.sqrt(tt.leaky_relu(x, 0.0)).sum())(np.array([-1.0, 4.0]))
    np.testing.assert_array_equal(g, [0.0, 0.25])


def test_max_reduction_selects():
    g = tt.grad(lambda x: tt.sqrt(tt.max(x) - 4.0 + tt.relu(x - 10)).sum())(np.array([-1.0, 4.0]))
    assert not np.isnan(g).any()


def test_second_order_of_a_norm_with_ord_of_relu():
    f = lambda x: tt.linalg.norm(tt.relu(x), ord=1.5)   # noqa: E731
    x0, v = np.array([-1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])
    hv = tt.hvp(f, (x0,), (v,))
    assert np.isfinite(hv).all() and hv[0] == 0.0
    # against differences of gradients on the smooth part
    eps = 1e-6
    fd = (tt.grad(f)(x0 + eps * v) - tt.grad(f)(x0 - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-8)


def test_relu_selection_holds_at_second_order():
    # d2/dx2 of sqrt(relu(x)) at x = -1 is 0 (the branch is flat), not NaN
    x0, v = np.array([-1.0, 4.0]), np.array([1.0, 1.0])
    hv = tt.hvp(lambda x: tt.sqrt(tt.relu(x)).sum(), (x0,), (v,))
    np.testing.assert_allclose(hv, [0.0, -0.25 * 0.5 / 4.0])


def test_jvp_of_piecewise_rules_selects():
    t = np.array([np.inf, 1.0])        # an infinite tangent on the flat side gives an exact 0
    for f in (tt.relu, tt.abs, lambda x: tt.maximum(x, 0.0), lambda x: tt.clip(x, 0.0, None)):
        _, out = tt.jvp(f, (np.array([0.0 if f is tt.abs else -1.0, 4.0]),), (t,))
        np.testing.assert_array_equal(out, [0.0, 1.0])


# ----- complex refused ------------------------------------------------------------------------------
def test_complex_tensor_that_requires_grad_is_refused():
    with pytest.raises(TypeError, match="complex"):
        tt.tensor(np.array([1 + 2j]), requires_grad=True)
    tt.tensor(np.array([1 + 2j]))        # without requires_grad: a plain value, allowed


def test_complex_input_to_a_layer_is_refused():
    with pytest.raises(TypeError, match="complex"):
        nn.Linear(2, 3)(np.array([[1 + 2j, 0.5]]))
    with pytest.raises(TypeError, match="complex"):
        nn.Linear(2, 3)(tt.tensor(np.array([[1 + 2j, 0.5]])))


def test_complex_input_to_the_transforms_is_refused():
    z = np.array([1 + 2j])
    for call in (lambda: tt.grad(lambda z: (z * z).sum().real)(z),
                 lambda: tt.vjp(lambda z: z * z, z), lambda: tt.jvp(lambda z: z * z, (z,), (z,)),
                 lambda: tt.value_and_grad(lambda z: (z * z).sum())(z)):
        with pytest.raises(TypeError, match="complex"):
            call()


# ----- size 0 -----------------------------------------------------------------------------------------
def test_take_with_an_empty_list():
    x = tt.tensor(np.arange(3.0), requires_grad=True)
    out = tt.take(x, [])
    assert out.shape == (0,) and out.dtype == np.float64
    out.sum().backward()
    np.testing.assert_array_equal(x.grad, np.zeros(3))


@pytest.mark.parametrize("shape,axis", [((2, 0), -1), ((0, 3), 0), ((0,), 0)])
def test_softmax_family_over_an_empty_axis(shape, axis):
    import scipy.special
    x0 = np.zeros(shape)
    # SciPy's softmax raises on an empty axis; PyTorch's returns the empty array, as here
    for op, ref in [(tt.softmax, lambda x, axis: x.copy()), (tt.log_softmax, lambda x, axis: x.copy()),
                    (tt.logsumexp, scipy.special.logsumexp)]:
        expected = ref(x0, axis=axis)
        out = op(tt.tensor(x0), axis=axis)
        assert out.shape == np.shape(expected)
        np.testing.assert_array_equal(out.data, expected)
        g = tt.grad(lambda x: op(x, axis=axis).sum())(x0)
        assert g.shape == shape


def test_tensordot_inner_and_dot_over_a_zero_length_axis():
    a, b = np.zeros((2, 0)), np.zeros((0, 3))
    np.testing.assert_array_equal(tt.tensordot(tt.tensor(a), b, axes=1).data, np.tensordot(a, b, axes=1))
    c = np.zeros((3, 0))
    np.testing.assert_array_equal(tt.inner(tt.tensor(a), c).data, np.inner(a, c))
    ga = tt.grad(lambda a: tt.tensordot(a, b, axes=1).sum())(a)
    assert ga.shape == (2, 0)
    # dot's second order rule goes through tensordot
    A, B = np.zeros((2, 0)), np.zeros((4, 0, 3))
    f = lambda A: (tt.dot(A, B) ** 2).sum()   # noqa: E731
    assert tt.hvp(f, (A,), (A,)).shape == (2, 0)
    A, B = np.ones((2, 3)), np.ones((0, 3, 2))
    f = lambda A: (tt.dot(A, B) ** 2).sum()   # noqa: E731
    assert tt.hvp(f, (A,), (A,)).shape == (2, 3)


def test_svd_of_an_empty_batch():
    a = np.zeros((0, 3, 3))
    U, s, Vh = tt.linalg.svd(tt.tensor(a), full_matrices=False)
    assert U.shape == (0, 3, 3) and s.shape == (0, 3) and Vh.shape == (0, 3, 3)
    g = tt.grad(lambda a: tt.linalg.svd(a, full_matrices=False)[1].sum())(a)
    assert g.shape == (0, 3, 3)


# ----- small traps ------------------------------------------------------------------------------------
def test_cross_entropy_loss_of_1d_logits_with_integer_labels_raises():
    with pytest.raises(ValueError, match="BCEWithLogitsLoss"):
        nn.CrossEntropyLoss()(tt.tensor(np.array([0.5, 1.0, 2.0])), np.array([0, 1, 1]))
    # (C,) logits with a 0-d label are one unbatched example, as PyTorch
    loss = nn.CrossEntropyLoss()(tt.tensor(np.array([0.5, 1.0, 2.0])), np.array(2))
    np.testing.assert_allclose(loss.data, -np.log(np.exp(2.0) / np.exp([0.5, 1.0, 2.0]).sum()))


def test_load_state_dict_returns_missing_and_unexpected_keys():
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    state = model.state_dict()
    result = model.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    missing, unexpected = result
    assert missing == [] and unexpected == []
    partial = {k: v for k, v in list(state.items())[1:]}
    partial["extra"] = np.zeros(1)
    result = model.load_state_dict(partial, strict=False)
    assert result.missing_keys == [list(state)[0]] and result.unexpected_keys == ["extra"]


def test_load_of_a_deeply_nested_structure_raises_clearly(tmp_path):
    path = tmp_path / "deep.npz"
    text = '{"format": "tinytensor-checkpoint-1", "root": ' + '{"list": [' * 100_000 + \
        ']}' * 100_000 + '}'
    np.savez(path, __structure__=np.array(text))
    with pytest.raises(ValueError, match="nested"):
        tt.load(path)


def test_load_of_an_npz_member_that_is_not_npy_raises(tmp_path):
    path = tmp_path / "odd.npz"
    buffer = io.BytesIO()
    np.save(buffer, np.array(json.dumps({"format": "tinytensor-checkpoint-1", "root": {"array": "a0"}})))
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("__structure__.npy", buffer.getvalue())
        z.writestr("a0", b"not an array")
    with pytest.raises(ValueError, match="a0"):
        tt.load(path)


@pytest.mark.parametrize("op", [tt.std, tt.var])
def test_std_and_var_at_zero_spread_are_exactly_zero(op):
    for x0 in (np.full(3, 2.8067178040220133), np.full((2, 5), 0.1), np.full(7, 1e300 / 3)):
        x = tt.tensor(x0, requires_grad=True)
        y = op(x)
        assert y.data == 0.0
        y.backward()
        np.testing.assert_array_equal(x.grad, np.zeros_like(x0))
    x0 = np.array([[0.1, 0.1, 0.1], [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(op(tt.tensor(x0), axis=1).data[0], 0.0)
    np.testing.assert_allclose(op(tt.tensor(x0), axis=1).data[1], op(np.array([1.0, 2.0, 3.0])))
    g = tt.grad(lambda x: op(x, axis=1).sum())(x0)
    np.testing.assert_array_equal(g[0], 0.0)


# ----- found by tests/fuzz.py ---------------------------------------------------------------------------
def test_compiled_gradient_of_power_on_0d_values_is_bit_for_bit_eager():
    # on NumPy scalars (0-d values in the compiled program) `**` and math.log are the C library's,
    # which differ in the last bit from the ufuncs eager mode runs on 0-d arrays
    u = np.array(0.7)
    g = tt.grad(lambda a, b: tt.sum(((tt.sigmoid(a) + 0.5) ** b) * u), argnums=(0, 1))
    c = tt.compile(g)
    c(np.array(0.1), np.array(0.2))
    rng = np.random.default_rng(0)
    for _ in range(100):
        a, b = np.array(rng.standard_normal()), np.array(rng.standard_normal())
        for got, want in zip(c(a, b), g(a, b)):
            assert np.array_equal(got, want)


def test_norm_inf_over_an_empty_axis_is_zero_as_numpy():
    x = np.zeros((0, 2))
    np.testing.assert_array_equal(tt.linalg.norm(tt.tensor(x), ord=np.inf, axis=0).data,
                                  np.linalg.norm(x, ord=np.inf, axis=0))
    assert tt.grad(lambda x: tt.linalg.norm(x, ord=np.inf, axis=0).sum())(x).shape == (0, 2)


NEGATIVE_AXES = {   # op with negative axes, and the same op with the axes NumPy reads them as
    "sum": (lambda x: tt.sum(x, axis=-1), lambda x: tt.sum(x, axis=2)),
    "mean": (lambda x: tt.mean(x, axis=(-1, -3)), lambda x: tt.mean(x, axis=(2, 0))),
    "max": (lambda x: tt.max(x, axis=-2), lambda x: tt.max(x, axis=1)),
    "min": (lambda x: tt.min(x, axis=-2, keepdims=True), lambda x: tt.min(x, axis=1, keepdims=True)),
    "prod": (lambda x: tt.prod(x, axis=-1), lambda x: tt.prod(x, axis=2)),
    "var": (lambda x: tt.var(x, axis=(-1, -2)), lambda x: tt.var(x, axis=(2, 1))),
    "std": (lambda x: tt.std(x, axis=-3, ddof=1), lambda x: tt.std(x, axis=0, ddof=1)),
    "logsumexp": (lambda x: tt.logsumexp(x, axis=(-1,)), lambda x: tt.logsumexp(x, axis=(2,))),
    "softmax": (lambda x: nn.functional.softmax(x, dim=-2), lambda x: tt.softmax(x, axis=1)),
    "log_softmax": (lambda x: nn.functional.log_softmax(x, dim=-3), lambda x: tt.log_softmax(x, axis=0)),
    "cumsum": (lambda x: tt.cumsum(x, axis=-2), lambda x: tt.cumsum(x, axis=1)),
    "diff": (lambda x: tt.diff(x, axis=-1), lambda x: tt.diff(x, axis=2)),
    "flip": (lambda x: tt.flip(x, axis=(-1, -2)), lambda x: tt.flip(x, axis=(2, 1))),
    "roll": (lambda x: tt.roll(x, 1, axis=-1), lambda x: tt.roll(x, 1, axis=2)),
    "take": (lambda x: tt.take(x, [0, 2], axis=-1), lambda x: tt.take(x, [0, 2], axis=2)),
    "repeat": (lambda x: tt.repeat(x, 2, axis=-2), lambda x: tt.repeat(x, 2, axis=1)),
    "split": (lambda x: tt.split(x, 2, axis=-1)[1], lambda x: tt.split(x, 2, axis=2)[1]),
    "concatenate": (lambda x: tt.concatenate([x, x * 2], axis=-2),
                    lambda x: tt.concatenate([x, x * 2], axis=1)),
    "stack": (lambda x: tt.stack([x, x * 2], axis=-2), lambda x: tt.stack([x, x * 2], axis=2)),
    "expand_dims": (lambda x: tt.expand_dims(x, -2), lambda x: tt.expand_dims(x, 2)),
    "moveaxis": (lambda x: tt.moveaxis(x, -1, -3), lambda x: tt.moveaxis(x, 2, 0)),
    "swapaxes": (lambda x: tt.swapaxes(x, -1, -3), lambda x: tt.swapaxes(x, 2, 0)),
    "transpose": (lambda x: x.transpose(-1, -3, -2), lambda x: tt.transpose(x, (2, 0, 1))),
    "diagonal": (lambda x: tt.diagonal(x, 0, -1, -2), lambda x: tt.diagonal(x, 0, 2, 1)),
    "trace": (lambda x: tt.trace(x, 1, -1, -2), lambda x: tt.trace(x, 1, 2, 1)),
    "tensordot": (lambda x: tt.tensordot(x, x, axes=([-1, -3], [-1, -3])),
                  lambda x: tt.tensordot(x, x, axes=([2, 0], [2, 0]))),
    "norm": (lambda x: tt.linalg.norm(x, ord=3, axis=-2), lambda x: tt.linalg.norm(x, ord=3, axis=1)),
    "norm(matrix)": (lambda x: tt.linalg.norm(x, ord=1, axis=(-1, -2)),
                     lambda x: tt.linalg.norm(x, ord=1, axis=(2, 1))),
    "vecdot": (lambda x: tt.linalg.vecdot(x, x, axis=-2), lambda x: tt.linalg.vecdot(x, x, axis=1)),
}


@pytest.mark.parametrize("name", list(NEGATIVE_AXES))
def test_negative_axes_mean_what_numpy_says_in_every_rule(name):
    negative, positive = NEGATIVE_AXES[name]
    rng = np.random.default_rng(0)
    x0, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    out, back = tt.vjp(negative, x0)
    out_p, back_p = tt.vjp(positive, x0)
    W = rng.standard_normal(np.shape(out))
    np.testing.assert_allclose(out, out_p)
    np.testing.assert_allclose(back(W)[0], back_p(W)[0])
    np.testing.assert_allclose(tt.jvp(negative, (x0,), (v,))[1], tt.jvp(positive, (x0,), (v,))[1])
    np.testing.assert_allclose(tt.hvp(lambda x: tt.sum(negative(x) ** 2), (x0,), (v,)),
                               tt.hvp(lambda x: tt.sum(positive(x) ** 2), (x0,), (v,)))


def test_compiled_p_norm_selects_on_the_values_of_each_call():
    # found by tests/fuzz.py: the zero test of the p-norm's root was a comparison in composed
    # code, a constant to tt.compile (recorded at 0, replayed elsewhere it gave 0)
    norm = tt.compile(lambda x: tt.linalg.norm(x, ord=3))
    assert norm(np.zeros(2)) == 0.0
    np.testing.assert_allclose(norm(np.array([1.0, 2.0])), 9.0 ** (1 / 3))
    grad = tt.compile(tt.grad(lambda x: tt.linalg.norm(x, ord=3)))
    np.testing.assert_array_equal(grad(np.zeros(2)), [0.0, 0.0])
    np.testing.assert_allclose(grad(np.array([1.0, 2.0])), tt.grad(lambda x: tt.linalg.norm(x, ord=3))(
        np.array([1.0, 2.0])))


def test_compiled_relu_rules_select_as_eager():
    # tt.compile inlined relu's rule as a product (g * (x > 0)): NaN where eager gives 0
    f = tt.grad(lambda x: tt.sqrt(tt.relu(x)).sum())
    c = tt.compile(f)
    c(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(c(np.array([-1.0, 4.0])), [0.0, 0.25])
    value_and_grad = tt.compile(tt.value_and_grad(lambda x: tt.sum(tt.relu(x) * 0.5)))
    for x in (np.array(0.3), np.array(-0.3)):
        value, grad = value_and_grad(x)
        assert type(grad) is np.ndarray and grad == (0.5 if x > 0 else 0.0)

"""nn layers (issue 12): values and gradients (both modes) against NumPy references of PyTorch's
formulas, init as PyTorch, train/eval behaviour, dtypes, errors; and, when torch is installed,
against torch itself."""

import math

import numpy as np
import pytest
import scipy.special

import tinytensor as tt
from tinytensor import nn
from tinytensor.specs import _np_conv2d, _np_pool


def arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def check_both_modes(layer, x, names=()):
    """gradcheck (reverse and forward mode vs central differences) of layer in its input and
    in the named parameters, through functional_call."""
    params = dict(layer.named_parameters())

    def f(x, *ps):
        return nn.functional_call(layer, dict(zip(names, ps)), x)
    return tt.gradcheck(f, x, *[params[n].data for n in names])


# ----- Conv2d -------------------------------------------------------------------------------------
@pytest.mark.parametrize("stride, padding", [(1, 0), (2, 1), ((2, 1), (0, 2))])
def test_conv2d_matches_a_loop_reference_in_both_modes(stride, padding):
    conv = nn.Conv2d(3, 4, (3, 2), stride=stride, padding=padding, rng=0, dtype=np.float64)
    x = arr((2, 3, 6, 5))
    y = conv(x)
    s, p = conv.stride, conv.padding
    np.testing.assert_allclose(y.data, _np_conv2d(x, conv.weight.data, conv.bias.data, s, p), atol=1e-12)
    assert check_both_modes(conv, x, ("weight", "bias"))


def test_conv2d_init_shapes_and_dtype_as_pytorch():
    conv = nn.Conv2d(3, 8, 5, rng=0)
    bound = 1 / math.sqrt(3 * 5 * 5)
    assert conv.weight.shape == (8, 3, 5, 5) and conv.bias.shape == (8,)
    assert conv.weight.dtype == np.float32
    for t in (conv.weight, conv.bias):
        assert np.abs(t.data).max() <= bound and np.abs(t.data).max() > 0.8 * bound
    assert [n for n, _ in conv.named_parameters()] == ["weight", "bias"]
    assert nn.Conv2d(3, 8, 5, bias=False).bias is None
    same = nn.Conv2d(3, 8, 5, rng=7).weight.data, nn.Conv2d(3, 8, 5, rng=7).weight.data
    np.testing.assert_array_equal(*same)


def test_conv2d_float32_model_on_float64_data_stays_float32():
    conv = nn.Conv2d(1, 2, 3, padding=1, rng=0)
    x = tt.tensor(arr((2, 1, 5, 5)), requires_grad=True)          # float64
    y = conv(x)
    assert y.dtype == np.float32
    y.sum().backward()
    assert conv.weight.grad.dtype == np.float32 and x.grad.dtype == np.float64


def test_conv2d_same_padding_and_unbatched_images_as_pytorch():
    conv = nn.Conv2d(2, 3, (3, 5), padding="same", rng=0, dtype=np.float64)
    assert conv.padding == (1, 2)
    image = arr((2, 6, 7))
    out = conv(image)
    assert out.shape == (3, 6, 7)
    np.testing.assert_allclose(out.data, conv(image[None]).data[0], atol=1e-15)
    x = tt.tensor(image, requires_grad=True)
    nn.MaxPool2d(2)(conv(x)).sum().backward()
    assert x.grad.shape == (2, 6, 7)
    assert nn.AvgPool2d(2)(image).shape == (2, 3, 3)
    assert nn.Conv2d(2, 3, 3, padding="valid").padding == (0, 0)
    with pytest.raises(ValueError, match="same"):
        nn.Conv2d(2, 3, 2, padding="same")


def test_conv2d_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"^conv2d: the input .* must agree on C"):
        nn.functional.conv2d(np.zeros((1, 2, 4, 4)), np.zeros((3, 1, 2, 2)))
    conv = nn.Conv2d(3, 4, 3)
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        conv(np.zeros((2, 2, 5, 5)))
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        conv(np.zeros((5, 5)))
    with pytest.raises(ValueError, match="smaller than the kernel"):
        conv(np.zeros((2, 3, 2, 5)))
    with pytest.raises(ValueError, match="kernel_size"):
        nn.Conv2d(3, 4, 0)


def test_hvp_through_a_cnn_matches_differences_of_gradients():
    """The conv rules are primitives themselves, so second derivatives work through Conv2d."""
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, rng=0, dtype=np.float64), nn.Tanh(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3, rng=1, dtype=np.float64))
    x, y = arr((4, 1, 4, 4)), np.array([0, 1, 2, 1])
    params = {k: v.data.copy() for k, v in model.named_parameters()}

    def loss(p):
        return nn.CrossEntropyLoss()(nn.functional_call(model, p, x), y)

    v = {k: arr(a.shape, seed=3) for k, a in params.items()}
    hv = tt.hvp(loss, (params,), (v,))
    hv = hv[0] if isinstance(hv, tuple) else hv
    eps = 1e-5
    plus = tt.grad(loss)({k: a + eps * v[k] for k, a in params.items()})
    minus = tt.grad(loss)({k: a - eps * v[k] for k, a in params.items()})
    for k in params:
        np.testing.assert_allclose(hv[k], (plus[k] - minus[k]) / (2 * eps), atol=1e-6)


# ----- pooling ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel, stride", [(2, None), (3, 1), ((2, 3), (1, 2))])
def test_pooling_matches_loop_references(kernel, stride):
    x = arr((2, 3, 6, 7))
    k = (kernel, kernel) if isinstance(kernel, int) else kernel
    s = k if stride is None else ((stride, stride) if isinstance(stride, int) else stride)
    np.testing.assert_allclose(nn.MaxPool2d(kernel, stride)(x), _np_pool(np.max)(x, k, s), atol=0)
    np.testing.assert_allclose(nn.AvgPool2d(kernel, stride)(x), _np_pool(np.mean)(x, k, s), atol=1e-15)
    for layer in (nn.MaxPool2d(kernel, stride), nn.AvgPool2d(kernel, stride)):
        assert tt.gradcheck(layer, x)


def test_max_pool_gives_a_tied_gradient_to_the_first_maximum():
    x = tt.tensor(np.ones((1, 1, 2, 2)), requires_grad=True)
    nn.MaxPool2d(2)(x).sum().backward()
    np.testing.assert_array_equal(x.grad[0, 0], [[1, 0], [0, 0]])


def test_overlapping_max_pool_accumulates():
    x = tt.tensor(np.array([[[[0., 0, 0], [0, 9, 0], [0, 0, 0]]]]), requires_grad=True)
    nn.MaxPool2d(2, 1)(x).sum().backward()
    assert x.grad[0, 0, 1, 1] == 4 and x.grad.sum() == 4


def test_pool_float32_and_errors():
    y = nn.MaxPool2d(2)(tt.tensor(arr((1, 1, 4, 4)), dtype=np.float32, requires_grad=True))
    assert y.dtype == np.float32
    with pytest.raises(ValueError, match="kernel_size"):
        nn.AvgPool2d(0)
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        nn.MaxPool2d(2)(np.zeros((4, 4)))


def test_flatten_and_identity():
    x = tt.tensor(arr((2, 3, 4, 5)), requires_grad=True)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
    assert nn.Flatten(2)(x).shape == (2, 3, 20)
    assert nn.Identity(54, unused=1)(x) is x
    with pytest.raises(ValueError, match="axes of the input"):
        nn.Flatten()(tt.tensor([1.0, 2.0]))


# ----- Dropout ------------------------------------------------------------------------------------
def test_dropout_mask_is_the_same_in_forward_and_backward_and_scaled():
    drop = nn.Dropout(0.3, rng=0)
    x = tt.tensor(arr((200, 50)) + 3, requires_grad=True)
    y = drop(x)
    mask = drop.mask
    assert set(np.unique(mask)) == {0.0, 1 / 0.7}
    assert abs((mask == 0).mean() - 0.3) < 0.02
    np.testing.assert_array_equal(y.data, x.data * mask)
    g = arr((200, 50), seed=1)
    y.backward(g)
    np.testing.assert_array_equal(x.grad, g * mask)
    # forward mode sees the same mask
    np.testing.assert_array_equal(y.jvp({x: np.ones(x.shape)}), mask)


def test_dropout_eval_is_the_identity_and_masks_are_seeded():
    x = tt.tensor(arr((10, 10)), requires_grad=True)
    drop = nn.Dropout(0.5, rng=1)
    assert drop.eval()(x) is x
    a, b = nn.Dropout(0.5, rng=3), nn.Dropout(0.5, rng=3)
    np.testing.assert_array_equal(a(x).data, b(x).data)
    assert not np.array_equal(a(x).data, a(x).data)          # the generator advances
    np.testing.assert_array_equal(nn.Dropout(1.0)(x).data, 0)
    assert nn.Dropout(0.0)(x) is x
    assert nn.Dropout(0.5, rng=0)(tt.tensor(x.data, dtype=np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="probability"):
        nn.Dropout(1.5)


# ----- normalisation ------------------------------------------------------------------------------
def layer_norm_reference(x, w, b, axes, eps=1e-5):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def test_layer_norm_matches_reference_in_both_modes():
    ln = nn.LayerNorm((3, 4), dtype=np.float64)
    ln.weight.data[...] = arr((3, 4), seed=1)
    ln.bias.data[...] = arr((3, 4), seed=2)
    x = arr((2, 3, 4))
    np.testing.assert_allclose(ln(x).data, layer_norm_reference(x, ln.weight.data, ln.bias.data, (1, 2)),
                               atol=1e-12)
    assert check_both_modes(ln, x, ("weight", "bias"))
    assert nn.LayerNorm(4)(arr((5, 4))).dtype == np.float32
    with pytest.raises(ValueError, match="normalized_shape"):
        ln(arr((2, 4, 3)))


@pytest.mark.parametrize("cls, shape", [(nn.BatchNorm1d, (8, 3)), (nn.BatchNorm1d, (4, 3, 5)),
                                        (nn.BatchNorm2d, (4, 3, 2, 5))])
def test_batch_norm_train_and_eval_against_reference(cls, shape):
    bn = cls(3, momentum=0.2, dtype=np.float64)
    bn.weight.data[...] = [1.5, -0.5, 2.0]
    bn.bias.data[...] = [0.1, 0.2, -0.3]
    axes = (0,) + tuple(range(2, len(shape)))
    view = (1, 3) + (1,) * (len(shape) - 2)
    running_mean, running_var = np.zeros(3), np.ones(3)
    for step in range(3):
        x = arr(shape, seed=step) * 2 + step
        y = bn(x)
        mean, var = x.mean(axis=axes), x.var(axis=axes)            # biased, for normalising
        n = x.size // 3
        expected = (x - mean.reshape(view)) / np.sqrt(var.reshape(view) + 1e-5) * \
            bn.weight.data.reshape(view) + bn.bias.data.reshape(view)
        np.testing.assert_allclose(y.data, expected, atol=1e-12)
        running_mean = 0.8 * running_mean + 0.2 * mean
        running_var = 0.8 * running_var + 0.2 * var * n / (n - 1)  # unbiased, for the buffer
        np.testing.assert_allclose(bn.running_mean.data, running_mean, rtol=1e-12)
        np.testing.assert_allclose(bn.running_var.data, running_var, rtol=1e-12)
    assert check_both_modes(bn, arr(shape, seed=9), ("weight", "bias"))
    bn.eval()
    before = bn.running_mean.data.copy()
    x = arr(shape, seed=5)
    expected = (x - bn.running_mean.data.reshape(view)) / np.sqrt(bn.running_var.data.reshape(view) + 1e-5) \
        * bn.weight.data.reshape(view) + bn.bias.data.reshape(view)
    np.testing.assert_allclose(bn(x).data, expected, atol=1e-12)
    np.testing.assert_array_equal(bn.running_mean.data, before)     # eval does not update
    assert check_both_modes(bn, x, ("weight", "bias"))


def test_batch_norm_buffers_state_dict_and_errors():
    bn = nn.BatchNorm2d(2)
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert bn.running_var.dtype == np.float32 and not bn.running_var.requires_grad
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(2)(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="channels"):
        bn(np.zeros((2, 3, 4, 4)))
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    assert "1.running_mean" in model.state_dict()


def test_batch_norm_momentum_none_is_a_cumulative_average():
    bn = nn.BatchNorm1d(2, momentum=None, dtype=np.float64)
    batches = [arr((6, 2), seed=s) + s for s in range(3)]
    for b in batches:
        bn(b)
    assert int(bn.num_batches_tracked.data) == 3
    np.testing.assert_allclose(bn.running_mean.data, np.mean([b.mean(axis=0) for b in batches], axis=0),
                               rtol=1e-12)


# ----- Embedding, containers, activations ------------------------------------------------------
def test_embedding_rows_and_repeated_indices_accumulate():
    emb = nn.Embedding(5, 3, rng=0, dtype=np.float64)
    idx = np.array([[0, 2], [2, 2]])
    out = emb(idx)
    np.testing.assert_array_equal(out.data, emb.weight.data[idx])
    out.sum().backward()
    np.testing.assert_array_equal(emb.weight.grad[:, 0], [1, 0, 3, 0, 0])
    assert nn.Embedding(5, 3).weight.dtype == np.float32
    with pytest.raises(IndexError, match=r"\[0, 5\)"):
        emb(np.array([5]))
    with pytest.raises(IndexError, match=r"\[0, 5\)"):
        emb(np.array([-1]))                    # as PyTorch: no indexing from the end
    with pytest.raises(TypeError, match="integers"):
        emb(np.array([0.0]))


def test_module_list_names_and_container_behaviour():
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 3)])
    layers.append(nn.Linear(3, 1))
    assert len(layers) == 3 and isinstance(layers[-1], nn.Linear)
    assert [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias",
                                                         "2.weight", "2.bias"]
    assert len(layers[:2]) == 2
    with pytest.raises(TypeError, match="not a Module"):
        layers.append(3)


ACTIVATIONS = [
    (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (nn.GELU(), lambda x: 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2)))),
    (nn.GELU("tanh"), lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    (nn.Softplus(), lambda x: np.log1p(np.exp(x))),
    (nn.Softplus(beta=2, threshold=3), lambda x: np.where(2 * x > 3, x, np.log1p(np.exp(2 * x)) / 2)),
    (nn.Softmax(axis=0), lambda x: scipy.special.softmax(x, axis=0)),
    (nn.LogSoftmax(dim=1), lambda x: scipy.special.log_softmax(x, axis=1)),
]


@pytest.mark.parametrize("layer, reference", ACTIVATIONS, ids=lambda v: type(v).__name__)
def test_activation_modules(layer, reference):
    x = arr((3, 4)) * 2 + 0.05
    np.testing.assert_allclose(layer(x), reference(x), rtol=1e-12, atol=1e-14)
    assert tt.gradcheck(layer, x)
    assert layer(tt.tensor(x, dtype=np.float32, requires_grad=True)).dtype == np.float32


def test_softplus_and_leaky_relu_at_the_edges():
    x = tt.tensor([-1e4, -40.0, 0.0, 40.0, 1e4], requires_grad=True)
    nn.Softplus()(x).sum().backward()
    np.testing.assert_allclose(x.grad, [0, scipy.special.expit(-40.0), 0.5, 1, 1], rtol=1e-12)
    x.grad = None
    nn.LeakyReLU(0.1)(x).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.1, 0.1, 0.1, 1, 1])     # 0 takes the negative slope


def test_linear_casts_input_to_its_dtype():
    layer = nn.Linear(3, 2, rng=0)
    x = tt.tensor(arr((4, 3)), requires_grad=True)
    y = layer(x)
    assert y.dtype == np.float32
    y.sum().backward()
    assert layer.weight.grad.dtype == np.float32 and x.grad.dtype == np.float64
    assert layer(np.arange(6).reshape(2, 3)).dtype == np.float32      # integer data too
    assert nn.Linear(3, 2, dtype=np.float64)(arr((1, 3)).astype(np.float32)).dtype == np.float64


# ----- against PyTorch itself --------------------------------------------------------------------------
def test_layers_match_torch():
    torch = pytest.importorskip("torch")
    x = arr((2, 3, 7, 6))
    pairs = [
        (nn.Conv2d(3, 4, 3, stride=2, padding=1, rng=0, dtype=np.float64),
         torch.nn.Conv2d(3, 4, 3, stride=2, padding=1).double()),
        (nn.MaxPool2d(3, 2), torch.nn.MaxPool2d(3, 2)), (nn.AvgPool2d(2), torch.nn.AvgPool2d(2)),
        (nn.BatchNorm2d(3, dtype=np.float64), torch.nn.BatchNorm2d(3).double()),
        (nn.LayerNorm((7, 6), dtype=np.float64), torch.nn.LayerNorm((7, 6)).double()),
        (nn.GELU(), torch.nn.GELU()), (nn.Softplus(), torch.nn.Softplus()),
        (nn.LeakyReLU(), torch.nn.LeakyReLU()),
    ]
    for ours, theirs in pairs:
        with torch.no_grad():
            for (_, p), q in zip(ours.named_parameters(), theirs.parameters()):
                q.copy_(torch.tensor(p.data))
        a = tt.tensor(x, requires_grad=True)
        b = torch.tensor(x, requires_grad=True)
        ya, yb = ours(a), theirs(b)
        (ya * ya * ya).sum().backward()
        (yb * yb * yb).sum().backward()
        np.testing.assert_allclose(ya.data, yb.detach().numpy(), atol=1e-12, err_msg=repr(ours))
        np.testing.assert_allclose(a.grad, b.grad.numpy(), atol=1e-10, err_msg=repr(ours))
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
            np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-10, atol=1e-10, err_msg=name)
        for (name, buf) in ours.named_buffers():
            np.testing.assert_allclose(buf.data, getattr(theirs, name).numpy(), rtol=1e-12)


def test_every_nn_primitive_has_a_spec_row():
    """The sweep (tests/sweeps/test_op_sweep.py) runs OP_SPECS; a primitive of nn.functional without a row
    would escape it."""
    from tinytensor.nn import functional
    from tinytensor.specs import OP_SPECS

    mine = {value.name for value in vars(functional).values() if isinstance(value, tt.Primitive)}
    assert {"conv2d", "max_pool2d", "avg_pool2d", "binary_cross_entropy"} <= mine
    assert mine <= tt.ops.BUILTIN                  # so tests/sweeps/test_op_sweep.py requires their rows too
    assert not sorted(mine - set(OP_SPECS))


@pytest.mark.parametrize("f", [
    lambda x: (nn.GELU()(x) ** 2).sum(),
    lambda x: (nn.Softplus(beta=2.0)(x) ** 3).sum(),
    lambda x: nn.BCEWithLogitsLoss(pos_weight=np.array(3.0))(x, np.full(x.shape, 0.3)),
    lambda x: nn.BCELoss()(tt.sigmoid(x), np.full(x.shape, 0.7)),
    lambda x: (nn.AvgPool2d(2, 1)(x.reshape(1, 1, 3, 4)) ** 3).sum(),
    lambda x: (nn.LeakyReLU(0.2)(x) ** 3).sum(),
], ids=["gelu", "softplus", "bce_logits", "bce", "avg_pool", "leaky_relu"])
def test_second_derivatives_through_the_nn_primitives(f):
    """Every rule is written with primitives, so hvp (a recorded reverse sweep) works."""
    x, v = arr((12,), seed=1) + 0.1, arr((12,), seed=2)
    hv = tt.hvp(f, (x,), (v,))
    hv = hv[0] if isinstance(hv, tuple) else hv
    eps = 1e-5
    expected = (tt.grad(f)(x + eps * v) - tt.grad(f)(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hv, expected, rtol=1e-5, atol=1e-7)

"""Shapes and indexing (tinytensor/ops/shape.py): what the spec sweep does not cover.

The sweep (sweeps/test_op_sweep.py, transforms/test_transforms.py) checks every row's rules in
both modes and at second order; here: NumPy's spellings reach these functions, lists mixing Tensors and arrays
are recorded, results match NumPy on the awkward cases (0-d, negative axes, axis=None), the
Tensor methods, and the errors.
"""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.specs import EXTRA_SPECS, OP_SPECS

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4))
B = rng.standard_normal((2, 3, 4))


def leaf(value, dtype=None):
    return tt.tensor(value, requires_grad=True, dtype=dtype)


def grad_of(f, value):
    """f(leaf) must be a Tensor equal to f(value) in NumPy; returns d sum(f * w) / d leaf,
    checked against central differences."""
    x = leaf(value)
    out = f(x)
    expected = f(np.asarray(value))
    assert isinstance(out, tt.Tensor) and out.requires_grad
    np.testing.assert_array_equal(out.data, expected)
    assert out.dtype == expected.dtype
    w = np.arange(1.0, out.size + 1).reshape(out.shape)
    out.backward(w)
    numerical = tt.numerical_grad(lambda a: np.sum(f(a) * w), np.asarray(value, dtype=float))[0]
    np.testing.assert_allclose(x.grad, numerical, atol=1e-7)
    return x.grad


# ----- NumPy's own spelling on a Tensor records tinytensor's version ----------------------------
NUMPY_CALLS = {
    "moveaxis": lambda a: np.moveaxis(a, [0, -1], [-1, 0]),
    "swapaxes": lambda a: np.swapaxes(a, 0, -1),
    "squeeze": lambda a: np.squeeze(np.expand_dims(a, (0, -1)), axis=(0, -1)),
    "expand_dims": lambda a: np.expand_dims(a, -2),
    "ravel": lambda a: np.ravel(a),
    "ravel F": lambda a: np.ravel(a, order="F"),
    "flip": lambda a: np.flip(a, -1),
    "fliplr": lambda a: np.fliplr(a),
    "flipud": lambda a: np.flipud(a),
    "roll": lambda a: np.roll(a, -1),
    "roll axes": lambda a: np.roll(a, (1, 5), axis=(0, -1)),
    "tile": lambda a: np.tile(a, 2),
    "repeat": lambda a: np.repeat(a, 2),
    "repeat counts": lambda a: np.repeat(a, [2, 0, 1], axis=0),
    "pad": lambda a: np.pad(a, ((1, 0), (2, 3))),
    "pad constant": lambda a: np.pad(a, 1, constant_values=(-1, 2)),
    "pad edge": lambda a: np.pad(a, (2, 1), mode="edge"),
    "pad reflect": lambda a: np.pad(a, 2, mode="reflect"),
    "pad symmetric": lambda a: np.pad(a, 3, mode="symmetric"),
    "pad wrap": lambda a: np.pad(a, ((4, 1), (0, 5)), mode="wrap"),
    "tril": lambda a: np.tril(a, 1),
    "triu": lambda a: np.triu(a, -1),
    "diag": lambda a: np.diag(a, -1),
    "diag of diag": lambda a: np.diag(np.diag(a, 1), 1),
    "diagonal": lambda a: np.diagonal(a, -1),
    "trace": lambda a: np.trace(a, 1),
    "take": lambda a: np.take(a, [[0, 11], [11, -1]]),
    "take axis": lambda a: np.take(a, [3, 0, 3], axis=-1),
    "take wrap": lambda a: np.take(a, [5, -7], axis=0, mode="wrap"),
    "take clip": lambda a: np.take(a, [5, -7], axis=1, mode="clip"),
    "take_along_axis": lambda a: np.take_along_axis(a, np.argsort(a, axis=1), axis=1),
    "take_along_axis 0": lambda a: np.take_along_axis(a, np.array([[2, 0, 0, 1]]), axis=0),
    "take_along_axis None": lambda a: np.take_along_axis(a, np.array([0, 5, 5]), axis=None),
    "split": lambda a: np.split(a, [1, -1, 10], axis=-1)[1],
    "array_split": lambda a: np.array_split(a, 3, axis=1)[2],
    "vstack": lambda a: np.vstack([a, np.ones(4), a[0]]),
    "hstack": lambda a: np.hstack([a, np.ones((3, 2))]),
    "dstack": lambda a: np.dstack([a, np.ones((3, 4))]),
    "column_stack": lambda a: np.column_stack([np.ones(3), a]),
    "concatenate": lambda a: np.concatenate([np.ones((1, 4)), a], axis=-2),
    "concatenate None": lambda a: np.concatenate([a, np.ones(2)], axis=None),
    "stack": lambda a: np.stack([a, np.zeros((3, 4))], axis=-1),
    "atleast_3d": lambda a: np.atleast_3d(a),
}


@pytest.mark.parametrize("name", NUMPY_CALLS)
def test_numpy_spelling_is_recorded_with_numpys_values(name):
    f = NUMPY_CALLS[name]
    x = leaf(A)
    out = f(x)
    assert isinstance(out, tt.Tensor) and out.requires_grad, name
    np.testing.assert_array_equal(out.data, f(A))
    assert out.dtype == f(A).dtype
    w = rng.standard_normal(out.shape)
    out.backward(w)
    np.testing.assert_allclose(x.grad, tt.numerical_grad(lambda a: np.sum(f(a) * w), A)[0], atol=1e-8)


def test_list_of_arrays_mixing_tensors_is_recorded_and_each_tensor_gets_its_part():
    a, b = leaf(np.ones(3)), leaf(np.full(3, 2.0))
    for join in (np.vstack, np.stack, np.hstack, np.concatenate, np.column_stack, np.dstack,
                 tt.vstack, tt.stack, tt.hstack, tt.concatenate):
        a.grad = b.grad = None
        out = join([a, np.zeros(3), b])
        assert isinstance(out, tt.Tensor) and out.requires_grad, join
        w = np.arange(out.size, dtype=float).reshape(out.shape)
        out.backward(w)
        expected = join([np.zeros(3), np.zeros(3), np.ones(3)])   # where b's entries went
        np.testing.assert_array_equal(b.grad, w[expected == 1].ravel(), err_msg=str(join))
        assert a.grad.shape == b.grad.shape == (3,)


def test_stacks_of_0d_tensors_numbers_and_negative_axes():
    a, b = leaf(1.0), leaf(2.0)
    out = tt.stack([a, 3.0, b])
    np.testing.assert_array_equal(out.data, [1.0, 3.0, 2.0])
    out.backward(np.array([10.0, 20.0, 30.0]))
    assert a.grad == 10.0 and b.grad == 30.0
    np.testing.assert_array_equal(np.hstack([a, b, 5.0]).data, [1.0, 2.0, 5.0])
    np.testing.assert_array_equal(np.vstack([a, b]).data, [[1.0], [2.0]])
    x = leaf(B)
    out = np.stack([x, B], axis=-2)
    assert out.shape == np.stack([B, B], axis=-2).shape
    out = np.concatenate([x, B], axis=-3)
    np.testing.assert_array_equal(out.data, np.concatenate([B, B], axis=-3))
    with pytest.raises(ValueError, match="concatenate"):
        tt.concatenate([a, b])   # 0-d arrays cannot be concatenated, as in NumPy


def test_joins_take_numpys_dtype_and_casting_keywords():
    x = leaf(np.ones(2, np.float32))
    for join in (np.concatenate, np.stack, np.vstack, np.hstack):
        out = join([x, np.zeros(2)], dtype=np.float32)
        assert out.dtype == np.float32 and out.requires_grad, join
        assert join([x, np.zeros(2)]).dtype == np.float64   # NumPy's promotion otherwise
        out.backward(np.ones(out.shape, np.float32))
        assert x.grad.dtype == np.float32
        x.grad = None
        with pytest.raises(TypeError, match="cannot cast float32 to int32"):
            join([x, np.zeros(2)], dtype=np.int32)
    for join in (np.concatenate, np.stack):
        with pytest.raises(TypeError, match="out= is not supported"):
            join([x, x], out=np.empty(4))
    assert np.concatenate([x, x], dtype=np.int32, casting="unsafe").dtype == np.int32


def test_float32_stays_float32_and_integers_work_without_gradients():
    x = leaf(A.astype(np.float32))
    for name, f in NUMPY_CALLS.items():
        if name in ("vstack", "hstack", "dstack", "column_stack", "concatenate", "concatenate None",
                    "stack", "pad constant"):
            continue   # joined with float64 arrays: NumPy promotes
        out = f(x)
        assert out.dtype == np.float32, name
        out.backward(np.ones(out.shape, np.float32))
        assert x.grad.dtype == np.float32, name
        x.grad = None
    assert tt.pad(x, 1, constant_values=2.5).dtype == np.float32
    ints = tt.tensor(np.arange(12).reshape(3, 4))
    for f in NUMPY_CALLS.values():
        np.testing.assert_array_equal(f(ints).data, f(np.arange(12).reshape(3, 4)))


@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
def test_ravel_orders_follow_numpy_on_views_of_any_layout(order):
    base = np.arange(60.0).reshape(3, 4, 5)
    x = leaf(base)
    for perm in [(0, 1, 2), (2, 0, 1), (1, 0, 2), (2, 1, 0)]:
        for index in [(slice(None),) * 3, (slice(None, None, -1), slice(1, None), slice(None, None, 2)),
                      (slice(0, 1), slice(None), slice(None, None, -1)), (slice(None), 0)]:
            view = x.transpose(perm)[index]   # a Tensor whose data is a strided view
            np.testing.assert_array_equal(tt.ravel(view, order).data, np.ravel(view.data, order))
            np.testing.assert_array_equal(tt.ravel(view.data, order), np.ravel(view.data, order))


def test_plain_arrays_and_lists_give_plain_arrays():
    assert type(tt.flip([1.0, 2.0])) is np.ndarray
    np.testing.assert_array_equal(tt.roll([1, 2, 3], 1), [3, 1, 2])
    np.testing.assert_array_equal(tt.pad([1.0], 1), [0.0, 1.0, 0.0])
    assert [type(p) for p in tt.split(np.arange(4.0), 2)] == [np.ndarray, np.ndarray]


# ----- 0-d and awkward cases, against NumPy ----------------------------------------------------------
ZERO_D = {
    "squeeze": np.squeeze, "expand_dims": lambda a: np.expand_dims(a, 0), "ravel": np.ravel,
    "flip": np.flip, "roll": lambda a: np.roll(a, 3), "tile": lambda a: np.tile(a, (2, 3)),
    "tile ()": lambda a: np.tile(a, ()), "repeat": lambda a: np.repeat(a, 3), "pad": lambda a: np.pad(a, 2),
    "take": lambda a: np.take(a, [0, 0]), "atleast_2d": np.atleast_2d, "hstack": lambda a: np.hstack([a, a]),
    "vstack": lambda a: np.vstack([a, a]), "stack": lambda a: np.stack([a, a], axis=-1),
    "moveaxis": lambda a: np.moveaxis(a, [], []),
}


@pytest.mark.parametrize("name", ZERO_D)
def test_zero_dimensional_inputs(name):
    assert grad_of(ZERO_D[name], 1.5).shape == ()


def test_every_axis_argument_takes_negative_axes_and_tuples():
    cases = [lambda a: np.squeeze(a[:, :1], axis=-2), lambda a: np.expand_dims(a, (-1, 0)),
             lambda a: np.flip(a, (-1, 0)), lambda a: np.roll(a, (1, 1), axis=(-1, -1)),
             lambda a: np.repeat(a, 2, axis=-2), lambda a: np.diagonal(a, 1, -1, 0),
             lambda a: np.trace(a, -1, -1, -3), lambda a: np.take(a, 1, axis=-1),
             lambda a: np.take_along_axis(a, np.zeros((2, 1, 4), int), axis=-2),
             lambda a: np.split(a, 2, axis=-1)[0], lambda a: np.moveaxis(a, -1, -3)]
    for f in cases:
        grad_of(f, B)


def test_diagonal_and_trace_of_rectangular_and_batched_matrices():
    for offset in (-3, -1, 0, 2, 4, 9):
        for axes in ((0, 1), (1, 0), (2, 0), (-1, -2)):
            grad_of(lambda a: np.diagonal(a, offset, *axes), B)
            grad_of(lambda a: np.trace(a, offset, *axes), B)
    grad_of(lambda a: np.diag(a, 2), A)
    grad_of(lambda a: np.diag(a, -5), np.arange(3.0))


def test_take_accumulates_repeated_indices_and_flattens_when_axis_is_none():
    g = grad_of(lambda a: tt.take(a, [1, 1, 1, 13 - 14]), np.arange(12.0).reshape(3, 4))
    assert g.ravel()[1] == 1 + 2 + 3 and g.ravel()[11] == 4
    assert tt.take(leaf(A), np.array(5)).shape == ()
    np.testing.assert_array_equal(tt.take(leaf(A), [True, False]).data, np.take(A, [True, False]))


def test_repeat_and_tile_are_numpys_not_pytorchs():
    t = leaf([1.0, 2.0])
    np.testing.assert_array_equal(t.repeat(2).data, [1.0, 1.0, 2.0, 2.0])   # np.repeat
    np.testing.assert_array_equal(tt.tile(t, 2).data, [1.0, 2.0, 1.0, 2.0])  # PyTorch's repeat
    assert tt.repeat(leaf(A), 0, axis=1).shape == (3, 0)


def test_arrays_and_tensors_are_sequences_of_their_rows_as_in_numpy():
    x = leaf(A)
    for join in (np.vstack, np.hstack, np.stack, np.concatenate, np.column_stack):
        np.testing.assert_array_equal(join(x).data, join(A))
    np.testing.assert_array_equal(tt.vstack(A), np.vstack(A))
    assert [p.shape for p in tt.split(x, np.array(2), axis=1)] == [(3, 2), (3, 2)]
    assert tt.tile(x, np.array([2, 1])).shape == (6, 4)


def test_split_pieces_and_their_gradients():
    x = leaf(np.arange(10.0))
    pieces = tt.array_split(x, 3)
    assert [p.shape for p in pieces] == [(4,), (3,), (3,)]
    (pieces[0].sum() + 2 * pieces[2].sum()).backward()
    np.testing.assert_array_equal(x.grad, [1, 1, 1, 1, 0, 0, 0, 2, 2, 2])
    shapes = [p.shape for p in np.split(leaf(B), [1, 1, 3], axis=1)]
    assert shapes == [(2, 1, 4), (2, 0, 4), (2, 2, 4), (2, 0, 4)]


# ----- Tensor methods: NumPy's names, and PyTorch's that cannot be misread ------------------------
def test_tensor_methods():
    x = leaf(B)
    assert x.view(6, 4).shape == x.view((6, 4)).shape == x.view(-1, 4).shape == (6, 4)
    assert x.flatten().shape == (24,) and x.flatten(1).shape == (2, 12)
    assert x.flatten(0, 1).shape == (6, 4) and x.flatten(start_dim=-2).shape == (2, 12)
    np.testing.assert_array_equal(x.flatten("F").data, B.flatten("F"))
    assert leaf(2.0).flatten().shape == (1,)
    assert x.unsqueeze(0).shape == (1, 2, 3, 4) and x.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert x.unsqueeze(1).squeeze().shape == (2, 3, 4) and x[:1].squeeze(0).shape == (3, 4)
    np.testing.assert_array_equal(x.ravel().data, B.ravel())
    np.testing.assert_array_equal(x.diagonal(0, 1, 2).data, B.diagonal(0, 1, 2))
    np.testing.assert_array_equal(x.trace().data, B.trace())
    np.testing.assert_array_equal(x.take([0, 3], axis=-1).data, B.take([0, 3], axis=-1))
    np.testing.assert_array_equal(x.repeat(2, axis=0).data, B.repeat(2, axis=0))
    np.testing.assert_array_equal(x.swapaxes(0, 2).data, B.swapaxes(0, 2))
    total = x.view(6, 4).sum() + x.flatten(1).sum() + x.unsqueeze(0).squeeze(0).sum() + x.trace().sum()
    total.backward()
    assert x.grad.shape == B.shape and "view" not in tt.__all__


# ----- errors: clear, named, and where NumPy raises --------------------------------------------
@pytest.mark.parametrize("call, error, words", [
    (lambda x: x.squeeze(-2), ValueError, ["squeeze", "axis 0 of length 3"]),
    (lambda x: tt.squeeze(x, 5), np.exceptions.AxisError, ["squeeze", "axis 5"]),
    (lambda x: tt.expand_dims(x, 3), np.exceptions.AxisError, ["expand_dims"]),
    (lambda x: tt.moveaxis(x, 0, (0, 1)), ValueError, ["moveaxis", "same number"]),
    (lambda x: tt.moveaxis(x, (0, 0), (0, 1)), ValueError, ["repeated axis"]),
    (lambda x: tt.split(x, 3, axis=1), ValueError, ["split", "equal"]),
    (lambda x: tt.split(x, 0), ValueError, ["sections must be positive"]),
    (lambda x: tt.vstack(x[0, 0]), TypeError, ["0-d"]),
    (lambda x: tt.hstack([]), ValueError, ["at least one"]),
    (lambda x: tt.tile(x, -1), ValueError, ["tile", "non-negative"]),
    (lambda x: tt.tile(x, 1.0), TypeError, ["tile", "integers"]),
    (lambda x: tt.repeat(x, [1, 2], axis=0), ValueError, ["repeat", "length 3"]),
    (lambda x: tt.repeat(x, -1), ValueError, ["non-negative"]),
    (lambda x: tt.repeat(x, 1.5), TypeError, ["integers"]),
    (lambda x: tt.take(x, [12]), IndexError, ["take", "12", "length 12"]),
    (lambda x: tt.take(x, [0.5]), TypeError, ["take", "integers"]),
    (lambda x: tt.take(x, [0], mode="nearest"), ValueError, ["mode"]),
    (lambda x: tt.take(x, [0], out=np.empty(1)), TypeError, ["out="]),
    (lambda x: tt.take_along_axis(x, np.zeros(3, int), axis=0), ValueError, ["as many axes"]),
    (lambda x: tt.diagonal(x[0]), ValueError, ["diagonal", "2 axes"]),
    (lambda x: tt.diag(x[None]), ValueError, ["diag", "1-D or 2-D"]),
    (lambda x: tt.tril(x[0, 0]), ValueError, ["tril", "0-d"]),
    (lambda x: tt.pad(x, 1, mode="mean"), NotImplementedError, ["pad", "'mean'", "'edge'"]),
    (lambda x: tt.pad(x, 1, mode="reflect", reflect_type="odd"), NotImplementedError, ["even"]),
    (lambda x: tt.pad(x, 1, mode="edge", constant_values=1), TypeError, ["constant_values"]),
    (lambda x: tt.pad(x, -1), ValueError, ["non-negative"]),
    (lambda x: tt.pad(x, 1.5), TypeError, ["integers"]),
    (lambda x: tt.pad(x, ((1, 2), (3, 4), (5, 6))), ValueError, ["does not fit", "2 axes"]),
    (lambda x: tt.pad(x, 1, constant_values=x), TypeError, ["constant_values", "Tensor"]),
    (lambda x: tt.flatten(x, 1, 0), ValueError, ["start_dim", "end_dim"]),
    (lambda x: x.view(np.float32), TypeError, ["view", "astype"]),
    (lambda x: tt.ravel(x, "Z"), ValueError, ["order"]),
])
def test_errors_name_the_op_and_what_was_wrong(call, error, words):
    with pytest.raises(error) as info:
        call(leaf(A))
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# ----- reverse over forward: the JVP rules run on Tensors too ------------------------------------
SHAPE_ROWS = {name: spec for name, spec in {**OP_SPECS, **EXTRA_SPECS}.items()
              if getattr(spec.call, "__module__", None) == "tinytensor.ops.shape"
              or name in ("vstack", "hstack", "dstack", "column_stack", "split", "array_split",
                          "concatenate(with an array)", "stack(with an array)")}


@pytest.mark.parametrize("name", sorted(SHAPE_ROWS))
def test_gradient_of_a_jvp_is_the_hessian_times_the_tangent(name):
    """grad_x <d f(x), t> = H t, for f = sum(y*y/2 + sin y), y = op(x): the JVP rules are then
    applied to recorded Tensors (the sweep in test_transforms runs the VJP rules that way)."""
    spec = SHAPE_ROWS[name]
    for index, (args, params) in enumerate(spec.cases()):
        def f(*xs):
            y = spec.call(*xs, **params)
            return tt.sum(y * y * 0.5 + tt.sin(y))
        t = tuple(np.random.default_rng(index).standard_normal(np.shape(a)) for a in args)
        argnums = tuple(range(len(args)))
        rev_over_fwd = tt.grad(lambda *xs: tt.jvp(f, xs, t)[1], argnums=argnums)(*args)
        fwd_over_rev = tt.hvp(f, tuple(args), t)
        for a, b in zip(rev_over_fwd, fwd_over_rev if len(args) > 1 else (fwd_over_rev,)):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=f"{name} case {index}")


# ----- random shapes and arguments: the exact Jacobian from NumPy itself ---------------------------
def _random_case(r, name):
    """(shape, f) for one op with random arguments; f works on arrays and on Tensors."""
    ndim = int(r.integers(1, 4))
    shape = tuple(int(n) for n in r.integers(1, 4, ndim))
    axis = int(r.integers(-ndim, ndim))
    some_axes = tuple(int(a) for a in r.permutation(ndim)[:r.integers(0, ndim + 1)])
    if name == "moveaxis":
        destination = tuple(int(i) - ndim for i in r.permutation(ndim)[:len(some_axes)])
        return shape, lambda a: np.moveaxis(a, some_axes, destination)
    if name == "squeeze":
        shape = tuple(1 if r.random() < 0.5 else n for n in shape)
        ones = tuple(i - ndim for i, n in enumerate(shape) if n == 1 and r.random() < 0.5)
        return shape, lambda a: np.squeeze(a, ones or None)
    if name == "expand_dims":
        new_axes = tuple(int(i) - 1 for i in r.permutation(ndim + 2)[:2])   # -1 included
        return shape, lambda a: np.expand_dims(a, new_axes)
    if name == "flip":
        return shape, lambda a: np.flip(a, some_axes or None)
    if name == "roll":
        shift = tuple(int(s) for s in r.integers(-4, 5, len(some_axes)))
        return shape, lambda a: np.roll(a, shift or 2, some_axes or None)
    if name == "tile":
        reps = tuple(int(n) for n in r.integers(0, 3, int(r.integers(0, 4))))
        return shape, lambda a: np.tile(a, reps)
    if name == "repeat":
        counts = r.integers(0, 3, shape[axis]) if r.random() < 0.5 else int(r.integers(0, 3))
        return shape, lambda a: np.repeat(a, counts, axis=axis)
    if name == "pad":
        mode = str(r.choice(["constant", "edge", "reflect", "symmetric", "wrap"]))
        widths = [(int(b), int(e)) for b, e in r.integers(0, 4, (ndim, 2))]
        extra = dict(constant_values=float(r.integers(-2, 3))) if mode == "constant" else {}
        return shape, lambda a: np.pad(a, widths, mode=mode, **extra)
    if name in ("tril", "triu"):
        k = int(r.integers(-3, 4))
        return shape, lambda a: getattr(np, name)(a, k)
    if name in ("diagonal", "trace"):
        shape = shape + (int(r.integers(1, 4)),)
        a1, a2 = (int(i) for i in r.permutation(ndim + 1)[:2])
        offset = int(r.integers(-3, 4))
        return shape, lambda a: getattr(np, name)(a, offset, a1, a2)
    if name == "take":
        index = r.integers(-shape[axis], shape[axis], tuple(r.integers(1, 3, int(r.integers(0, 3)))))
        return shape, lambda a: np.take(a, index, axis=axis)
    if name == "take_along_axis":
        index_shape = tuple(int(r.integers(1, 4)) if i == axis % ndim else n for i, n in enumerate(shape))
        index = r.integers(0, shape[axis], index_shape)
        return shape, lambda a: np.take_along_axis(a, index, axis=axis)
    if name in ("split", "array_split"):
        points = sorted(int(i) for i in r.integers(-4, 5, int(r.integers(0, 3))))
        sections = int(r.integers(1, 5)) if name == "array_split" else shape[axis]   # divides it
        how = points if r.random() < 0.5 else sections
        piece = int(r.integers(0, len(points) + 1 if how is points else sections))
        return shape, lambda a: getattr(np, name)(a, how, axis=axis)[piece]
    if name == "ravel":
        order = str(r.choice(list("CFAK")))
        return shape, lambda a: np.ravel(np.transpose(a), order)
    raise KeyError(name)


RANDOM_OPS = ["moveaxis", "squeeze", "expand_dims", "flip", "roll", "tile", "repeat", "pad", "tril",
              "triu", "diagonal", "trace", "take", "take_along_axis", "split", "array_split", "ravel"]


@pytest.mark.parametrize("name", RANDOM_OPS)
def test_random_arguments_against_the_jacobian_numpy_itself_gives(name):
    """Each op is linear (pad: affine), so NumPy's own function applied to the unit vectors gives
    its exact Jacobian J; then x.grad must be J^T w and the JVP J v, for 40 random cases."""
    r = np.random.default_rng(RANDOM_OPS.index(name))
    for case in range(40):
        shape, g = _random_case(r, name)
        x0 = r.standard_normal(shape)
        expected = g(x0)
        basis = np.eye(x0.size).reshape((x0.size,) + shape)
        offset = np.asarray(g(np.zeros(shape)))
        J = np.stack([np.asarray(g(e)) - offset for e in basis], axis=-1).reshape(-1, x0.size)
        x = leaf(x0)
        out = g(x)
        assert isinstance(out, tt.Tensor), (name, case)
        np.testing.assert_array_equal(out.data, expected, err_msg=f"{name} case {case}")
        w, v = r.standard_normal(out.shape), r.standard_normal(shape)
        if out.size:
            out.backward(w)
            np.testing.assert_allclose(x.grad.ravel(), J.T @ w.ravel(), atol=1e-12, err_msg=f"{name} {case}")
            np.testing.assert_allclose(out.jvp({x: v}).ravel(), J @ v.ravel(), atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_integer_array_index_gradient_adds_repeated_rows_as_np_add_at(dtype):
    """An embedding's backward (x[rows] for one integer array of rows) sums by sorting the rows
    (ops.core._add_rows), not np.add.at: the same sums for repeated, negative, unsigned and
    multi-dimensional rows, and rows out of range still raise."""
    rng = np.random.default_rng(0)
    for shape, rows in [((65, 8), rng.integers(-65, 65, (16, 32))), ((10,), rng.integers(0, 10, 40)),
                        ((7, 3, 2), rng.integers(0, 7, (5, 4)).astype(np.uint8)),
                        ((3, 2), np.zeros(20, int))]:
        w = rng.standard_normal(shape).astype(dtype)
        g = rng.standard_normal(rows.shape + shape[1:]).astype(dtype)
        expected = np.zeros_like(w)
        np.add.at(expected, rows, g)
        got = tt.vjp(lambda v: v[rows], w)[1](g)[0]
        assert got.dtype == dtype
        np.testing.assert_allclose(got, expected, rtol=1e-6 if dtype == np.float32 else 1e-14, atol=1e-6)
    from tinytensor.ops.core import _index_adjoint_forward
    with pytest.raises(IndexError):
        _index_adjoint_forward(np.ones((20, 4)), np.arange(20) + 5, (9, 4))
    with pytest.raises(IndexError, match="-12 is out of bounds"):      # not wrapped onto row 6
        _index_adjoint_forward(np.ones((20, 4)), np.arange(20) - 12, (9, 4))

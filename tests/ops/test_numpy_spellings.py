"""An outside suite's view: tinytensor called with NumPy's own keyword names and signatures."""
import numpy as np
import pytest

import tinytensor as tt

RNG = np.random.default_rng(11)
X = RNG.uniform(0.2, 0.8, (3, 4))


def _same(got, want):
    got = got.data if isinstance(got, tt.Tensor) else got
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "var", "std", "cumsum",
                                  "argmax", "argmin", "diff", "transpose", "round"])
@pytest.mark.parametrize("spelling", ["tt", "np"])
def test_first_argument_is_called_a(name, spelling):
    t = tt.tensor(X, requires_grad=name not in ("argmax", "argmin", "round"))
    fun = getattr(tt if spelling == "tt" else np, name)
    _same(fun(a=t), getattr(np, name)(a=X))


def test_keyword_names_of_shape_functions():
    t = tt.tensor(X, requires_grad=True)
    _same(tt.swapaxes(a=t, axis1=0, axis2=1), np.swapaxes(a=X, axis1=0, axis2=1))
    _same(tt.broadcast_to(array=t, shape=(2, 3, 4)), np.broadcast_to(array=X, shape=(2, 3, 4)))
    _same(tt.stack(arrays=[t, t], axis=1), np.stack(arrays=[X, X], axis=1))


@pytest.mark.parametrize("call, reference", [
    (lambda t: tt.dot(a=t, b=t.T), lambda x: np.dot(a=x, b=x.T)),
    (lambda t: np.dot(a=t, b=t.T), lambda x: np.dot(a=x, b=x.T)),
    (lambda t: t.dot(b=t.T), lambda x: x.dot(b=x.T)),
    (lambda t: tt.sinc(x=t), lambda x: np.sinc(x=x)),
    (lambda t: np.sinc(x=t), lambda x: np.sinc(x=x)),
    (lambda t: tt.linalg.inv(a=t @ t.T), lambda x: np.linalg.inv(a=x @ x.T)),
    (lambda t: np.linalg.inv(a=t @ t.T), lambda x: np.linalg.inv(a=x @ x.T)),
    (lambda t: tt.linalg.det(a=t @ t.T), lambda x: np.linalg.det(a=x @ x.T)),
    (lambda t: np.linalg.det(a=t @ t.T), lambda x: np.linalg.det(a=x @ x.T)),
])
def test_primitive_inputs_by_keyword(call, reference):
    """Inputs given by NumPy's keyword names are inputs (they recursed, or asked about complex)."""
    t = tt.tensor(X, requires_grad=True)
    out = call(t)
    _same(out, reference(X))
    out.sum().backward()
    assert t.grad is not None and np.all(np.isfinite(t.grad))


def test_swapaxes_out_of_range_is_numpys_axis_error():
    t = tt.tensor(X, requires_grad=True)
    with pytest.raises(np.exceptions.AxisError, match="axis 2"):
        tt.swapaxes(t, 0, 2)
    _same(tt.swapaxes(t, -1, -2), np.swapaxes(X, -1, -2))


@pytest.mark.parametrize("axis", [0, -1, (0,)])
def test_mean_of_0d_with_an_axis_raises_as_numpy(axis):
    with pytest.raises(np.exceptions.AxisError):
        np.mean(np.array(0.5), axis=axis)
    with pytest.raises(np.exceptions.AxisError):
        tt.mean(tt.tensor(0.5, requires_grad=True), axis=axis)


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_and_mean_take_dtype(name):
    t = tt.tensor(X.astype(np.float32), requires_grad=True)
    out = getattr(tt, name)(t, axis=0, dtype=np.float64)
    want = getattr(np, name)(X.astype(np.float32), axis=0, dtype=np.float64)
    assert out.dtype == want.dtype == np.float64
    np.testing.assert_allclose(out.data, want, rtol=1e-12)
    out.sum().backward()
    assert t.grad.dtype == np.float32
    out = getattr(np, name)(t, axis=-1, dtype=np.float64, keepdims=True)
    assert out.dtype == np.float64 and out.shape == (3, 1)


@pytest.mark.parametrize("call, reference", [
    (lambda t: np.max(t, 1, None, True), lambda x: np.max(x, 1, None, True)),
    (lambda t: t.max(1, None, True), lambda x: x.max(1, None, True)),
    (lambda t: np.min(t, 0, None, True), lambda x: np.min(x, 0, None, True)),
    (lambda t: np.argmax(t, 1, None, keepdims=True), lambda x: np.argmax(x, 1, None, keepdims=True)),
    (lambda t: t.argmin(1, None, keepdims=True), lambda x: x.argmin(1, None, keepdims=True)),
    (lambda t: tt.logsumexp(a=t, axis=1, keepdims=True),
     lambda x: np.log(np.sum(np.exp(x), axis=1, keepdims=True))),
])
def test_positional_out_slot_as_numpy(call, reference):
    """NumPy's positional order (a, axis, out, keepdims): the third slot is out, not keepdims."""
    _same(call(tt.tensor(X, requires_grad=True)), reference(X))


def test_out_is_refused_clearly():
    t = tt.tensor(X, requires_grad=True)
    for call in (lambda: np.max(t, 0, out=np.empty(4)), lambda: tt.argmax(t, 0, out=np.empty(4, int))):
        with pytest.raises(TypeError, match="out="):
            call()


def test_a_0d_leaf_accumulates_over_three_backward_calls():
    """backward() accumulated `prev + g`, a NumPy scalar for 0-d leaves: the third call raised."""
    z = tt.tensor(0.5, requires_grad=True)
    for _ in range(3):
        (z * 2.0).backward()
    assert type(z.grad) is np.ndarray and z.grad.shape == () and z.grad == 6.0


def test_floor_division_and_divmod_as_numpy():
    t = tt.tensor(X, requires_grad=True)
    _same(t // 0.3, X // 0.3)
    _same(1.0 // t, 1.0 // X)
    _same(tt.floor_divide(t, 0.3), np.floor_divide(X, 0.3))
    _same(np.floor_divide(t, 0.3), np.floor_divide(X, 0.3))
    q, r = divmod(t, 0.3)
    _same(q, X // 0.3)
    _same(r, X % 0.3)
    r.sum().backward()                      # the remainder keeps its gradient (1 almost everywhere)
    np.testing.assert_allclose(t.grad, np.ones_like(X))
    _same(tt.tensor(np.arange(7)) // 2, np.arange(7) // 2)


@pytest.mark.parametrize("shape, order",
                         [(np.array([6, 2]), "C"), ((6, 2), "F"), ((2, -1, 3), "F"), (12, "F")])
def test_reshape_takes_array_shapes_and_fortran_order(shape, order):
    t = tt.tensor(X, requires_grad=True)
    _same(np.reshape(t, shape, order=order), np.reshape(X, shape, order=order))
    _same(tt.reshape(t, shape, order=order), np.reshape(X, shape, order=order))
    assert tt.gradcheck(lambda a: tt.reshape(a, shape, order=order) * np.arange(12.0).reshape(
        np.reshape(X, shape).shape), X)


def test_reshape_refuses_other_orders():
    with pytest.raises(ValueError, match="order"):
        tt.reshape(tt.tensor(X), (4, 3), order="K")


def test_value_methods_all_any_nonzero_argsort():
    """NumPy's methods that give indices or booleans: plain arrays, computed on the values."""
    t = tt.tensor(X - 0.5, requires_grad=True)
    v = X - 0.5
    assert t.all() == v.all() and t.any() == v.any()
    _same(t.all(axis=0), v.all(axis=0))
    _same(t.any(axis=-1, keepdims=True), v.any(axis=-1, keepdims=True))
    _same(t.argsort(axis=0), v.argsort(axis=0))
    _same(np.argsort(t, axis=-1), np.argsort(v, axis=-1))
    for got, want in zip(t.nonzero(), v.nonzero()):
        _same(got, want)
    for got, want in zip(np.nonzero(t), np.nonzero(v)):
        _same(got, want)
    _same(tt.argsort(t), np.argsort(v))


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_initial_as_numpy(name):
    t = tt.tensor(X, requires_grad=True)
    for kwargs in ({"initial": 0.5}, {"axis": 0, "initial": 0.5},
                   {"axis": -1, "keepdims": True, "initial": 0.3}):
        out = getattr(np, name)(t, **kwargs)
        _same(out, getattr(np, name)(X, **kwargs))
        assert tt.gradcheck(lambda a: getattr(tt, name)(a, **kwargs), X)
    if name in ("sum", "prod"):     # an empty reduction gives the initial value
        _same(getattr(tt, name)(tt.tensor(np.zeros((0, 3))), axis=0, initial=2.0),
              getattr(np, name)(np.zeros((0, 3)), axis=0, initial=2.0))


def test_copy_takes_a():
    t = tt.tensor(X, requires_grad=True)
    _same(np.copy(a=t), X)
    _same(tt.clone(a=t), X)

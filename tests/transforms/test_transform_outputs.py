"""Issue 19: transforms refuse outputs they cannot differentiate, and pullbacks compose."""

import numpy as np
import pytest

import tinytensor as tt

X = np.array([0.3, -1.2, 0.8])
W = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)     # a Tensor the functions close over


def _transforms(f, allow_unused=False):
    """Each transform applied to f at X, as a thunk."""
    kw = {"allow_unused": allow_unused}
    return {
        "grad": lambda: tt.grad(f, **kw)(X),
        "value_and_grad": lambda: tt.value_and_grad(f, **kw)(X)[1],
        "vjp": lambda: tt.vjp(f, X, **kw)[1](np.ones(()))[0],     # every f here is scalar
        "jvp": lambda: tt.jvp(f, (X,), (np.ones(3),), **kw)[1],
        "jacobian-rev": lambda: tt.jacobian(f, **kw)(X),
        "jacobian-fwd": lambda: tt.jacobian(f, mode="fwd", **kw)(X),
        "hvp": lambda: tt.hvp(f, (X,), (np.ones(3),), **kw),
        "grad-nested": lambda: tt.grad(lambda x: tt.sum(tt.grad(f, **kw)(x) * x))(X),
    }


NOT_A_TENSOR = {"float": lambda x: 3.0, "ndarray": lambda x: np.float64(2.0) * np.ones(()),
                "from .data": lambda x: np.sum(x.data ** 2)}
NOT_CONNECTED = {"detached": lambda x: tt.sum(x.detach() ** 2),
                 "constant Tensor": lambda x: tt.sum(tt.tensor([1.0, 2.0]) ** 2),
                 "no_grad": lambda x: tt.no_grad()(lambda: tt.sum(x ** 2))(),
                 "closed-over Tensor": lambda x: tt.sum(W ** 2)}


@pytest.mark.parametrize("kind", list(NOT_A_TENSOR))
@pytest.mark.parametrize("transform", list(_transforms(None)))
def test_an_output_that_is_not_a_tensor_is_refused(transform, kind):
    # was: zeros without a word
    f = NOT_A_TENSOR[kind]
    with pytest.raises(TypeError, match="not a Tensor.*allow_unused=True"):
        _transforms(f)[transform]()


@pytest.mark.parametrize("kind", list(NOT_CONNECTED))
@pytest.mark.parametrize("transform", list(_transforms(None)))
def test_an_output_not_computed_from_the_inputs_is_refused(transform, kind):
    f = NOT_CONNECTED[kind]
    with pytest.raises(ValueError, match="not computed from the differentiated.*allow_unused=True"):
        _transforms(f)[transform]()


@pytest.mark.parametrize("transform", list(_transforms(None)))
def test_allow_unused_gives_zeros_on_purpose(transform):
    for f in list(NOT_A_TENSOR.values()) + list(NOT_CONNECTED.values()):
        result = _transforms(f, allow_unused=True)[transform]()
        assert not np.any(result)


def test_zero_derivatives_of_connected_outputs_are_not_refused(registry):
    # computed from x, with a derivative that is zero: zeros are the answer, not an error
    assert not tt.grad(lambda x: tt.sum(x * 0.0))(X).any()
    flat = tt.primitive(lambda x: np.zeros_like(x), name="flat_borders")   # a rule giving None
    flat.defvjp(lambda g, ans, x: None)
    flat.defjvp(lambda t, ans, x: None)
    for transform in ("grad", "vjp", "jvp", "jacobian-rev", "jacobian-fwd"):
        assert not np.any(_transforms(lambda x: tt.sum(flat(x)))[transform]())
    # an argument unused among several gets zeros (JAX's behaviour)
    gx, gy = tt.grad(lambda x, y: tt.sum(x ** 2), argnums=(0, 1))(X, np.ones(2))
    np.testing.assert_allclose(gx, 2 * X)
    assert not gy.any()


def test_second_order_of_linear_functions_is_zero_not_refused():
    lin = lambda x: tt.sum(3.0 * x)
    assert not tt.hvp(lin, (X,), (np.ones(3),)).any()
    assert tt.grad(tt.grad(lambda x: 2 * x))(1.0) == 0.0
    assert not tt.jacobian(tt.grad(lin))(X).any()
    assert not tt.jacobian(tt.grad(lin), mode="fwd")(X).any()
    # the gradient of x -> <W, x> is W, computed from a Tensor f closes over, not from x
    np.testing.assert_array_equal(tt.hvp(lambda x: tt.sum(W * x), (X,), (np.ones(3),)), 0.0)
    # hessian-style compositions of nonlinear functions stay exact
    cube = lambda x: tt.sum(x ** 3)
    np.testing.assert_allclose(tt.hvp(cube, (X,), (np.ones(3),)), 6 * X)
    np.testing.assert_allclose(tt.jacobian(tt.grad(cube))(X), np.diag(6 * X))
    np.testing.assert_allclose(tt.hvp(lambda x: tt.sum(tt.grad(cube)(x)), (X,), (np.ones(3),)), 6.0)


# ----- pullbacks reused inside a transform (HIPS autograd's flatten_func in gmm.py) ---------------------
def _flatten(params):
    return tt.concatenate([tt.reshape(params[k], (-1,)) for k in sorted(params)])


def test_a_pullback_kept_from_the_top_level_records_inside_grad():
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((2, 3)), "b": rng.standard_normal(3)}
    flat, pullback = tt.vjp(_flatten, params)       # autograd's flatten: unflatten is a pullback
    unflatten = lambda v: pullback(v)[0]

    def loss(p):
        return tt.sum(tt.tanh(p["w"]) * p["b"]) + tt.sum(p["b"] ** 2)

    g = tt.grad(lambda v: loss(unflatten(v)))(flat)           # was all zeros: Newton-CG stopped at once
    direct = tt.grad(loss)(params)
    np.testing.assert_allclose(g, np.concatenate([direct["b"], direct["w"].ravel()]), rtol=1e-12)
    # second order through it, against the Hessian of the direct function
    v = rng.standard_normal(flat.size)
    hv = tt.hvp(lambda u: loss(unflatten(u)), (flat,), (v,))
    H = tt.jacobian(lambda u: _flatten(tt.grad(loss)({"b": u[:3], "w": tt.reshape(u[3:], (2, 3))})))(flat)
    np.testing.assert_allclose(hv, H @ v, rtol=1e-10)
    # eagerly, on a Tensor that requires grad, too
    c = tt.tensor(flat, requires_grad=True)
    tt.sum(unflatten(c)["w"] ** 2).backward()
    np.testing.assert_allclose(c.grad, np.concatenate([np.zeros(3), 2 * params["w"].ravel()]))
    # and given arrays, still arrays
    assert isinstance(unflatten(flat)["w"], np.ndarray)


def test_a_jvp_function_kept_from_the_top_level_records_inside_grad():
    x0 = np.array([0.3, 0.4])
    _, jvp_fn = tt.transforms._linearize(lambda x: tt.sin(x) * 2.0, (x0,))
    t = np.array([1.0, 2.0])
    g = tt.grad(lambda t: tt.sum(jvp_fn(t) ** 2))(t)
    np.testing.assert_allclose(g, 2 * (2 * np.cos(x0)) ** 2 * t)
    assert isinstance(jvp_fn(t), np.ndarray)


def test_scipy_newton_cg_moves_with_a_flattened_objective():
    import scipy.optimize
    params = {"m": np.array([0.0, 0.0]), "s": np.array([1.0])}
    flat, pullback = tt.vjp(_flatten, params)
    target = np.array([1.0, -2.0])

    def objective(v):
        p = pullback(v)[0]
        return tt.sum((p["m"] - target) ** 2) + tt.sum((p["s"] - 3.0) ** 2)

    res = scipy.optimize.minimize(lambda v: float(tt.value_and_grad(objective)(v)[0]), flat,
                                  jac=tt.grad(objective), method="Newton-CG",
                                  hessp=lambda v, p: tt.hvp(objective, (v,), (p,)))
    np.testing.assert_allclose(res.x, [1.0, -2.0, 3.0], atol=1e-6)

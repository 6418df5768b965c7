"""Function transforms (vjp, jvp, grad, value_and_grad, jacobian, hvp) and higher order.

Checked against closed forms and central differences (`tt.numerical_grad`, float64): the
Hessian of x^T A x is A + A^T, the logistic-regression Hessian, random compositions of
primitives through every transform, nested containers, and the error messages.
"""

from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.specs import EXTRA_SPECS, OP_SPECS
from tinytensor.transforms import tree_flatten, tree_unflatten

RTOL, ATOL = 1e-5, 1e-7


def close(a, b, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def numerical_hessian(f, x):
    """Central differences of the analytic gradient: (x.size, x.size) for a flat x."""
    return tt.numerical_grad(tt.grad(f), x)[0]


# ----- closed forms ------------------------------------------------------------------------------
def test_quadratic_form_hessian_is_a_plus_a_transpose():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((5, 5))          # not symmetric
    x = rng.standard_normal(5)
    v = rng.standard_normal(5)
    f = lambda x: tt.dot(x, tt.dot(A, x))
    close(tt.grad(f)(x), (A + A.T) @ x)
    for mode in ("rev", "fwd"):
        H = tt.jacobian(tt.grad(f), mode=mode)(x)
        assert H.shape == (5, 5)
        close(H, A + A.T)
    close(tt.hvp(f, (x,), (v,)), (A + A.T) @ v)


SECOND_DERIVATIVES = {
    "sin": (tt.sin, lambda x: -np.sin(x)),
    "cos": (tt.cos, lambda x: -np.cos(x)),
    "exp": (tt.exp, np.exp),
    "cube": (lambda x: x ** 3, lambda x: 6 * x),
    "tanh": (tt.tanh, lambda x: -2 * np.tanh(x) / np.cosh(x) ** 2),
    "sigmoid": (tt.sigmoid, lambda x: (s := 1 / (1 + np.exp(-x))) * (1 - s) * (1 - 2 * s)),
    "log": (tt.log, lambda x: -1 / x ** 2),
    "sqrt": (tt.sqrt, lambda x: -0.25 * x ** -1.5),
    "square": (tt.square, lambda x: 2.0),
    "div": (lambda x: 1 / x, lambda x: 2 / x ** 3),
    "x_pow_x": (lambda x: x ** x, lambda x: x ** x * ((np.log(x) + 1) ** 2 + 1 / x)),
    "sin_x_cubed": (lambda x: tt.sin(x) * x ** 3,
                    lambda x: -np.sin(x) * x ** 3 + 6 * np.cos(x) * x ** 2 + 6 * x * np.sin(x)),
}


@pytest.mark.parametrize("name", SECOND_DERIVATIVES)
@pytest.mark.parametrize("x", [0.7, 1.9])
def test_grad_of_grad_against_closed_form(name, x):
    f, second = SECOND_DERIVATIVES[name]
    value = tt.grad(tt.grad(f))(x)
    assert isinstance(value, np.ndarray) and value.shape == () and value.dtype == np.float64
    close(value, second(x), rtol=1e-12, atol=1e-12)


def test_third_and_fourth_derivatives():
    quartic = lambda x: x ** 4
    close(tt.grad(tt.grad(tt.grad(quartic)))(1.5), 24 * 1.5)
    close(tt.grad(tt.grad(tt.grad(tt.grad(tt.sin))))(0.4), np.sin(0.4))
    # hvp inside grad: d/dx (f''(x) v) for f = x^4, v = 1 is 24 x
    close(tt.grad(lambda x: tt.hvp(quartic, (x,), (1.0,)))(1.5), 24 * 1.5)


def test_perturbation_confusion_is_avoided():
    # d/dx [ d/dy (x * y) at y = x ] = d/dx x = 1, not 2
    close(tt.grad(lambda x: tt.grad(lambda y: x * y)(x))(3.0), 1.0)
    # d/dx [ x * d/dy (x + y) at y = 1 ] = 1
    close(tt.grad(lambda x: x * tt.grad(lambda y: x + y)(1.0))(3.0), 1.0)
    # the same with the inner transform in forward mode: d/dx [ x * (d/dy x y along 1) ] = 2 x
    close(tt.grad(lambda x: x * tt.jvp(lambda y: x * y, (x,), (1.0,))[1])(3.0), 6.0)


def test_jvp_inside_grad_reverse_over_forward():
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal(3), rng.standard_normal(3)
    f = lambda x: tt.sum(tt.sin(x) * tt.exp(x))
    # the directional derivative's gradient is the Hessian times t
    directional = lambda x: tt.jvp(tt.grad(f), (x,), (t,))[1]
    H = tt.jacobian(tt.grad(f))(x)
    close(tt.grad(lambda x: tt.sum(tt.jvp(f, (x,), (t,))[1] * 1.0))(x), H @ t)
    close(tt.jacobian(directional)(x), tt.numerical_grad(directional, x)[0], rtol=1e-5, atol=1e-6)


# ----- logistic regression ----------------------------------------------------------------------
def logreg_problem(seed=0, n=7, d=4, k=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    y = np.eye(k)[rng.integers(0, k, n)]
    W = rng.standard_normal((d, k)) * 0.5
    return x, y, W


@pytest.mark.parametrize("labels", ["one-hot", "indices"])
def test_logistic_regression_hessian_against_numerical_jacobian_of_gradient(labels):
    x, y, W = logreg_problem()
    target = y if labels == "one-hot" else y.argmax(axis=1)
    loss = lambda W: (tt.crossEntropy(tt.softmax(tt.dot(x, W)), target) + 0.1 * tt.frobeniusNorm(W))
    numerical = tt.numerical_grad(tt.grad(loss), W)[0]
    assert numerical.shape == W.shape + W.shape
    for mode in ("rev", "fwd"):
        close(tt.jacobian(tt.grad(loss), mode=mode)(W), numerical, rtol=1e-5, atol=1e-8)
    v = np.random.default_rng(3).standard_normal(W.shape)
    close(tt.hvp(loss, (W,), (v,)), np.tensordot(numerical, v, axes=2), rtol=1e-5, atol=1e-8)
    # the Hessian is symmetric, and positive semi-definite (a convex loss)
    H = tt.jacobian(tt.grad(loss))(W).reshape(W.size, W.size)
    close(H, H.T, rtol=1e-10, atol=1e-12)
    assert np.linalg.eigvalsh(H).min() > -1e-10


# ----- jacobian in both modes -------------------------------------------------------------------
JACOBIAN_CASES = {
    "non-square": (lambda x: tt.concatenate([tt.sin(x), x * x[0], tt.exp(x[:2])]), [(3,)]),
    "0-d in": (lambda s: tt.stack([s * s, tt.sin(s), s]), [()]),
    "0-d out": (lambda x: tt.sum(tt.tanh(x) ** 2), [(2, 3)]),
    "0-d both": (lambda s: tt.exp(s) * s, [()]),
    "broadcasting": (lambda a, b: a * b + tt.sin(a) / (2 + tt.cos(b)), [(3, 1), (4,)]),
    "matmul batch": (lambda a, b: tt.matmul(a, b), [(2, 3, 4), (4, 2)]),
    "reductions": (lambda x: tt.logsumexp(x, axis=0) + tt.max(x, axis=0) * tt.mean(x, axis=0), [(4, 3)]),
    "softmax": (lambda x: tt.log_softmax(x) + tt.softmax(x, axis=0), [(2, 3)]),
}


@pytest.mark.parametrize("name", JACOBIAN_CASES)
def test_jacobian_modes_agree_with_each_other_and_with_differences(name):
    f, shapes = JACOBIAN_CASES[name]
    rng = np.random.default_rng(len(name))
    args = [rng.standard_normal(s) for s in shapes]
    out_shape = np.shape(f(*[tt.tensor(a) for a in args]).data)
    argnums = tuple(range(len(args)))
    rev = tt.jacobian(f, argnums=argnums, mode="rev")(*args)
    fwd = tt.jacobian(f, argnums=argnums, mode="fwd")(*args)
    numerical = tt.numerical_grad(f, *args)
    assert isinstance(rev, tuple) and len(rev) == len(args)
    for r, w, n, a in zip(rev, fwd, numerical, args):
        assert r.shape == w.shape == out_shape + a.shape
        close(r, w, rtol=1e-12, atol=1e-14)
        close(r, n, rtol=1e-6, atol=1e-8)


def test_jacobian_of_an_independent_output_is_zero():
    x = np.ones((2, 3), dtype=np.float32)
    for mode in ("rev", "fwd"):
        J = tt.jacobian(lambda x: tt.tensor(np.arange(4.0)), mode=mode, allow_unused=True)(x)
        assert J.shape == (4, 2, 3) and not J.any()
        with pytest.raises(ValueError, match="not computed from the differentiated"):   # issue 19
            tt.jacobian(lambda x: tt.tensor(np.arange(4.0)), mode=mode)(x)


def test_jacobian_with_containers_nests_output_around_input_structure():
    rng = np.random.default_rng(2)
    p = {"a": rng.standard_normal(2), "b": rng.standard_normal((2, 2))}
    f = lambda p: (tt.sum(p["a"] * p["b"], axis=1), tt.sin(p["a"][0]))
    for mode in ("rev", "fwd"):
        J = tt.jacobian(f, mode=mode)(p)
        assert isinstance(J, tuple) and set(J[0]) == {"a", "b"}
        assert J[0]["a"].shape == (2, 2) and J[0]["b"].shape == (2, 2, 2)
        assert J[1]["a"].shape == (2,) and J[1]["b"].shape == (2, 2)
        close(J[0]["a"], p["b"])   # d sum_j a_j b_ij / d a_j = b_ij
        close(J[1]["a"], [np.cos(p["a"][0]), 0.0])
        assert not J[1]["b"].any()


# ----- vjp / jvp against the tape ---------------------------------------------------------------
def test_jvp_equals_tensor_jvp_on_the_recorded_tape():
    rng = np.random.default_rng(4)
    x, t = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    f = lambda x: tt.softmax(tt.sin(x) * x.sum(axis=0)) @ np.ones((2, 4))
    leaf = tt.tensor(x, requires_grad=True)
    on_tape = f(leaf).jvp({leaf: t})
    out, tangent = tt.jvp(f, (x,), (t,))
    close(out, f(leaf).data, rtol=0, atol=0)
    close(tangent, on_tape, rtol=1e-14, atol=1e-15)
    assert isinstance(out, np.ndarray) and isinstance(tangent, np.ndarray)


def test_vjp_equals_backward_and_satisfies_the_adjoint_identity():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal(3)
    u, ta, tb = rng.standard_normal((2, 3)), rng.standard_normal((2, 3)), rng.standard_normal(3)
    f = lambda a, b: tt.tanh(a * b) + b
    out, vjp_fn = tt.vjp(f, a, b)
    ga, gb = vjp_fn(u)
    A, B = tt.tensor(a, requires_grad=True), tt.tensor(b, requires_grad=True)
    f(A, B).backward(u)
    close(ga, A.grad, rtol=1e-14, atol=0)
    close(gb, B.grad, rtol=1e-14, atol=0)
    _, jv = tt.jvp(f, (a, b), (ta, tb))
    close(np.sum(u * jv), np.sum(ga * ta) + np.sum(gb * tb), rtol=1e-12)
    # vjp_fn can be called again, and accepts a Tensor cotangent
    close(vjp_fn(tt.tensor(2 * u))[0], 2 * ga, rtol=1e-14)


def test_hvp_equals_jacobian_of_grad_times_v_with_several_primals():
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(3), rng.standard_normal((3, 2))
    vx, vy = rng.standard_normal(3), rng.standard_normal((3, 2))
    f = lambda x, y: tt.sum(tt.exp(tt.dot(x, y)) * tt.sin(x[:2]))
    hx, hy = tt.hvp(f, (x, y), (vx, vy))
    (Hxx, Hxy), (Hyx, Hyy) = tt.jacobian(tt.grad(f, argnums=(0, 1)), argnums=(0, 1))(x, y)
    close(hx, Hxx @ vx + np.tensordot(Hxy, vy, axes=2))
    close(hy, np.tensordot(Hyx, vx, axes=1) + np.tensordot(Hyy, vy, axes=2))


# ----- second order of every row of the op table -------------------------------------------------
ROWS = {**OP_SPECS, **EXTRA_SPECS}
SPEC_CASES = [pytest.param(name, i, id=f"{name}-{i}")
              for name, spec in ROWS.items() for i in range(len(spec.cases()))]


@pytest.mark.parametrize("name, index", SPEC_CASES)
def test_second_order_of_every_primitive(name, index):
    """H t of sum(y*y/2 + sin y), y = op(inputs), three ways: forward over reverse (hvp), reverse
    over reverse (grad of <grad, t>), and central differences of the gradient. A VJP rule that is
    not Tensor-safe (computes on .data, or leaves NumPy) breaks the first two."""
    spec = ROWS[name]
    args, params = spec.cases()[index]
    floats = [i for i, a in enumerate(args) if np.issubdtype(np.asarray(a).dtype, np.floating)]
    argnums = tuple(range(len(floats)))

    def f(*values):
        full = list(args)
        for i, v in zip(floats, values):
            full[i] = v
        y = spec.call(*full, **params)
        return tt.sum(y * y * 0.5 + tt.sin(y))

    primals = [args[i] for i in floats]
    rng = np.random.default_rng(index)
    t = [rng.standard_normal(np.shape(p)) for p in primals]
    grad_f = tt.grad(f, argnums=argnums)
    fwd_over_rev = tt.hvp(f, tuple(primals), tuple(t))
    fwd_over_rev = fwd_over_rev if len(primals) > 1 else (fwd_over_rev,)
    rev_over_rev = tt.grad(lambda *p: sum(tt.sum(g * d) for g, d in zip(grad_f(*p), t)), argnums)(*primals)
    eps = 1e-6
    up = grad_f(*[p + eps * d for p, d in zip(primals, t)])
    down = grad_f(*[p - eps * d for p, d in zip(primals, t)])
    for a, b, u, d in zip(fwd_over_rev, rev_over_rev, up, down):
        numerical = (u - d) / (2 * eps)
        scale = max(1.0, np.abs(numerical).max())
        close(a / scale, numerical / scale, rtol=0, atol=1e-6)
        close(b / scale, numerical / scale, rtol=0, atol=1e-6)


def test_second_order_of_a_user_primitive():
    @tt.primitive
    def cube_in_test_transforms(x):   # a name of its own: the registry is global
        return x ** 3
    cube = cube_in_test_transforms
    cube.defvjp(lambda g, ans, x: 3 * x ** 2 * g)
    cube.defjvp(lambda t, ans, x: 3 * x ** 2 * t)
    close(tt.grad(tt.grad(lambda x: cube(x)))(1.5), 6 * 1.5)
    close(tt.hvp(lambda x: tt.sum(cube(x)), (np.array([1.0, 2.0]),), (np.ones(2),)), [6.0, 12.0])


# ----- random compositions of primitives ---------------------------------------------------------
UNARY = [
    ("sin", tt.sin), ("cos", tt.cos), ("tanh", tt.tanh), ("sigmoid", tt.sigmoid),
    ("exp", lambda a: tt.exp(tt.tanh(a))), ("log", lambda a: tt.log(1 + a * a)),
    ("sqrt", lambda a: tt.sqrt(1 + a * a)), ("square", tt.square), ("neg", tt.neg),
    ("cube", lambda a: a ** 3 * 0.3), ("softmax", lambda a: tt.softmax(a, axis=1)),
    ("log_softmax", lambda a: tt.log_softmax(a, axis=0)),
    ("getitem", lambda a: a[:, [2, 0, 1]] * a[::-1]), ("transpose", lambda a: a.T.T * 1.5),
    ("reshape", lambda a: tt.reshape(a, (3, 2)).reshape(2, 3)),
    ("centre", lambda a: a - tt.mean(a, axis=0, keepdims=True)),
    ("logsumexp", lambda a: a - tt.logsumexp(a, axis=1, keepdims=True)),
    ("max", lambda a: a * tt.max(a, axis=1, keepdims=True)),
    ("norm", lambda a: a / (1 + tt.frobeniusNorm(a))),
]
BINARY = [
    ("add", tt.add), ("sub", tt.sub), ("mul", tt.mul),
    ("div", lambda a, b: a / (2 + tt.tanh(b))),
    ("power", lambda a, b: (1 + a * a) ** tt.sigmoid(b)),
    ("matmul", lambda a, b: tt.matmul(a, b.T) @ a * 0.3),
    ("concatenate", lambda a, b: tt.concatenate([a[:, :1], b[:, 1:]], axis=1)),
    ("stack", lambda a, b: tt.sum(tt.stack([a, b * 2]), axis=0)),
    ("broadcast", lambda a, b: a + tt.sum(b, axis=0)),
]


def random_program(seed, steps=6):
    """A random composition of primitives on two (2, 3) inputs; returns (f_vector, f_scalar, ops)."""
    rng = np.random.default_rng(seed)
    program = []
    for _ in range(steps):
        if rng.random() < 0.5:
            program.append((UNARY[rng.integers(len(UNARY))], (int(rng.integers(0, 2 + len(program))),)))
        else:
            program.append((BINARY[rng.integers(len(BINARY))],
                            tuple(int(i) for i in rng.integers(0, 2 + len(program), 2))))
    weights = rng.standard_normal((2, 3))

    def vector(x, y):
        pool = [x, y]
        for (_, op), operands in program:
            pool.append(op(*[pool[i] for i in operands]))
        return tt.sum(pool[-1] * weights, axis=1) + tt.sum(pool[-2], axis=0)[:2]

    def scalar(x, y):
        return tt.sum(tt.tanh(vector(x, y)) * np.array([0.7, -1.3]))

    return vector, scalar, [name for (name, _), _ in program]


@pytest.mark.parametrize("seed", range(16))
def test_random_compositions_through_every_transform(seed):
    vector, scalar, names = random_program(seed)
    rng = np.random.default_rng(100 + seed)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    tx, ty = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    u = rng.standard_normal(2)
    tol = dict(rtol=1e-5, atol=1e-7)
    Jx, Jy = tt.numerical_grad(vector, x, y)                          # (2, 2, 3) each
    # jacobian, both modes
    for mode in ("rev", "fwd"):
        Ax, Ay = tt.jacobian(vector, argnums=(0, 1), mode=mode)(x, y)
        close(Ax, Jx, **tol)
        close(Ay, Jy, **tol)
    # jvp and vjp
    out, tangent = tt.jvp(vector, (x, y), (tx, ty))
    close(out, vector(tt.tensor(x), tt.tensor(y)).data, rtol=0, atol=0)
    close(tangent, np.tensordot(Jx, tx, axes=2) + np.tensordot(Jy, ty, axes=2), **tol)
    _, vjp_fn = tt.vjp(vector, x, y)
    gx, gy = vjp_fn(u)
    close(gx, np.tensordot(u, Jx, axes=1), **tol)
    close(gy, np.tensordot(u, Jy, axes=1), **tol)
    # grad and value_and_grad
    nx, ny = tt.numerical_grad(scalar, x, y)
    value, (gx, gy) = tt.value_and_grad(scalar, argnums=(0, 1))(x, y)
    close(value, scalar(tt.tensor(x), tt.tensor(y)).data, rtol=1e-15, atol=0)
    close(gx, nx, **tol)
    close(gy, ny, **tol)
    # second order: hvp and jacobian(grad) against differences of the gradient
    # (some random programs do not use x: zeros on purpose, issue 19)
    H = tt.numerical_grad(lambda x: tt.grad(scalar, allow_unused=True)(x, y), x)[0]   # (2, 3, 2, 3)
    close(tt.hvp(lambda x: scalar(x, y), (x,), (tx,), allow_unused=True), np.tensordot(H, tx, axes=2),
          rtol=1e-4, atol=1e-6)
    for mode in ("rev", "fwd"):
        close(tt.jacobian(tt.grad(scalar, allow_unused=True), mode=mode, allow_unused=True)(x, y), H,
              rtol=1e-4, atol=1e-6)
    # grad of grad along one element (a scalar function of a scalar)
    line = lambda s: scalar(x + s * tx, y)
    close(tt.grad(tt.grad(line, allow_unused=True), allow_unused=True)(0.0),
          np.sum(tx * np.tensordot(H, tx, axes=2)), rtol=1e-4, atol=1e-6)


# ----- nested containers ------------------------------------------------------------------------
Pair = namedtuple("Pair", "left right")


def test_tree_flatten_and_unflatten_round_trip():
    tree = {"a": [1.0, (np.ones(2), None)], "b": Pair(np.zeros(3), {"c": 2.0}),
            "d": OrderedDict(z=1.0, y=3.0)}
    leaves, structure = tree_flatten(tree)
    assert len(leaves) == 6
    rebuilt = tree_unflatten(structure, leaves)
    assert type(rebuilt["b"]) is Pair and type(rebuilt["d"]) is OrderedDict
    assert list(rebuilt["d"]) == ["z", "y"] and rebuilt["a"][1][1] is None
    assert tree_flatten(rebuilt)[1] == structure
    assert [np.shape(v) for v in tree_flatten(rebuilt)[0]] == [np.shape(v) for v in leaves]


def test_grad_of_dict_params_returns_a_dict_with_the_same_keys():
    rng = np.random.default_rng(7)
    params = {"W1": rng.standard_normal((4, 5)), "b1": np.zeros(5),
              "W2": rng.standard_normal((5, 3)), "b2": np.zeros(3)}
    x, y = rng.standard_normal((6, 4)), rng.integers(0, 3, 6)

    def loss(p):
        h = tt.tanh(tt.dot(x, p["W1"]) + p["b1"])
        return tt.cross_entropy(tt.softmax(tt.dot(h, p["W2"]) + p["b2"]), y)

    g = tt.grad(loss)(params)
    assert type(g) is dict and list(g) == list(params)
    for k in params:
        assert g[k].shape == params[k].shape and g[k].dtype == np.float64
        numerical = tt.numerical_grad(lambda v, k=k: loss({**params, k: v}), params[k])[0]
        close(g[k], numerical, rtol=1e-6, atol=1e-9)


def test_nested_structures_round_trip_through_vjp_jvp_and_argnums():
    rng = np.random.default_rng(8)
    a = {"w": [rng.standard_normal(2), (rng.standard_normal(()), None)]}
    b = rng.standard_normal(2)

    def f(a, scale, b):
        w = a["w"]
        return {"s": tt.sum(w[0] * b) * w[1][0] * scale, "v": [w[0] ** 2, None]}

    out, vjp_fn = tt.vjp(lambda a, b: f(a, 3.0, b), a, b)
    assert set(out) == {"s", "v"} and out["v"][1] is None and isinstance(out["s"], np.ndarray)
    ga, gb = vjp_fn({"v": [np.ones(2), None], "s": np.array(1.0)})   # keys in another order: fine
    w0, w1 = a["w"][0], a["w"][1][0]
    close(ga["w"][0], b * w1 * 3 + 2 * w0)
    close(ga["w"][1][0], np.sum(w0 * b) * 3)
    assert ga["w"][1][1] is None
    close(gb, w0 * w1 * 3)
    _, tangent = tt.jvp(lambda a, b: f(a, 3.0, b), (a, b), (a, np.zeros(2)))
    assert set(tangent) == {"s", "v"} and tangent["v"][1] is None
    close(tangent["v"][0], 2 * w0 * w0)
    # argnums tuple: a tuple of gradients, the non-differentiated argument passed through
    g_a, g_b = tt.grad(lambda a, scale, b: f(a, scale, b)["s"], argnums=(0, 2))(a, 3, b)
    close(g_a["w"][0], b * w1 * 3)
    close(g_b, w0 * w1 * 3)
    g_b_only = tt.grad(lambda a, scale, b: f(a, scale, b)["s"], argnums=-1)(a, 3, b)
    close(g_b_only, g_b, rtol=0, atol=0)


def test_hvp_over_a_dict():
    rng = np.random.default_rng(9)
    p = {"u": rng.standard_normal(3), "v": rng.standard_normal(3)}
    t = {"u": rng.standard_normal(3), "v": rng.standard_normal(3)}
    f = lambda p: tt.sum(p["u"] ** 2 * p["v"])
    h = tt.hvp(f, (p,), (t,))
    # H = [[2 diag(v), 2 diag(u)], [2 diag(u), 0]]
    close(h["u"], 2 * p["v"] * t["u"] + 2 * p["u"] * t["v"])
    close(h["v"], 2 * p["u"] * t["u"])


def test_state_dict_goes_straight_through_grad():
    rng = np.random.default_rng(10)
    try:
        from tinytensor import nn
    except ImportError:   # tinytensor.nn not written yet
        nn = None
    if nn is not None and hasattr(nn, "Linear") and hasattr(nn.Module, "state_dict"):
        model = nn.Sequential(nn.Linear(4, 5, rng=rng), nn.Tanh(), nn.Linear(5, 3, rng=rng))
        state = model.state_dict()
    else:   # tinytensor.nn not there yet: a plain dict shaped like an MLP's parameters
        model = None
        state = {"0.weight": rng.standard_normal((5, 4)), "0.bias": rng.standard_normal(5),
                 "2.weight": rng.standard_normal((3, 5)), "2.bias": rng.standard_normal(3)}
    x, y = rng.standard_normal((8, 4)), rng.integers(0, 3, 8)

    def loss(state):
        # layers in order: each a 2-D weight (out, in) and a 1-D bias, as tt.nn.Linear keeps them
        weights = [v for v in state.values() if np.ndim(v) == 2]
        biases = [v for v in state.values() if np.ndim(v) == 1]
        h = x
        for i, (W, b) in enumerate(zip(weights, biases)):
            h = tt.dot(h, W.T) + b
            h = tt.tanh(h) if i < len(weights) - 1 else h
        return tt.cross_entropy(tt.softmax(h), y)

    g = tt.grad(loss)(state)
    assert list(g) == list(state)
    for k, v in state.items():
        assert g[k].shape == np.shape(v)
        close(g[k], tt.numerical_grad(lambda w, k=k: loss({**state, k: w}), v)[0], rtol=1e-6, atol=1e-9)
    if model is not None:   # the functional reading is the model
        close(loss(state).data, tt.cross_entropy(tt.softmax(model(tt.tensor(x))), y).data, rtol=1e-12)


# ----- dtypes, constants, no_grad ---------------------------------------------------------------
def test_dtypes_are_kept_and_independent_inputs_get_zeros():
    x32 = np.array([0.5, 1.5], dtype=np.float32)
    g = tt.grad(lambda x: tt.sum(tt.sin(x)))(x32)
    assert g.dtype == np.float32
    close(g, np.cos(x32), rtol=1e-6)
    assert tt.grad(lambda x: x * x)(2.0).dtype == np.float64
    gx, gy = tt.grad(lambda x, y: tt.sum(x * 2.0), argnums=(0, 1))(x32, np.ones((2, 2), np.float32))
    assert gy.shape == (2, 2) and gy.dtype == np.float32 and not gy.any()
    close(gx, [2.0, 2.0])
    assert tt.grad(lambda x: 3.0, allow_unused=True)(x32).shape == (2,)   # a constant function
    assert not tt.hvp(lambda x: tt.sum(x), (x32,), (x32,)).any()   # a linear function
    assert tt.grad(tt.grad(lambda x: 2 * x))(1.0) == 0.0


def test_arguments_may_be_tensors_and_the_user_tape_is_left_alone():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    g = tt.grad(lambda x: tt.sum(x ** 3))(x)
    assert isinstance(g, np.ndarray)
    close(g, 3 * x.data ** 2)
    assert x.grad is None


def test_transforms_work_under_no_grad():
    with tt.no_grad():
        close(tt.grad(lambda x: x ** 3)(2.0), 12.0)
        close(tt.hvp(lambda x: x ** 3, (2.0,), (1.0,)), 12.0)
    assert tt.tensor(1.0, requires_grad=True).requires_grad


def test_an_error_inside_f_leaves_no_nesting_behind():
    def broken(x):
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        tt.grad(broken)(1.0)
    # a fresh outermost call returns arrays again
    assert isinstance(tt.grad(lambda x: x * x)(1.0), np.ndarray)


# ----- error messages ---------------------------------------------------------------------------
def test_grad_of_a_non_scalar_function_points_to_jacobian():
    with pytest.raises(TypeError, match=r"scalar.*\(3,\).*jacobian.*vjp"):
        tt.grad(tt.sin)(np.ones(3))
    with pytest.raises(TypeError, match="scalar"):
        tt.grad(lambda x: (x, x))(1.0)


def test_differentiating_an_integer_argument_is_a_clear_error():
    with pytest.raises(TypeError, match="floating-point.*int64"):
        tt.grad(lambda x: x * 2.0)(np.array(3))
    with pytest.raises(TypeError, match="floating-point"):
        tt.grad(lambda x: x * 2.0)(3)
    # but an integer argument that is not differentiated is fine
    close(tt.grad(lambda x, n: x ** n, argnums=0)(2.0, 3), 12.0)


def test_wrong_cotangent_structure_or_shape():
    _, vjp_fn = tt.vjp(lambda x: {"a": x * 2, "b": [tt.sin(x)]}, np.ones(3))
    with pytest.raises(ValueError, match=r"keys \['a', 'b'\].*\['a'\]"):
        vjp_fn({"a": np.ones(3)})
    with pytest.raises(ValueError, match=r"list of length 1 at \['b'\], got length 2"):
        vjp_fn({"a": np.ones(3), "b": [np.ones(3), np.ones(3)]})
    with pytest.raises(ValueError, match=r"shape \(2,\) but must have shape \(3,\)"):
        vjp_fn({"a": np.ones(2), "b": [np.ones(3)]})
    _, vjp_fn = tt.vjp(tt.sin, np.ones(3))
    with pytest.raises(ValueError, match="expected an array"):
        vjp_fn([np.ones(3)])


def test_wrong_tangents_and_arguments():
    with pytest.raises(ValueError, match=r"tangents.*shape \(2,\) but must have shape \(3,\)"):
        tt.jvp(tt.sin, (np.ones(3),), (np.ones(2),))
    with pytest.raises(ValueError, match="length 1"):
        tt.jvp(tt.sin, (np.ones(3),), (np.ones(3), np.ones(3)))
    with pytest.raises(TypeError, match="primals must be a tuple"):
        tt.jvp(tt.sin, np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="argnums"):
        tt.grad(lambda x: x, argnums=1)(1.0)
    with pytest.raises(ValueError, match="repeats"):
        tt.grad(lambda x, y: x * y, argnums=(0, 0))(1.0, 2.0)
    with pytest.raises(ValueError, match="mode"):
        tt.jacobian(tt.sin, mode="forward")


# ----- has_aux, as JAX (issue 30) -----------------------------------------------------------------------
def test_has_aux_as_jax():
    def f(x):
        y = tt.sum(x ** 2)
        return y, {"y": y, "twice": 2 * x, "label": "sq"}

    x = np.array([1.0, 2.0])
    g, aux = tt.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g, 2 * x)
    assert aux["label"] == "sq" and type(aux["twice"]) is np.ndarray and float(aux["y"]) == 5.0
    (value, aux), g = tt.value_and_grad(f, has_aux=True)(x)
    assert float(value) == 5.0 and np.array_equal(aux["twice"], 2 * x) and np.array_equal(g, 2 * x)
    (g0, g1), _ = tt.grad(lambda a, b: (tt.sum(a * b), b), argnums=(0, 1), has_aux=True)(x, 3 * x)
    np.testing.assert_allclose(g0, 3 * x)
    hess = tt.jacobian(lambda x: tt.grad(f, has_aux=True)(x)[0])(x)      # nested: aux stays on the tape
    np.testing.assert_allclose(hess, 2 * np.eye(2))
    with pytest.raises(TypeError, match="pair"):
        tt.grad(lambda x: tt.sum(x), has_aux=True)(x)

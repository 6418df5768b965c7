"""tt.vmap: JAX's semantics (in_axes/out_axes per leaf, None, nesting, errors), composition with
every transform both ways and with tt.compile, the batching column of check_rules, randomness."""

import numpy as np
import pytest

import tinytensor as tt

R = np.random.default_rng(0)
X = R.standard_normal((5, 3))
W = R.standard_normal((3, 4))
Y = R.integers(0, 4, 5)


def loss(w, x, y):                      # one example's logistic-regression loss
    return tt.softmax_cross_entropy(x @ w, y)


# ----- in_axes / out_axes ---------------------------------------------------------------------------
def test_in_axes_per_argument_and_per_leaf():
    f = lambda p, x: tt.tanh(x @ p["w"]) * p["s"]          # noqa: E731
    p = {"w": W, "s": R.standard_normal((5, 4))}
    out = tt.vmap(f, in_axes=({"w": None, "s": 0}, 0))(p, X)
    np.testing.assert_allclose(out, np.tanh(X @ W) * p["s"], rtol=1e-15)
    # a prefix: one axis for the whole dict, negative axes
    out = tt.vmap(lambda q: q["a"] + q["b"], in_axes=-1)({"a": X.T, "b": X.T})
    np.testing.assert_allclose(out, 2 * X)


def test_out_axes_and_unbatched_results_broadcast():
    out = tt.vmap(lambda x: (x * 2, tt.sum(x)), out_axes=(1, 0))(X)
    np.testing.assert_allclose(out[0], 2 * X.T)
    np.testing.assert_allclose(out[1], X.sum(1))
    # a result that does not depend on the example is broadcast (as jax.vmap)
    out = tt.vmap(lambda x: np.ones(2))(X)
    assert out.shape == (5, 2)
    assert tt.vmap(lambda x: np.ones(2), out_axes=None)(X).shape == (2,)
    # keyword arguments are mapped over axis 0
    np.testing.assert_allclose(tt.vmap(lambda x, *, y: x * y)(X, y=X), X * X)
    assert tt.vmap(lambda: np.zeros(3), axis_size=4)().shape == (4, 3)


def test_nested_vmap_is_an_outer_product():
    a, b = R.standard_normal(3), R.standard_normal(4)
    outer = tt.vmap(tt.vmap(lambda u, v: u * v, in_axes=(None, 0)), in_axes=(0, None))(a, b)
    np.testing.assert_allclose(outer, np.outer(a, b))
    batched_mm = tt.vmap(tt.vmap(lambda r, c: tt.sum(r * c), (None, 1)), (0, None))(X, W)
    np.testing.assert_allclose(batched_mm, X @ W, rtol=1e-14)


@pytest.mark.parametrize("call, error, match", [
    (lambda: tt.vmap(lambda x, y: x + y, in_axes=[0, 0])(X, X), TypeError, "tuple"),
    (lambda: tt.vmap(lambda x, y: x + y)(X, X[:3]), ValueError, "inconsistent sizes.*size 5.*size 3"),
    (lambda: tt.vmap(lambda x: x, out_axes=None)(X), ValueError, "out_axes is None"),
    (lambda: tt.vmap(lambda x: x, in_axes=None)(X), ValueError, "at least one non-None"),
    (lambda: tt.vmap(lambda x: x, in_axes=2)(X), ValueError, "axis 2.*shape \\(5, 3\\)"),
    (lambda: tt.vmap(lambda x: x if x.sum() > 0 else -x)(X), TypeError, "tt.where"),
    (lambda: tt.vmap(lambda x: float(x[0]))(X), TypeError, "float"),
    (lambda: tt.vmap(lambda x: x, in_axes=(0, 1))(X), ValueError, "2 entries.*1 positional"),
    (lambda: tt.vmap(lambda x: x, randomness="sometimes"), ValueError, "randomness"),
])
def test_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_an_escaped_batched_value_is_refused():
    kept = []
    tt.vmap(lambda x: kept.append(x) or x)(X)
    with pytest.raises(RuntimeError, match="escaped"):
        tt.exp(kept[0])


# ----- composition with the transforms --------------------------------------------------------------
def _loop(f, *args):
    return np.stack([f(*a) for a in zip(*args)])


def test_per_example_gradients_are_vmap_of_grad():
    per_example = tt.vmap(tt.grad(loss), in_axes=(None, 0, 0))(W, X, Y)
    np.testing.assert_allclose(per_example, _loop(lambda x, y: tt.grad(loss)(W, x, y), X, Y), rtol=1e-13)
    # summed: the batch gradient of the summed loss
    batch = tt.grad(lambda w: tt.softmax_cross_entropy(X @ w, Y, reduction="sum"))(W)
    np.testing.assert_allclose(per_example.sum(0), batch, rtol=1e-13)
    value, g = tt.vmap(tt.value_and_grad(loss), in_axes=(None, 0, 0))(W, X, Y)
    assert value.shape == (5,) and np.allclose(g, per_example, rtol=0, atol=0)


def test_the_lectures_loss_per_example_and_in_float32():
    lecture = lambda w, x, y: tt.crossEntropy(tt.softmax(tt.dot(x, w)), y) + tt.frobeniusNorm(w)  # noqa: E731
    onehot = np.eye(4)[Y]
    got = tt.vmap(tt.grad(lecture), in_axes=(None, 0, 0))(W, X, onehot)
    np.testing.assert_allclose(got, _loop(lambda x, y: tt.grad(lecture)(W, x, y), X, onehot), rtol=1e-13)
    got32 = tt.vmap(tt.grad(lecture), in_axes=(None, 0, 0))(W.astype(np.float32), X.astype(np.float32),
                                                            onehot.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, got, rtol=1e-4, atol=1e-5)


def test_grad_of_vmap_and_vmap_inside_a_closure():
    f = lambda w: tt.sum(tt.vmap(lambda x: tt.tanh(x @ w).sum())(X))     # noqa: E731
    np.testing.assert_allclose(tt.grad(f)(W), tt.grad(lambda w: tt.tanh(X @ w).sum())(W), rtol=1e-14)
    # a closed-over batched value inside a grad inside vmap: per example, never summed
    g = tt.vmap(lambda x: tt.grad(lambda w: tt.sum(tt.sin(x @ w)))(W))(X)
    np.testing.assert_allclose(g, _loop(lambda x: tt.grad(lambda w: tt.sum(tt.sin(x @ w)))(W), X), rtol=1e-14)


def test_vmap_of_jvp_vjp_hvp():
    f = lambda v: tt.sin(v @ W)                                          # noqa: E731
    t = R.standard_normal((5, 3))
    out, tan = tt.vmap(lambda x, u: tt.jvp(f, (x,), (u,)))(X, t)
    np.testing.assert_allclose(tan, np.cos(X @ W) * (t @ W), rtol=1e-14)
    ct = R.standard_normal((5, 4))
    got = tt.vmap(lambda x, c: tt.vjp(f, x)[1](c)[0])(X, ct)
    np.testing.assert_allclose(got, (np.cos(X @ W) * ct) @ W.T, rtol=1e-13)
    h = tt.vmap(lambda x, u: tt.hvp(lambda v: tt.sum(v ** 3), (x,), (u,)))(X, t)
    np.testing.assert_allclose(h, 6 * X * t, rtol=1e-14)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_vmap_of_jacobian_and_hessian(mode):
    f = lambda v: tt.tanh(v @ W)                                         # noqa: E731
    J = tt.vmap(tt.jacobian(f, mode=mode))(X)
    np.testing.assert_allclose(J, (1 - np.tanh(X @ W) ** 2)[:, :, None] * W.T[None], rtol=1e-13)
    H = tt.vmap(tt.hessian(lambda v: tt.sum(tt.sin(v) * v[0]), mode=mode))(X)
    np.testing.assert_allclose(H, _loop(tt.hessian(lambda v: tt.sum(tt.sin(v) * v[0])), X), rtol=1e-13)


def test_jacobian_of_vmap_is_block_diagonal_and_has_aux():
    J = tt.jacobian(tt.vmap(lambda v: tt.sin(v)))(X[0])
    np.testing.assert_allclose(J, np.diag(np.cos(X[0])))
    jac, aux = tt.jacobian(lambda v: (tt.sin(v), tt.sum(v)), has_aux=True)(X[0])
    np.testing.assert_allclose(jac, np.diag(np.cos(X[0])))
    assert isinstance(aux, np.ndarray) and np.isclose(aux, X[0].sum())


def test_vmap_of_a_pullback_made_outside_is_jacrev():
    out, pullback = tt.vjp(lambda v: tt.tanh(v @ W), X[0])
    rows = tt.vmap(pullback)(np.eye(4))[0]
    np.testing.assert_allclose(rows, tt.jacobian(lambda v: tt.tanh(v @ W))(X[0]), rtol=1e-14)


def test_second_order_inside_vmap():
    g2 = tt.vmap(tt.grad(tt.grad(lambda s: s ** 3 * tt.sin(s))))(X[:, 0])
    s = X[:, 0]
    expected = 6 * s * np.sin(s) + 6 * s ** 2 * np.cos(s) - s ** 3 * np.sin(s)
    np.testing.assert_allclose(g2, expected, rtol=1e-12)


def test_tensor_arguments_stay_on_the_tape():
    w = tt.tensor(W, requires_grad=True)
    out = tt.vmap(lambda x: tt.sum(tt.tanh(x @ w)))(X)
    assert isinstance(out, tt.Tensor) and out.shape == (5,)
    tt.sum(out).backward()
    np.testing.assert_allclose(w.grad, X.T @ (1 - np.tanh(X @ W) ** 2), rtol=1e-14)


def test_compile_of_vmap_of_grad_gives_eager_numbers():
    f = tt.vmap(tt.grad(loss), in_axes=(None, 0, 0))
    compiled = tt.compile(f)
    for _ in range(2):
        np.testing.assert_allclose(compiled(W, X, Y), f(W, X, Y), rtol=1e-14)


# ----- the batching column -------------------------------------------------------------------------
def test_check_rules_has_the_batching_column_and_names_loop_fallbacks(capsys):
    rows = tt.check_rules(only=["matmul", "sqrtm", "getitem"], verbose=True)
    kinds = {r["op"]: r["rule"] for r in rows}
    assert kinds == {"matmul": "native", "sqrtm": "loop", "getitem": "native"}
    assert all(r["batching"] <= 1e-12 for r in rows)
    assert "declared loop fallback under tt.vmap" in capsys.readouterr().out


def test_a_user_primitive_runs_on_the_loop_until_given_a_rule(registry):
    cube = tt.primitive(lambda x: x ** 3, name="vmap_cube")
    cube.defvjp(lambda g, ans, x: 3 * x ** 2 * g)
    cube.defjvp(lambda t, ans, x: 3 * x ** 2 * t)
    np.testing.assert_allclose(tt.vmap(cube)(X), X ** 3)
    assert tt.check_rules(only=cube, verbose=False)[0]["rule"] == "loop"
    tt.ops.batching.defbatch(cube, lambda prim, size, vals, dims: (prim(vals[0]), dims[0]))
    row = tt.check_rules(only=cube, verbose=False)[0]
    assert row["rule"] == "native" and row["ok"]
    # a wrong rule is caught by the column
    tt.ops.batching.defbatch(cube, lambda prim, size, vals, dims: (prim(vals[0]) + 1, dims[0]))
    with pytest.raises(tt.GradcheckError, match="vmap_cube.*batching"):
        tt.check_rules(only=cube, verbose=False)
    tt.ops.table.BATCHING.pop("vmap_cube")


# ----- randomness ----------------------------------------------------------------------------------
def test_dropout_randomness():
    x = R.standard_normal((4, 6))
    with pytest.raises(RuntimeError, match="randomness='different'.*'same'.*eval"):
        tt.vmap(tt.nn.Dropout(0.5, rng=1))(x)
    different = tt.vmap(tt.nn.Dropout(0.5, rng=1), randomness="different")(x)
    np.testing.assert_array_equal(different, tt.nn.Dropout(0.5, rng=1)(x))   # the stacked batch's draw
    same = tt.vmap(tt.nn.Dropout(0.5, rng=1), randomness="same")(x)
    kept = same != 0
    assert (kept == kept[0]).all() and 0 < kept[0].sum() < 6
    d = tt.nn.Dropout(0.5)
    d.eval()
    np.testing.assert_array_equal(tt.vmap(d)(x), x)


def test_batchnorm_train_raises_and_eval_is_exact():
    bn = tt.nn.BatchNorm1d(3, dtype=np.float64)
    with pytest.raises(RuntimeError, match="eval\\(\\).*outside vmap"):
        tt.vmap(lambda x: bn(x[None]))(X)
    bn.running_mean[...] = [0.1, -0.2, 0.3]
    bn.running_var[...] = [1.5, 0.5, 2.0]
    bn.eval()
    np.testing.assert_array_equal(tt.vmap(lambda x: bn(x[None])[0])(X).data, bn(X).data)


def test_other_random_draws_follow_randomness():
    with pytest.raises(RuntimeError, match="tt.randn inside tt.vmap with randomness='error'"):
        tt.vmap(lambda x: x + tt.randn(3).data)(X)
    with pytest.raises(RuntimeError, match="only nn.Dropout draws per example"):
        tt.vmap(lambda x: x + tt.rand(3).data, randomness="different")(X)
    same = tt.vmap(lambda x: x * 0 + tt.randn(3, rng=0).data, randomness="same")(X)
    np.testing.assert_array_equal(same, np.broadcast_to(tt.randn(3, rng=0).data, (5, 3)))


def test_nested_and_meta_compositions():
    x3 = R.standard_normal((3, 4, 3))
    f = lambda w, x: tt.sum(tt.tanh(x @ w) ** 2)                            # noqa: E731
    twice = tt.vmap(tt.vmap(tt.grad(f), in_axes=(None, 0)), in_axes=(None, 0))(W, x3)
    np.testing.assert_allclose(twice, [[tt.grad(f)(W, x) for x in row] for row in x3], rtol=1e-13)
    # the gradient of a function of per-example gradients (meta-learning), against differences
    meta = lambda w: tt.sum(tt.vmap(tt.grad(f), in_axes=(None, 0))(w, X) ** 2)   # noqa: E731
    np.testing.assert_allclose(tt.grad(meta)(W), tt.numerical_grad(meta, W)[0], rtol=1e-6, atol=1e-8)
    # a batched Jacobian with respect to shared parameters
    J = tt.jacobian(lambda w: tt.vmap(lambda x: tt.tanh(x @ w))(X))(W)
    np.testing.assert_allclose(J, [tt.jacobian(lambda w: tt.tanh(x @ w))(W) for x in X], rtol=1e-13)


def test_compile_retraces_for_another_batch_size():
    f = tt.vmap(tt.grad(loss), in_axes=(None, 0, 0))
    compiled = tt.compile(f)
    for n in (5, 3, 5):
        np.testing.assert_allclose(compiled(W, X[:n], Y[:n]), f(W, X[:n], Y[:n]), rtol=1e-14)


def test_has_aux_as_jax():
    f = lambda v: (tt.sum(v ** 3), {"n": tt.sum(v)})                       # noqa: E731
    g, aux = tt.grad(f, has_aux=True)(X[0])
    np.testing.assert_allclose(g, 3 * X[0] ** 2)
    assert isinstance(aux["n"], np.ndarray) and np.isclose(aux["n"], X[0].sum())
    (value, aux), g = tt.value_and_grad(f, has_aux=True)(X[0])
    assert np.isclose(value, np.sum(X[0] ** 3))
    H, aux = tt.hessian(f, has_aux=True)(X[0])
    np.testing.assert_allclose(H, np.diag(6 * X[0]), atol=1e-14)
    gs, auxes = tt.vmap(tt.grad(f, has_aux=True))(X)                      # per example, aux too
    np.testing.assert_allclose(gs, 3 * X ** 2)
    np.testing.assert_allclose(auxes["n"], X.sum(1))
    Hs, auxes = tt.vmap(tt.hessian(f, has_aux=True))(X)
    assert Hs.shape == (5, 3, 3) and type(auxes["n"]) is np.ndarray
    np.testing.assert_allclose(auxes["n"], X.sum(1))
    J, auxes = tt.vmap(tt.jacobian(lambda v: (tt.sin(v), tt.sum(v)), has_aux=True))(X)
    assert J.shape == (5, 3, 3) and type(auxes) is np.ndarray
    with pytest.raises(TypeError, match="pair"):
        tt.grad(lambda v: tt.sum(v), has_aux=True)(X[0])


# ----- the one-output Jacobian (issue 33's input Jacobian of a network) -------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_one_element_output_jacobian_is_its_gradient_reshaped(dtype):
    """One output element takes a single sweep (no basis, no rows to cut): the blocks keep
    out.shape + in.shape, the dtype, every input leaf of a pytree, and equal jacfwd's."""
    rng = np.random.default_rng(3)
    p = {"x": rng.standard_normal((6, 2)).astype(dtype), "s": rng.standard_normal(3).astype(dtype)}
    W1, W2 = rng.standard_normal((2, 3)).astype(dtype), rng.standard_normal((3, 1)).astype(dtype)
    nets = {(1,): lambda q: tt.tanh(q["x"] @ W1 * q["s"]) @ W2,
            (): lambda q: tt.sum(tt.tanh(q["x"] @ W1 * q["s"]) @ W2),
            (1, 1): lambda q: tt.reshape(tt.sum(tt.tanh(q["x"] @ W1 * q["s"]) @ W2), (1, 1))}
    for out_shape, f in nets.items():
        one = lambda q: f({"x": q["x"][None], "s": q["s"]})[0] if out_shape == (1,) else f(  # noqa: E731
            {"x": q["x"][None], "s": q["s"]})
        for g in (f, one):
            rev = tt.vmap(tt.jacobian(g), in_axes=({"x": 0, "s": None},))(p)
            fwd = tt.vmap(tt.jacobian(g, mode="fwd"), in_axes=({"x": 0, "s": None},))(p)
            loop = [tt.jacobian(g)({"x": p["x"][i], "s": p["s"]}) for i in range(6)]
            for k in ("x", "s"):
                assert rev[k].dtype == dtype
                assert rev[k].shape == fwd[k].shape == (6,) + np.shape(loop[0][k])
                tol = 1e-12 if dtype == np.float64 else 1e-5
                np.testing.assert_allclose(rev[k], fwd[k], rtol=tol, atol=tol)
                np.testing.assert_allclose(rev[k], np.stack([j[k] for j in loop]), rtol=tol, atol=tol)


def test_the_input_jacobian_of_a_tanh_network_in_one_call():
    """bench_vmap.py's workload (issue 33), small: vmap(jacobian(net)) against the hand-written
    NumPy Jacobian, to rounding."""
    rng = np.random.default_rng(0)
    P = rng.standard_normal((50, 2))
    W1, b1 = rng.standard_normal((2, 16)), rng.standard_normal(16)
    W2, b2 = rng.standard_normal((16, 16)) / 4, rng.standard_normal(16)
    W3, b3 = rng.standard_normal((16, 1)) / 4, rng.standard_normal(1)
    net = lambda x: tt.tanh(tt.tanh(x @ W1 + b1) @ W2 + b2) @ W3 + b3       # noqa: E731
    h1 = np.tanh(P @ W1 + b1)
    h2 = np.tanh(h1 @ W2 + b2)
    by_hand = ((((1 - h2 ** 2) * W3[:, 0]) @ W2.T) * (1 - h1 ** 2)) @ W1.T
    np.testing.assert_allclose(tt.vmap(tt.jacobian(net))(P), by_hand[:, None, :], rtol=1e-12, atol=1e-14)


def test_a_dict_in_axes_applies_to_every_argument_as_a_prefix():
    """in_axes given as one dict (not a tuple) is a prefix for each positional argument."""
    q = {"a": X, "b": X[0]}
    out = tt.vmap(lambda q: q["a"] * q["b"], in_axes={"a": 0, "b": None})(q)
    np.testing.assert_allclose(out, X * X[0])
    out = tt.vmap(lambda p, q: p["a"] + q["b"], in_axes={"a": 0, "b": None})({"a": X, "b": X[0]}, q)
    np.testing.assert_allclose(out, X + X[0])

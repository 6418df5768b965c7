"""The compile-vs-eager matrix: one case per known footgun of tracing compilers (tinygrad's
test/unit/test_jit_footguns.py, torch.compile's recompile guards, MLX's compile notes, issue 22).
Each case asserts that tt.compile(f) gives what f gives eagerly on every call, or that it
raises with a message naming the fix; none may differ silently. The README's compile table is
printed from this file: `python tests/compile/test_compile_semantics.py`.
"""

import sys
import warnings

import numpy as np
import pytest

import tinytensor as tt

CASES = []


def case(source, kind, what):
    """kind: "equal" (the same numbers as eagerly, on every call) or "raises" (a message naming
    the fix). what: the behaviour, for the README's table."""
    def register(fn):
        CASES.append((fn.__name__, source, kind, what, fn))
        return fn
    return register


def leaves(x):
    if isinstance(x, tt.Tensor):
        return [x.data]
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in leaves(x[k])]
    if isinstance(x, (tuple, list)):
        return [v for item in x for v in leaves(item)]
    return [np.asarray(x)]


def same(got, want):
    got, want = leaves(got), leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, dtype=float), np.asarray(w, dtype=float),
                                   rtol=1e-12, atol=1e-12)


def eager(f):
    """f called as tt.compile calls it: array arguments as Tensors."""
    return lambda *args: f(*[tt.Tensor(a) if isinstance(a, np.ndarray) else a for a in args])


X = [np.array([0.5, 1.5, -2.0]), np.array([2.5, -3.5, 4.0]), np.array([-1.0, 0.25, 7.0])]


def over_calls(f, xs=X):
    compiled = tt.compile(f)
    for x in xs:
        same(compiled(x), eager(f)(x))
    return compiled


# ----- what re-traces (guards) -----------------------------------------------------------------
@case("tinygrad: shape change", "equal", "re-traces (new shape or dtype)")
def check_new_shape_retraces():
    c = over_calls(lambda x: tt.sum(x * x), [np.ones(2), np.ones(3), np.ones(3, np.float32)])
    assert c.traces == 3


@case("tinygrad: Python scalar argument", "equal",
      "an input of the program (issue 29): one recording; used in Python (a branch), a key")
def check_number_argument_retraces():
    f = lambda x, k: x * k                                          # noqa: E731
    c = tt.compile(f)
    for k in (2.0, 3.0, 2.0):
        same(c(np.ones(2), k), eager(f)(np.ones(2), k))
    assert c.traces == 1
    f = lambda x, k: x * k if k > 2.5 else x - k                    # noqa: E731
    c = tt.compile(f)
    for k in (2.0, 3.0, 2.0):
        same(c(np.ones(2), k), eager(f)(np.ones(2), k))
    assert c.traces == 2


@case("torch.compile guard: closed-over number", "equal",
      "re-traces (closure and global numbers are guarded)")
def check_closed_over_number_retraces():
    scale = [2.0]
    box = {"s": 2.0}

    def make():
        s = box["s"]
        return lambda x: x * s
    c = tt.compile(make())
    same(c(np.ones(2)), 2 * np.ones(2))
    box["s"] = 5.0
    c2 = tt.compile(make())
    same(c2(np.ones(2)), 5 * np.ones(2))
    k = 3.0

    def g(x):
        return x * k
    cg = tt.compile(g)
    same(cg(np.ones(2)), 3 * np.ones(2))
    k = 4.0
    same(cg(np.ones(2)), 4 * np.ones(2))
    assert cg.traces == 2 and scale


@case("torch.compile guard: a number the loss closes over", "equal",
      "re-traces (closures of the functions f wraps are guarded too)")
def check_number_closed_over_by_the_wrapped_loss():
    lam = 0.1

    def loss(w):
        return tt.sum(w * w) * lam
    c = tt.compile(tt.value_and_grad(loss))
    same(c(np.ones(2)), tt.value_and_grad(loss)(np.ones(2)))
    lam = 1.0
    same(c(np.ones(2)), tt.value_and_grad(loss)(np.ones(2)))


@case("torch.compile guard: closed-over array rebound", "equal",
      "re-traces (a rebound array is another constant)")
def check_rebound_closed_over_array_retraces():
    w = np.ones(2)

    def f(x):
        return x * w
    c = tt.compile(f)
    same(c(np.ones(2)), np.ones(2))
    w = np.full(2, 3.0)
    same(c(np.ones(2)), np.full(2, 3.0))


@case("tinygrad: closed-over array updated in place", "equal",
      "read on every call (constants are not copied)")
def check_closed_over_array_written_in_place_is_seen():
    w = np.ones(2)
    c = tt.compile(lambda x: x * w)
    c(np.ones(2))
    w *= 7
    same(c(np.ones(2)), np.full(2, 7.0))


@case("tt.compile: an array both closed over and passed", "equal",
      "the argument is an input, the closed-over array a constant")
def check_an_array_closed_over_and_passed_as_an_argument():
    u = np.arange(3.0)
    c = tt.compile(lambda a, b: tt.sum(a * u) + tt.sum(b))
    same(c(np.ones(3), u), 6.0)                  # recorded with b being u itself
    same(c(np.ones(3), np.zeros(3)), 3.0)        # u stays u; it was replaced by b (0.0)


@case("tt.compile: a view recorded, a contiguous array replayed", "equal",
      "no write into a result that views the argument at replay")
def check_a_view_recorded_then_a_contiguous_array():
    f = tt.grad(lambda a: tt.sum(tt.reshape(a, (-1,)) ** 2 * 3.0))
    c = tt.compile(f)
    c(np.arange(6.0).reshape(3, 2).T[::-1])      # reshape copies this one ...
    a = np.arange(6.0).reshape(2, 3)            # ... and views this one
    same(c(a), eager(f)(np.arange(6.0).reshape(2, 3)))
    same(a, np.arange(6.0).reshape(2, 3))


@case("issue 22: train() -> eval() with Dropout", "equal",
      "re-traces (every reached module's training flag is guarded)")
def check_train_to_eval_with_dropout():
    def make():
        m = tt.nn.Sequential(tt.nn.Linear(3, 4, rng=0, dtype=np.float64), tt.nn.Dropout(0.5, rng=1))
        return m, (lambda x: tt.sum(m(x)))
    (m1, f1), (m2, f2) = make(), make()
    c = tt.compile(f1)
    x = np.ones((2, 3))
    same(c(x), eager(f2)(x))
    m1.eval()
    m2.eval()
    same(c(x), eager(f2)(x))
    m1.train()
    m2.train()
    same(c(x), eager(f2)(x))


@case("issue 22: eval() -> train() with BatchNorm", "equal",
      "re-traces; running statistics update on every call")
def check_eval_to_train_with_batchnorm():
    def make():
        m = tt.nn.Sequential(tt.nn.Linear(3, 4, rng=0, dtype=np.float64),
                             tt.nn.BatchNorm1d(4, dtype=np.float64))
        m.eval()
        return m, (lambda x: tt.sum(m(x) ** 2))
    (m1, f1), (m2, f2) = make(), make()
    c = tt.compile(f1)
    rng = np.random.default_rng(0)
    for mode in ("eval", "train", "train", "eval", "train"):
        getattr(m1, mode)()
        getattr(m2, mode)()
        x = rng.normal(size=(5, 3))
        same(c(x), eager(f2)(x))
        same(m1[1].running_var, m2[1].running_var)


@case("torch.compile guard: module attribute", "equal", "re-traces (Dropout's p, any number attribute)")
def check_module_attribute_change_retraces():
    d1, d2 = tt.nn.Dropout(0.5, rng=3), tt.nn.Dropout(0.5, rng=3)
    c = tt.compile(lambda x: d1(x))
    same(c(np.ones(6)), eager(lambda x: d2(x))(np.ones(6)))
    d1.p = d2.p = 0.0
    same(c(np.ones(6)), eager(lambda x: d2(x))(np.ones(6)))


@case("torch.compile guard: grad mode", "equal", "re-traces (grad mode is part of the key)")
def check_grad_mode_is_part_of_the_key():
    c = tt.compile(lambda x: tt.sum(tt.exp(x)))
    with tt.no_grad():
        same(c(np.ones(2)), 2 * np.e)
    same(c(np.ones(2)), 2 * np.e)
    assert c.traces == 2


@case("tinygrad: pytree structure change", "equal", "re-traces (containers are part of the key)")
def check_pytree_structure_change_retraces():
    f = lambda p: tt.sum(p["w"]) * len(p)                     # noqa: E731
    c = tt.compile(f)
    same(c({"w": np.ones(2)}), 2.0)
    same(c({"w": np.ones(2), "b": np.ones(1)}), 4.0)


# ----- randomness is an input ------------------------------------------------------------------
@case("issue 22: Dropout in a compiled step", "equal",
      "draws anew on every call, from the module's generator")
def check_dropout_draws_anew_every_call():
    d1, d2 = tt.nn.Dropout(0.5, rng=0), tt.nn.Dropout(0.5, rng=0)
    c = tt.compile(tt.value_and_grad(lambda x: tt.sum(d1(x) * x)))
    e = tt.value_and_grad(lambda x: tt.sum(d2(x) * x))
    for k in range(5):
        same(c(np.arange(8.0) + k), e(np.arange(8.0) + k))


@case("issue 22: Generator argument to tt.randn", "equal",
      "an input: drawn from in eager order on every call")
def check_generator_argument():
    r1, r2 = np.random.default_rng(5), np.random.default_rng(5)
    f = lambda x, r: x * tt.randn(3, rng=r) + tt.rand(3, rng=r)     # noqa: E731
    c = tt.compile(f)
    for _ in range(3):
        same(c(np.ones(3), r1), eager(f)(np.ones(3), r2))


@case("MLX notes: closed-over generator", "equal", "drawn from on every call")
def check_closed_over_generator():
    r1, r2 = np.random.default_rng(1), np.random.default_rng(1)
    c = tt.compile(lambda x: x + tt.randn(2, rng=r1))
    for _ in range(3):
        same(c(np.zeros(2)), tt.randn(2, rng=r2))


@case("tinygrad: random draw whose result is unused", "equal",
      "still drawn: the generator advances as eagerly")
def check_unused_draw_still_advances_the_generator():
    r1, r2 = np.random.default_rng(2), np.random.default_rng(2)

    def f(x, r):
        tt.rand(4, rng=r)
        return x * 1.0
    tt.compile(f)(np.ones(1), r1)
    tt.compile(f)(np.ones(1), r1)
    f(tt.Tensor(np.ones(1)), r2)
    f(tt.Tensor(np.ones(1)), r2)
    assert r1.random() == r2.random()


@case("tinygrad: numpy Generator method inside", "raises",
      "refused at trace time (draw with tt.randn/tt.rand/Dropout)")
def check_generator_method_inside_is_refused():
    r = np.random.default_rng(0)
    with pytest.raises(RuntimeError, match="past tinytensor.*tt.randn"):
        tt.compile(lambda x: x * r.normal(size=3))(np.ones(3))


@case("tinygrad: np.random global state inside", "raises", "refused at trace time (draw with tinytensor)")
def check_global_numpy_random_is_refused():
    with pytest.raises(RuntimeError, match="global random state.*tt.randn"):
        tt.compile(lambda x: x * np.random.rand(3))(np.ones(3))


# ----- nothing inside tinytensor is frozen ---------------------------------------------------------
@case("issue 22: floor in value_and_grad", "equal", "recomputed on every call")
def check_floor_in_value_and_grad():
    over_calls(tt.value_and_grad(lambda x: tt.sum(tt.floor(x) * x)))


@case("issue 22: round/ceil/trunc/sign methods", "equal", "recomputed on every call")
def check_piecewise_constant_methods():
    over_calls(lambda x: x.round() + tt.ceil(x) * tt.trunc(x) - x.sign(),    # (Tensor methods:
               [tt.tensor(a) for a in X])                                     # Tensor arguments)


@case("issue 22: argmax/argmin", "equal", "recomputed on every call")
def check_argmax_argmin():
    over_calls(lambda x: x[tt.argmax(x)] * 2 + x[x.argmin()])


@case("issue 22: argsort/sort indices", "equal", "recomputed on every call")
def check_argsort():
    over_calls(lambda x: x[np.argsort(x)] * tt.arange(3.0))


@case("issue 22: softplus threshold branch", "equal", "recomputed on every call")
def check_softplus_threshold():
    over_calls(lambda x: tt.nn.functional.softplus(x, beta=2.0),
               [np.array(15.0), np.array(0.0), np.array([-3.0, 30.0])[:1]])


@case("tinygrad: mask from a comparison", "equal", "recomputed on every call")
def check_comparison_mask():
    over_calls(lambda x: tt.where(x > 0, x, 0.1 * x) + (x < 1) * x)


@case("JAX: nonzero of a traced value", "raises", "refused at trace time (data-dependent shape; use a mask)")
def check_nonzero_is_refused():
    with pytest.raises(RuntimeError, match="depends on the values.*mask"):
        tt.compile(lambda x: x[x.nonzero()])(X[0])


@case("audit: CrossEntropyLoss weight/smoothing/ignore_index", "equal",
      "the labels' coefficients are recomputed on every call")
def check_weighted_cross_entropy_labels():
    loss = tt.nn.CrossEntropyLoss(weight=np.array([1.0, 2.0, 3.0]), label_smoothing=0.1, ignore_index=1)
    f = tt.value_and_grad(lambda z, y: loss(z, y))
    c = tt.compile(f)
    rng = np.random.default_rng(0)
    for _ in range(3):
        z, y = rng.normal(size=(5, 3)), rng.integers(0, 3, size=5)
        same(c(z, y), f(z, y))


# ----- composition -----------------------------------------------------------------------------------
f_comp = lambda x: tt.sum(tt.sin(x) * x)                       # noqa: E731


@case("issue 22: tt.grad(tt.compile(f))", "equal", "runs f as it is inside the transform (MLX's rule)")
def check_grad_of_compiled():
    same(tt.grad(tt.compile(f_comp))(X[0]), tt.grad(f_comp)(X[0]))
    same(tt.value_and_grad(tt.compile(f_comp))(X[1]), tt.value_and_grad(f_comp)(X[1]))


@case("issue 22: hvp / jacobian / vjp of a compiled f", "equal", "eager derivatives")
def check_other_transforms_of_compiled():
    c = tt.compile(f_comp)
    v = np.array([1.0, -1.0, 0.5])
    same(tt.hvp(c, (X[0],), (v,)), tt.hvp(f_comp, (X[0],), (v,)))
    same(tt.jacobian(tt.compile(lambda x: tt.sin(x) * x))(X[0]), tt.jacobian(lambda x: tt.sin(x) * x)(X[0]))
    out, back = tt.vjp(tt.compile(lambda x: tt.sin(x)), X[0])
    same(back(np.ones(3)), (np.cos(X[0]),))


@case("issue 22: tt.jvp through a compiled call", "equal", "eager tangent")
def check_jvp_of_function_calling_compiled():
    inner = tt.compile(lambda x: tt.exp(x))
    got = tt.jvp(lambda x: inner(x) * 2, (X[0],), (np.ones(3),))
    same(got, (2 * np.exp(X[0]), 2 * np.exp(X[0])))


@case("issue 22: compiled on a recorded Tensor, then backward()", "equal",
      "traced through: backward reaches the leaves")
def check_compiled_on_a_recorded_tensor():
    c = tt.compile(lambda x: tt.exp(x))
    w = tt.tensor(X[0], requires_grad=True)
    tt.sum(c(w * 2)).backward()
    same(w.grad, 2 * np.exp(2 * X[0]))


@case("issue 22: compiled inside compiled", "equal", "inlined")
def check_compiled_inside_compiled():
    inner = tt.compile(lambda x: x * 3)
    outer = over_calls(lambda x: inner(x) + 1)
    assert "c1" not in outer.source.split("return")[-1]


@case("issue 22: compiled method on a class", "equal", "one compiled function per instance (__get__)")
def check_compiled_method():
    class Scale:
        def __init__(self, k):
            self.k = k

        def f(self, x):
            return x * self.k
    Scale.cf = tt.compile(Scale.f)
    a, b = Scale(2.0), Scale(3.0)
    same(a.cf(np.ones(2)), 2 * np.ones(2))
    same(b.cf(np.ones(2)), 3 * np.ones(2))
    a.k = 5.0
    same(a.cf(np.ones(2)), 5 * np.ones(2))


# ----- side effects, reads, errors --------------------------------------------------------------------
@case("tinygrad: output buffers reused across calls", "equal", "fresh arrays on every call")
def check_results_are_fresh_arrays():
    c = tt.compile(lambda x: x * 2)
    a = c(np.ones(2))
    c(np.full(2, 5.0))
    same(a, 2 * np.ones(2))


@case("torch.compile: BatchNorm running statistics", "equal", "updated on every call, as eagerly")
def check_batchnorm_running_statistics_update_every_call():
    b1, b2 = tt.nn.BatchNorm1d(3, dtype=np.float64), tt.nn.BatchNorm1d(3, dtype=np.float64)
    c = tt.compile(lambda x: tt.sum(b1(x)))
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = rng.normal(size=(6, 3))
        same(c(x), eager(lambda x: tt.sum(b2(x)))(x))
    same((b1.running_mean, b1.running_var, b1.num_batches_tracked),
         (b2.running_mean, b2.running_var, b2.num_batches_tracked))


@case("tinygrad: value-dependent Python branch", "equal",
      "guarded: the other branch is recorded when the value flips (any call)")
def check_python_branch_on_a_value():
    def f(x):
        return x * 2 if tt.sum(x) > 0 else x * 3      # bool() of a comparison: a guard
    c = tt.compile(f)
    for x in (np.ones(2), np.ones(2), -np.ones(2), np.ones(2), -2 * np.ones(2)):
        same(c(x), eager(f)(x))
    assert c.traces == 2


@case("tinygrad: write into an argument", "raises", "refused (write x = x + ... instead)")
def check_write_into_argument_is_refused():
    def f(x):
        x += 1
        return x * 2
    with pytest.raises(RuntimeError, match="x = x \\+"):
        tt.compile(f)(np.ones(2))


@case("PyTorch habit: backward() inside", "raises", "refused (return tt.value_and_grad's gradients)")
def check_backward_inside_is_refused():
    def f(x):
        t = tt.tensor(x, requires_grad=True)
        tt.sum(t * t).backward()
        return t.grad
    with pytest.raises(RuntimeError, match="value_and_grad"):
        tt.compile(f)(np.ones(2))


@case("issue 21: a user VJP that raises", "raises", "names its tape entry, as eagerly")
def check_user_vjp_error_names_the_entry():
    @tt.primitive
    def picky(x):
        return x * 1.0
    picky.defvjp(lambda g, ans, x: np.sqrt(-1 - x) if np.any(x > 5) and np.sqrt("x") else g)
    picky.defjvp(lambda t, ans, x: t)
    c = tt.compile(tt.grad(lambda x: tt.sum(picky(x))))
    c(np.ones(2))
    with pytest.raises(TypeError, match="VJP rule of tape entry picky"):
        c(np.full(2, 9.0))


@case("issue 21: detect_anomaly", "raises", "FloatingPointError naming the entry, as eagerly")
def check_detect_anomaly():
    c = tt.compile(tt.grad(lambda x: tt.sum(tt.sqrt(x))))
    c(np.ones(2))
    with tt.detect_anomaly(), pytest.raises(FloatingPointError, match="sqrt"):
        c(np.zeros(2))


@case("MLX notes: model.eval() inside vs outside", "equal", "each mode its own program")
def check_two_models_two_modes():
    m = tt.nn.Sequential(tt.nn.Linear(2, 2, rng=0, dtype=np.float64), tt.nn.Dropout(0.3, rng=2))
    twin = tt.nn.Sequential(tt.nn.Linear(2, 2, rng=0, dtype=np.float64), tt.nn.Dropout(0.3, rng=2))
    c = tt.compile(lambda x: m(x))
    for mode in ("train", "eval", "train", "eval"):
        getattr(m, mode)()
        getattr(twin, mode)()
        same(c(np.ones((3, 2))), twin(tt.Tensor(np.ones((3, 2)))))


def table():
    """The README's table: one row per case."""
    rows = ["| case | from | compiled, compared with eager |", "|---|---|---|"]
    for name, source, kind, what, _ in CASES:
        label = name.removeprefix("check_").replace("_", " ")
        rows.append(f"| {label} | {source} | {'equal' if kind == 'equal' else 'raises'}: {what} |")
    counts = {k: sum(1 for c in CASES if c[2] == k) for k in ("equal", "raises")}
    rows.append(f"\n{len(CASES)} cases: {counts['equal']} equal to eager, {counts['raises']} raise "
                f"(or warn, then raise with check=True) naming the fix, 0 silently different.")
    return "\n".join(rows)


@pytest.mark.parametrize("name, source, kind, what, fn", CASES, ids=[c[0] for c in CASES])
def test_matrix(name, source, kind, what, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning) if kind == "raises" else None
        fn()


def test_the_matrix_is_large_enough():
    assert len(CASES) >= 30


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")

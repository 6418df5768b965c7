"""tt.compile: the compiled program gives the eager call's numbers, for every primitive
(from the op table), the lecture's loss, MLPs and the transforms; it re-traces on new
shapes; check=True catches a frozen branch; the source is Python naming each entry."""

import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.specs import EXTRA_SPECS, OP_SPECS
from tinytensor.transforms import tree_flatten

ROWS = {**OP_SPECS, **EXTRA_SPECS}
CASES = [pytest.param(name, i, id=f"{name}-{i}")
         for name, spec in ROWS.items() for i in range(len(spec.cases()))]


# Ops whose result on NumPy arrays is a NumPy scalar eagerly, a 0-d array compiled (NumPy's own
# function dispatched on the Tensor path, which gives arrays); the bits are equal.
ARRAY_TYPE_GAPS = {("np.median", "f"), ("np.quantile", "f")}


def assert_same(got, want, exact=True):
    got, got_structure = tree_flatten(got)
    want, want_structure = tree_flatten(want)
    assert repr(got_structure) == repr(want_structure)
    for g, w in zip(got, want):
        assert type(g) is type(w), (type(g), type(w))      # what f returns eagerly, type included
        g, w = (np.asarray(x.data if isinstance(x, tt.Tensor) else x) for x in (g, w))
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12 * (np.max(np.abs(w), initial=0) or 1))


def _inputs(name, index, seed=0):
    spec = ROWS[name]
    args, params = spec.cases(seed)[index]
    args = [np.asarray(a) for a in args]      # a 0-d sample is a float: make it an array input
    samplers = spec.sample if isinstance(spec.sample, tuple) else (spec.sample,) * len(args)
    floats = [i for i, s in enumerate(samplers)
              if not getattr(s, "constant", False) and args[i].dtype.kind == "f"]
    return spec, args, params, floats


@pytest.mark.parametrize("name, index", CASES)
def test_every_op_compiles_to_the_same_numbers(name, index):
    """Forward, gradient (value_and_grad) and tangent (jvp) of each spec case, compiled and
    eager, bit for bit; a second call on other values of the same shapes replays the program."""
    spec, args, params, floats = _inputs(name, index)
    rng = np.random.default_rng(1)

    def f(*xs):
        return spec.call(*xs, **params)

    def loss(*xs):   # a scalar that weighs every output element differently
        out = f(*xs)
        return tt.sum(out * weights)

    weights = rng.standard_normal(np.shape(tt.Tensor(f(*[tt.tensor(a) for a in args])).data))
    grad = tt.value_and_grad(loss, argnums=tuple(floats))
    tangents = tuple(rng.standard_normal(np.shape(args[i])) for i in floats)

    def forward_mode(*xs):
        def g(*fs):
            full = list(xs)
            for i, v in zip(floats, fs):
                full[i] = v
            return f(*full)
        return tt.jvp(g, tuple(xs[i] for i in floats), tangents)

    for fun in (f, grad, forward_mode):
        compiled = tt.compile(fun)
        for seed in (0, 1):   # the trace, then a replay on new values
            _, values, _, _ = _inputs(name, index, seed)
            # on Tensors: eager's numbers bit for bit (crossEntropy fuses with softmax only on
            # Tensors); gelu's compiled VJP reads the forward's Phi(x), eager's ans / x
            tensors = [tt.tensor(v) for v in values]
            assert_same(compiled(*tensors), fun(*tensors), exact=not (name == "gelu" and fun is grad))
            if fun is not f:          # the transforms give arrays on either: the types once
                continue
            # on arrays: eager's result types (NumPy's own functions on arrays may round
            # differently from the Tensor path the program takes, in the last bit)
            got, want = compiled(*values), fun(*values)
            if (name, fun.__name__) in ARRAY_TYPE_GAPS:
                got, want = np.asarray(got), np.asarray(want)
            assert_same(got, want, exact=False)
        assert compiled.traces == (2 if fun is f else 1), compiled.recompiles   # arrays, Tensors


def lecture_loss(W, x, y):
    return tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + tt.frobeniusNorm(W)


def test_lecture_loss_and_its_adjoint_program():
    rng = np.random.default_rng(0)
    W, x = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
    y = np.eye(3)[rng.integers(0, 3, 5)]
    step = tt.compile(tt.value_and_grad(lecture_loss))
    assert_same(step(W, x, y), tt.value_and_grad(lecture_loss)(W, x, y))
    source = step.source
    builtins_compile = __builtins__["compile"] if isinstance(__builtins__, dict) else __builtins__.compile
    builtins_compile(source, "<test>", "exec")            # valid Python
    for text in ("z1 = np.dot(x, W)", "np.exp(z2_shifted)", "cross_entropy_rows(", "nrm2(W.ravel())",
                 "x.T @ g_z1", "adjoint of z1", "return (np.asarray(z5), g_W"):
        assert text in source, (text, source)
    lines = [line for line in source.splitlines()[1:-1]]
    assert all("  # " in line for line in lines)          # each entry has its label


def _mlp_params(rng, sizes, dtype=np.float64):
    params = {}
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"W{i}"] = (rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype)
        params[f"b{i}"] = (0.1 * rng.standard_normal(n)).astype(dtype)
    return params


def mlp(params, x, activation=tt.relu):
    h = x
    n = len(params) // 2
    for i in range(n):
        h = tt.linear(h, params[f"W{i}"], params[f"b{i}"])
        if i < n - 1:
            h = activation(h)
    return h


def mlp_loss(params, x, labels):
    return tt.softmax_cross_entropy(mlp(params, x), labels)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mlp_training_step_with_integer_labels(dtype):
    rng = np.random.default_rng(0)
    params = _mlp_params(rng, [6, 8, 5, 3], dtype)
    step = tt.compile(tt.value_and_grad(mlp_loss))
    for _ in range(3):                                       # labels and data change every call
        x = rng.standard_normal((7, 6)).astype(dtype)
        labels = rng.integers(0, 3, 7)
        want = tt.value_and_grad(mlp_loss)(params, x, labels)
        got = step(params, x, labels)
        assert_same(got, want)
        for k in params:                                     # the update, in place, outside
            params[k] -= 0.1 * got[1][k]
    assert step.traces == 1, step.recompiles


def test_update_inside_the_compiled_step():
    """Code after the transform (an SGD update) is part of the program."""
    rng = np.random.default_rng(1)
    params = _mlp_params(rng, [3, 4, 1])
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 1))

    def loss(p, x, y):
        return tt.mean(tt.square(mlp(p, x, tt.tanh) - y))

    def sgd(p, x, y):
        value, g = tt.value_and_grad(loss)(p, x, y)
        return value, {k: p[k] - 0.1 * g[k] for k in p}

    compiled = tt.compile(sgd)
    p_eager, p_compiled = dict(params), dict(params)
    for _ in range(3):
        v1, p_eager = sgd(p_eager, x, y)
        v2, p_compiled = compiled(p_compiled, x, y)
        assert_same((v2, p_compiled), (v1, p_eager))


def test_transforms_inside_compile():
    rng = np.random.default_rng(2)
    x, v = rng.standard_normal(4), rng.standard_normal(4)

    def f(x):
        return tt.sum(tt.tanh(x) * tt.exp(x) * x)

    def relu_f(x):
        return tt.sum(tt.relu(x) ** 3 + tt.maximum(x, 0.1 * x))

    cases = [
        (lambda x: tt.grad(f)(x), (x,)),
        (lambda x, v: tt.vjp(lambda x: tt.sin(x) * x, x)[1](v), (x, v)),
        (lambda x, v: tt.jvp(lambda x: tt.sin(x) * x, (x,), (v,)), (x, v)),
        (lambda x, v: tt.hvp(f, (x,), (v,)), (x, v)),
        (lambda x, v: tt.hvp(relu_f, (x,), (v,)), (x, v)),          # masks recomputed per call
        (lambda x: tt.jacobian(lambda x: tt.tanh(x) * x[::-1])(x), (x,)),
        (lambda x: tt.jacobian(lambda x: tt.tanh(x) * x, mode="fwd")(x), (x,)),
        (lambda x: tt.grad(lambda x: tt.sum(tt.grad(lambda x: tt.sum(tt.sin(x)) ** 2)(x) ** 2))(x), (x,)),
    ]
    for fun, args in cases:
        compiled = tt.compile(fun)
        for scale in (1.0, -0.7):                 # -0.7 flips the relu masks
            args_now = tuple(a * scale for a in args)
            assert_same(compiled(*args_now), fun(*args_now), exact=False)


def test_retraces_on_new_shapes_and_static_values_and_bounds_the_cache():
    def f(x, power):
        return tt.sum(x ** power)

    compiled = tt.compile(f, cache_size=2)
    x = np.arange(3.0)
    assert compiled(x, 2) == 5.0 and compiled(x + 1, 2) == 14.0
    assert compiled.traces == 1
    assert compiled(np.arange(4.0), 2) == 14.0           # new shape: traced again
    assert compiled(x, 3) == 9.0                         # a new number: an input, not traced again
    assert compiled.traces == 2
    assert compiled(x, 3.0) == 9.0                       # a new type of number: traced again
    assert compiled.traces == 3 and len(compiled.programs) == 2
    assert compiled(x.astype(np.float32), 2).dtype == np.float32   # new dtype: traced again
    assert compiled.traces == 4


def test_a_data_dependent_branch_is_guarded_not_frozen():
    def f(x):
        s = tt.sum(x)
        return s * 2 if s > 0 else s * 3                 # bool() of a comparison: a guard

    for compiled in (tt.compile(f, check=True), tt.compile(f)):
        assert compiled(np.ones(3)) == 6.0
        assert compiled(-np.ones(3)) == -9.0             # the other branch, recorded on its own
        assert compiled(2 * np.ones(3)) == 12.0 and compiled(-np.ones(3)) == -9.0
        assert compiled.traces == 2                      # each outcome's program kept
        assert "bool()" in compiled.recompiles[1]

    def g(x):                                            # float() itself is guarded by value:
        s = tt.sum(x)                                    # a new value records again
        return s * 2 if float(s) > 0 else s * 3

    compiled = tt.compile(g)
    assert [float(compiled(v * np.ones(3))) for v in (1, -1, 2)] == [6.0, -9.0, 12.0]
    assert compiled.traces == 3 and "float()" in compiled.recompiles[1]


def test_check_passes_for_a_pure_function():
    compiled = tt.compile(tt.value_and_grad(lecture_loss), check=True)
    loss_only = tt.compile(lecture_loss, check=True)
    rng = np.random.default_rng(0)
    for _ in range(3):
        W, x = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
        y = np.eye(3)[rng.integers(0, 3, 5)]
        assert_same(compiled(W, x, y), tt.value_and_grad(lecture_loss)(W, x, y))
        loss_only(300 * W, x, y)    # softmax underflows: the check compares like with like


def test_results_are_fresh_arrays_each_call():
    compiled = tt.compile(lambda x: (tt.sum(x * x), np.ones(2)))
    a = compiled(np.arange(3.0))
    b = compiled(np.arange(3.0) + 1)
    assert a[0] == 5.0 and b[0] == 14.0
    a[1][0] = 7
    assert b[1][0] == 1 and compiled(np.arange(3.0))[1][0] == 1


def test_dead_entries_dropped_and_constants_hoisted():
    c = np.linspace(0, 1, 3)

    def f(x):
        tt.exp(x)                                        # dead: its result is unused
        return tt.sum(x * c)

    compiled = tt.compile(f)
    assert compiled(np.ones(3)) == c.sum()
    assert "exp" not in compiled.source
    assert "c1" in compiled.source                      # the closed-over array, by name


def test_backward_inside_compile_is_refused():
    def f(x):
        t = tt.tensor(x, requires_grad=True)
        tt.sum(t * t).backward()
        return t.grad

    with pytest.raises(RuntimeError, match="value_and_grad"):
        tt.compile(f)(np.ones(2))


def test_functional_gradients_do_not_alias_inputs_or_each_other():
    x, y = np.ones(3), np.ones(3)
    gx, gy = tt.grad(lambda x, y: tt.sum(x + y), argnums=(0, 1))(x, y)
    assert gx is not gy and not np.shares_memory(gx, gy)
    gx[0] = 5
    assert gy[0] == 1 and x[0] == 1
    (g,) = tt.vjp(lambda x: x, x)[1](y)                  # identity: the cotangent is copied
    assert g is not y and not np.shares_memory(g, y)


@pytest.mark.slow
def test_train_mlp_example_compiled_gives_the_same_run(tmp_path, monkeypatch, capsys):
    """examples/train_mlp.py --compile: the object-style pattern (parameter dict of the model's
    arrays, compiled step, optimizer in place) trains to the same numbers as the eager loop."""
    import importlib.util
    import pathlib

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")
    path = pathlib.Path(__file__).parents[2] / "examples" / "train_mlp.py"
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "save_plot", lambda history, path: None)   # tested elsewhere
    runs = []
    for extra in ([], ["--compile"]):
        script.main(["--epochs", "2", "--quiet", "--plot", str(tmp_path / "c.png")] + extra)
        runs.append(capsys.readouterr().out.strip().splitlines()[-2:])   # kept epoch, accuracy
    assert runs[0] == runs[1]


def test_the_same_array_passed_twice_is_two_inputs():
    f = tt.compile(tt.grad(lambda a, b: tt.sum(a * tt.exp(b)), argnums=0))
    x = np.arange(3.0)
    np.testing.assert_array_equal(f(x, x), np.exp(x))
    np.testing.assert_array_equal(f(x, x + 1), np.exp(x + 1))


def test_an_error_while_recording_leaves_tinytensor_as_it_was():
    call = tt.Primitive.__call__

    def broken(x):
        tt.exp(x)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        tt.compile(broken)(np.ones(2))
    assert tt.Primitive.__call__ is call
    assert tt.tape.STATE.recorder is None
    t = tt.tensor([1.0, -1.0])
    assert type(t > 0) is np.ndarray


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="expected a function"):
        tt.compile(3)
    # an unhashable argument (a set, a slice on Python 3.11) is compared by its contents
    g = tt.compile(lambda x, opts: tt.sum(x) * len(opts))
    assert float(g(np.ones(2), {1, 2})) == 4.0 and float(g(np.ones(2), {1, 2, 3})) == 6.0
    h = tt.compile(lambda x, s: tt.sum(x[s]))
    assert float(h(np.arange(4.0), slice(1, 3))) == 3.0 and float(h(np.arange(4.0), slice(0, 2))) == 1.0
    inner = tt.compile(lambda x: tt.sum(x))     # compiled inside compiled: inlined
    outer = tt.compile(lambda x: inner(x) * 2)
    outer(np.ones(2))
    np.testing.assert_allclose(outer(np.arange(2.0)), 2.0)


def test_keyword_and_nested_container_arguments():
    def f(x, *, scale, params):
        return tt.sum(x * params["a"][0] + params["a"][1]) * scale

    compiled = tt.compile(f)
    kw = dict(scale=2.0, params={"a": [np.ones(3), np.arange(3.0)]})
    assert compiled(np.arange(3.0), **kw) == f(tt.tensor(np.arange(3.0)), **kw).data
    assert compiled(np.ones(3), **kw) == f(tt.tensor(np.ones(3)), **kw).data
    assert compiled.traces == 1


UNARY_ROWS = [name for name, spec in OP_SPECS.items()
              if spec.shapes is not None and spec.pairs is None and len(spec.shapes[0]) == 1]


@pytest.mark.parametrize("name", UNARY_ROWS)
def test_compositions_and_second_order_of_every_unary_op(name):
    """tanh(op(x)) * op(x) through grad and hvp (forward over reverse: the inner gradient is
    recorded with create_graph, so masks such as relu's and abs's sign are recomputed)."""
    spec = OP_SPECS[name]
    sample = spec.sample if not isinstance(spec.sample, tuple) else spec.sample[0]

    shape = spec.shapes[-1][0]    # the row's largest case: (2, 3) for elementwise ops, matrices for linalg

    def f(x):
        y = spec.call(x, **spec.params[0])
        return tt.sum(tt.tanh(y) * y) + tt.sum(tt.sin(x)) * tt.sum(y)

    grad_f = tt.grad(f)
    hvp_f = lambda x, v: tt.hvp(f, (x,), (v,))   # noqa: E731
    compiled_grad, compiled_hvp = tt.compile(grad_f), tt.compile(hvp_f)
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        x, v = sample(rng, shape), rng.standard_normal(shape)
        assert_same(compiled_grad(x), grad_f(x))
        assert_same(compiled_hvp(x, v), hvp_f(x, v), exact=False)
    assert compiled_grad.traces == compiled_hvp.traces == 1


def _copy_model(model, dtype):
    twin = tt.nn.Sequential(tt.nn.Linear(5, 8, rng=0, dtype=dtype), tt.nn.Tanh(),
                            tt.nn.Linear(8, 6, rng=1, dtype=dtype), tt.nn.ReLU(),
                            tt.nn.Linear(6, 3, rng=2, dtype=dtype))
    twin.load_state_dict(model.state_dict())
    return twin


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nn_model_step_through_functional_call(dtype):
    """The documented object-style pattern: the compiled step runs the model through
    tt.nn.functional_call on a dict of the model's own arrays (the Linear layers cast the float64
    data to the parameters' dtype), and the optimizer updates those arrays in place. It gives
    the eager loss.backward()/opt.step() loop's numbers bit for bit, step after step."""
    model = tt.nn.Sequential(tt.nn.Linear(5, 8, rng=0, dtype=dtype), tt.nn.Tanh(),
                             tt.nn.Linear(8, 6, rng=1, dtype=dtype), tt.nn.ReLU(),
                             tt.nn.Linear(6, 3, rng=2, dtype=dtype))
    eager = _copy_model(model, dtype)
    loss_fn = tt.nn.CrossEntropyLoss()
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt_eager = tt.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    named = dict(model.named_parameters())
    params = {name: p.data for name, p in named.items()}

    @tt.compile
    def step(params, x, y):
        return tt.value_and_grad(lambda p: loss_fn(tt.nn.functional_call(model, p, x), y))(params)

    rng = np.random.default_rng(3)
    for _ in range(4):
        x, y = rng.standard_normal((7, 5)), rng.integers(0, 3, 7)     # float64 data, int labels
        loss, grads = step(params, x, y)
        for name, g in grads.items():
            named[name].grad = g
        opt.step()
        want = loss_fn(eager(x), y)
        opt_eager.zero_grad()
        want.backward()
        opt_eager.step()
        assert loss.dtype == dtype and loss == want.data
        for name, p in eager.named_parameters():
            assert grads[name].dtype == dtype
            np.testing.assert_array_equal(grads[name], p.grad)
            np.testing.assert_array_equal(params[name], p.data)      # the same update, in place
    assert step.traces == 1, step.recompiles
    assert ("astype(x" in step.source) == (dtype == np.float32)   # the layer's cast is in the program


def test_in_place_writes_while_recording_are_refused_or_warned():
    """A write into an argument would make the program's numbers differ from f's: an error.
    A module's buffers updated once (BatchNorm's running statistics): a warning. eval(): quiet."""
    def bump(x):
        x += 1
        return x * 2

    def set_first(x):
        x[0] = 5.0
        return x * 2

    def add_out(x):
        np.add(x, 1, out=x)
        return x * 2

    for f in (bump, set_first, add_out):
        with pytest.raises(RuntimeError, match="in place"):
            tt.compile(f)(np.ones(3))
    model = tt.nn.Sequential(tt.nn.Linear(3, 4, rng=0, dtype=np.float64),
                             tt.nn.BatchNorm1d(4, dtype=np.float64))
    params = {k: v.data for k, v in model.named_parameters()}
    step = tt.compile(lambda p, x: tt.sum(tt.nn.functional_call(model, p, x)))
    with warnings.catch_warnings():              # running statistics: updated on every call
        warnings.simplefilter("error")
        step(params, np.arange(15.0).reshape(5, 3))
        step(params, np.ones((5, 3)))
    assert int(model[1].num_batches_tracked.data) == 2
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step(params, np.ones((6, 3)))            # a new shape: recorded again, quietly


@pytest.mark.parametrize("label_dtype, classes", [(np.int64, 3), (np.int32, 7), (np.uint8, 4),
                                                  (np.int8, 5), (np.int8, 200)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_lecture_loss_with_class_indices(label_dtype, classes, reduction):
    """crossEntropy(softmax(z), labels) with integer labels is written out in the program (the
    range check, the gather at the labels, the VJP's subtraction): the eager numbers bit for
    bit, and a label out of range raises the eager error on every call, not only the first."""
    def loss(W, x, y):
        rows = tt.crossEntropy(tt.softmax(tt.dot(x, W)), y, reduction=reduction)
        return tt.sum(rows) + tt.frobeniusNorm(W)

    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64):
        step = tt.compile(tt.value_and_grad(loss))
        for _ in range(3):
            W, x = rng.standard_normal((4, classes)).astype(dtype), rng.standard_normal((6, 4)).astype(dtype)
            y = rng.integers(0, min(classes, np.iinfo(label_dtype).max + 1), 6).astype(label_dtype)
            assert_same(step(W, x, y), tt.value_and_grad(loss)(W, x, y))
        assert step.traces == 1
        for bad in (-1, -100, classes):       # -100 in int8 is 156 as uint8: below 200 classes
            if not np.iinfo(label_dtype).min <= bad <= np.iinfo(label_dtype).max:
                continue
            y[2] = bad
            with pytest.raises(IndexError, match=r"class indices must lie in \[0, "):
                tt.value_and_grad(loss)(W, x, y)
            with pytest.raises(IndexError, match=r"class indices must lie in \[0, "):
                step(W, x, y)
    if reduction != "none":
        assert "label_range_error" in step.source and "cross_entropy_rows" not in step.source


def test_functional_value_and_grad_keeps_the_structure_of_its_argument():
    """value_and_grad's quick path (a list, tuple or dict of float arrays, or one array) and its
    general one (Tensors, nesting, float32 next to float64) give the same structure and numbers."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(3), rng.standard_normal((2, 3)).astype(np.float32)

    def loss(p):
        leaves = tree_flatten(p)[0]
        return tt.sum(tt.tanh(leaves[0]) * leaves[-1])

    want = np.tanh(a) * 0 + np.sum(b, axis=0) * (1 - np.tanh(a) ** 2)
    for primal in ([a, b], (a, b), {"a": a, "b": b}, [tt.tensor(a), b], {"a": a, "rest": (b,)}):
        value, grads = tt.value_and_grad(loss)(primal)
        flat, structure = tree_flatten(grads)
        assert repr(structure) == repr(tree_flatten(primal)[1])
        np.testing.assert_allclose(flat[0], want, rtol=1e-6)
        assert flat[0].dtype == np.float64 and flat[1].dtype == np.float32
        assert not np.shares_memory(flat[0], a) and not np.shares_memory(flat[1], b)
    value, g = tt.value_and_grad(lambda x: tt.sum(x * x))(a)
    np.testing.assert_array_equal(g, 2 * a)
    with pytest.raises(TypeError, match="floating-point"):
        tt.value_and_grad(loss)([a, np.arange(3)])


def test_embedding_checks_its_indices_on_every_compiled_call():
    """The range check is in the embedding primitive's forward, not in Python at trace time: a
    negative index on a later call raises as eager does (it used to pick the last row silently)."""
    emb = tt.nn.Embedding(5, 2, rng=0, dtype=np.float64)
    params = {k: v.data for k, v in emb.named_parameters()}
    f = tt.compile(lambda p, i: tt.sum(tt.nn.functional_call(emb, p, i) * np.arange(2.0)))
    eager = tt.sum(emb(np.array([3, 4])) * np.arange(2.0)).data
    f(params, np.array([0, 1]))
    assert f(params, np.array([3, 4])) == eager
    with pytest.raises(IndexError, match="indices must lie in"):
        f(params, np.array([-1, 2]))
    with pytest.raises(IndexError, match="indices must lie in"):
        f(params, np.array([0, 5]))


def test_recorded_setitem_inside_a_compiled_gradient_gives_no_warning():
    """`out[0] = a[1] * 3` under a gradient is recorded on the tape (no array is written), so
    compile has nothing to warn about; it used to warn that arrays changed in place."""
    def f(a):
        out = tt.zeros(a.shape)
        out[0] = a[1] * 3
        return tt.sum(out * out)

    g = tt.compile(tt.grad(f))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = g(np.array([1.0, 2.0]))
    np.testing.assert_allclose(got, tt.grad(f)(np.array([1.0, 2.0])))

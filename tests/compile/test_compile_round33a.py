"""Round 33a: the call boundary -- what a caller hands over and what changes between calls.

Written by a fresh user who knows `torch.compile` (Dynamo guards, graph breaks) and `jax.jit`,
from the documentation only (README, docs/guides/compile.md, tensors.md, guarantees.md,
training.md and docstrings), without reading tinytensor's code or the earlier rounds' tests.
Every case builds an eager world and a compiled world independently (same seeds, separate
models, optimizers and generators), runs the same calls in both (12, or 42 where something
changes on the 40th call), and compares every result, argument, parameter, gradient, buffer and
generator state bit for bit (type, dtype, shape, bytes; Python floats by their bits); an error
eagerly must be the same exception type compiled. The eager world is run twice first, so a
difference is never the test's own nondeterminism. A refusal passes only where the docs list
it (writes into arguments; an np.matrix / masked array argument, an ndarray subclass).

906 cases: 906 pass, 0 strict xfails.

* test_shape_dtype_schedule (180): ten functions x nine schedules of argument shapes and dtypes
  (batch size changing on the 3rd/10th call, features on the 40th, three shapes cycling,
  float32/float64 flipping, int64 from the 10th call, 1-row and 1x1 inputs), as arrays and as
  Tensors that require grad (with backward through the compiled call's tape entry).
* test_layouts_and_views (304): nineteen functions (several returning views of the argument, or
  a reshape/ravel/ascontiguousarray/astype that is a view for one layout and a copy for another,
  followed by arithmetic the program might do in place) x eight layouts (transposed, Fortran,
  strided, negative strides, broadcast_to, read-only, 0 rows, contiguous/Fortran alternating)
  x array/Tensor; the caller then writes into what it handed over and the results are compared
  again (a view eagerly must be a view compiled).
* test_transform_of_compiled (5): grad, value_and_grad, jacobian, hvp and vjp of a compiled
  function whose argument shapes change.
* test_misc (417): the same array or Tensor passed twice (from the start, from the 3rd call,
  alternating, once), with backward; results fed back as the next call's arguments (arrays,
  Tensors on the tape, tuples, dicts, floats, 0-d results); the caller writing an argument or a
  closed-over Tensor/array between calls (ndarray writes, .data[...] =, add_, .data rebinding to
  another dtype, numpy() views; every call, on the 3rd, on the 40th); f writing its Tensor
  argument (documented refusal); grad mode around the call (no_grad, set_grad_enabled as a call,
  inference_mode) and inside f (set_grad_enabled(flag), enable_grad, is_grad_enabled branches);
  requires_grad_ toggled on parameters (3rd/10th/40th call) and on the same input object;
  gradients accumulating across calls; train/eval, load_state_dict, forward and forward-pre
  hooks, tensor hooks added and removed between calls; whole training steps (SGD momentum,
  Adam; BatchNorm and Dropout) with the batch size, input dtype, mode, frozen parameters, a
  hook, a loaded state dict, a learning rate in param_groups, model.to(float32), a replaced
  Parameter or requires_grad inputs changing on the 3rd or 40th step; cache_size 1 and 2 with
  three cycling shapes, the recompile limit exceeded and left, check=True, fuse=True; the
  caller reseeding or restoring the global generator between calls; a compiled method on two
  instances; Dropout p and BatchNorm momentum/eps changed; 52 uses of a float argument and 32 of
  an int argument that changes on every call (unbound float methods, struct, ctypes, array,
  Fraction, statistics, set membership, dict lookups, hash, formatting, bit operations,
  math.comb, ...); np.bool_, complex, float16, longdouble, Fraction, Decimal, slice, range,
  Ellipsis, dtype, dtype class, function, closure, partial, string, shape-tuple, axis, seed and
  Generator arguments; dataclass, SimpleNamespace, namedtuple, OrderedDict, deque, set,
  frozenset, bytes, object-array, structured-array and datetime64 arguments; Modules and
  optimizers passed as arguments, as defaults, mutable and replaced defaults/kwdefaults; dict
  arguments with reordered, swapped, int, mixed and tuple keys and None leaves; *args/**kwargs of
  changing length; keyword order; the same array twice inside a pytree, a Tensor with its own
  .data, an array with its own view, a Parameter passed that f also closes over; 0-row, 0-column,
  big-endian, float16, int32, uint8, bool and complex inputs through the ten functions;
  non-leaf inputs on the tape, requires_grad branches, detached feedback, a replaced Parameter
  and a bias set to None.

Strict xfails: none. No silent difference, difference after a warning, crash where eager works
or undocumented refusal was found at the call boundary in this round.
"""

import array
import cmath
import collections
import contextlib
import ctypes
import dataclasses
import decimal
import fractions
import functools
import math
import operator
import statistics
import struct
import types
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

# --------------------------------------------------------------------------------------------
# harness
# --------------------------------------------------------------------------------------------


def canon(v, depth=0):
    """A comparable, byte-exact description of a value (type, dtype, shape, bytes)."""
    if depth > 8:
        return ("deep",)
    if isinstance(v, tt.Tensor):
        g = v.grad
        return (
            "Tensor",
            type(v).__name__,
            bool(v.requires_grad),
            canon(np.asarray(v.data)),
            None if g is None else canon(np.asarray(g)),
        )
    if isinstance(v, (np.ndarray, np.generic)) and v.dtype == np.longdouble:
        return ("longdouble", type(v).__name__, np.shape(v), repr(np.asarray(v).tolist()))
    if isinstance(v, np.ndarray):
        a = np.ascontiguousarray(v)
        return ("ndarray", str(v.dtype), v.shape, a.tobytes())
    if isinstance(v, np.generic):
        return ("npscalar", type(v).__name__, np.asarray(v).tobytes())
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return (type(v).__name__, v)
    if isinstance(v, float):
        return ("float", type(v).__name__, struct.pack("<d", v))
    if isinstance(v, int):
        return ("int", type(v).__name__, v)
    if isinstance(v, dict):
        return ("dict", type(v).__name__, tuple((k, canon(x, depth + 1)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(canon(x, depth + 1) for x in v))
    return ("other", type(v).__name__, repr(v))


def _is_refusal(e):
    return isinstance(e, RuntimeError) and "tt.compile" in str(e)


def run_world(make, n, compiled):
    w = make()
    f = w["f"]
    if compiled:
        f = tt.compile(f, **w.get("copts", {}))
    log, prev, refusal = [], None, None
    ctxf = w.get("ctx")
    for i in range(n):
        if "before" in w:
            w["before"](i, prev)
        a, k = w["args"](i, prev)
        ctx = ctxf(i) if ctxf else contextlib.nullcontext()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with ctx:
                    out = f(*a, **k)
                    rec = ("ok", canon(out))
                    if "after" in w:
                        rec = rec + (canon(w["after"](i, out, a, k)),)
            prev = out
        except Exception as e:  # noqa: BLE001 - we compare the exception types
            if compiled and _is_refusal(e) and refusal is None:
                refusal = (i, str(e).splitlines()[0][:300])
            rec = ("err", type(e).__name__)
        log.append(rec)
        if "state" in w:
            log.append(("state", canon(w["state"]())))
    return log, refusal


def check(make, n=12, refusal_ok=False):
    e1, _ = run_world(make, n, False)
    e2, _ = run_world(make, n, False)
    assert e1 == e2, "the eager run is not deterministic: a bug in the test"
    c, refusal = run_world(make, n, True)
    if refusal is not None and refusal_ok:
        return
    for i, (x, y) in enumerate(zip(e1, c)):
        assert x == y, (
            f"entry {i} differs (refusal: {refusal}):\n eager={str(x)[:600]}\n compiled={str(y)[:600]}"
        )
    assert len(e1) == len(c)


def rnd(i, shape, dtype=np.float64, salt=0):
    r = np.random.default_rng(1000 * salt + i)
    if np.dtype(dtype).kind == "f":
        return r.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return r.standard_normal(shape) > 0
    return r.integers(-3, 4, size=shape).astype(dtype)


# --------------------------------------------------------------------------------------------
# 1. shapes and dtypes that change between calls
# --------------------------------------------------------------------------------------------

FNS = {
    "tanh_sum": lambda x: tt.tanh(x * 2.0).sum(axis=-1),
    "softmax": lambda x: tt.softmax(x, axis=-1),
    "gram": lambda x: x @ x.T,
    "mean0_center": lambda x: x - x.mean(axis=0, keepdims=True),
    "cumsum_max": lambda x: tt.cumsum(x, axis=0).max(axis=-1),
    "concat_self": lambda x: tt.concatenate([x, x * 3.0], axis=0),
    "diff_rows": lambda x: x[1:] - x[:-1],
    "reshape_flat": lambda x: (x * 1.5).reshape(-1),
    "logsumexp": lambda x: tt.logsumexp(x, axis=-1),
    "var_std": lambda x: x.var(axis=0) + x.std(axis=-1).sum(),
}

SCHEDULES = {
    # name: function i -> (shape, dtype)
    "batch_at_3": lambda i: ((4 if i < 3 else 6, 3), np.float64),
    "batch_at_10": lambda i: ((5 if i < 10 else 2, 3), np.float64),
    "feat_at_40": lambda i: ((4, 3 if i < 40 else 5), np.float64),
    "cycle3": lambda i: (((2, 3), (5, 3), (3, 4))[i % 3], np.float64),
    "dtype_flip": lambda i: ((4, 3), (np.float64, np.float32)[(i // 2) % 2]),
    "dtype_f32_at_40": lambda i: ((4, 3), np.float32 if i >= 40 else np.float64),
    "int_at_10": lambda i: ((4, 3), np.int64 if i >= 10 else np.float64),
    "rows_1": lambda i: ((1, 3) if i % 4 == 3 else (3, 3), np.float64),
    "one_elem": lambda i: ((1, 1) if i >= 3 else (2, 2), np.float64),
}

NCALLS = {"feat_at_40": 42, "dtype_f32_at_40": 42}


def _make_shape_case(fname, sname, kind):
    fn = FNS[fname]
    sched = SCHEDULES[sname]

    def make():
        def args(i, prev):
            shape, dtype = sched(i)
            a = rnd(i, shape, dtype)
            if kind == "array":
                return (a,), {}
            if kind == "tensor":
                return (tt.tensor(a),), {}
            t = tt.tensor(a, requires_grad=np.dtype(dtype).kind == "f")
            return (t,), {}

        def after(i, out, a, k):
            x = a[0]
            if kind == "tensor_rg" and isinstance(out, tt.Tensor) and out.requires_grad:
                (out * out).sum().backward()
                return x.grad
            return None

        return {"f": fn, "args": args, "after": after}

    return make


SHAPE_CASES = [(f, s, k) for f in FNS for s in SCHEDULES for k in ("array", "tensor_rg")]


@pytest.mark.parametrize("fname,sname,kind", SHAPE_CASES)
def test_shape_dtype_schedule(fname, sname, kind):
    check(_make_shape_case(fname, sname, kind), n=NCALLS.get(sname, 12))


# --------------------------------------------------------------------------------------------
# 2. layouts: non-contiguous, read-only, 0-size; outputs that are views of the arguments
# --------------------------------------------------------------------------------------------

LAYOUTS = {
    "transposed": lambda a: a.T,
    "fortran": lambda a: np.asfortranarray(a),
    "step_slice": lambda a: np.repeat(a, 2, axis=0)[::2],
    "neg_stride": lambda a: a[::-1, ::-1],
    "broadcast_to": lambda a: np.broadcast_to(a[:1], a.shape),
    "alternating": None,  # contiguous on even calls, transposed-copy layout on odd calls
    "zero_rows": lambda a: a[:0],
    "readonly": None,
}

VIEW_FNS = {
    "identity_T": lambda x: x.T,
    "slice_rows": lambda x: x[1:],
    "reshape": lambda x: x.reshape(-1),
    "plus_zero": lambda x: x + 0.0,
    "sum_axis0": lambda x: x.sum(axis=0),
    "matmul_T": lambda x: x.T @ x,
    "tanh": lambda x: tt.tanh(x),
    "flip": lambda x: tt.flip(x, axis=0),
    "reshape_plus": lambda x: x.reshape(-1) + 1.0,
    "T_reshape_plus": lambda x: x.T.reshape(-1) * 2.0,
    "ravel_plus": lambda x: tt.ravel(x) + 1.0,
    "np_ravel_plus": lambda x: np.ravel(x) - 1.0,
    "ascontig_plus": lambda x: np.ascontiguousarray(x) + 1.0,
    "asfortran_plus": lambda x: np.asfortranarray(x) * 3.0,
    "astype_same_plus": lambda x: x.astype(np.float64) + 1.0,
    "squeeze_col_plus": lambda x: tt.squeeze(x[:, :1]) + 1.0,
    "swap_reshape_div": lambda x: tt.swapaxes(x, 0, 1).reshape(2, -1) / 2.0,
    "softmax_T": lambda x: tt.softmax(x.T, axis=-1),
    "where_T": lambda x: tt.where(x.T > 0, x.T, 0.0) + 1.0,
}


def _layout(name, a, i):
    if name == "alternating":
        return a if i % 2 == 0 else np.asfortranarray(a)
    if name == "readonly":
        a = a.copy()
        a.setflags(write=False)
        return a
    return LAYOUTS[name](a)


def _make_layout_case(lname, fname, kind):
    fn = VIEW_FNS[fname]

    def make():
        held = {}

        def args(i, prev):
            a = _layout(lname, rnd(i, (4, 3)), i)
            held["a"] = a
            if kind == "array":
                return (a,), {}
            t = tt.tensor(a) if kind == "tensor" else tt.Tensor(a) if False else tt.tensor(a)
            held["t"] = t
            return (t,), {}

        def after(i, out, a, k):
            # the caller writes into what it handed over; a view returned eagerly sees it
            before = (canon(out), canon(a))
            if kind == "array" and held["a"].flags.writeable:
                held["a"][...] += 100.0
            elif kind == "tensor":
                held["t"].data[...] += 100.0
            return (before, canon(out))

        return {"f": fn, "args": args, "after": after}

    return make


LAYOUT_CASES = [(ln, fn, k) for ln in LAYOUTS for fn in VIEW_FNS for k in ("array", "tensor")]


@pytest.mark.parametrize("lname,fname,kind", LAYOUT_CASES)
def test_layouts_and_views(lname, fname, kind):
    check(_make_layout_case(lname, fname, kind), n=12)


# --------------------------------------------------------------------------------------------
# 3. aliasing, feedback, writes between calls and inside f
# --------------------------------------------------------------------------------------------

MISC = {}


def case(name, n=12, refusal_ok=False, xfail=None):
    def deco(make):
        MISC[name] = (make, n, refusal_ok, xfail)
        return make

    return deco


def _pair_args(pattern):
    """pattern(i) -> True where both arguments are the same object on call i."""

    def args(i, prev):
        a = rnd(i, (3, 3))
        if pattern(i):
            return (a, a), {}
        return (a, rnd(i, (3, 3), salt=1)), {}

    return args


for _pname, _pat in {
    "same_first2": lambda i: i < 2,
    "same_at_3": lambda i: i >= 3,
    "same_alternate": lambda i: i % 2 == 1,
    "same_at_10": lambda i: i == 10,
}.items():
    for _fname, _fn in {
        "a_mul_b": lambda a, b: a * b + a,
        "a_matmul_bT": lambda a, b: a @ b.T,
        "a_minus_b": lambda a, b: tt.tanh(a) - tt.tanh(b),
        "is_branch": lambda a, b: a * 2.0 if a is b else a - b,
    }.items():
        case(f"alias_arrays_{_pname}_{_fname}")(
            (lambda fn, pat: lambda: {"f": fn, "args": _pair_args(pat)})(_fn, _pat)
        )


def _alias_tensor_grad(pat):
    def make():
        def f(a, b):
            return (a * b).sum() + (a**2).sum()

        def args(i, prev):
            a = tt.tensor(rnd(i, (3,)), requires_grad=True)
            b = a if pat(i) else tt.tensor(rnd(i, (3,), salt=2), requires_grad=True)
            return (a, b), {}

        def after(i, out, a, k):
            out.backward()
            return (a[0].grad, a[1].grad)

        return {"f": f, "args": args, "after": after}

    return make


for _pname, _pat in {
    "at_3": lambda i: i >= 3,
    "alternate": lambda i: i % 2 == 0,
    "only_10": lambda i: i == 10,
}.items():
    case(f"alias_tensors_backward_{_pname}")(_alias_tensor_grad(_pat))


def _feedback(fn, init, n_kind):
    def make():
        def args(i, prev):
            if prev is None:
                x = init()
            else:
                x = prev
            return (x,), {}

        return {"f": fn, "args": args}

    return make


case("feedback_array_tanh")(_feedback(lambda x: tt.tanh(x) * 1.5 + 0.1, lambda: rnd(0, (3, 2)), 0))
case("feedback_array_grows")(_feedback(lambda x: tt.concatenate([x, x[:1] * 0.5]), lambda: rnd(0, (1, 2)), 0))
case("feedback_tensor_rg", n=12)(
    _feedback(lambda x: x * 0.9 + tt.sin(x), lambda: tt.tensor(rnd(0, (3,)), requires_grad=True), 0)
)
case("feedback_tuple")(
    lambda: {
        "f": lambda s: (s[0] + s[1], s[0] * s[1]),
        "args": lambda i, prev: ((prev if prev is not None else (rnd(0, (2,)), rnd(1, (2,))),), {}),
    }
)
case("feedback_dict")(
    lambda: {
        "f": lambda d: {"h": tt.tanh(d["h"] + d["x"]), "x": d["x"]},
        "args": lambda i, prev: (({"h": np.zeros(3), "x": rnd(0, (3,))} if prev is None else prev,), {}),
    }
)
case("feedback_scalar_float")(
    lambda: {
        "f": lambda x, s: x * s,
        "args": lambda i, prev: ((rnd(i, (2,)), 1.5 if prev is None else float(prev.sum())), {}),
    }
)
case("feedback_0d_result")(
    lambda: {
        "f": lambda x, s: (x * s).sum(),
        "args": lambda i, prev: ((rnd(i, (2,)), np.float64(0.5) if prev is None else prev), {}),
    }
)


def _caller_writes(kind, when):
    def make():
        w = {}
        base = rnd(0, (3, 3))
        if kind == "ndarray":
            x = base.copy()
        else:
            x = tt.tensor(base)
        w["x"] = x

        def f(x):
            return tt.tanh(x) @ x

        def before(i, prev):
            if when(i):
                if kind == "ndarray":
                    x[...] = rnd(i, (3, 3), salt=3)
                elif kind == "data_index":
                    x.data[1] = rnd(i, (3,), salt=3)
                elif kind == "add_":
                    with tt.no_grad():
                        x.add_(1.0)
                elif kind == "data_rebind":
                    x.data = rnd(i, (3, 3), salt=3)
                elif kind == "data_rebind_f32":
                    x.data = rnd(i, (3, 3), np.float32, salt=3)
                elif kind == "numpy_view":
                    x.numpy()[0, 0] = float(i)

        return {"f": f, "args": lambda i, prev: ((x,), {}), "before": before}

    return make


for _kind in ("ndarray", "data_index", "add_", "data_rebind", "data_rebind_f32", "numpy_view"):
    for _wname, _when in {
        "every": lambda i: True,
        "at_3": lambda i: i == 3,
        "at_40": lambda i: i == 40,
    }.items():
        case(f"caller_writes_{_kind}_{_wname}", n=42 if _wname == "at_40" else 12)(
            _caller_writes(_kind, _when)
        )


def _closed_writes(kind):
    def make():
        W = tt.tensor(rnd(0, (3, 3)))
        arr = rnd(1, (3,))

        def f(x):
            return (x @ W) * arr

        def before(i, prev):
            if i in (2, 5, 9):
                if kind == "tensor_data":
                    W.data[0, 0] = float(i)
                elif kind == "array":
                    arr[0] = float(i)
                elif kind == "array_rebind_global":
                    pass

        return {"f": f, "args": lambda i, prev: ((rnd(i, (2, 3)),), {}), "before": before}

    return make


case("closed_tensor_written")(_closed_writes("tensor_data"))
case("closed_array_written")(_closed_writes("array"))


def _f_writes_arg(kind):
    def make():
        def f(x):
            if kind == "add_nograd":
                with tt.no_grad():
                    x.add_(1.0)
                return x * 2.0
            if kind == "mul_":
                x.mul_(0.5)
                return x.sum()
            if kind == "setitem":
                x[0] = 0.0
                return x * 1.0
            if kind == "iadd_tensor":
                x += 1.0
                return x
            raise AssertionError

        def args(i, prev):
            return (tt.tensor(rnd(i, (3,))),), {}

        def after(i, out, a, k):
            return a[0]

        return {"f": f, "args": args, "after": after}

    return make


for _k in ("add_nograd", "mul_", "setitem", "iadd_tensor"):
    case(f"f_writes_tensor_arg_{_k}", refusal_ok=True)(_f_writes_arg(_k))


def _f_writes_persistent(kind):
    # the same Tensor handed over on every call, written by f: the writes accumulate
    def make():
        x = tt.tensor(rnd(0, (3,)))

        def f(x, s):
            with tt.no_grad():
                if kind == "add_":
                    x.add_(s)
                else:
                    x.mul_(s)
            return x.sum()

        return {"f": f, "args": lambda i, prev: ((x, 0.5 + i % 3), {}), "state": lambda: x}

    return make


case("f_writes_same_tensor_add_", refusal_ok=True)(_f_writes_persistent("add_"))
case("f_writes_same_tensor_mul_", refusal_ok=True)(_f_writes_persistent("mul_"))


# --------------------------------------------------------------------------------------------
# 4. grad modes, requires_grad, modules, training steps, number uses, argument kinds
# --------------------------------------------------------------------------------------------


def tryc(name, make, n=12, refusal_ok=False):
    case(name, n=n, refusal_ok=refusal_ok)(make)


# ---- s2
def model_state(m):
    return [(k, p) for k, p in m.named_parameters()] + [(k, b) for k, b in m.named_buffers()]


# grad mode around the call
for mode in ["no_grad_3_5", "set_grad_false_call", "inference_mode", "alt"]:

    def mk(mode=mode):
        m = nn.Linear(3, 2, rng=0, dtype=np.float64)

        def f(x):
            return tt.tanh(m(x)).sum()

        def ctx(i):
            if mode == "no_grad_3_5":
                return tt.no_grad() if 3 <= i <= 5 else contextlib.nullcontext()
            if mode == "inference_mode":
                return tt.inference_mode() if i % 3 == 1 else contextlib.nullcontext()
            if mode == "alt":
                return tt.set_grad_enabled(i % 2 == 0)
            return tt.set_grad_enabled(i < 4)

        def after(i, out, a, k):
            if isinstance(out, tt.Tensor) and out.requires_grad:
                out.backward()
            return out.requires_grad if isinstance(out, tt.Tensor) else None

        return {
            "f": f,
            "args": lambda i, p: ((rnd(i, (4, 3)),), {}),
            "ctx": ctx,
            "after": after,
            "state": lambda: model_state(m),
        }

    tryc("gradmode_" + mode, mk)


# grad mode inside f, flipping by argument
def mk():
    m = nn.Linear(3, 2, rng=0, dtype=np.float64)

    def f(x, flag):
        with tt.set_grad_enabled(flag):
            y = m(x)
        return y.sum() * 2.0

    def after(i, out, a, k):
        if out.requires_grad:
            out.backward()
        return out.requires_grad

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (4, 3)), i % 3 == 0), {}),
        "after": after,
        "state": lambda: model_state(m),
    }


tryc("gradmode_inside_flag", mk)


def mk():
    m = nn.Linear(3, 2, rng=0, dtype=np.float64)

    def f(x):
        with tt.enable_grad():
            y = m(x)
        return y.sum() * 2.0

    def after(i, out, a, k):
        if out.requires_grad:
            out.backward()
        return out.requires_grad

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (4, 3)),), {}),
        "after": after,
        "state": lambda: model_state(m),
        "ctx": lambda i: tt.no_grad() if i % 2 else contextlib.nullcontext(),
    }


tryc("enable_grad_inside_under_nograd", mk)


def mk():
    m = nn.Linear(3, 2, rng=0, dtype=np.float64)

    def f(x):
        return m(x).sum() * (2.0 if tt.is_grad_enabled() else 3.0)

    def after(i, out, a, k):
        if out.requires_grad:
            out.backward()
        return out.requires_grad

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (4, 3)),), {}),
        "after": after,
        "state": lambda: model_state(m),
        "ctx": lambda i: tt.no_grad() if i in (2, 3, 7) else contextlib.nullcontext(),
    }


tryc("is_grad_enabled_branch", mk)

# requires_grad toggled on a parameter
for when in (3, 10, 40):

    def mk(when=when):
        m = nn.Sequential(
            nn.Linear(3, 4, rng=0, dtype=np.float64), nn.Tanh(), nn.Linear(4, 1, rng=1, dtype=np.float64)
        )

        def f(x):
            return (m(x) ** 2).mean()

        def before(i, p):
            if i == when:
                m[0].weight.requires_grad_(False)
            if i == when + 1:
                m[0].weight.requires_grad_(True)
            if i == when + 2:
                m[2].requires_grad_(False)

        def after(i, out, a, k):
            if out.requires_grad:
                out.backward()
            return out.requires_grad

        return {
            "f": f,
            "args": lambda i, p: ((rnd(i, (5, 3)),), {}),
            "after": after,
            "before": before,
            "state": lambda: [(k, v.requires_grad, v) for k, v in m.named_parameters()],
        }

    tryc(f"freeze_at_{when}", mk, 42 if when == 40 else 14)


# requires_grad toggled on the same input object
def mk():
    x = tt.tensor(rnd(0, (3, 2)))
    W = tt.tensor(rnd(1, (2, 2)), requires_grad=True)

    def f(x):
        return (x @ W).sum() + (x * x).sum()

    def before(i, p):
        if i % 3 == 1:
            x.requires_grad_(True)
        elif i % 3 == 2:
            x.requires_grad = False
        x.grad = None

    def after(i, out, a, k):
        if out.requires_grad:
            out.backward()
        return (out.requires_grad, x.grad)

    return {"f": f, "args": lambda i, p: ((x,), {}), "after": after, "before": before, "state": lambda: W}


tryc("input_rg_toggle_same_object", mk)


# backward through compiled, grads accumulating across calls (no zero_grad)
def mk():
    m = nn.Linear(3, 2, rng=0, dtype=np.float64)

    def f(x, y):
        return ((m(x) - y) ** 2).sum()

    def after(i, out, a, k):
        out.backward()
        return None

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (4 + (i >= 6), 3)), rnd(i, (2,), salt=1)), {}),
        "after": after,
        "state": lambda: model_state(m),
    }


tryc("accumulate_grads", mk)


# train/eval switches with dropout + batchnorm
def mk():
    tt.manual_seed(0)
    m = nn.Sequential(
        nn.Linear(3, 4, rng=0, dtype=np.float64),
        nn.BatchNorm1d(4, dtype=np.float64)
        if "dtype" in nn.BatchNorm1d.__init__.__code__.co_varnames
        else nn.BatchNorm1d(4),
        nn.Dropout(0.3, rng=5),
        nn.Linear(4, 1, rng=1, dtype=np.float64),
    )

    def f(x):
        return m(x).sum()

    def before(i, p):
        if i == 3 or i == 9:
            m.eval()
        if i == 5:
            m.train()
        if i == 7:
            m[2].eval()

    def after(i, out, a, k):
        if out.requires_grad:
            out.backward()
        return None

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (6, 3)),), {}),
        "after": after,
        "before": before,
        "state": lambda: model_state(m),
    }


tryc("train_eval_switch", mk)


# load_state_dict between calls
def mk():
    m = nn.Sequential(
        nn.Linear(3, 4, rng=0, dtype=np.float64), nn.BatchNorm1d(4), nn.Linear(4, 1, rng=1, dtype=np.float64)
    )
    sd0 = m.state_dict()

    def f(x):
        return m(x).sum()

    def before(i, p):
        if i in (3, 8):
            m.load_state_dict(sd0)
        if i == 5:
            sd = {k: v * 0.5 if v.dtype.kind == "f" else v for k, v in sd0.items()}
            m.load_state_dict(sd)

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (6, 3)),), {}),
        "before": before,
        "state": lambda: model_state(m),
        "after": lambda i, out, a, k: out.backward(),
    }


tryc("load_state_dict", mk)


# hooks added and removed
def mk():
    m = nn.Sequential(
        nn.Linear(3, 4, rng=0, dtype=np.float64), nn.Tanh(), nn.Linear(4, 1, rng=1, dtype=np.float64)
    )
    hs = {}

    def f(x):
        return m(x).sum()

    def before(i, p):
        if i == 2:
            hs["a"] = m[1].register_forward_hook(lambda mod, args, out: out * 2.0)
        if i == 4:
            hs["b"] = m[0].register_forward_pre_hook(lambda mod, args: (args[0] + 1.0,))
        if i == 6:
            hs["a"].remove()
        if i == 8:
            hs["b"].remove()
        if i == 9:
            hs["c"] = m.register_forward_hook(lambda mod, args, out: None)

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (6, 3)),), {}),
        "before": before,
        "state": lambda: model_state(m),
        "after": lambda i, out, a, k: out.backward(),
    }


tryc("module_hooks", mk)


# tensor hook on the input between calls
def mk():
    W = tt.tensor(rnd(1, (2, 2)), requires_grad=True)
    f = lambda x: (tt.tanh(x @ W)).sum()

    def args(i, p):
        x = tt.tensor(rnd(i, (3, 2)), requires_grad=True)
        if i % 2:
            x.register_hook(lambda g: g * 3.0)
        if i % 3 == 0:
            W_h = W.register_hook(lambda g: g * 0.5)
            hold.append(W_h)
        return (x,), {}

    hold = []

    def after(i, out, a, k):
        out.backward()
        while hold:
            hold.pop().remove()
        return a[0].grad

    return {"f": f, "args": args, "after": after, "state": lambda: W}


tryc("tensor_hooks", mk)


# ---- s4
def build(opt_name, bn=False, drop=False, dtype=np.float64):
    tt.manual_seed(0)
    layers = [nn.Linear(3, 5, rng=0, dtype=dtype)]
    if bn:
        layers.append(nn.BatchNorm1d(5))
    layers.append(nn.Tanh())
    if drop:
        layers.append(nn.Dropout(0.25, rng=3))
    layers.append(nn.Linear(5, 2, rng=1, dtype=dtype))
    m = nn.Sequential(*layers)
    if opt_name == "sgd":
        opt = tt.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    elif opt_name == "adam":
        opt = tt.optim.Adam(m.parameters(), lr=0.01)
    else:
        opt = tt.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.1)
    return m, opt


def state(m, opt):
    return [(k, v) for k, v in m.named_parameters()] + [(k, v) for k, v in m.named_buffers()]


CHANGES = [
    "batch",
    "dtype_in",
    "eval",
    "freeze",
    "hook",
    "load_sd",
    "lr_group",
    "to_f32",
    "zero_grad_none",
    "swap_param",
    "requires_grad_input",
    "new_param_group",
]
for opt_name in ("sgd", "adam"):
    for change in CHANGES:
        for when in (3, 40):

            def mk(opt_name=opt_name, change=change, when=when):
                m, opt = build(opt_name, bn=True, drop=True)
                sd = m.state_dict()
                lossf = nn.MSELoss()

                def step(x, y):
                    opt.zero_grad()
                    loss = lossf(m(x), y)
                    loss.backward()
                    opt.step()
                    return loss

                def before(i, p):
                    if i != when:
                        return
                    if change == "eval":
                        m.eval()
                    if change == "freeze":
                        m[0].weight.requires_grad_(False)
                        m[0].weight.grad = None
                    if change == "hook":
                        m[2].register_forward_hook(lambda mod, a, o: o * 0.5)
                    if change == "load_sd":
                        m.load_state_dict(sd)
                    if change == "lr_group":
                        opt.param_groups[0]["lr"] = 0.001
                    if change == "to_f32":
                        m.to(np.float32)
                    if change == "swap_param":
                        m[0].weight = nn.Parameter(m[0].weight.data * 0.5)
                    if change == "new_param_group":
                        extra = nn.Parameter(rnd(0, (2,)))
                        m.extra = extra

                def args(i, p):
                    b = 6 if (change == "batch" and i >= when) else 4
                    dt = np.float32 if (change == "dtype_in" and i >= when) else np.float64
                    x = rnd(i, (b, 3), dt)
                    if change == "requires_grad_input" and i >= when:
                        x = tt.tensor(x, requires_grad=True)
                    return (x, rnd(i, (b, 2), salt=1)), {}

                return {
                    "f": step,
                    "args": args,
                    "before": before,
                    "state": lambda: state(m, opt),
                    "after": lambda i, out, a, k: float(out),
                }

            tryc(f"step_{opt_name}_{change}_{when}", mk, 42 if when == 40 else 8)

# ---- s5
FLOAT_USES = {
    "real": lambda x, s: x * s.real,
    "conjugate": lambda x, s: x * s.conjugate(),
    "abs": lambda x, s: x * abs(s),
    "floordiv": lambda x, s: x * (s // 0.25),
    "mod": lambda x, s: x * (s % 0.3),
    "divmod": lambda x, s: x * divmod(s, 0.3)[0],
    "pow3": lambda x, s: x * pow(s, 3),
    "round2": lambda x, s: x * round(s, 2),
    "unbound_mul": lambda x, s: x * float.__mul__(s, 2.0),
    "dunder_mul": lambda x, s: x * s.__mul__(2.0),
    "is_integer": lambda x, s: x * (2.0 if s.is_integer() else 3.0),
    "hex": lambda x, s: x * float.fromhex(s.hex()),
    "ratio": lambda x, s: x * (s.as_integer_ratio()[0] / s.as_integer_ratio()[1]),
    "sum_list": lambda x, s: x * sum([s, s, 0.1]),
    "fsum": lambda x, s: x * math.fsum([s, 0.1]),
    "stat_mean": lambda x, s: x * statistics.mean([s, 1.0]),
    "np_float64": lambda x, s: x * np.float64(s),
    "np_sqrt": lambda x, s: x * np.sqrt(s * s),
    "op_mul": lambda x, s: x * operator.mul(s, 2.0),
    "reduce": lambda x, s: x * functools.reduce(operator.add, [s, s]),
    "struct": lambda x, s: x * struct.unpack("d", struct.pack("d", s))[0],
    "ctypes": lambda x, s: x * ctypes.c_double(s).value,
    "array": lambda x, s: x * array.array("d", [s])[0],
    "fraction": lambda x, s: x * float(fractions.Fraction(s)),
    "max_builtin": lambda x, s: x * max(s, 0.5),
    "min_builtin": lambda x, s: x * min(s, 0.5),
    "sorted": lambda x, s: x * sorted([s, 0.5])[0],
    "in_set": lambda x, s: x * (2.0 if s in {0.5, 1.5} else 3.0),
    "in_list": lambda x, s: x * (2.0 if s in [0.5, 1.5] else 3.0),
    "dict_get": lambda x, s: x * {0.5: 2.0, 1.5: 4.0}.get(s, 1.0),
    "copysign": lambda x, s: x * math.copysign(1.0, s),
    "isclose": lambda x, s: x * (2.0 if math.isclose(s, 0.5) else 1.0),
    "complex": lambda x, s: x * complex(s, 0).real,
    "cmath": lambda x, s: x * cmath.sqrt(s).real,
    "float_repr": lambda x, s: x * float(repr(s)),
    "format": lambda x, s: x * float(format(s, ".3f")),
    "percent": lambda x, s: x * float("%.3f" % s),  # noqa: UP031
    "neg_pos": lambda x, s: x * (-(+s)),
    "np_array_list": lambda x, s: x * np.array([s, s, s]),
    "np_full": lambda x, s: x * np.full(3, s),
    "np_linspace": lambda x, s: x * np.linspace(0, s, 3),
    "np_clip": lambda x, s: x * np.clip(s, 0.4, 1.0),
    "tt_tensor": lambda x, s: x * tt.tensor(s),
    "tuple_index": lambda x, s: x * (1.0, 2.0, 3.0)[int(s * 2) % 3],
    "hash": lambda x, s: x * float(hash(s) % 7),
    "bool": lambda x, s: x * (1.0 if bool(s - 0.5) else 2.0),
    "trunc": lambda x, s: x * math.trunc(s * 3),
    "float_float": lambda x, s: x * float(float(s)),
    "getattr_dunder": lambda x, s: x * s.__add__(1.0),
    "numpy_item": lambda x, s: x * np.float64(s).item(),
    "int_of": lambda x, s: x * int(s * 4),
    "id_compare": lambda x, s: x * (2.0 if s == s else 3.0),
}
VALUES = [0.5, 1.5, 1.0, 0.75, 0.5, 2.0, 1.5, 0.25, 0.5, 3.0, 1.0, 0.5]
for name, fn in FLOAT_USES.items():

    def mk(fn=fn):
        return {"f": fn, "args": lambda i, p: ((rnd(0, (3,)), VALUES[i % len(VALUES)]), {})}

    tryc("float_" + name, mk, 12)

INT_USES = {
    "bit_length": lambda x, n: x * n.bit_length(),
    "lshift": lambda x, n: x * (n << 1),
    "and": lambda x, n: x * (n & 1),
    "invert": lambda x, n: x * (~n),
    "numerator": lambda x, n: x * n.numerator,
    "unbound_add": lambda x, n: x * int.__add__(n, 1),
    "index": lambda x, n: x * operator.index(n),
    "slice": lambda x, n: x[:n].sum() + x[0],
    "range_len": lambda x, n: x * len(range(n)),
    "to_bytes": lambda x, n: x * n.to_bytes(2, "little")[0],
    "bin": lambda x, n: x * bin(n).count("1"),
    "list_index": lambda x, n: x * [1.0, 2.0, 3.0, 4.0][n],
    "in_set": lambda x, n: x * (2.0 if n in {1, 2} else 3.0),
    "dict_key": lambda x, n: x * {1: 2.0, 2: 3.0}.get(n, 0.5),
    "float_of": lambda x, n: x * float(n),
    "truediv": lambda x, n: x * (n / 3),
    "pow_neg": lambda x, n: x * (2**-n),
    "x_pow": lambda x, n: x**n,
    "tt_power": lambda x, n: tt.power(x, n),
    "roll": lambda x, n: tt.roll(x, n),
    "repeat_str": lambda x, n: x * len("ab" * n),
    "math_comb": lambda x, n: x * math.comb(5, n),
    "math_factorial": lambda x, n: x * math.factorial(n),
    "gcd": lambda x, n: x * math.gcd(n, 6),
    "divmod": lambda x, n: x * divmod(n, 2)[1],
    "abs_neg": lambda x, n: x * abs(-n),
    "np_int64": lambda x, n: x * np.int64(n),
    "np_arange": lambda x, n: x.sum() * np.arange(n),
    "ones_n": lambda x, n: tt.ones(n) * x.sum(),
    "chr_ord": lambda x, n: x * ord(chr(65 + n)),
    "isqrt": lambda x, n: x * math.isqrt(n * n),
    "enumerate": lambda x, n: x * sum(i for i, _ in enumerate(range(n))),
}
IVALS = [1, 2, 3, 1, 0, 2, 3, 1, 2, 0, 3, 1]
for name, fn in INT_USES.items():

    def mk(fn=fn):
        return {"f": fn, "args": lambda i, p: ((rnd(0, (4,)), IVALS[i % len(IVALS)]), {})}

    tryc("int_" + name, mk, 12)

# ---- s6
W0 = rnd(1, (3, 3))


def mkW():
    return tt.tensor(W0, requires_grad=True)


FS = {
    "unused_x": lambda x, W: (W * 2.0).sum(),
    "mask_only": lambda x, W: (tt.where(x > 0, W, 0.0)).sum(),
    "argmax_only": lambda x, W: W[tt.argmax(x, axis=0) % 3].sum(),
    "detach_x": lambda x, W: (x.detach() @ W).sum(),
    "x_data": lambda x, W: (x.data @ W).sum(),
    "both": lambda x, W: (tt.tanh(x) @ W).sum(),
    "x_only": lambda x, W: (x * x).sum(),
    "x_times_zero": lambda x, W: (x * 0.0).sum() + W.sum(),
    "floor_x": lambda x, W: (tt.floor(x) @ W).sum(),
    "sign_x": lambda x, W: (tt.sign(x) * W).sum(),
    "int_cast": lambda x, W: (x.astype(np.int64) @ W).sum(),
    "nograd_inside": None,
}


def _ng(x, W):
    with tt.no_grad():
        y = x * 2.0
    return (y @ W).sum()


FS["nograd_inside"] = _ng

for name, fn in FS.items():
    for pat in ("rg_every", "rg_alt", "rg_at_3"):

        def mk(fn=fn, pat=pat):
            W = mkW()

            def args(i, p):
                rg = {"rg_every": True, "rg_alt": i % 2 == 0, "rg_at_3": i >= 3}[pat]
                x = tt.tensor(rnd(i, (3, 3)), requires_grad=rg)
                return (x, W), {}

            def after(i, out, a, k):
                if isinstance(out, tt.Tensor) and out.requires_grad:
                    out.backward()
                return (a[0].grad, getattr(out, "requires_grad", None))

            return {"f": fn, "args": args, "after": after, "state": lambda: W}

        tryc(f"{name}_{pat}", mk, 8)

# several outputs, backward through a subset
for which in ("first", "second", "both", "alt"):

    def mk(which=which):
        W = mkW()

        def f(x):
            h = x @ W
            return tt.tanh(h), (h * h).sum(axis=0)

        def after(i, out, a, k):
            a_, b_ = out
            w = which if which != "alt" else ("first", "second", "both")[i % 3]
            if w == "first":
                a_.sum().backward()
            elif w == "second":
                b_.backward(np.ones(3))
            else:
                (a_.sum() + b_.sum()).backward()
            return None

        return {"f": f, "args": lambda i, p: ((rnd(i, (2, 3)),), {}), "after": after, "state": lambda: W}

    tryc("multi_out_" + which, mk, 8)

# cotangent dtype/values
for gk in ("f32", "f64", "int", "scalar_py", "tensor"):

    def mk(gk=gk):
        W = mkW()

        def f(x):
            return tt.tanh(x @ W)

        def after(i, out, a, k):
            g = rnd(i, (2, 3), salt=5)
            if gk == "f32":
                g = g.astype(np.float32)
            if gk == "int":
                g = np.ones((2, 3), dtype=np.int64)
            if gk == "tensor":
                g = tt.tensor(g)
            if gk == "scalar_py":
                out.sum().backward()
                return None
            out.backward(g)
            return None

        return {"f": f, "args": lambda i, p: ((rnd(i, (2, 3)),), {}), "after": after, "state": lambda: W}

    tryc("cotangent_" + gk, mk, 6)


# backward twice, retain
def mk():
    W = mkW()
    f = lambda x: (tt.tanh(x @ W) ** 2).sum()

    def after(i, out, a, k):
        out.backward()
        out.backward()
        return None

    return {"f": f, "args": lambda i, p: ((rnd(i, (2, 3)),), {}), "after": after, "state": lambda: W}


tryc("backward_twice", mk, 6)


# chain of compiled outputs then one backward
def mk():
    W = mkW()
    f = lambda h, x: tt.tanh(h @ W + x)

    def args(i, p):
        h = p if p is not None else tt.tensor(np.zeros((2, 3)))
        return (h, rnd(i, (2, 3))), {}

    def after(i, out, a, k):
        if i == 9:
            out.sum().backward()
        return None

    return {"f": f, "args": args, "after": after, "state": lambda: W}


tryc("rnn_chain_backward", mk, 10)


# compiled output used twice + eager ops
def mk():
    W = mkW()
    f = lambda x: x @ W

    def after(i, out, a, k):
        (out * out + tt.sin(out)).sum().backward()
        return None

    return {"f": f, "args": lambda i, p: ((rnd(i, (2, 3)),), {}), "after": after, "state": lambda: W}


tryc("out_reused", mk, 6)


# tt.grad and friends around a compiled function (the compiled one inlined), shapes change
def _transform_of_compiled(tr, compiled):
    out = []

    def f(w, x):
        return (tt.tanh(x @ w) ** 2).sum()

    cf = tt.compile(f) if compiled else f
    for i in range(8):
        w = W0.copy()
        x = rnd(i, (2 + (i >= 4), 3))
        if tr == "grad":
            r = tt.grad(cf)(w, x)
        elif tr == "vg":
            r = tt.value_and_grad(cf)(w, x)
        elif tr == "jac":
            r = tt.jacobian(cf)(w, x)
        elif tr == "hvp":
            r = tt.hvp(lambda ww: cf(ww, x), (w,), (np.ones_like(w),))  # noqa: B023
        else:
            o, pb = tt.vjp(lambda ww: cf(ww, x), w)  # noqa: B023
            r = (o, pb(1.0))
        out.append(canon(r))
    return out


@pytest.mark.parametrize("tr", ["grad", "vg", "jac", "hvp", "vjp"])
def test_transform_of_compiled(tr):
    assert _transform_of_compiled(tr, False) == _transform_of_compiled(tr, True)


# ---- s7
def simple(name, fn, vals, shape=(3,), n=12, dtype=np.float64, refusal_ok=False):
    def mk():
        return {"f": fn, "args": lambda i, p: ((rnd(i, shape, dtype), vals(i)), {})}

    tryc(name, mk, n, refusal_ok=refusal_ok)


def simple_refusal_ok(name, fn, vals):
    # documented: "an np.ndarray or Tensor subclass ... as an argument" is refused, naming np.asarray
    simple(name, fn, vals, refusal_ok=True)


simple("np_bool_operand", lambda x, b: x * b, lambda i: np.bool_(i % 3 == 0))
simple("np_bool_branch", lambda x, b: x * 2.0 if b else x - 1.0, lambda i: np.bool_(i % 3 == 0))
simple("complex_operand", lambda x, c: (x * c).real, lambda i: complex(i, 1.0))
simple("np_complex_operand", lambda x, c: (x * c).real, lambda i: np.complex128(i + 1j))
simple("np_float16_operand", lambda x, c: x * c, lambda i: np.float16(i / 3), dtype=np.float16)
simple("longdouble", lambda x, c: x * c, lambda i: np.longdouble(i / 3))
simple("fraction", lambda x, c: x * float(c), lambda i: fractions.Fraction(i, 3))
simple("decimal", lambda x, c: x * float(c), lambda i: decimal.Decimal(i) / 4)
simple("slice_arg", lambda x, s: x[s] * 2.0, lambda i: slice(0, 1 + i % 3), shape=(4,))
simple("slice_step", lambda x, s: x[s] * 2.0, lambda i: slice(None, None, 1 + i % 2), shape=(4,))
simple("range_arg", lambda x, r: x[list(r)] * 2.0, lambda i: range(i % 3 + 1), shape=(4,))
simple("ellipsis_or_none", lambda x, s: x[s] * 2.0, lambda i: Ellipsis if i % 2 else None, shape=(4,))
simple(
    "dtype_arg",
    lambda x, d: x.astype(d) * 3.0,
    lambda i: [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)][i % 3],
)
simple(
    "dtype_class_arg", lambda x, d: x.astype(d) * 3.0, lambda i: [np.float32, np.float64, np.float16][i % 3]
)
simple("func_arg", lambda x, act: act(x) * 2.0, lambda i: [tt.tanh, tt.sigmoid, tt.relu][i % 3])
simple("lambda_arg_closure", lambda x, act: act(x), lambda i: (lambda k: lambda y: y * k)(float(i)))
simple(
    "partial_arg",
    lambda x, act: act(x),
    lambda i: functools.partial(tt.leaky_relu, negative_slope=0.1 * (i % 3)),
)
simple("str_arg", lambda x, s: getattr(tt, s)(x), lambda i: ["tanh", "sin", "exp"][i % 3])
simple("shape_tuple", lambda x, s: tt.reshape(x, s), lambda i: [(2, 3), (3, 2), (6,)][i % 3], shape=(6,))
simple("axis_none_int", lambda x, a: x.sum(axis=a), lambda i: [None, 0, 1, -1][i % 4], shape=(2, 3))
simple("axis_tuple", lambda x, a: x.sum(axis=a), lambda i: [(0, 1), (1,), (0,)][i % 3], shape=(2, 3))
simple("seed_int", lambda x, s: x + tt.randn(3, rng=s), lambda i: i % 4)
simple("generator_arg", lambda x, g: x + tt.randn(3, rng=g), lambda i: np.random.default_rng(i % 3))


def mk():
    g = np.random.default_rng(7)
    return {
        "f": lambda x, g: x + tt.randn(3, rng=g) + tt.rand(3, rng=g),
        "args": lambda i, p: ((rnd(i, (3,)), g), {}),
        "state": lambda: g.bit_generator.state["state"]["state"],
    }


tryc("same_generator_advancing", mk)


# objects holding arrays
@dataclasses.dataclass
class Batch:
    x: np.ndarray
    scale: float


simple("dataclass_arg", lambda x, b: x * b.x + b.scale, lambda i: Batch(rnd(i, (3,), salt=3), 0.5 * i))
simple(
    "namespace_arg",
    lambda x, b: x * b.x + b.scale,
    lambda i: types.SimpleNamespace(x=rnd(i, (3,), salt=3), scale=0.5 * i),
)
NT = collections.namedtuple("NT", "x scale")
simple("namedtuple_arg", lambda x, b: x * b.x + b.scale, lambda i: NT(rnd(i, (3,), salt=3), 0.5 * i))
simple(
    "ordereddict_arg",
    lambda x, b: x * b["x"] + b["scale"],
    lambda i: collections.OrderedDict(x=rnd(i, (3,), salt=3), scale=0.5 * i),
)
simple("deque_arg", lambda x, b: x * b[0], lambda i: collections.deque([rnd(i, (3,), salt=3)]))
simple("set_arg", lambda x, b: x * sum(b), lambda i: {i % 3, 5})
simple("frozenset_arg", lambda x, b: x * len(b), lambda i: frozenset(range(i % 3)))
simple("bytes_arg", lambda x, b: x * b[0], lambda i: bytes([i % 5]))
simple("object_array_arg", lambda x, b: x * b[0], lambda i: np.array([float(i), 1.0], dtype=object))
simple("list_of_floats", lambda x, b: x * tt.tensor(b), lambda i: [0.5 * i, 1.0, 2.0])
simple("tuple_mixed", lambda x, b: x * b[0] + b[1], lambda i: (0.5 * i, rnd(i, (3,), salt=2)))
simple(
    "recarray",
    lambda x, b: x * b["a"],
    lambda i: np.array([(float(i),), (1.0,), (2.0,)], dtype=[("a", "f8")]),
)
simple_refusal_ok(
    "matrix_subclass_arg", lambda x, b: x * np.asarray(b).ravel(), lambda i: np.matrix([[float(i), 1.0, 2.0]])
)
simple_refusal_ok(
    "masked_array",
    lambda x, b: x * b.filled(0.0),
    lambda i: np.ma.array([float(i), 1.0, 2.0], mask=[i % 2, 0, 0]),
)
simple("memmap_like_view", lambda x, b: x * b, lambda i: np.frombuffer(np.arange(3.0) * i))
simple(
    "datetime64",
    lambda x, b: x * (b - np.datetime64("2020-01-01")).astype(np.int64),
    lambda i: np.datetime64("2020-01-01") + i,
)
simple("structured_scalar", lambda x, b: x * b, lambda i: np.int8(i))
simple("uint8_scalar_wrap", lambda x, b: x * (b + np.uint8(250)), lambda i: np.uint8(i), dtype=np.float32)


# module and optimizer as arguments
def mk():
    ms = [nn.Linear(3, 2, rng=s, dtype=np.float64) for s in range(3)]

    def f(m, x):
        return m(x).sum()

    return {
        "f": f,
        "args": lambda i, p: ((ms[i % 3], rnd(i, (4, 3))), {}),
        "after": lambda i, out, a, k: out.backward(),
        "state": lambda: [list(m.parameters()) for m in ms],
    }


tryc("module_arg_cycle", mk)


def mk():
    ms = [nn.Linear(3, 2, rng=s, dtype=np.float64) for s in range(2)]
    opts = [tt.optim.SGD(m.parameters(), lr=0.1) for m in ms]

    def f(m, opt, x):
        opt.zero_grad()
        loss = (m(x) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    return {
        "f": f,
        "args": lambda i, p: ((ms[i % 2], opts[i % 2], rnd(i, (4, 3))), {}),
        "state": lambda: [list(m.parameters()) for m in ms],
    }


tryc("module_opt_args", mk)


def mk():
    ms = [nn.Linear(3, 2, rng=s, dtype=np.float64) for s in range(2)]

    def f(x, m=ms[0]):
        return m(x).sum()

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (4, 3)),), ({} if i % 2 else {"m": ms[1]})),
        "state": lambda: [list(m.parameters()) for m in ms],
    }


tryc("module_default_kw", mk)


def mk():
    def f(x, scale=[1.0]):  # noqa: B006 - the point of the case
        return x * scale[0]

    def before(i, p):
        f.__defaults__[0][0] = float(i)

    return {"f": f, "args": lambda i, p: ((rnd(i, (3,)),), {}), "before": before}


tryc("mutable_default_changed", mk)


def mk():
    def f(x, scale=1.0):
        return x * scale

    def before(i, p):
        if i == 3:
            f.__defaults__ = (2.0,)

    return {"f": f, "args": lambda i, p: ((rnd(i, (3,)),), {}), "before": before}


tryc("defaults_replaced", mk)


def mk():
    def f(x, *, scale=1.0):
        return x * scale

    def before(i, p):
        if i == 3:
            f.__kwdefaults__ = {"scale": 2.0}

    return {"f": f, "args": lambda i, p: ((rnd(i, (3,)),), {}), "before": before}


tryc("kwdefaults_replaced", mk)


# ---- s8
def build_drop(drop_rng):
    tt.manual_seed(0)
    m = nn.Sequential(
        nn.Linear(3, 5, rng=0, dtype=np.float64),
        nn.BatchNorm1d(5),
        nn.Tanh(),
        nn.Dropout(0.25, rng=drop_rng),
        nn.Linear(5, 2, rng=1, dtype=np.float64),
    )
    return m, tt.optim.Adam(m.parameters(), lr=0.01)


for copts_name, copts, sched in [
    ("cache1_cycle3", {"cache_size": 1}, lambda i: 2 + i % 3),
    ("cache2_cycle3", {"cache_size": 2}, lambda i: 2 + i % 3),
    ("limit_exceeded", {}, lambda i: 2 + i),
    ("limit_then_back", {}, lambda i: 2 + i if i < 12 else 2),
    ("check_true", {"check": True}, lambda i: 2 + (i >= 5)),
    ("fuse_true_bn", {"fuse": True}, lambda i: 4),
]:
    for drop_rng in (None, 5):

        def mk(copts=copts, sched=sched, drop_rng=drop_rng):
            m, opt = build_drop(drop_rng)
            lossf = nn.MSELoss()

            def step(x, y):
                opt.zero_grad()
                loss = lossf(m(x), y)
                loss.backward()
                opt.step()
                return loss

            def args(i, p):
                b = sched(i)
                return (rnd(i, (b, 3)), rnd(i, (b, 2), salt=1)), {}

            return {
                "f": step,
                "args": args,
                "copts": copts,
                "state": lambda: (
                    [(k, v) for k, v in m.named_parameters()] + [(k, v) for k, v in m.named_buffers()],
                    tt.get_rng_state() if drop_rng is None else None,
                ),
            }

        tryc(f"step_{copts_name}_{drop_rng}", mk, 16)

# caller reseeds between calls
for how in ("manual_seed_each", "manual_seed_at_3", "set_state_back"):

    def mk(how=how):
        tt.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 4, rng=0, dtype=np.float64), nn.Dropout(0.5))
        saved = {}

        def f(x):
            return m(x) + tt.randn(4)

        def before(i, p):
            if how == "manual_seed_each":
                tt.manual_seed(i % 2)
            if how == "manual_seed_at_3" and i == 3:
                tt.manual_seed(11)
            if how == "set_state_back":
                if i == 2:
                    saved["s"] = tt.get_rng_state()
                if i == 5:
                    tt.set_rng_state(saved["s"])

        return {
            "f": f,
            "args": lambda i, p: ((rnd(i, (2, 3)),), {}),
            "before": before,
            "ctx": lambda i: tt.no_grad(),
        }

    tryc("rng_" + how, mk)


# compiled method decorator on two instances
def mk():
    class Net(nn.Module):
        def __init__(self, s, k):
            super().__init__()
            self.lin = nn.Linear(3, 2, rng=s, dtype=np.float64)
            self.k = k

        @tt.compile
        def forward_c(self, x):
            return self.lin(x) * self.k

    a, b = Net(0, 2.0), Net(1, 3.0)

    def f(x, which):
        return (a if which else b).forward_c(x).sum()

    def before(i, p):
        if i == 6:
            a.k = 5.0

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (2, 3)), i % 2 == 0), {}),
        "before": before,
        "after": lambda i, out, ar, k: out.backward(),
        "state": lambda: [list(a.parameters()), list(b.parameters())],
    }


tryc("method_decorator", mk)


# dropout p changed by caller
def mk():
    tt.manual_seed(0)
    d = nn.Dropout(0.5, rng=3)

    def before(i, p):
        if i == 4:
            d.p = 0.2
        if i == 7:
            d.p = 0.0

    return {"f": lambda x: d(x) * 1.0, "args": lambda i, p: ((rnd(i, (3, 4)),), {}), "before": before}


tryc("dropout_p_changed", mk)


# batchnorm momentum changed and num_batches / momentum None
def mk():
    bn = nn.BatchNorm1d(3)

    def before(i, p):
        if i == 3:
            bn.momentum = None
        if i == 6:
            bn.momentum = 0.5
        if i == 8:
            bn.eps = 1e-2

    return {
        "f": lambda x: bn(x),
        "args": lambda i, p: ((rnd(i, (4, 3), np.float32),), {}),
        "before": before,
        "state": lambda: list(bn.named_buffers()),
        "ctx": lambda i: tt.no_grad(),
    }


tryc("bn_momentum_changed", mk)

# ---- s10
for fname, fn in FNS.items():
    for sname, sch in {
        "zero_at_3": lambda i: (0, 3) if i == 3 else (3, 3),
        "zero_cols": lambda i: (3, 0) if i % 2 else (3, 3),
        "bigendian": None,
        "bigendian_alt": None,
        "f16": None,
        "i32": None,
        "u8": None,
        "bool": None,
        "c128": None,
    }.items():

        def mk(fn=fn, sname=sname, sch=sch):
            def args(i, p):
                if sch is not None:
                    return (rnd(i, sch(i)),), {}
                a = rnd(i, (3, 3))
                if sname == "bigendian":
                    a = a.astype(">f8")
                if sname == "bigendian_alt":
                    a = a.astype(">f8") if i % 2 else a
                if sname == "f16":
                    a = a.astype(np.float16)
                if sname == "i32":
                    a = (a * 3).astype(np.int32)
                if sname == "u8":
                    a = (np.abs(a) * 3).astype(np.uint8)
                if sname == "bool":
                    a = a > 0
                if sname == "c128":
                    a = a + 1j * rnd(i, (3, 3), salt=3)
                return (a,), {}

            return {"f": fn, "args": args}

        tryc(f"{fname}_{sname}", mk, 6)


def simple2(name, fn, argsf, n=8):
    tryc(name, lambda: {"f": fn, "args": argsf}, n)


simple2(
    "dict_keys_swap",
    lambda d: sum(v.sum() * (k == "a") for k, v in d.items()),
    lambda i, p: (({"a" if i % 2 else "b": rnd(i, (2,))},), {}),
)
simple2(
    "dict_int_keys",
    lambda d: d[0] * 2.0 + d[1],
    lambda i, p: (
        (
            {0: rnd(i, (2,)), 1: rnd(i, (2,), salt=1)}
            if i % 2
            else {1: rnd(i, (2,)), 0: rnd(i, (2,), salt=1)},
        ),
        {},
    ),
)
simple2(
    "dict_mixed_keys",
    lambda d: d[0] * 2.0 + d["b"],
    lambda i, p: (({0: rnd(i, (2,)), "b": rnd(i, (2,), salt=1)},), {}),
)
simple2("dict_tuple_keys", lambda d: d[(0, 1)] * 2.0, lambda i, p: (({(0, 1): rnd(i, (2,))},), {}))


def same_in_tree(i, p):
    x = rnd(i, (2,))
    y = rnd(i, (2,), salt=1)
    return (({"a": x, "b": x if i % 2 else y},), {})


simple2("same_in_tree", lambda d: d["a"] * d["b"] + (1.0 if d["a"] is d["b"] else 0.0), same_in_tree)


def same_pos_and_tree(i, p):
    x = rnd(i, (2,))
    y = rnd(i, (2,), salt=1)
    return ((x, [x if i % 3 == 0 else y]), {})


simple2("same_pos_and_tree", lambda a, lst: a * lst[0] - lst[0], same_pos_and_tree)


def t_and_data(i, p):
    t = tt.tensor(rnd(i, (2,)))
    return ((t, t.data if i % 2 else rnd(i, (2,), salt=1)), {})


simple2("tensor_and_its_data", lambda t, d: t * d + d, t_and_data)


def t_and_view(i, p):
    a = rnd(i, (4,))
    return ((a, a[::2] if i % 2 else rnd(i, (2,), salt=1)), {})


simple2("array_and_its_view", lambda a, v: a[:2] * v, t_and_view)


def mkp():
    W = nn.Parameter(rnd(0, (2,)))

    def f(w, x):
        return (w * x + W).sum()

    def param_arg(i, p):
        return ((W if i % 2 else tt.tensor(rnd(i, (2,)), requires_grad=True), rnd(i, (2,))), {})

    def after(i, out, a, k):
        out.backward()
        return a[0].grad

    return {"f": f, "args": param_arg, "after": after, "state": lambda: W}


tryc("param_passed_and_closed", mkp)


# ---- non-leaf inputs, requires_grad branches, detached feedback, replaced parameters
def mk():
    A = tt.tensor(rnd(0, (3, 3)), requires_grad=True)
    W = tt.tensor(rnd(1, (3, 3)), requires_grad=True)
    f = lambda h: tt.tanh(h @ W)

    def args(i, p):
        return ((rnd(i, (2, 3)) @ A if i % 2 else tt.tensor(rnd(i, (2, 3)))),), {}

    def after(i, out, a, k):
        out.sum().backward()
        return None

    return {"f": f, "args": args, "after": after, "state": lambda: (A, W)}


tryc("nonleaf_input", mk)


def mk():
    W = tt.tensor(rnd(1, (3, 3)), requires_grad=True)
    f = lambda x: x @ W * (2.0 if x.requires_grad else 3.0)

    def args(i, p):
        return ((tt.tensor(rnd(i, (2, 3)), requires_grad=i % 3 == 0)),), {}

    def after(i, out, a, k):
        out.sum().backward()
        return a[0].grad

    return {"f": f, "args": args, "after": after, "state": lambda: W}


tryc("requires_grad_branch", mk)


def mk():
    W = tt.tensor(rnd(1, (3, 3)), requires_grad=True)
    f = lambda x: tt.tanh(x @ W)

    def args(i, p):
        return (
            (p.detach() if p is not None and i % 2 else (p if p is not None else tt.tensor(rnd(0, (2, 3))))),
        ), {}

    def after(i, out, a, k):
        if i % 4 == 3:
            out.sum().backward()
        return None

    return {"f": f, "args": args, "after": after, "state": lambda: W}


tryc("feedback_detach_mix", mk)


def mk():
    m = nn.Linear(3, 3, rng=0, dtype=np.float64)
    f = lambda x: m(x)

    def before(i, p):
        if i == 4:
            m.weight = nn.Parameter(rnd(5, (3, 3)))
        if i == 6:
            m.bias = None

    def after(i, out, a, k):
        out.sum().backward()
        return None

    return {
        "f": f,
        "args": lambda i, p: ((rnd(i, (2, 3)),), {}),
        "before": before,
        "after": after,
        "state": lambda: list(m.parameters()),
    }


tryc("param_replaced_bias_none", mk)


@pytest.mark.parametrize("name", sorted(MISC))
def test_misc(name):
    make, n, refusal_ok, _ = MISC[name]
    check(make, n=n, refusal_ok=refusal_ok)

"""A differential fuzzer of tinytensor's own: random straight-line programs, checked against
themselves (issue 20).

    python -m tests.fuzz --programs 10000 [--seed 0] [--out fuzz-failures]
    python -m tests.fuzz --replay fuzz-failures/<file>.json

A program is 2-6 steps drawn from KINDS, each one an op of the op table (its spec row in
tinytensor/specs.py is named by the kind, and must exist), applied to the program's inputs and
earlier results: random ranks 0-4 with size-0 and size-1 axes, negative axes, broadcasting both
ways, Python numbers on either side, float32 and float64, inputs passed as transposed,
negative-stride or strided views. Inputs of an op with a domain (log, arcsin, ...) are mapped
into it first by a smooth squashing (sigmoid, tanh), recorded too. Every step's forward value is
compared with NumPy's when NumPy gives one (a step NumPy refuses is not drawn), and for each
program the checks are:

  vjp        eager `backward` and `tt.vjp` give the same gradients, bit for bit
  jvp        eager `y.jvp` and `tt.jvp` give the same tangent, bit for bit
  adjoint    <u, J v> == <J^T u, v> (float64)
  fd         <u, J v> against central differences of <u, f> (float64; skipped where the two
             step sizes disagree: a kink or a jump is crossed)
  float32    float32 inputs give a float32 value, gradients and tangent
  compiled   tt.compile of the function, its gradient and its JVP, replayed on fresh inputs,
             equal the eager results on those inputs bit for bit
  hvp        (a third of the programs) tt.hvp against differences of gradients

Each failing program is shrunk (the shortest failing prefix, then unused steps dropped) and
stored as JSON under --out with the failure, its readable form and its inputs; `--replay` runs
one again. The last line printed is the figure: programs, checks, failures.
"""

import argparse
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np
import scipy.special

import tinytensor as tt
from tinytensor.specs import EXTRA_SPECS, OP_SPECS

H_FD = (1e-6, 1e-5)      # the two central-difference steps (float64)


# ----- the kinds: how to draw parameters for given input shapes, and how to apply them --------------
def _expit(x):
    return scipy.special.expit(x)


# Domain maps, the same in tinytensor and NumPy: smooth, into the op's domain.
DOMAINS = {
    None: (lambda x: x, lambda x: x),
    "pos": (lambda x: tt.sigmoid(x) + 0.5, lambda x: _expit(x) + 0.5),
    "unit": (lambda x: tt.tanh(x) * 0.9, lambda x: np.tanh(x) * 0.9),
    "above1": (lambda x: tt.sigmoid(x) + 1.2, lambda x: _expit(x) + 1.2),
    "moderate": (lambda x: tt.tanh(x) * 1.2, lambda x: np.tanh(x) * 1.2),
    "away": (lambda x: x * x + 0.5, lambda x: x * x + 0.5),
}

UNARY = {   # name: (spec row, tinytensor, NumPy, domain)
    "neg": ("neg", lambda x: -x, np.negative, None),
    "exp": ("exp", tt.exp, np.exp, "moderate"),
    "log": ("log", tt.log, np.log, "pos"),
    "sin": ("sin", tt.sin, np.sin, None),
    "cos": ("cos", tt.cos, np.cos, None),
    "tanh": ("tanh", tt.tanh, np.tanh, None),
    "sigmoid": ("sigmoid", tt.sigmoid, _expit, None),
    "relu": ("relu", tt.relu, lambda x: np.maximum(x, 0), None),
    "sqrt": ("sqrt", tt.sqrt, np.sqrt, "pos"),
    "square": ("square", tt.square, np.square, None),
    "abs": ("abs", tt.abs, np.abs, None),
    "log1p": ("log1p", tt.log1p, np.log1p, "pos"),
    "expm1": ("expm1", tt.expm1, np.expm1, "moderate"),
    "reciprocal": ("reciprocal", tt.reciprocal, np.reciprocal, "away"),
    "tan": ("tan", tt.tan, np.tan, "moderate"),
    "arcsin": ("arcsin", tt.arcsin, np.arcsin, "unit"),
    "arccos": ("arccos", tt.arccos, np.arccos, "unit"),
    "arctan": ("arctan", tt.arctan, np.arctan, None),
    "sinh": ("sinh", tt.sinh, np.sinh, "moderate"),
    "cosh": ("cosh", tt.cosh, np.cosh, "moderate"),
    "arcsinh": ("arcsinh", tt.arcsinh, np.arcsinh, None),
    "arccosh": ("arccosh", tt.arccosh, np.arccosh, "above1"),
    "arctanh": ("arctanh", tt.arctanh, np.arctanh, "unit"),
    "sinc": ("sinc", tt.sinc, np.sinc, None),
    "erf": ("erf", tt.erf, scipy.special.erf, None),
    "softplus": ("softplus", tt.softplus, lambda x: np.logaddexp(0, x), None),
    "gelu": ("gelu", tt.gelu, lambda x: x * scipy.special.ndtr(x), None),
    "leaky_relu": ("leaky_relu", lambda x: tt.leaky_relu(x, 0.1),
                   lambda x: np.where(x > 0, x, 0.1 * x), None),
    "clone": ("clone", tt.clone, np.copy, None),
    # sign-like factors: no gradient through the factor, the product keeps x's
    "sign": ("abs", lambda x: x * tt.sign(x), lambda x: x * np.sign(x), None),
    "floor": ("remainder", lambda x: x - tt.floor(x), lambda x: x - np.floor(x), None),
    "round": ("remainder", lambda x: x - tt.round(x), lambda x: x - np.round(x), None),
    "trunc": ("remainder", lambda x: x * tt.trunc(x), lambda x: x * np.trunc(x), None),
}

BINARY = {   # name: (spec row, tinytensor, NumPy, domain of a, domain of b)
    "add": ("add", lambda a, b: a + b, np.add, None, None),
    "sub": ("sub", lambda a, b: a - b, np.subtract, None, None),
    "mul": ("mul", lambda a, b: a * b, np.multiply, None, None),
    "div": ("div", lambda a, b: a / b, np.divide, None, "away"),
    "power": ("power", lambda a, b: a ** b, np.power, "pos", "moderate"),
    "maximum": ("maximum", tt.maximum, np.maximum, None, None),
    "minimum": ("minimum", tt.minimum, np.minimum, None, None),
    "fmax": ("fmax", tt.fmax, np.fmax, None, None),
    "fmin": ("fmin", tt.fmin, np.fmin, None, None),
    "hypot": ("hypot", tt.hypot, np.hypot, None, None),
    "arctan2": ("arctan2", tt.arctan2, np.arctan2, None, "away"),
    "logaddexp": ("logaddexp", tt.logaddexp, np.logaddexp, None, None),
    "logaddexp2": ("logaddexp2", tt.logaddexp2, np.logaddexp2, None, None),
    "remainder": ("remainder", lambda a, b: a % b, np.remainder, None, "away"),
    "where": ("where", lambda a, b: tt.where(_positive(a), a, b),
              lambda a, b: np.where(a > 0, a, b), None, None),
    "clip": ("clip", lambda a, b: tt.clip(a, b, None), lambda a, b: np.clip(a, b, None), None, None),
}

REDUCTIONS = {   # name: (spec row, tinytensor, NumPy)
    "sum": ("sum", tt.sum, np.sum), "mean": ("mean", tt.mean, np.mean), "max": ("max", tt.max, np.max),
    "min": ("min", tt.min, np.min), "prod": ("prod", tt.prod, np.prod),
    "logsumexp": ("logsumexp", tt.logsumexp, lambda x, axis, keepdims: np.reshape(   # NumPy's shapes
        scipy.special.logsumexp(x, axis=axis, keepdims=keepdims),
        np.sum(x, axis=axis, keepdims=keepdims).shape)),
    "var": ("var", tt.var, np.var), "std": ("std", tt.std, np.std),
    "var1": ("var", lambda x, **p: tt.var(x, ddof=1, **p), lambda x, **p: np.var(x, ddof=1, **p)),
}


def _data(x):
    return x.data if isinstance(x, tt.Tensor) else np.asarray(x)


def _positive(x):
    """x > 0 as a user writes it: a Tensor's comparison (tt.compile records it and recomputes
    the mask on every call), a plain array's for a number."""
    return x > 0 if isinstance(x, tt.Tensor) else np.asarray(x) > 0


def _softmax_ref(x, axis):   # PyTorch's convention on an empty axis (SciPy's raises)
    return x.copy() if x.size == 0 else scipy.special.softmax(x, axis=axis)


def _log_softmax_ref(x, axis):
    return x.copy() if x.size == 0 else scipy.special.log_softmax(x, axis=axis)


def _axis(rng, ndim, negative=0.5):
    a = int(rng.integers(ndim))
    return a - ndim if rng.random() < negative else a


def _axes(rng, ndim):
    k = int(rng.integers(1, ndim + 1))
    chosen = rng.choice(ndim, size=k, replace=False)
    return tuple(int(a) - ndim if rng.random() < 0.5 else int(a) for a in chosen)


def _one_input_params(kind, rng, shape):
    """Parameters of a one-input kind for an input of `shape` (None: not applicable)."""
    nd = len(shape)
    if kind in REDUCTIONS:
        choice = rng.integers(3) if nd else 0
        axis = None if choice == 0 else _axis(rng, nd) if choice == 1 else _axes(rng, nd)
        return dict(axis=axis, keepdims=bool(rng.random() < 0.4))
    if kind in ("softmax", "log_softmax", "cumsum", "flip"):
        return dict(axis=_axis(rng, nd)) if nd else (dict(axis=None) if kind in ("cumsum", "flip") else None)
    if kind == "transpose":
        perm = [int(a) for a in rng.permutation(nd)]
        return dict(axes=tuple(a - nd if rng.random() < 0.5 else a for a in perm))
    if kind in ("moveaxis", "swapaxes"):
        return dict(a=_axis(rng, nd), b=_axis(rng, nd)) if nd else None
    if kind == "expand_dims":
        return dict(axis=int(rng.integers(-nd - 1, nd + 1)))
    if kind == "squeeze":
        ones = [i for i, n in enumerate(shape) if n == 1]
        return dict(axis=tuple(i - nd if rng.random() < 0.5 else i for i in ones)) if ones else None
    if kind == "reshape":
        return dict(shape=(-1,) if rng.random() < 0.5 or 0 in shape else tuple(shape[::-1]))
    if kind == "roll":
        return dict(shift=int(rng.integers(-3, 4)), axis=_axis(rng, nd) if nd else None)
    if kind == "diff":
        return dict(axis=_axis(rng, nd)) if nd else None
    if kind == "getitem":
        if not nd:
            return None
        axis = int(rng.integers(nd))
        index = [slice(None)] * nd
        index[axis] = ((slice(None, None, -1), slice(1, None, 2), slice(0, 1))[int(rng.integers(3))]
                       if rng.random() < 0.7 or shape[axis] == 0
                       else int(rng.integers(-shape[axis], shape[axis])))
        return dict(index=_encode_index(index))
    if kind == "take":
        n = int(np.prod(shape)) if nd else 1
        if n == 0:
            return dict(indices=[], axis=None)
        k = int(rng.integers(0, 4))
        return dict(indices=[int(i) for i in rng.integers(-n, n, k)], axis=None)
    if kind == "norm":
        if not nd:
            return None
        return dict(ord=[1, 2, 1.5, 3, np.inf][int(rng.integers(5))], axis=_axis(rng, nd))
    if kind == "gram":       # x @ swapaxes(x): matmul of x with itself
        return {} if nd >= 1 else None
    if kind in UNARY:
        return {}
    raise KeyError(kind)


def _encode_index(index):
    return [["s", s.start, s.stop, s.step] if isinstance(s, slice) else ["i", s] for s in index]


def _decode_index(index):
    return tuple(slice(*s[1:]) if s[0] == "s" else s[1] for s in index)


def _apply_one(kind, x, p, lib):
    """kind applied to x with parameters p, in tinytensor (lib == "tt") or NumPy."""
    T = lib == "tt"
    if kind in UNARY:
        _, fun, ref, domain = UNARY[kind]
        return (fun if T else ref)(DOMAINS[domain][0 if T else 1](x))
    if kind in REDUCTIONS:
        return (REDUCTIONS[kind][1] if T else REDUCTIONS[kind][2])(x, axis=p["axis"], keepdims=p["keepdims"])
    if kind == "softmax":
        return tt.softmax(x, axis=p["axis"]) if T else _softmax_ref(x, p["axis"])
    if kind == "log_softmax":
        return tt.log_softmax(x, axis=p["axis"]) if T else _log_softmax_ref(x, p["axis"])
    if kind == "cumsum":
        return (tt.cumsum if T else np.cumsum)(x, axis=p["axis"])
    if kind == "flip":
        return (tt.flip if T else np.flip)(x, axis=p["axis"])
    if kind == "transpose":
        return (tt.transpose if T else np.transpose)(x, p["axes"])
    if kind == "moveaxis":
        return (tt.moveaxis if T else np.moveaxis)(x, p["a"], p["b"])
    if kind == "swapaxes":
        return (tt.swapaxes if T else np.swapaxes)(x, p["a"], p["b"])
    if kind == "expand_dims":
        return (tt.expand_dims if T else np.expand_dims)(x, p["axis"])
    if kind == "squeeze":
        return (tt.squeeze if T else np.squeeze)(x, axis=p["axis"])
    if kind == "reshape":
        return (tt.reshape if T else np.reshape)(x, p["shape"])
    if kind == "roll":
        return (tt.roll if T else np.roll)(x, p["shift"], axis=p["axis"])
    if kind == "diff":
        return (tt.diff if T else np.diff)(x, axis=p["axis"])
    if kind == "getitem":
        return x[_decode_index(p["index"])]
    if kind == "take":
        return (tt.take if T else np.take)(x, p["indices"], axis=p["axis"])
    if kind == "norm":
        return (tt.linalg.norm if T else np.linalg.norm)(x, ord=p["ord"], axis=p["axis"])
    if kind == "gram":
        return (tt.matmul(x, tt.swapaxes(x, -1, -2)) if T and x.ndim >= 2 else tt.matmul(x, x) if T
                else x @ np.swapaxes(x, -1, -2) if x.ndim >= 2 else x @ x)
    raise KeyError(kind)


ONE_INPUT = list(UNARY) + list(REDUCTIONS) + [
    "softmax", "log_softmax", "cumsum", "flip", "transpose", "moveaxis", "swapaxes", "expand_dims",
    "squeeze", "reshape", "roll", "diff", "getitem", "take", "norm", "gram"]
TWO_INPUT = list(BINARY) + ["concatenate", "stack", "tensordot", "inner"]
SPEC_ROW = {   # the spec row each kind exercises (checked to exist in tinytensor/specs.py)
    **{k: v[0] for k, v in UNARY.items()}, **{k: v[0] for k, v in BINARY.items()},
    **{k: v[0] for k, v in REDUCTIONS.items()},
    "softmax": "softmax", "log_softmax": "log_softmax", "cumsum": "cumsum", "flip": "flip",
    "transpose": "transpose", "moveaxis": "moveaxis", "swapaxes": "swapaxes", "expand_dims": "expand_dims",
    "squeeze": "squeeze", "reshape": "reshape", "roll": "roll", "diff": "diff", "getitem": "getitem",
    "take": "take", "norm": "norm(vector)", "gram": "matmul", "concatenate": "concatenate",
    "stack": "stack", "tensordot": "tensordot", "inner": "inner"}


def _in_domain(domain, x, is_number, T):
    if is_number:                       # a Python number stays one (NumPy's weak scalars)
        return abs(x) + 0.5 if domain else x
    return DOMAINS[domain][0 if T else 1](x)


def _apply_two(kind, a, b, p, lib, numbers=(False, False)):
    T = lib == "tt"
    if kind in BINARY:
        _, fun, ref, da, db = BINARY[kind]
        a, b = _in_domain(da, a, numbers[0], T), _in_domain(db, b, numbers[1], T)
        return (fun if T else ref)(a, b)
    if kind == "concatenate":
        return (tt.concatenate if T else np.concatenate)([a, b], axis=p["axis"])
    if kind == "stack":
        return (tt.stack if T else np.stack)([a, b], axis=p["axis"])
    if kind == "tensordot":
        return (tt.tensordot if T else np.tensordot)(a, b, axes=p["axes"])
    if kind == "inner":
        return (tt.inner if T else np.inner)(a, b)
    raise KeyError(kind)


# ----- programs ---------------------------------------------------------------------------------------
def _random_shape(rng, max_rank=4):
    rank = int(rng.choice([0, 1, 2, 3, 4], p=[0.15, 0.3, 0.3, 0.17, 0.08]))
    sizes = [0, 1, 2, 3, 4]
    return tuple(int(rng.choice(sizes, p=[0.06, 0.24, 0.3, 0.3, 0.1])) for _ in range(min(rank, max_rank)))


def _broadcast_partner(rng, shape):
    """A shape that broadcasts with `shape` (in either direction)."""
    nd = len(shape)
    out = list(shape[int(rng.integers(0, nd + 1)):]) if nd else []
    out = [1 if rng.random() < 0.3 else n for n in out]
    if rng.random() < 0.3 and len(out) < 4:   # the other way round: the partner has more axes
        out = [int(rng.integers(1, 4))] + out
    return tuple(out)


def _sample(rng, shape, view, dtype):
    """Normal values of `shape`, as a view of the kind asked (c: contiguous, T: transposed,
    neg: negative stride, strided: every other entry)."""
    shape = tuple(shape)
    if view == "T" and len(shape) >= 2:
        x = rng.standard_normal(shape[::-1]).T
    elif view == "neg" and len(shape) >= 1:
        x = rng.standard_normal(shape)[..., ::-1] if shape[-1] else rng.standard_normal(shape)
    elif view == "strided" and len(shape) >= 1:
        x = rng.standard_normal(shape[:-1] + (2 * shape[-1],))[..., ::2]
    else:
        x = rng.standard_normal(shape)
    return x.astype(dtype, copy=False) if dtype != np.float64 else x


def _typed(x, dtype, view):
    """x (float64) in dtype, keeping the kind of view."""
    if dtype == np.float64:
        return x
    if view == "T" and x.ndim >= 2:
        return x.T.astype(dtype).T
    if view == "neg" and x.ndim >= 1 and x.shape[-1]:
        return x[..., ::-1].astype(dtype)[..., ::-1]
    if view == "strided" and x.ndim >= 1:
        y = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype)
        y[..., ::2] = x
        return y[..., ::2]
    return x.astype(dtype)


def generate(rng, n_steps=None):
    """A random program: {"inputs": [{"shape", "view"}], "steps": [{"kind", "args", "params"}]}."""
    inputs, steps = [], []
    env = {}     # ("in", i) or ("step", i) -> its NumPy float64 value (for shapes and references)

    def new_input(shape):
        view = ["c", "T", "neg", "strided"][int(rng.choice(4, p=[0.55, 0.15, 0.15, 0.15]))]
        inputs.append(dict(shape=list(shape), view=view))
        env[("in", len(inputs) - 1)] = _sample(rng, shape, view, np.float64)
        return ["in", len(inputs) - 1]

    new_input(_random_shape(rng))
    n_steps = int(rng.integers(2, 7)) if n_steps is None else n_steps
    tries = 0
    while len(steps) < n_steps and tries < 60:
        tries += 1
        keys = list(env)
        src = keys[-1] if rng.random() < 0.6 else keys[int(rng.integers(len(keys)))]
        x = env[src]
        if rng.random() < 0.6:
            kind = ONE_INPUT[int(rng.integers(len(ONE_INPUT)))]
            params = _one_input_params(kind, rng, x.shape)
            if params is None:
                continue
            args = [list(src)]
        else:
            kind = TWO_INPUT[int(rng.integers(len(TWO_INPUT)))]
            params, args = _two_input_args(kind, rng, x, src, env, new_input)
            if args is None:
                continue
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = _run_step(kind, args, params, env, "np")
        except Exception:        # NumPy refuses it: not a program to draw
            continue
        expected = np.asarray(expected)
        if expected.dtype.kind != "f" or not np.isfinite(expected).all() or (
                expected.size and np.abs(expected).max() > 1e6):
            continue
        steps.append(dict(kind=kind, args=args, params=params))
        env[("step", len(steps) - 1)] = expected
    return dict(inputs=inputs, steps=steps)


def _two_input_args(kind, rng, x, src, env, new_input):
    """(params, args) for a two-input kind with first input x (None, None: not applicable)."""
    shape, nd = x.shape, x.ndim
    if kind in BINARY:
        r = rng.random()
        if r < 0.25:                         # a Python number on either side
            number = float(np.round(rng.standard_normal(), 2))
            return {}, ([list(src), ["num", number]] if rng.random() < 0.5 else [["num", number], list(src)])
        if r < 0.45:                         # an earlier value, when it broadcasts
            other = list(env)[int(rng.integers(len(env)))]
            try:
                np.broadcast_shapes(shape, env[other].shape)
            except ValueError:
                return None, None
            b = list(other)
        else:
            b = new_input(_broadcast_partner(rng, shape))
        return {}, ([list(src), b] if rng.random() < 0.5 else [b, list(src)])
    if kind in ("concatenate", "stack"):
        if kind == "concatenate" and not nd:
            return None, None
        axis = _axis(rng, nd + (kind == "stack"))
        other = list(shape)
        if kind == "concatenate":
            other[axis] = int(rng.integers(0, 3))
        return dict(axis=axis), [list(src), new_input(tuple(other))]
    if kind == "tensordot":
        if not nd:
            return None, None
        k = int(rng.integers(0, min(nd, 2) + 1))
        a_axes = [int(a) for a in rng.choice(nd, size=k, replace=False)]
        other_free = [int(rng.integers(0, 3)) for _ in range(int(rng.integers(0, 2)))]
        b_shape = [shape[a] for a in a_axes] + other_free
        order = [int(i) for i in rng.permutation(len(b_shape))]
        b_shape = [b_shape[i] for i in order]
        b_axes = [order.index(i) for i in range(k)]
        a_axes = [a - nd if rng.random() < 0.5 else a for a in a_axes]
        return dict(axes=[a_axes, b_axes]), [list(src), new_input(tuple(b_shape))]
    if kind == "inner":
        b_shape = (tuple(int(rng.integers(0, 3)) for _ in range(int(rng.integers(0, 2)))) + shape[-1:]
                   if nd else ())
        return {}, [list(src), new_input(b_shape)]
    raise KeyError(kind)


def _run_step(kind, args, params, env, lib):
    vals = [float(a[1]) if a[0] == "num" else env[tuple(a)] for a in args]
    if kind in ONE_INPUT:
        return _apply_one(kind, vals[0], params, lib)
    return _apply_two(kind, vals[0], vals[1], params, lib, tuple(a[0] == "num" for a in args))


def execute(program, xs, lib="tt"):
    """Run `program` on inputs xs (Tensors or arrays); returns the last step's value."""
    env = {("in", i): x for i, x in enumerate(xs)}
    out = xs[0]
    for i, step in enumerate(program["steps"]):
        out = _run_step(step["kind"], step["args"], step["params"], env, lib)
        env[("step", i)] = out
    return out


def describe(program):
    """The program as readable lines: v0 = inputs, s1 = kind(args, params)."""
    lines = [f"in{i}: shape {tuple(x['shape'])}, view {x['view']}" for i, x in enumerate(program["inputs"])]
    for i, s in enumerate(program["steps"]):
        args = ", ".join(repr(a[1]) if a[0] == "num" else f"{'in' if a[0] == 'in' else 's'}{a[1]}"
                         for a in s["args"])
        params = ", ".join(f"{k}={v!r}" for k, v in s["params"].items())
        lines.append(f"s{i} = {s['kind']}({args}{', ' + params if params else ''})")
    return "\n".join(lines)


# ----- the checks ---------------------------------------------------------------------------------------
class Failure(Exception):
    pass


def _close(a, b, scale, rtol):
    return abs(a - b) <= rtol * scale + 1e-12


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def _same_to_rounding(a, b):
    a, b = np.asarray(a), np.asarray(b)
    scale = np.max(np.abs(b[np.isfinite(b)]), initial=0) or 1
    return (a.shape == b.shape and a.dtype == b.dtype and np.array_equal(np.isnan(a), np.isnan(b))
            and np.allclose(a, b, rtol=1e-12, atol=1e-12 * scale, equal_nan=True))


def _inputs(program, rng, dtype=np.float64):
    return [_sample(rng, x["shape"], x["view"], dtype) for x in program["inputs"]]


def _used(program):
    """Indices of the inputs the program reads (an input may be drawn and then not used)."""
    used = {0} if not program["steps"] else set()
    for s in program["steps"]:
        used.update(a[1] for a in s["args"] if a[0] == "in")
    return used


def check(program, rng, hvp=False, stats=None):
    """Run every check on `program`; returns the number of checks run. Raises Failure."""
    stats = {} if stats is None else stats
    n = 0

    def f(*xs):
        return execute(program, xs)

    xs = _inputs(program, rng)
    with tt.no_grad():
        y0 = f(*[tt.tensor(x) for x in xs])
    y0 = _data(y0)
    if y0.dtype.kind != "f":
        return 0
    u = rng.standard_normal(y0.shape)
    vs = [rng.standard_normal(x.shape) for x in xs]
    finite = bool(np.isfinite(y0).all())

    # eager reverse and forward mode
    leaves = [tt.tensor(x, requires_grad=True) for x in xs]
    y = f(*leaves)
    if not isinstance(y, tt.Tensor) or not y.requires_grad:
        return 0
    eager_tangent = y.jvp({leaf: v for leaf, v in zip(leaves, vs)})
    y.backward(u)
    eager_grads = [leaf.grad if leaf.grad is not None else np.zeros_like(x) for leaf, x in zip(leaves, xs)]

    # functional, on the same (contiguous) arrays the eager Tensors copied: bit for bit
    copies = [leaf.data for leaf in leaves]
    out, back = tt.vjp(f, *copies)
    grads = back(u)
    n += 1
    if not _same(out, y0) or not all(_same(g, e) for g, e in zip(grads, eager_grads)):
        raise Failure("vjp: eager backward and tt.vjp differ")
    _, tangent = tt.jvp(f, tuple(copies), tuple(vs))
    n += 1
    if not _same(tangent, eager_tangent):
        raise Failure("jvp: eager y.jvp and tt.jvp differ")
    # on the views themselves (transposed, negative-stride, strided): the same up to rounding
    # (BLAS may sum in another order for another memory layout)
    out_v, back_v = tt.vjp(f, *xs)
    n += 1
    if not all(np.allclose(a, b, rtol=1e-12, atol=1e-14, equal_nan=True)
               for a, b in zip([out_v] + list(back_v(u)), [out] + list(grads))):
        raise Failure("views: the inputs as views give other values or gradients than contiguous copies")

    # adjoint identity
    lhs = float(np.sum(u * tangent))
    rhs = float(sum(np.sum(g * v) for g, v in zip(grads, vs)))
    scale = float(np.sum(np.abs(u * tangent)) + sum(np.sum(np.abs(g * v)) for g, v in zip(grads, vs)))
    if finite and np.isfinite(scale):
        n += 1
        if not _close(lhs, rhs, scale, 1e-9):
            raise Failure(f"adjoint: <u, J v> = {lhs!r} but <J^T u, v> = {rhs!r}")

    # central differences, at two steps (skipped where they disagree: a kink or jump is crossed)
    if finite and np.isfinite(lhs):
        fds = []
        with tt.no_grad(), np.errstate(all="ignore"):
            for h in H_FD:
                plus = _data(f(*[tt.tensor(x + h * v) for x, v in zip(xs, vs)]))
                minus = _data(f(*[tt.tensor(x - h * v) for x, v in zip(xs, vs)]))
                fds.append(float(np.sum(u * (plus - minus))) / (2 * h))
        # the scale of the derivative, plus the rounding of f itself divided by the step
        fd_scale = (float(np.sum(np.abs(u * tangent))) + abs(fds[0]) + 1e-8
                    + 1e-10 * float(np.sum(np.abs(u * y0))) / H_FD[0])
        if all(np.isfinite(fds)) and _close(fds[0], fds[1], fd_scale, 1e-4):
            n += 1
            if not _close(lhs, fds[0], fd_scale, 1e-4):
                raise Failure(f"fd: <u, J v> = {lhs!r} but central differences give {fds[0]!r}")
        else:
            stats["fd_skipped"] = stats.get("fd_skipped", 0) + 1

    # float32 in, float32 out
    views = [x["view"] for x in program["inputs"]]
    xs32 = [_typed(x, np.float32, view) for x, view in zip(xs, views)]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out32, back32 = tt.vjp(f, *xs32)
        grads32 = back32(u.astype(np.float32))
        _, tangent32 = tt.jvp(f, tuple(xs32), tuple(v.astype(np.float32) for v in vs))
        # NumPy's own dtype for the same float32 program (np.clip(0.5, x32) is float64 in NumPy too)
        want = np.asarray(execute(program, xs32, "np")).dtype
    n += 1
    bad = [what for what, a in [("value", out32), ("tangent", tangent32)] if np.asarray(a).dtype != want]
    bad += [f"gradient {i} (not its input's float32)" for i, g in enumerate(grads32)
            if np.asarray(g).dtype != np.float32]
    if bad:
        raise Failure(f"float32: float32 inputs give another dtype than NumPy's {want} for the "
                      f"{', '.join(bad)}")

    # compiled replay on fresh inputs, bit for bit (or a refusal at trace time naming what
    # tt.compile cannot replay; never a silent difference, nor a warning)
    def loss(*xs):
        return tt.sum(f(*xs) * u)

    argnums = tuple(range(len(xs)))
    compiled = [tt.compile(f), tt.compile(tt.grad(loss, argnums=argnums)),
                tt.compile(lambda *xs: tt.jvp(f, xs, tuple(vs))[1])]
    def value(*xs):          # eager on Tensors (on plain arrays, 0-d results are NumPy scalars)
        with tt.no_grad():
            return f(*[tt.tensor(x) for x in xs])

    eager = [value, tt.grad(loss, argnums=argnums), lambda *xs: tt.jvp(f, xs, tuple(vs))[1]]
    refused = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for c in compiled:
                c(*xs)                                   # records
        except RuntimeError as err:      # what tt.compile cannot replay: refused, naming it
            if not str(err).startswith("tt.compile:"):
                raise
            refused = str(err)
    warned = [str(w.message) for w in caught if str(w.message).startswith("tt.compile:")]
    if warned:
        raise Failure(f"compiled: tt.compile warned while recording (a value read into Python "
                      f"inside tinytensor?): {warned[0]}")
    if refused is not None:
        n += 1
        stats["compile_refused"] = stats.get("compile_refused", 0) + 1
    fresh = [np.array(x, order="C") for x in _inputs(program, rng)]   # views: checked above
    for c, e, what in zip(compiled if refused is None else (), eager, ("value", "gradient", "tangent")):
        n += 1
        got, want = c(*fresh), e(*fresh)
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        # gelu's compiled VJP reads the forward's Phi(x) (compile/fusions.py), eager's ans / x
        close = what == "gradient" and any(s["kind"] == "gelu" for s in program["steps"])
        if not all((_same_to_rounding if close else _same)(_data(a), _data(b)) for a, b in zip(got, want)):
            raise Failure(f"compiled: the compiled {what} on fresh inputs differs from eager")

    # second order: hvp against differences of gradients
    if hvp and finite:
        def loss2(*xs):
            return tt.sum(f(*xs) * u)

        argnums = tuple(range(len(xs)))
        hv = tt.hvp(loss2, tuple(xs), tuple(vs))
        hv = hv if isinstance(hv, tuple) else (hv,)
        g = tt.grad(loss2, argnums=argnums)
        diffs = []
        with np.errstate(all="ignore"):
            for h in H_FD:
                gp = g(*[x + h * v for x, v in zip(xs, vs)])
                gm = g(*[x - h * v for x, v in zip(xs, vs)])
                diffs.append([(a - b) / (2 * h) for a, b in zip(gp, gm)])
        w = [rng.standard_normal(x.shape) for x in xs]    # compare along a random direction
        dots = [float(sum(np.sum(wi * di) for wi, di in zip(w, d))) for d in diffs]
        got = float(sum(np.sum(wi * hi) for wi, hi in zip(w, hv)))
        hscale = (float(sum(np.sum(np.abs(wi * hi)) for wi, hi in zip(w, hv))) + abs(dots[0]) + 1e-8
                  + 1e-10 * float(sum(np.sum(np.abs(wi * gi)) for wi, gi in zip(w, g(*xs)))) / H_FD[0])
        if all(np.isfinite(dots)) and np.isfinite(got) and _close(dots[0], dots[1], hscale, 1e-4):
            n += 1
            if not _close(got, dots[0], hscale, 1e-4):
                raise Failure(f"hvp: <w, H v> = {got!r} but differences of gradients give {dots[0]!r}")
        elif not np.isfinite(got) and all(np.isfinite(dots)) and _close(dots[0], dots[1], hscale, 1e-4):
            n += 1
            raise Failure(f"hvp: not finite ({got!r}) where differences of gradients give {dots[0]!r}")
    return n


def _forward_matches(program, rng):
    """Each step's tinytensor value against NumPy's on the same inputs (float64)."""
    xs = _inputs(program, rng)
    env_tt = {("in", i): tt.tensor(x) for i, x in enumerate(xs)}
    env_np = {("in", i): x for i, x in enumerate(xs)}
    for i, s in enumerate(program["steps"]):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = np.asarray(_run_step(s["kind"], s["args"], s["params"], env_np, "np"))
            try:
                got = _run_step(s["kind"], s["args"], s["params"], env_tt, "tt")
            except Exception as err:
                raise Failure(f"forward: step s{i} ({s['kind']}) raises {type(err).__name__}: {err} "
                              f"where NumPy gives {want.dtype} {want.shape}") from err
        got_v = _data(got)
        if got_v.shape != want.shape or not np.allclose(got_v, want, rtol=1e-10, atol=1e-12, equal_nan=True):
            raise Failure(f"forward: step s{i} ({s['kind']}) gives {got_v.shape} {got_v.ravel()[:4]} where "
                          f"NumPy gives {want.shape} {want.ravel()[:4]}")
        env_tt[("step", i)], env_np[("step", i)] = got, want
    return 1


def run_one(program, seed, hvp):
    """All checks of one program, with its own seed: (checks, failure message or None)."""
    rng = np.random.default_rng(seed)
    n = 0
    try:
        n += _forward_matches(program, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n += check(program, rng, hvp=hvp)
    except Failure as err:
        return n + 1, str(err)
    except Exception as err:
        return n + 1, f"error: {type(err).__name__}: {err}\n{traceback.format_exc(limit=6)}"
    return n, None


def _with_steps(program, k):
    return dict(inputs=program["inputs"], steps=program["steps"][:k])


def _pruned(program):
    """The program without the steps and inputs its last step does not depend on."""
    steps = program["steps"]
    needed, inputs = {len(steps) - 1}, set()
    for i in range(len(steps) - 1, -1, -1):
        if i in needed:
            for kind, j in steps[i]["args"]:
                (needed if kind == "step" else inputs if kind == "in" else set()).add(j)
    step_map = {old: new for new, old in enumerate(sorted(needed))}
    input_map = {old: new for new, old in enumerate(sorted(inputs))}

    def renamed(arg):
        kind, j = arg
        return [kind, step_map[j] if kind == "step" else input_map[j] if kind == "in" else j]

    return dict(inputs=[program["inputs"][i] for i in sorted(inputs)],
                steps=[dict(steps[i], args=[renamed(a) for a in steps[i]["args"]]) for i in sorted(needed)])


def shrink(program, seed, hvp):
    """The shortest failing prefix, then without the steps and inputs the result does not use
    (kept only if it still fails: the inputs' values are drawn in order)."""
    best = program
    for k in range(1, len(program["steps"])):
        candidate = _with_steps(program, k)
        if run_one(candidate, seed, hvp)[1] is not None:
            best = candidate
            break
    pruned = _pruned(best)
    if pruned["steps"] and pruned != best and run_one(pruned, seed, hvp)[1] is not None:
        best = pruned
    return best


def fuzz(n_programs, seed=0, out_dir=None, verbose=False, max_seconds=None):
    """Generate and check n_programs programs. Returns (programs, checks, failures, messages)."""
    master = np.random.default_rng(seed)
    checks = failures = programs = 0
    messages = []
    start = time.time()
    for i in range(n_programs):
        if max_seconds is not None and time.time() - start > max_seconds:
            break
        program_seed = int(master.integers(2 ** 63))
        rng = np.random.default_rng(program_seed)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            program = generate(rng)
        if not program["steps"]:
            continue
        hvp = i % 3 == 0
        n, failure = run_one(program, program_seed, hvp)
        programs += 1
        checks += n
        if failure is not None:
            failures += 1
            small = shrink(program, program_seed, hvp)
            message = run_one(small, program_seed, hvp)[1] or failure
            messages.append((small, message))
            if verbose:
                print(f"FAIL program {i} (seed {program_seed}):\n{describe(small)}\n  {message}", flush=True)
            if out_dir:
                _store(out_dir, i, program_seed, small, message, hvp)
    return programs, checks, failures, messages


def _store(out_dir, i, seed, program, message, hvp):
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    entry = dict(seed=seed, hvp=hvp, failure=message, program=program, readable=describe(program),
                 replay=f"python -m tests.fuzz --replay {os.path.join(out_dir, f'seed{seed}.json')}",
                 first_inputs=[x.tolist() for x in _inputs(program, rng)])
    with open(os.path.join(out_dir, f"seed{seed}.json"), "w") as fh:
        json.dump(entry, fh, indent=1, default=float)


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _check_spec_rows():
    rows = set(OP_SPECS) | set(EXTRA_SPECS)
    missing = sorted({row for row in SPEC_ROW.values() if row not in rows})
    if missing:
        raise SystemExit(f"tests/fuzz.py: kinds name spec rows that tinytensor/specs.py lacks: {missing}")
    unknown = sorted(set(ONE_INPUT + TWO_INPUT) - set(SPEC_ROW))
    if unknown:
        raise SystemExit(f"tests/fuzz.py: kinds without a spec row: {unknown}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="fuzz-failures", help="where minimal reproductions go")
    parser.add_argument("--replay", help="a stored reproduction (JSON) to run again")
    parser.add_argument("--max-seconds", type=float, default=None)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    _check_spec_rows()
    if args.replay:
        with open(args.replay) as fh:
            entry = json.load(fh)
        for step in entry["program"]["steps"]:     # JSON has no tuples: axis=(0, 2) came back a list
            step["params"] = {k: _tuples(v) for k, v in step["params"].items()}
        print(describe(entry["program"]))
        print(run_one(entry["program"], entry["seed"], entry["hvp"])[1] or "passes now")
        return 0
    start = time.time()
    programs, checks, failures, _ = fuzz(args.programs, args.seed, args.out, args.verbose, args.max_seconds)
    print(f"fuzz: {programs} programs, {checks} checks, {failures} failures "
          f"(seed {args.seed}, {time.time() - start:.0f} s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Compile-vs-eager harness for the issue 29 matrix (tests/compile/matrix_cases.py).

A case is a builder ``build(C, k)`` that makes fresh state and returns ``step(i)``; ``C`` is
``tt.compile`` in the compiled run and the identity in the eager run, ``k`` the (1-based) call on
which the scripted change happens. The harness seeds every generator identically, runs ``n``
calls eagerly and ``n`` compiled, snapshots after each call what ``step`` returns (outputs,
modules: parameters, their ``.grad``, buffers and generators; optimizers' state; schedulers;
generators) together with the global generator and Python's ``random`` state, and compares
everything bit for bit.

Classification of a case:

* ``equal``: every snapshot equal (a ``UserError`` the case raises on purpose is a snapshot too).
* ``refused``: a compiled call raised where eager did not, everything before it was equal, and
  the message names ``compile``/recording and a fix (an argument, uncompiled/eager, instead, ...).
* ``crashed``: a compiled call raised an error that does not name a fix (an internal error), or
  the eager run itself raised (a broken case: ``case-error``).
* ``differ-after-warning``: a snapshot differs and the compiled run warned (a warning the eager
  run did not give).
* ``silent-difference``: a snapshot differs with no warning.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re
import traceback
import warnings

import numpy as np

import tinytensor as tt

nn = tt.nn


class UserError(Exception):
    """Raised by a case's own code on purpose (compared as an outcome, like a value)."""


@dataclasses.dataclass
class Case:
    name: str
    cls: int
    build: object
    want: str  # "equal" or "either"
    n: int
    k: int | None
    note: str = ""
    max_traces: int | None = None  # recordings allowed over the whole compiled run


CLASS_NAMES = {
    1: "1 control flow on values",
    2: "2 gradients to closed-over params",
    3: "3 parameter identity",
    4: "4 guards",
    5: "5 values inside tinytensor",
    6: "6 whole training steps",
    7: "7 changing floats, randomness, modes",
}

FIX = re.compile(r"argument|uncompiled|eager|instead|disable|outside|pass |guard", re.I)
NAMES_COMPILE = re.compile(r"compil|record|trac", re.I)


# ---------------------------------------------------------------- snapshots
def _is_opt(obj):
    return hasattr(obj, "param_groups") and hasattr(obj, "state_dict") and hasattr(obj, "step")


def _snap(obj, out, path):
    if isinstance(obj, tt.Tensor):
        # a Tensor's value is compared as an array's (eager Tensor vs compiled array is equal
        # where nothing needs gradients); requires_grad and .grad only where eager has them
        out.append((path, np.array(obj.data, copy=True)))
        if obj.requires_grad or obj.grad is not None:
            out.append((path + ".requires_grad", str(bool(obj.requires_grad))))
            g = obj.grad
            out.append((path + ".grad", "None" if g is None else np.array(g, copy=True)))
    elif isinstance(obj, nn.Module):
        for name, p in obj.named_parameters():
            _snap(p, out, f"{path}.{name}")
        _snap(obj.state_dict(), out, path + ".state_dict")
        for name, m in obj.named_modules():
            out.append((f"{path}.{name}.training", str(bool(m.training))))
    elif _is_opt(obj):
        _snap(obj.state_dict(), out, path + ".opt")
    elif hasattr(obj, "get_last_lr"):
        _snap(list(obj.get_last_lr()), out, path + ".lr")
        _snap(getattr(obj, "last_epoch", None), out, path + ".last_epoch")
    elif isinstance(obj, np.random.Generator):
        out.append((path + ".rng", _digest(obj.bit_generator.state)))
    elif isinstance(obj, np.ndarray):
        out.append((path, np.array(obj, copy=True)))
    elif isinstance(obj, (bool, int, float, complex, np.generic)):
        out.append((path, np.asarray(obj)))
    elif obj is None or isinstance(obj, str):
        out.append((path, repr(obj)))
    elif isinstance(obj, dict):
        for key in sorted(obj, key=repr):
            _snap(obj[key], out, f"{path}[{key!r}]")
    elif isinstance(obj, (list, tuple)):
        out.append((path + ".len", str(len(obj))))
        for j, v in enumerate(obj):
            _snap(v, out, f"{path}[{j}]")
    else:
        out.append((path, repr(obj)))


def _digest(x):
    return hashlib.sha1(repr(x).encode()).hexdigest()


def snapshot(result):
    out = []
    _snap(result, out, "r")
    out.append(("global_rng", _digest(tt.get_rng_state().tolist())))
    out.append(("python_random", _digest(random.getstate())))
    return out


def _leaf_equal(a, b):
    if isinstance(a, np.ndarray) != isinstance(b, np.ndarray):
        return False
    if not isinstance(a, np.ndarray):
        return a == b
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def first_difference(ea, ca):
    """(call index, path, short description) of the first difference, or None."""
    for i, (e, c) in enumerate(zip(ea, ca)):
        if len(e) != len(c) or [p for p, _ in e] != [p for p, _ in c]:
            pe, pc = [p for p, _ in e], [p for p, _ in c]
            return i, "structure", f"eager {pe[:4]}... compiled {pc[:4]}..."
        for (path, a), (_, b) in zip(e, c):
            if not _leaf_equal(a, b):
                return i, path, _describe(a, b)
    return None


def _describe(a, b):
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"eager {a.dtype}{a.shape} vs compiled {b.dtype}{b.shape}"
        if a.dtype.kind in "fc" and a.size and (np.isnan(a) != np.isnan(b)).any():
            return "NaN where the other is not"
        if a.dtype.kind in "fc" and a.size:
            d = np.max(np.abs(np.nan_to_num(a.astype(complex)) - np.nan_to_num(b.astype(complex))))
            return f"max |diff| {d:.3g}"
        return "values differ"
    return f"eager {str(a)[:40]} vs compiled {str(b)[:40]}"


# ---------------------------------------------------------------- running
def _eager_C(f=None, **kw):
    if f is None:
        return lambda g: g
    return f


_CREATED = []  # the compiled functions made during the current compiled run


def _compiled_C(f=None, **kw):
    if f is None:
        return lambda g: _compiled_C(g, **kw)
    out = tt.compile(f, **kw)
    _CREATED.append(out)
    return out


def traces():
    """Recordings made by the compiled functions of the last compiled run (None: unknown)."""
    counts = [getattr(c, "traces", None) for c in _CREATED]
    if any(not isinstance(n, int) for n in counts):
        return None
    return sum(counts)


def _reset():
    tt.manual_seed(1234)
    random.seed(1234)
    np.random.seed(1234)
    grad_on = tt.set_grad_enabled(True)  # noqa: F841  (grad mode on at the start of each run)


def run(case, compiled):
    """Run a case; return (snapshots, error, warnings, error_call)."""
    _reset()
    _CREATED.clear()
    C = _compiled_C if compiled else _eager_C
    snaps, err, err_call = [], None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            step = case.build(C, case.k) if case.k is not None else case.build(C)
        except Exception as e:  # noqa: BLE001
            return snaps, e, [], -1
        for i in range(case.n):
            try:
                try:
                    r = step(i)
                except UserError as e:
                    r = ("UserError", str(e))
                snap = snapshot(r)
            except Exception as e:  # noqa: BLE001
                err, err_call = e, i
                err.tb = traceback.format_exc()
                break
            snaps.append(snap)
    msgs = [f"{w.category.__name__}: {w.message}" for w in caught]
    return snaps, err, msgs, err_call


@dataclasses.dataclass
class Result:
    case: Case
    outcome: str  # equal / refused / crashed / differ-after-warning / silent-difference
    detail: str
    traces: int | None = None  # recordings in the compiled run


def first_line(s):
    s = str(s).strip()
    return s.splitlines()[0] if s else ""


def classify(case):
    es, eerr, ewarn, ecall = run(case, compiled=False)
    if eerr is not None:
        return Result(case, "crashed", f"case-error (eager raised at call {ecall + 1}): "
                      f"{type(eerr).__name__}: {first_line(eerr)}")
    cs, cerr, cwarn, ccall = run(case, compiled=True)
    n_traces = traces()
    result = _classify(case, es, ewarn, cs, cerr, cwarn, ccall)
    result.traces = n_traces
    return result


def _classify(case, es, ewarn, cs, cerr, cwarn, ccall):
    # a warning counts when tt.compile gave it (not NumPy's "invalid value" on a frozen branch)
    extra = [w for w in cwarn if w not in set(ewarn) and "compil" in w.lower()]
    diff = first_difference(es, cs)
    warned = f" (warned: {first_line(extra[0])[:100]})" if extra else ""
    if diff is not None:
        i, path, what = diff
        kind = "differ-after-warning" if extra else "silent-difference"
        return Result(case, kind, f"call {i + 1}: {path}: {what}{warned}")
    if cerr is not None:
        msg = f"{type(cerr).__name__}: {first_line(cerr)}"
        if ccall == -1:
            return Result(case, "crashed", "compiled build raised " + msg)
        if NAMES_COMPILE.search(str(cerr)) and FIX.search(str(cerr)) and not isinstance(
                cerr, (AttributeError, KeyError, IndexError, NameError, AssertionError,
                       UnboundLocalError)):
            return Result(case, "refused", f"call {ccall + 1}: {msg}")
        return Result(case, "crashed", f"call {ccall + 1}: {msg}")
    if len(cs) != len(es):
        return Result(case, "silent-difference", "fewer calls")
    return Result(case, "equal", "")

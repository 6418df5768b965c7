"""`tt.scipy.integrate.odeint`: SciPy's ODE solver (LSODA), differentiable in y0, t, args and
every Tensor the right-hand side closes over.

    ys = tt.scipy.integrate.odeint(func, y0, t, args=(theta,))   # func(y, t, *args) -> dy/dt

One primitive, whose inputs are y0, t, the arrays of `args` (a pytree, as autograd's) and the
Tensors that require grad which `func` reaches without being given them (closure conversion, as
JAX's odeint: found by calling `func` once on the tape and walking back from its result to the
Tensors recorded before the call; every later call of `func` on the tape is checked against them,
so a term is never dropped).

Values are SciPy's `odeint`. The VJP is the adjoint method with the forward trajectory kept: the
state is never integrated backward (unstable for stiff, dissipative systems). Between observation
times t[i-1] and t[i] the state is solved forward again from the stored ys[i-1] with dense output
(solve_ivp's LSODA), and only the adjoint [a, a_params], da/ds = -J^T a, runs backward, reading y
from that interpolant. The JVP solves the forward sensitivities ds/dt = J s + df/dparams dparams
alongside y. Every solve's status is checked: a failed one raises, naming the option to change.
Given Tensors (a second derivative: hessian, hvp, grad of grad), the VJP is JAX's instead: the
adjoint system [y, a, a_params] integrated backward by a recorded odeint call, so it can be
differentiated again (the state is integrated backward there, as in JAX).

Cost: the solvers call func ~1,100 times per value and gradient of a small fit. func is recorded
once by tt.compile and replayed (`_Replay`); when y and the args hold at most SCALAR_LIMIT floats
its program is also written as straight-line Python on floats (`_Floats`, _scalar.py), ~0.5-1 us
a call against ~10-60 us on arrays, used where it agrees with the array program (see `_Floats`).
"""

import warnings
import weakref

import numpy as np
import scipy.integrate

from .. import ops
from ..compile import RECOMPILE_LIMIT
from ..compile import compile as tt_compile
from ..state import STATE
from ..tape import REGISTRY, Primitive, enable_grad, forward_sweep, is_grad_enabled, no_grad, reverse_sweep
from ..tensor import Tensor, _make, _next_id
from ..transforms import jvp as tt_jvp
from ..transforms import tree_flatten, tree_unflatten
from ..transforms import vjp as tt_vjp
from ..vmap import vmap
from . import _scalar

_SUCCESS = "Integration successful."

# What to change when a solve fails, by the start of LSODA's message (scipy.integrate.odeint's).
_FIXES = {
    "Excess work done": "raise mxstep (the most steps per output interval, now {mxstep}; 0 means 500)",
    "Excess accuracy requested": "loosen rtol/atol",
    "Illegal input": "check h0, hmin, hmax, rtol and atol (h0 must be small enough for the first "
                     "interval; rtol and atol non-negative)",
    "Repeated error test failures": "check func for singularities, or loosen rtol/atol",
    "Repeated convergence failures": "the problem may be ill-posed or func not smooth; loosen rtol/atol",
    "Error weight became zero": "pass a positive atol (a component of y became exactly 0)",
}


def _fix_for(message, options):
    fix = next((fix for start, fix in _FIXES.items() if message.startswith(start)),
               "check the solver options")
    return fix.format(mxstep=options.get("mxstep", 0))


class _Replay:
    """f recorded once by tt.compile and replayed as a straight NumPy program (the right-hand side
    is called hundreds of times per solve; replaying cuts ~390 us to ~30 us per VJP of a small
    system). tt.compile guards what f's result depends on (a branch such as `if t < 0.5` records
    a program per outcome). A call returns None, and the caller runs f eagerly (with its closure
    check), when it recorded f again (another branch may reach a Tensor the first call did not);
    for good once a recording warned or failed (a refusal)."""

    def __init__(self, f):
        self.compiled, self.usable = tt_compile(f), True
        self.steady = False       # replayed without recording: later calls skip the warning catch

    def __call__(self, *args):
        if not self.usable:
            return None
        before = self.compiled.traces
        if self.steady:    # (catching warnings cost 2.5 us of a 8 us call, a solve makes hundreds)
            try:
                out = self.compiled(*args)
            except Exception:   # noqa: BLE001
                if self.compiled.traces == before:
                    raise
                out = None
            if self.compiled.traces == before:
                return out
            self.steady = False           # recorded again (a branch): this call runs eagerly and
            return None                   # the next ones are watched again
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = self.compiled(*args)
            except Exception:   # noqa: BLE001  (the eager call raises the user's error itself)
                if self.compiled.traces != before or before == 0:
                    self.usable = False
                    return None
                raise
        if self.compiled.traces != before:
            if caught:
                self.usable = False
                return None
            if before:                        # recorded again: this call runs eagerly, checked
                return None
        for w in caught:                      # a replay's own warnings (overflow ...) are the user's
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        # steady: later calls skip the catch, unless a new key could reach tt.compile's recording
        # limit, whose warning (naming this internal program) the catch keeps from the user
        self.steady = self.compiled.traces == before < RECOMPILE_LIMIT
        return out


_PROGRAMS = weakref.WeakKeyDictionary()     # func -> {args structure: its four _Replay programs}
_NO_REPLAY = lambda *args: None   # noqa: E731  (a "program" that always sends the caller to eager)


def _call(func, structure, y, t, args):
    out = func(y, t, *tree_unflatten(structure, list(args)))
    if isinstance(out, (list, tuple)) and any(isinstance(o, Tensor) for o in out):
        out = ops.PUBLIC["stack"](list(out))      # [dy0, dy1]: a list of Tensors, stacked
    return out


def _replays(func_ref, structure):
    """The programs replayed for func (reached through func_ref, so the cache keyed by func does
    not keep it alive): its values, its VJP (y, t, cotangent, *args), its Jacobian and its
    forward sensitivities (f and its JVP along P directions at once, the sensitivity system)."""
    def values(y, t, *args):
        return _call(func_ref(), structure, y, t, args)

    def vjp_of_call(y, t, cotangent, *args):
        out, pull = tt_vjp(lambda y, t, *args: _call(func_ref(), structure, y, t, args), y, t, *args,
                           allow_unused=True)
        return pull(cotangent)

    def jacobian_of_call(y, t, *args):
        out, pull = tt_vjp(lambda y, *args: _call(func_ref(), structure, y, t, args), y, *args,
                           allow_unused=True)
        rows = [pull(e) for e in np.eye(np.shape(y)[0])]
        return (out, *[ops.PUBLIC["stack"]([row[k] for row in rows]) for k in range(len(rows[0]))])

    def sensitivities_of_call(y, t, tangents, *args_and_tangents):
        """(f (P, D), J_y tangents[p] + J_args arg_tangents[p] for each p (P, D)): one JVP mapped
        over the P directions, so the sensitivity system's right-hand side is one program (half
        the lines of D reverse sweeps, and no scatter of a cotangent into zeros per row)."""
        n = len(args_and_tangents) // 2
        args, arg_tangents = args_and_tangents[:n], args_and_tangents[n:]

        def push(dy, *dargs):
            return tt_jvp(lambda y, *args: _call(func_ref(), structure, y, t, args), (y, *args),
                          (dy, *dargs), allow_unused=True)
        return vmap(push)(tangents, *arg_tangents)

    return (_Replay(values), _Replay(vjp_of_call), _Replay(jacobian_of_call), _Replay(sensitivities_of_call),
            _Floats())


# The most floats in a solved state ([y], or [y, S] for the sensitivities) and in y, the args and
# the closed-over Tensors together for which the right-hand side is written as Python on floats
# (_scalar.py): past that, one NumPy call on arrays costs less than a line per element.
SCALAR_LIMIT = 64


class _Floats:
    """func's programs on Python floats (_scalar.py), for one args structure, per shapes: its
    values (the forward solve) and its sensitivity system (the reverse mode of a small problem,
    and the forward mode). LSODA calls them ~1,100 times per value and gradient of a small fit;
    on floats a call costs ~0.5-1 us, the replayed array program ~10-60 us. The Tensors func
    closes over (`rhs.captures`) are parameters of the programs like the args' leaves.

    Each is written once from a recording of func and used only while
      * func has a form on floats (every primitive in _scalar._PRIMITIVES, no mask; y, the args
        and the closed-over Tensors float64, at most SCALAR_LIMIT floats together), and
      * tt.compile's values program of func read no value into Python (no branch: the float
        program is straight-line, so the closed-over Tensors it reaches cannot change mid-solve;
        recorded under no_grad, where they are inputs read anew), and
      * it agrees with the array program at the start of every solve: the values bit for bit (at
        y0 and at a point beside it; only `exact` programs, so the forward solve's numbers are
        SciPy's on the array program), the sensitivity system to 1e-12 of its largest entry. A
        closed-over number or Tensor changed since it was written: written again from a new
        recording; still disagreeing: not used (the array program runs, as before).
    `why` holds, per shapes, the reason a program was refused."""

    def __init__(self):
        self.built = {}     # shapes -> a builder of _scalar.Scalarized (from one recording)
        self.makers = {}    # (shapes, what) -> `make` of the program's source
        self.why = {}       # shapes -> why func has no program on floats

    def _key(self, D, args, rhs):
        return (D, tuple(np.shape(a) for a in args), tuple(c.shape for c in rhs.captures))

    def _refused(self, rhs, y0, t0, args):
        """Why func gets no program on floats here (None: it may)."""
        params = [*args, *(c.data for c in rhs.captures)]
        if any(np.asarray(a).dtype != np.float64 for a in params):
            return "an args leaf or a closed-over Tensor is not float64"
        if np.shape(y0)[0] + sum(np.size(a) for a in params) > SCALAR_LIMIT:
            return f"y, args and the closed-over Tensors hold more than SCALAR_LIMIT = {SCALAR_LIMIT} floats"
        replay = rhs._values
        if getattr(replay, "usable", False) and not replay.compiled.programs:
            with no_grad():     # tt.compile records func's values program (closed-over Tensors: inputs)
                replay(np.asarray(y0, dtype=np.float64), np.asarray(t0, dtype=np.float64),
                       *[np.asarray(a) for a in args])
        if not getattr(replay, "usable", False) or not replay.compiled.programs:
            return "tt.compile does not replay func"
        if any(getattr(p, "reads", True) for p in replay.compiled.programs.values()):
            return "func reads a value into Python (a branch): its program is not straight-line"
        return None

    def _builder(self, rhs, y0, t0, args, fresh=False):
        key = self._key(np.shape(y0)[0], args, rhs)
        if fresh or key not in self.built:
            self.makers = {k: v for k, v in self.makers.items() if k[0] != key}
            self.why.pop(key, None)
            inputs, out = rhs._traced(y0, t0, args, check=False)
            leaves = [*inputs, *rhs.captures]     # a closed-over Tensor is a parameter like the args
            if not isinstance(out, Tensor) or not out.requires_grad:
                self.built[key] = None
                self.why[key] = "func's result does not depend on y, t or args"
            else:
                names = [[f"y{j}" for j in range(np.shape(y0)[0])], ["t"],
                         *[[f"a{k}_{j}" for j in range(np.size(a))] for k, a in enumerate(args)],
                         *[[f"c{k}_{j}" for j in range(c.size)] for k, c in enumerate(rhs.captures)]]

                def build():
                    program = _scalar.build(out, leaves, names, start=inputs[0]._id)
                    program.names = names
                    return program
                try:
                    build()
                    self.built[key] = build
                except (_scalar.Unscalarizable, TypeError, ValueError, IndexError, AttributeError,
                        NotImplementedError) as err:
                    self.built[key] = None
                    self.why[key] = f"{type(err).__name__}: {err}"
        return key, self.built[key]

    def _reference(self, rhs, y, t, args):
        return rhs.array_values(y, t, args)

    def values(self, rhs, y0, t0, args):
        """The forward solve's right-hand side on floats, verified; None where refused."""
        why = self._refused(rhs, y0, t0, args)
        if why is not None:
            self.why[self._key(np.shape(y0)[0], args, rhs)] = why
            return None
        bound = _floats_of(args, rhs)
        points = [(np.asarray(y0, dtype=np.float64), float(t0))]
        points.append((points[0][0] + 2.0 ** -6 * (1.0 + np.abs(points[0][0])), points[0][1] + 2.0 ** -6))
        for fresh in (False, True):
            key, build = self._builder(rhs, y0, t0, args, fresh)
            if build is None:
                return None
            make = self.makers.get((key, "values"))
            if make is None:
                program = build()
                if not program.exact:
                    self.why[key] = "its values program is not bit for bit NumPy's (exp, log, sums, ...)"
                    self.makers[(key, "values")] = make = False
                else:
                    make = _scalar.compile_source(_scalar.values_source(program))
                    self.makers[(key, "values")] = make
            if make is False:
                return None
            function = make(lambda y, s: rhs.array_values(y, s, args), *bound)
            with np.errstate(all="ignore"):
                if all(np.array_equal(np.asarray(function(y, s), dtype=np.float64),
                                      self._reference(rhs, y, s, args), equal_nan=True) for y, s in points):
                    return function
        self.built[key], self.why[key] = None, "disagrees with the array program"
        return None

    def sensitivities(self, rhs, D, args, arg_tangents, dynamics, start, t0):
        """The sensitivity system on floats (see RHS.sensitivity_system; arg_tangents: of the
        args, then of the captures), checked at `start`; None where refused."""
        y0 = start[:D]
        if start.size > SCALAR_LIMIT or self._refused(rhs, y0, t0, args) is not None:
            return None
        bound = _floats_of(args, rhs)
        pattern = tuple(np.asarray(d).tobytes() if np.all((np.asarray(d) == 0) | (np.asarray(d) == 1))
                        else np.shape(d) for d in arg_tangents)
        for fresh in (False, True):
            key, build = self._builder(rhs, y0, t0, args, fresh)
            if build is None:
                return None
            what = ("sensitivities", start.size, pattern)
            made = self.makers.get((key, what))
            if made is None:
                try:
                    source, moving = _scalar.sensitivity_source(build, D, arg_tangents)
                    made = (_scalar.compile_source(source), len(moving))
                except (_scalar.Unscalarizable, TypeError, ValueError, IndexError, AttributeError,
                        NotImplementedError) as err:
                    self.why[key] = f"sensitivities: {type(err).__name__}: {err}"
                    made = False
                self.makers[(key, what)] = made
            if made is False:
                return None
            make, n_moving = made
            moving = [np.asarray(d, dtype=np.float64) for d in arg_tangents
                      if not np.all((np.asarray(d) == 0) | (np.asarray(d) == 1))]
            extra = [float(x) for d in moving for x in d.reshape(-1)] if n_moving else []
            function = make(dynamics, *bound, *extra)
            with np.errstate(all="ignore"):
                ours = np.asarray(function(start, float(t0)), dtype=np.float64)
                reference = np.asarray(dynamics(start, t0), dtype=np.float64)
            scale = np.max(np.abs(reference), initial=0.0)
            if np.all(np.abs(ours - reference) <= 1e-12 * scale):
                return function
        self.built[key], self.why[key] = None, "its sensitivities disagree with the array program"
        return None


def _floats_of(args, rhs):
    """The entries of the args, then of the closed-over Tensors, as Python floats."""
    return [float(x) for a in [*args, *(c.data for c in rhs.captures)] for x in np.reshape(a, -1)]


def _weakly(func):
    try:
        weakref.ref(func)
        return True
    except TypeError:
        return False


class _RHS:
    """The right-hand side: func(y, t, *args) with `args` a pytree (given as its leaves), and the
    closed-over Tensors it reaches (`captures`)."""

    def __init__(self, func, structure, n_args, replay=True):
        self.func, self.structure, self.n_args = func, structure, n_args
        self.captures = []
        self.failure = None          # the forward solve's message when it failed
        self.check = False           # check the closure in the forward solve (set while recording)
        # Replayed programs for f, its VJP and its Jacobian, when func closes over no Tensor that
        # requires grad (a closed-over Tensor's gradient is not a VJP argument: those run eagerly,
        # checked); kept per function, so a fit's next odeint call replays without recording.
        programs = _PROGRAMS.setdefault(func, {}) if replay and _weakly(func) else {}
        replays = programs.get(repr(structure)) if replay else (_NO_REPLAY,) * 4 + (None,)
        if replays is None:
            replays = programs[repr(structure)] = _replays(weakref.ref(func) if _weakly(func) else
                                                           (lambda: func), structure)
        self._values, self._pull, self._jac, self._sens, self._floats = replays
        self.float_values = None     # this solve's values program on floats, once verified

    def jacobian(self, y, t, args):
        """(f, df/dy (D, D), df/dparams (D, n) with params = the args' and captures' entries, flat)."""
        D = np.shape(y)[0]
        if not self.captures:
            parts = self._jac(np.asarray(y, dtype=np.float64), np.asarray(t, dtype=np.float64),
                              *[np.asarray(a) for a in args])
            if parts is not None:
                value, Jy, *Jargs = (np.asarray(p, dtype=np.float64) for p in parts)
                return value, Jy, np.concatenate([np.reshape(J, (D, -1)) for J in Jargs], axis=1) \
                    if Jargs else np.zeros((D, 0))
        inputs, out = self._traced(y, t, args)          # one recording, D sweeps over it
        wrt = [inputs[0], *inputs[2:], *self.captures]
        value = np.asarray(out.data if isinstance(out, Tensor) else out, dtype=np.float64)
        rows = []
        for e in np.eye(D):
            grads = reverse_sweep([out], [e], wrt=wrt, cut=True) if isinstance(out, Tensor) and \
                out.requires_grad else {}
            rows.append([_dense(grads.get(w), w) for w in wrt])
        return value, np.stack([r[0] for r in rows]), np.stack([_flat(r[1:]) for r in rows])

    def sensitivity_system(self, D, args, param_tangents, fallback, start, t0):
        """The right-hand side of [y, S] for odeint, S holding P rows of D: the tangents of y
        along P directions, in each of which the args, then the captures, move by
        param_tangents[k][p] (constant).
        f and its JVP along all P directions are one replayed program; `fallback(y, s, S)` ->
        (f, dS) runs eagerly when func is not replayed (it closes over Tensors that require grad,
        or replay=False) and for a call the program declines (func recorded again)."""
        program = self._sens if not self.captures else _NO_REPLAY

        def dynamics(state, s):
            S = state[D:].reshape(-1, D)
            parts = program(state[:D], np.asarray(s, dtype=np.float64), S, *args, *param_tangents)
            value, dS = fallback(state[:D], s, S) if parts is None else (parts[0][0], parts[1])
            return np.concatenate([value, np.reshape(dS, -1)])
        if self._floats is None:
            return dynamics
        return self._floats.sensitivities(self, D, args, param_tangents, dynamics, start, t0) or dynamics

    def values_program(self, y0, t0, args):
        """The forward solve's right-hand side (state, t) -> dy/dt: the program on floats when
        func has one that is bit for bit the array program's (`_Floats.values`), else `values`."""
        if self._floats is not None and t0 is not None:
            program = self._floats.values(self, y0, t0, args)
            if program is not None:
                self.float_values = program
                return program
        return lambda y, s: self.array_values(y, s, args, self.check)

    def call(self, y, t, args):
        return _call(self.func, self.structure, y, t, args)

    def values(self, y, t, args, check=False):
        """dy/dt as a float64 array. With `check` (the forward solve, while recording) func runs
        on the tape, so a Tensor it reaches that was not found at its first call is caught."""
        if self.float_values is not None and not check:
            return np.array(self.float_values(np.asarray(y, dtype=np.float64), float(t)))
        return self.array_values(y, t, args, check)

    def array_values(self, y, t, args, check=False):
        """values() by the array program (replayed, or func eagerly)."""
        out = None
        if not self.captures:
            with no_grad():
                out = self._values(np.asarray(y, dtype=np.float64), np.asarray(t, dtype=np.float64),
                                   *[np.asarray(a) for a in args])
        if out is not None:
            pass
        elif check:
            start = _next_id()
            with enable_grad():
                out = self.call(y, t, args)
            if isinstance(out, Tensor) and out.requires_grad:
                self._check(out, start)
        else:
            with no_grad():
                out = self.call(y, t, args)
        out = np.asarray(out.data if isinstance(out, Tensor) else out, dtype=np.float64)
        if out.shape != np.shape(y):
            raise ValueError(f"odeint: func(y, t, *args) returned shape {out.shape} for y of shape "
                             f"{np.shape(y)}; it must return dy/dt, of y's shape")
        return out

    def _traced(self, y, t, args, check=True):
        """func on fresh Tensors: (inputs, output), with the closure checked against the first call."""
        inputs = [_make(_fresh(y, np.float64), requires_grad=True),
                  _make(_fresh(t, np.float64), requires_grad=True),
                  *[_make(_fresh(a), requires_grad=True) for a in args]]
        with enable_grad():
            out = self.call(inputs[0], inputs[1], inputs[2:])
        if check and isinstance(out, Tensor) and out.requires_grad:
            self._check(out, inputs[0]._id)
        return inputs, out

    def _check(self, out, start):
        new = [c for c in _reached_before(out, start) if not any(c is k for k in self.captures)]
        if new:
            c = new[0]
            raise RuntimeError(
                f"odeint: func used a Tensor that requires grad ({c.name or 'tensor'} {c.shape} "
                f"{c.dtype}) which it did not use in its first call (at y0, t[0]), so its gradient "
                f"would be dropped; pass it in args= (func(y, t, *args)) or use it in every call")

    def pullback(self, y, t, args, cotangent):
        """cotangent^T d func / d(y, t, *args, *captures): a list of arrays."""
        if not self.captures:
            grads = self._pull(np.asarray(y, dtype=np.float64), np.asarray(t, dtype=np.float64),
                               np.asarray(cotangent, dtype=np.float64), *[np.asarray(a) for a in args])
            if grads is not None:
                return [np.asarray(g, dtype=np.float64) for g in grads]
        inputs, out = self._traced(y, t, args)
        wrt = inputs + self.captures
        grads = {}
        if isinstance(out, Tensor) and out.requires_grad:
            grads = reverse_sweep([out], [cotangent], wrt=wrt, cut=True)
        return [_dense(grads.get(w), w) for w in wrt]

    def push(self, y, t, args, tangents):
        """(func, d func along `tangents`) for tangents of (y, *args, *captures) (None: zero)."""
        inputs, out = self._traced(y, t, args)
        value = np.asarray(out.data if isinstance(out, Tensor) else out, dtype=np.float64)
        named = {x: d for x, d in zip([inputs[0], *inputs[2:], *self.captures], tangents) if d is not None}
        if not named or not (isinstance(out, Tensor) and out.requires_grad):
            return value, np.zeros_like(value)
        return value, np.asarray(forward_sweep(out, named), dtype=np.float64)


def _dense(g, like):
    return np.zeros(like.shape) if g is None else np.asarray(g.data if isinstance(g, Tensor) else g,
                                                            dtype=np.float64)


def _reached_before(out, start):
    """The Tensors that require grad, recorded before id `start`, that `out` is computed from
    (the walk stops at them: they are the closure's, not func's)."""
    stack, seen, found = [out], set(), []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node._id < start:
            found.append(node)
        elif node._prim is not None:
            stack.extend(a for a in node._inputs if isinstance(a, Tensor) and a.requires_grad)
    return sorted(found, key=lambda n: n._id)


def _flat(arrays):
    return np.concatenate([np.reshape(a, -1) for a in arrays]) if arrays else np.zeros(0)


def _unflat(flat, like):
    out, at = [], 0
    for a in like:
        n = np.size(a)
        out.append(np.reshape(flat[at:at + n], np.shape(a)))
        at += n
    return out


def _succeeded(info, t):
    """LSODA's verdict, where a solve over no time (a single time point, or all equal: y is y0)
    counts as done, though LSODA says 'Nothing was done'."""
    return info["message"] == _SUCCESS or len(t) > 0 and bool(np.all(np.asarray(t) == t[0]))


def _solve(fun, y0, t, options, what):
    """scipy.integrate.odeint, raising (naming the option) when the solve fails."""
    ys, info = scipy.integrate.odeint(fun, y0, t, full_output=True, **options)
    if not _succeeded(info, t):
        raise RuntimeError(f"odeint: the {what} failed ({info['message']}); the gradient would be "
                           f"computed from a failed solution. {_fix_for(info['message'], options)}")
    return ys


def _forward(y0, t, *inputs, rhs, options):
    args = inputs[:rhs.n_args]
    fun = rhs.values_program(y0, t[0] if len(t) else None, args)
    ys, info = scipy.integrate.odeint(fun, y0, t, full_output=True, **options)   # SciPy warns on a failure
    rhs.failure = None if _succeeded(info, t) else info["message"]
    return ys


def _check_forward(rhs, options):
    if rhs.failure is not None:
        raise RuntimeError(f"odeint: the forward solve failed ({rhs.failure}), so its result has no "
                           f"meaningful derivative. {_fix_for(rhs.failure, options)}")


def _backward_options(options):
    """What the backward (adjoint) solve can accept: the tolerances and hmax; not h0 (a first
    step for the forward direction) and not a small step budget meant for the forward system."""
    out = {k: options[k] for k in ("rtol", "atol", "hmax") if k in options}
    out["mxstep"] = max(options.get("mxstep", 0), 500)
    return out


def _dense_options(options):
    out = {k: options[k] for k in ("rtol", "atol") if k in options}
    if options.get("hmax"):
        out["max_step"] = options["hmax"]
    if options.get("hmin"):
        out["min_step"] = options["hmin"]
    return out


def _adjoint_vjp(g, ys, y0, t, *inputs, rhs, options):
    """(gradient of y0, of t, of each input) for the cotangent g of ys (len(t), D)."""
    _check_forward(rhs, options)
    T, D = ys.shape
    args = [np.asarray(a, dtype=np.float64) for a in inputs[:rhs.n_args]]
    params = args + [c.data for c in rhs.captures]
    a, a_params = np.asarray(g[-1], dtype=np.float64).copy(), np.zeros(sum(np.size(p) for p in params))
    t_grads = np.zeros(T)
    back = _backward_options(options)
    for i in range(T - 1, 0, -1):
        t_grads[i] = float(np.dot(rhs.values(ys[i], t[i], args), g[i]))   # moving observation time t_i
        if t[i] == t[i - 1]:
            a = a + g[i - 1]
            continue
        # the state on [t[i-1], t[i]], solved forward from the stored ys[i-1] (never backward)
        path = scipy.integrate.solve_ivp(lambda s, y: rhs.values(y, s, args), (t[i - 1], t[i]), ys[i - 1],
                                         method="LSODA", dense_output=True, **_dense_options(options))
        if not path.success:
            raise RuntimeError(f"odeint: re-solving the state on [{t[i - 1]}, {t[i]}] for the gradient "
                               f"failed ({path.message}); loosen rtol/atol or check func")

        def adjoint(state, s, path=path):
            grads = rhs.pullback(path.sol(s), s, args, -state[:D])
            return np.concatenate([grads[0].reshape(-1), _flat([grads[2 + k] for k in range(len(params))])])

        state = _solve(adjoint, np.concatenate([a, a_params]), np.array([t[i], t[i - 1]]), back,
                       "backward (adjoint) solve")[1]
        a, a_params = state[:D] + g[i - 1], state[D:]
    t_grads[0] = -float(np.dot(rhs.values(ys[0], t[0], args), a - g[0]))   # moving t0 moves the path
    out = [a.astype(ys.dtype), t_grads.astype(np.result_type(t, np.float32))]
    for x, like in zip(_unflat(a_params, params), inputs):
        out.append(np.asarray(x, dtype=np.result_type(like, np.float32)))
    return tuple(out)


# The VJP on arrays solves, by the size of the problem, one of two systems forward in time (the
# state is never integrated backward, so stiff systems get the gradient forward mode gets):
#  * the forward sensitivities S = dy/d(y0, params), D (1 + D + n) unknowns, when that is at most
#    SENSITIVITY_LIMIT: one solve over all of t, no restarts and no interpolation (a small ODE fit);
#  * else the adjoint, interval by interval, on the re-solved forward trajectory (a neural ODE).
SENSITIVITY_LIMIT = 64


def _sensitivity_vjp(g, ys, y0, t, *inputs, rhs, options):
    _check_forward(rhs, options)
    T, D = ys.shape
    args = [np.asarray(a, dtype=np.float64) for a in inputs[:rhs.n_args]]
    params = args + [c.data for c in rhs.captures]
    P = D + sum(np.size(p) for p in params)

    def by_jacobian(y, s, S):
        value, Jy, Jp = rhs.jacobian(y, s, args)
        dS = S @ Jy.T
        dS[D:] += Jp.T
        return value, dS

    # S[p] = dy/d(direction p): the y0 entries, then the params' (row-major: S[p] is one JVP)
    eye, basis, at = np.eye(P), [], D
    for a in params:                       # each param's tangent along each direction
        basis.append(np.ascontiguousarray(eye[:, at:at + a.size]).reshape((P,) + a.shape))
        at += a.size
    S0 = np.concatenate([np.eye(D), np.zeros((P - D, D))])
    start = np.concatenate([ys[0], S0.reshape(-1)])
    dynamics = rhs.sensitivity_system(D, args, basis, by_jacobian, start, t[0])
    states = _solve(dynamics, start, t, _backward_options(options), "sensitivity solve for the gradient")
    g = np.asarray(g, dtype=np.float64)
    total = np.einsum("tpd,td->p", states[:, D:].reshape(T, P, D), g)     # sum_i S_i g_i
    t_grads = np.array([0.0] + [float(np.dot(rhs.values(ys[i], t[i], args), g[i])) for i in range(1, T)])
    t_grads[0] = -float(np.dot(rhs.values(ys[0], t[0], args), total[:D] - g[0]))
    out = [total[:D].astype(ys.dtype), t_grads.astype(np.result_type(t, np.float32))]
    for x, like in zip(_unflat(total[D:], params), inputs):
        out.append(np.asarray(x, dtype=np.result_type(like, np.float32)))
    return tuple(out)


def _sensitivity_jvp(tangents, ys, y0, t, *inputs, rhs, options):
    """The tangent of ys from the tangents of y0, t, args and captures (None: zero)."""
    _check_forward(rhs, options)
    t_y0, t_t, *t_params = tangents
    args = [np.asarray(a, dtype=np.float64) for a in inputs[:rhs.n_args]]
    t_params = [None if d is None else np.asarray(d, dtype=np.float64) for d in t_params]
    D = ys.shape[1]
    s0 = np.zeros(D) if t_y0 is None else np.asarray(t_y0, dtype=np.float64).copy()
    if t_t is not None:
        s0 -= rhs.values(ys[0], t[0], args) * t_t[0]

    def by_push(y, s, S):
        return rhs.push(y, s, args, [S[0], *t_params])

    params = args + [c.data for c in rhs.captures]
    directions = [np.zeros((1,) + np.shape(a)) if d is None else np.reshape(d, (1,) + np.shape(a))
                  for a, d in zip(params, t_params)]
    start = np.concatenate([ys[0], s0])
    dynamics = rhs.sensitivity_system(D, args, directions, by_push, start, t[0])
    out = _solve(dynamics, start, t, options, "forward sensitivity solve")[:, D:]
    if t_t is not None:
        slopes = np.stack([rhs.values(ys[i], t[i], args) for i in range(len(t))])
        out = out + slopes * np.asarray(t_t)[:, None]
    return out.astype(ys.dtype)


def _is_tensor(x):
    return isinstance(x, Tensor) or (isinstance(x, (list, tuple)) and any(isinstance(v, Tensor) for v in x))


def _refuse_in_recording(name):
    """A first derivative runs whole as one line of a compiled program (as the forward solve);
    a second one is the adjoint system written as recorded odeint calls on the tape, whose
    adaptive steps no straight-line program replays."""
    from ..state import STATE
    if STATE.recorder is not None:
        raise RuntimeError(
            f"tt.compile: the second derivative of tt.scipy.integrate.{name} (a Hessian, "
            f"create_graph=True, tt.grad of tt.grad) is not recorded in a compiled function: the "
            f"adjoint solve it differentiates takes value-dependent adaptive steps; compute it "
            f"uncompiled, or compile only the first derivative (tt.hessian(tt.compile(loss)))")


def _deferred():
    from ..state import STATE
    return STATE.recorder is not None and STATE.recorder.deferred


def _vjp(g, ys, y0, t, *inputs, rhs, options):
    """Given arrays, the adjoint on the kept trajectory; given Tensors (a second derivative), the
    same adjoint system written as a recorded odeint call, so it can be differentiated again."""
    if any(_is_tensor(x) for x in (g, ys, y0, t, *inputs)):
        _refuse_in_recording("odeint")
        return _recorded_adjoint_vjp(g, ys, y0, t, *inputs, rhs=rhs, options=options)
    if rhs.failure is not None and _deferred():
        # tt.compile records a compiled call's backward while the call runs: a failed forward
        # solve raises when backward() runs this rule again (as eagerly), not in the call
        return tuple(np.zeros(np.shape(x), np.result_type(x, np.float32)) for x in (ys[0], t, *inputs))
    D = ys.shape[1]
    unknowns = D * (1 + D + sum(np.size(a) for a in inputs[:rhs.n_args]) + sum(c.size for c in rhs.captures))
    if unknowns <= SENSITIVITY_LIMIT:
        return _sensitivity_vjp(g, ys, y0, t, *inputs, rhs=rhs, options=options)
    return _adjoint_vjp(g, ys, y0, t, *inputs, rhs=rhs, options=options)


def _augmented(rhs, D):
    """The adjoint system [y, a, a_params] -> [f, -a^T df/dy, -a^T df/dparams] (params: args, then
    captures), for odeint: on arrays through rhs.pullback, on Tensors recorded (create_graph)."""
    def aug(state, s, *args):
        y, a = state[:D], state[D:2 * D]   # (run eagerly, never replayed: it sweeps the tape itself)
        if not any(_is_tensor(x) for x in (state, s, *args)):
            grads = rhs.pullback(y, s, args, -a)
            return np.concatenate([rhs.values(y, s, args), grads[0], _flat(grads[2:])])
        with enable_grad():
            out = rhs.call(y, s, args)
        wrt = [w for w in (y, *args, *rhs.captures) if isinstance(w, Tensor) and w.requires_grad]
        grads = {}
        if isinstance(out, Tensor) and out.requires_grad and wrt:
            grads = reverse_sweep([out], [-a], wrt=wrt, create_graph=True, cut=True)
        pieces = [grads[w] if isinstance(w, Tensor) and w in grads else np.zeros(np.shape(w))
                  for w in (y, *args, *rhs.captures)]
        return ops.PUBLIC["concatenate"]([out, *[np.reshape(p, -1) for p in pieces]])
    aug._adjoint_system = True
    return aug


def _recorded_adjoint_vjp(g, ys, y0, t, *inputs, rhs, options):
    """JAX's odeint VJP: the augmented system integrated backward by odeint itself, on the tape.
    The state is integrated backward here (as JAX's): second derivatives of stiff systems are as
    stable as that."""
    T, D = ys.shape
    args = list(inputs[:rhs.n_args])
    params = args + list(rhs.captures)
    a = g[-1]
    a_params = np.zeros(sum(int(np.prod(np.shape(p))) for p in params))
    aug = _augmented(rhs, D)
    back = _backward_options(options)
    t_grads = [None] * T
    for i in range(T - 1, 0, -1):
        with enable_grad():
            t_grads[i] = ops.PUBLIC["sum"](rhs.call(ys[i], t[i], args) * g[i])
        state = ops.PUBLIC["concatenate"]([ys[i], a, a_params])
        times = ops.PUBLIC["stack"]([t[i], t[i - 1]])
        out = odeint(aug, state, times, args=tuple(args), **back)[1]
        a, a_params = out[D:2 * D] + g[i - 1], out[2 * D:]
    with enable_grad():
        t_grads[0] = -ops.PUBLIC["sum"](rhs.call(ys[0], t[0], args) * (a - g[0]))
    return (a, ops.PUBLIC["stack"](t_grads), *_unflat(a_params, params))


def _first_order_jvp(rule):
    """The sensitivity JVP runs NumPy solves; given Tensors (tt.compile's trace) it says so.
    (Second derivatives never need it: nested forward mode transposes the VJP.)"""
    def checked(c, ans, *inputs, **params):
        if any(_is_tensor(x) for x in (c, ans, *inputs)):
            raise NotImplementedError("odeint: its JVP rule (forward sensitivities) runs NumPy ODE solves, "
                                      "so tt.compile cannot record it; call the function uncompiled")
        return rule(c, ans, *inputs, **params)
    return checked


# Not a built-in row of specs.OP_SPECS (the sweeps there compile every row): checked in
# tests/scipy/test_integrate.py, and left out of tt.check_rules()'s registry.
_odeint = Primitive(_forward, "odeint", nargs=None)
_odeint.defvjp(_vjp)
_odeint.defjvp_joint(_first_order_jvp(_sensitivity_jvp))
REGISTRY.pop("odeint")


def _fresh(x, dtype=None):
    """x's value now as a plain array: the fresh leaves func is traced on (a traced array's view
    taken first, so tt.compile's check for tinytensor code dropping a traced array lets it be)."""
    if isinstance(x, np.ndarray):
        x = np.ndarray.view(x, np.ndarray)
    return np.asarray(x, dtype=dtype)


def _as_input(x, what):
    if isinstance(x, Tensor):
        if x.data.dtype.kind != "f":
            raise TypeError(f"odeint: {what} must be a float array, got dtype {x.dtype}")
        return x
    x = np.asanyarray(x)      # (a traced array stays one: tt.compile records what is computed from it)
    if x.dtype.kind == "c":
        raise TypeError(f"odeint: {what} is complex ({x.dtype}); SciPy's odeint is real only")
    return x.astype(np.float64) if x.dtype.kind != "f" else x


def _prepare(func, y0, t, args, name, replay=True):
    """(y0, t, the leaves of args, the right-hand side with its closed-over Tensors found)."""
    ndim = np.ndim(y0.data if isinstance(y0, Tensor) else y0)
    if ndim == 0 and name == "odeint":     # SciPy's odeint takes a number: y of shape (1,)
        y0 = ops.reshape(y0, (1,)) if isinstance(y0, Tensor) else np.reshape(y0, (1,))
    elif ndim != 1:
        raise ValueError(f"{name}: y0 must be 1-D (odeint also takes a number), as SciPy's; "
                         f"got {ndim} dimensions")
    if not isinstance(args, tuple):
        args = (args,)               # SciPy's single extra argument
    leaves, structure = tree_flatten(args)
    y0 = _as_input(y0, "y0")
    t = _as_input(t, "t")
    leaves = [_as_input(a, f"args leaf {i}") for i, a in enumerate(leaves)]
    rhs = _RHS(func, structure, len(leaves), replay=replay and not getattr(func, "_adjoint_system", False))
    rhs.check = is_grad_enabled()
    rec = STATE.recorder       # tt.compile recording the call: what func reads of its values
    rec = rec if rec is not None and getattr(rec, "recording", False) and not rec.depth_inside else None
    if rhs.check or rec is not None:   # closure conversion: the Tensors func reaches on its own
        t0 = (t.data if isinstance(t, Tensor) else t)[0]
        y0v = y0.data if isinstance(y0, Tensor) else y0
        seen = (len(rec.entries), len(rec.values)) if rec is not None else None
        inputs, out = rhs._traced(y0v, t0, [a.data if isinstance(a, Tensor) else a for a in leaves],
                                  check=False)
        if rhs.check and isinstance(out, Tensor) and out.requires_grad:
            rhs.captures = _reached_before(out, inputs[0]._id)
        if rec is not None:
            _refuse_traced_closure(rec, seen, (y0, t, *leaves, *rhs.captures), name)
    return y0, t, leaves, rhs


def _refuse_traced_closure(rec, seen, given, name):
    """func, called once on fresh values while tt.compile records, read a value the recording
    traces (an argument of the compiled function, or computed from one) other than those handed
    to it: its program would keep that value. Refused, naming the fix."""
    from ..compile.tracer import _refs
    entries, count = seen
    handed = {rec.var_of(x) for x in given if isinstance(x, (Tensor, np.ndarray))}
    read = {r for e in rec.entries[entries:] for r in _refs(e.args, []) + _refs(e.kwargs, [])}
    if any(r < count and r not in handed and r not in rec.live_vars for r in read):   # (a Tensor made
        # before the call, closed over: its program reads it through the Tensor on every call)
        raise RuntimeError(
            f"tt.compile: the right-hand side given to tt.scipy.integrate.{name} reads, through its "
            f"closure, a value the compiled function computes from its arguments; the solver's "
            f"program would keep this call's value. Pass it in args=(...) (func(y, t, *args)), or "
            f"call the function uncompiled")


def odeint(func, y0, t, args=(), Dfun=None, col_deriv=0, full_output=0, ml=None, mu=None, rtol=None,
           atol=None, tcrit=None, h0=0.0, hmax=0.0, hmin=0.0, ixpr=0, mxstep=0, mxhnil=0, mxordn=12,
           mxords=5, printmessg=0, tfirst=False, replay=True):
    """scipy.integrate.odeint(func, y0, t, args): y at each time in t, shape (len(t), len(y0)),
    differentiable in y0, t, every array in `args` (a tuple, or any pytree of arrays) and every
    Tensor func closes over (adjoint-method VJP on the kept forward trajectory, sensitivity JVP),
    to any order. The options apply to the forward solve; a failed solve makes the derivative raise.
    func is recorded once with tt.compile and replayed on every call, several times cheaper, when
    it closes over no Tensor that requires grad; for a small state (SCALAR_LIMIT floats, closed-over
    Tensors included) it runs as straight-line Python on floats written from a recording
    (docs/guides/scipy.md); `replay=False` (not SciPy's) runs it eagerly.

    Examples
    --------
    Exponential decay, dy/dt = -k y, and the derivative of y(2) = exp(-2k) in the rate k:

    >>> k = tt.tensor(0.5, requires_grad=True)
    >>> t = np.array([0.0, 1.0, 2.0])
    >>> ys = tt.scipy.integrate.odeint(lambda y, t, k: -k * y, np.array([1.0]), t, args=(k,))
    >>> ys.shape
    (3, 1)
    >>> ys.numpy().round(6)                   # exp(-k t)
    array([[1.      ],
           [0.606531],
           [0.367879]])
    >>> ys[-1, 0].backward()
    >>> round(float(k.grad), 6)               # -2 exp(-2k)
    -0.735759
    """
    if full_output or Dfun is not None or tfirst:
        raise TypeError("odeint: full_output, Dfun and tfirst are not supported on Tensors")
    options = {k: v for k, v in dict(rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax, hmin=hmin,
                                     h0=h0).items() if v is not None}
    y0, t, leaves, rhs = _prepare(func, y0, t, args, "odeint", replay)
    return _odeint(y0, t, *leaves, *rhs.captures, rhs=rhs, options=options)


# ----- solve_ivp -------------------------------------------------------------------------------------
def _ivp_forward(y0, t, *inputs, rhs, options, solved):
    return solved        # solve_ivp's own values at t (the wrapper solved once, with SciPy)


_ivp = Primitive(_ivp_forward, "solve_ivp", nargs=None)
_ivp.defvjp(lambda g, ys, y0, t, *inputs, rhs, options, solved:
            _vjp(g, ys, y0, t, *inputs, rhs=rhs, options=options))
_ivp.defjvp_joint(_first_order_jvp(lambda c, ys, y0, t, *inputs, rhs, options, solved:
                                   _sensitivity_jvp(c, ys, y0, t, *inputs, rhs=rhs, options=options)))
REGISTRY.pop("solve_ivp")

_IVP_METHODS = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")


def solve_ivp(fun, t_span, y0, method="RK45", t_eval=None, dense_output=False, events=None,
              vectorized=False, args=None, replay=True, **options):
    """scipy.integrate.solve_ivp(fun, t_span, y0, method, t_eval, args, rtol=, atol=, ...): SciPy's
    result (t, y, status, message, success, nfev, ...), with `y` (shape (len(y0), len(t))) a Tensor
    differentiable in y0, the arrays of `args`, every Tensor fun closes over and t_eval, to any
    order, as odeint (the adjoint reads the kept forward trajectory). Without t_eval the times are
    the solver's steps, taken as constants. A failed solve (success False) gives SciPy's result with
    `y` an array, so no gradient can be taken from it. `replay=True`: as odeint's.

    Examples
    --------
    Exponential decay with the rate closed over (no `args` needed), and d y(2) / dk:

    >>> k = tt.tensor(0.5, requires_grad=True)
    >>> sol = tt.scipy.integrate.solve_ivp(lambda t, y: -k * y, (0.0, 2.0), np.array([1.0]),
    ...                                    t_eval=[1.0, 2.0], rtol=1e-8, atol=1e-10)
    >>> sol.success, sol.y.shape
    (True, (1, 2))
    >>> sol.y.numpy().round(6)                # exp(-k t)
    array([[0.606531, 0.367879]])
    >>> sol.y[0, -1].backward()
    >>> round(float(k.grad), 6)               # -2 exp(-2k)
    -0.735759
    """
    if STATE.recorder is not None and getattr(STATE.recorder, "recording", False):
        raise RuntimeError(
            "tt.compile: tt.scipy.integrate.solve_ivp inside a compiled function: SciPy's solver "
            "runs in Python, and what it gives (the times it stepped to, their number, success, "
            "nfev) would be frozen at the recording call. Use tt.scipy.integrate.odeint with the "
            "times you need (it is recorded: solved again on every call), or call solve_ivp outside "
            "the compiled function, or the function uncompiled")
    if dense_output or events is not None or vectorized:
        raise TypeError("solve_ivp: dense_output, events and vectorized are not supported on Tensors "
                        "(use t_eval for the times you need)")
    if method not in _IVP_METHODS:
        raise ValueError(f"solve_ivp: method must be one of {_IVP_METHODS}, got {method!r}")
    if any(isinstance(x, Tensor) and x.requires_grad for x in t_span):
        raise TypeError("solve_ivp: not differentiable in t_span; give the times as t_eval (a Tensor) "
                        "instead")
    t0, t1 = (float(x.data if isinstance(x, Tensor) else x) for x in t_span)
    func = lambda y, t, *a: fun(t, y, *a)          # noqa: E731  (odeint's order: y first)
    start = np.array([t0]) if t_eval is None else _as_input(t_eval, "t_eval")
    y0, start, leaves, rhs = _prepare(func, y0, start, () if args is None else args, "solve_ivp", replay)
    values = [a.data if isinstance(a, Tensor) else a for a in leaves]
    t_values = None if t_eval is None else np.asarray(start.data if isinstance(start, Tensor) else start)
    y0v = y0.data if isinstance(y0, Tensor) else y0
    program = rhs.values_program(y0v, t0, values)      # on floats where bit for bit the array program
    sol = scipy.integrate.solve_ivp(lambda s, y: program(y, s), (t0, t1), y0v, method=method,
                                    t_eval=t_values, **options)
    if not sol.success:
        return sol
    times, ys = sol.t, sol.y.T
    prepend = len(times) == 0 or times[0] != t0
    if prepend:                                    # the adjoint starts from y0 at t0
        ys = np.concatenate([np.reshape(y0.data if isinstance(y0, Tensor) else y0, (1, -1)), ys])
    if t_eval is None:
        t_in = np.concatenate([[t0], times]) if prepend else times
    else:
        t_in = ops.PUBLIC["concatenate"]([np.array([t0]), start]) if prepend else start
    tolerances = {"rtol": options.get("rtol", 1e-3), "atol": options.get("atol", 1e-6), "mxstep": 100000}
    out = _ivp(y0, t_in, *leaves, *rhs.captures, rhs=rhs, options=tolerances, solved=ys)
    sol.y = (out[1:] if prepend else out).T
    return sol


__all__ = ["odeint", "solve_ivp"]

"""Checking gradients: numerical differences, gradcheck, and the per-primitive rule check.

`check_op` is the one check every primitive goes through, both in the test suite
(tests/sweeps/test_op_sweep.py) and in `tt.check_rules()`: the forward against NumPy, the VJP and the JVP
against central differences, the adjoint identity <u, J v> = <J^T u, v> that ties the two
rules together, and float32 against float64.
"""

import math

import numpy as np

from . import backend, tape
from .state import off_the_record, recording
from .tape import REGISTRY, forward_sweep, reverse_sweep
from .tensor import Tensor


class GradcheckError(AssertionError):
    """Raised by `gradcheck`; the message names argument, mode, worst element and values.

    Examples
    --------
    >>> @tt.primitive
    ... def twice(x):
    ...     return 2 * x
    ...
    >>> _ = twice.defvjp(lambda g, ans, x: 3 * g)   # wrong: the derivative is 2
    >>> _ = twice.defjvp(lambda t, ans, x: 2 * t)
    >>> try:
    ...     tt.gradcheck(lambda x: twice(x).sum(), np.array([1.0]))
    ... except tt.GradcheckError:
    ...     print('the VJP rule is wrong')
    ...
    the VJP rule is wrong
    """


def _on_every_call(fun, args, name):
    """fun(*args) (a check that runs f on values it makes) while tt.compile records: computed now
    off the recording, and a line of the program that computes it again on every call (f runs
    whole there, as eagerly: nothing it reads is frozen)."""
    from .ops import on_values
    with off_the_record(tape.ANOMALY_CHECK):
        result = fun(*args)
    if type(result) is tuple and any(r is None for r in result):   # (a non-float argument's None)
        raise RuntimeError(f"tt.compile: tt.{name} inside a compiled function with a non-float "
                           f"argument; call it outside the compiled function")
    return on_values(fun, args, {}, result, name=name)


def _as_array(x):   # arrays stay on their device (NumPy's, CuPy's)
    return backend.asarray(x.data if isinstance(x, Tensor) else x)


def _is_float(x):
    return np.issubdtype(_as_array(x).dtype, np.inexact)


def _evaluate(f, args):
    out = f(*[Tensor(a) if _is_float(a) else a for a in args])
    return _as_array(out).astype(np.float64)


def _require_a_float(args, who):
    if not any(_is_float(a) for a in args):
        raise TypeError(f"{who} differentiates only floating-point arguments, and none of "
                        f"{tuple(_as_array(a).dtype.name for a in args)} is one: integer arguments "
                        f"are passed through as constants (labels, indices). Pass floats, e.g. "
                        f"{who}(f, 2.0, 5.0) rather than {who}(f, 2, 5)")


def numerical_grad(f, *args, eps=1e-6):
    """Central differences in float64, one array per argument (a tuple).

    Parameters
    ----------
    f : callable
        Takes arrays or Tensors, returns a Tensor or an array.
    *args : array_like
        The point. Arguments on a device (CuPy arrays) are differentiated there, and the
        results stay there.
    eps : float
        The step.

    Returns
    -------
    tuple of ndarray
        For a scalar f each array has the argument's shape (the gradient); otherwise it is the
        Jacobian, of shape f(...).shape + argument.shape. Non-float arguments get None.

    Examples
    --------
    >>> a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    >>> tt.numerical_grad(lambda a, b: (a * b).sum(), a, b)
    (array([3., 4.]), array([1., 2.]))
    """
    if recording():
        return _on_every_call(lambda *a: numerical_grad(f, *a, eps=eps), args, "numerical_grad")
    _require_a_float(args, "numerical_grad")
    values = [_as_array(a) for a in args]
    values = [v.astype(np.float64) if _is_float(v) else v for v in values]
    out_shape = _evaluate(f, values).shape
    result = []
    for i, v in enumerate(values):
        if not _is_float(v):
            result.append(None)
            continue
        jac = backend.namespace(v).zeros(out_shape + v.shape)
        flat = jac.reshape(out_shape + (v.size,))
        center = v.reshape(-1)
        for k in range(v.size):
            shifted = [w.copy() if j == i else w for j, w in enumerate(values)]
            element = shifted[i].reshape(-1)      # a view of the copy: writes move one element
            element[k] = center[k] + eps
            up = _evaluate(f, shifted)
            element[k] = center[k] - eps
            down = _evaluate(f, shifted)
            flat[..., k] = (up - down) / (2 * eps)
        result.append(jac)
    return tuple(result)


def analytic_jacobians(f, *args, modes=("rev", "fwd")):
    """The Jacobian of f at args from each mode: {mode: [jacobian per float argument]}.

    "rev" runs one reverse sweep per output element, "fwd" one forward sweep per input element,
    both on the one recorded tape. Jacobians are out.shape + arg.shape.
    """
    inputs = [Tensor(_as_array(a), requires_grad=True) if _is_float(a) else a for a in args]
    out = f(*inputs)
    if not isinstance(out, Tensor):
        raise TypeError(f"the function must return a Tensor, got {type(out).__name__}")
    leaves = [x for x in inputs if isinstance(x, Tensor)]
    jacobians = {}
    if "rev" in modes:
        jac = [backend.namespace(x.data).zeros(out.shape + x.shape, dtype=x.dtype) for x in leaves]
        for k in np.ndindex(out.shape):
            seed = np.zeros_like(out.data)
            seed[k] = 1
            grads = reverse_sweep([out], [seed], wrt=leaves) if out.requires_grad else {}
            for j, x in zip(jac, leaves):
                if x in grads:
                    j[k] = grads[x]
        jacobians["rev"] = jac
    if "fwd" in modes:
        jac = []
        for x in leaves:
            j = backend.namespace(x.data).zeros(out.shape + x.shape, dtype=out.dtype)
            for k in np.ndindex(x.shape):
                tangent = np.zeros_like(x.data)
                tangent[k] = 1
                j[(Ellipsis,) + k] = forward_sweep(out, {x: tangent})
            jac.append(j)
        jacobians["fwd"] = jac
    return out, jacobians


def _worst(analytic, numerical, atol, rtol):
    """None if they agree elementwise within atol + rtol*|numerical|; else a report."""
    err = np.abs(analytic.astype(np.float64) - numerical)
    excess = err - (atol + rtol * np.abs(numerical))
    if excess.size == 0 or np.all(excess <= 0) and np.all(np.isfinite(analytic)):
        return None
    where = np.unravel_index(np.nanargmax(np.where(np.isfinite(excess), excess, np.inf)), err.shape)
    rel = err / np.maximum(np.abs(numerical), 1e-300)
    return (f"largest absolute error {np.nanmax(err):.3g}, largest relative error "
            f"{np.nanmax(rel[np.abs(numerical) > atol]) if np.any(np.abs(numerical) > atol) else 0:.3g}; "
            f"worst at Jacobian index {tuple(int(i) for i in where)} (output index, then input "
            f"index): analytic {analytic[where]:.10g}, numerical {numerical[where]:.10g}")


def gradcheck(f, *args, eps=1e-6, atol=1e-5, rtol=1e-3, modes=("rev", "fwd")):
    """Compare `backward` and `jvp` with central differences; True, or raise GradcheckError.

    Parameters
    ----------
    f : callable
        Takes Tensors and returns a Tensor.
    *args : array_like
        The point. The numerical Jacobian is taken in float64 whatever their dtype; non-float
        arguments (labels, indices) are passed through unchanged.
    eps : float
        The step of the central differences.
    atol, rtol : float
        The tolerances, as `np.allclose`'s.
    modes : tuple of str
        "rev" (`backward`), "fwd" (`jvp`) or both.

    Returns
    -------
    bool
        True.

    Raises
    ------
    GradcheckError
        Naming, per argument and mode, the largest absolute and relative error, where it is,
        and the analytic and numerical values there.

    Examples
    --------
    >>> tt.gradcheck(lambda W: (W ** 2).sum(), np.array([1.0, 2.0]))
    True
    """
    if recording():
        return _on_every_call(lambda *a: gradcheck(f, *a, eps=eps, atol=atol, rtol=rtol, modes=modes),
                              args, "gradcheck")
    _require_a_float(args, "gradcheck")
    numerical = [n for n in numerical_grad(f, *args, eps=eps) if n is not None]
    _, analytic = analytic_jacobians(f, *args, modes=modes)
    positions = [i for i, a in enumerate(args) if _is_float(_as_array(a))]
    failures = []
    for mode in modes:
        for pos, a, n in zip(positions, analytic[mode], numerical):
            report = _worst(backend.to_host(a), backend.to_host(n), atol, rtol)
            if report:
                failures.append(f"argument {pos}, mode {mode!r}: {report}")
    if failures:
        raise GradcheckError("gradcheck failed:\n  " + "\n  ".join(failures))
    return True


# ----- the per-primitive check (tests/sweeps/test_op_sweep.py and check_rules) -----------------------------
def _max_rel_error(a, b, floor=1.0):
    """max |a - b| relative to the largest |b|, or to `floor` if that is larger."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return np.inf
    if a.size == 0:
        return 0.0
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return np.inf
    return float(np.max(np.abs(a - b)) / max(floor, float(np.max(np.abs(b)))))


def check_op(call, args, params=None, reference=None, eps=1e-6, rng=0, float32=True):
    """Run one op on one set of inputs through every check; returns the errors found.

    `args` are arrays (float ones are differentiated, others are constants). Returns a dict:
    forward (vs `reference`), vjp and jvp (vs central differences, relative to the largest
    entry), adjoint (|<u, J v> - <J^T u, v>|, relative), float32 (float32 run vs float64 run,
    inf if a float32 value, gradient or tangent came out in another dtype).
    """
    params = params or {}
    rng = np.random.default_rng(rng)
    args = [np.asarray(a, dtype=np.float64) if _is_float(a) else a for a in args]

    def f(*xs):
        return call(*xs, **params)

    errors = {}
    out, jac = analytic_jacobians(f, *args)
    if reference is not None:
        errors["forward"] = _max_rel_error(out.data, reference(*args, **params))
    numerical = [n for n in numerical_grad(f, *args, eps=eps) if n is not None]
    # Relative to the Jacobian's own scale down to 1e-3, so small gradients are checked too.
    errors["vjp"] = max([_max_rel_error(a, n, 1e-3) for a, n in zip(jac["rev"], numerical)], default=0.0)
    errors["jvp"] = max([_max_rel_error(a, n, 1e-3) for a, n in zip(jac["fwd"], numerical)], default=0.0)
    errors["adjoint"] = _adjoint_error(f, args, rng)
    errors["float32"] = _float32_error(f, args, rng) if float32 else 0.0
    return errors


def _adjoint_error(f, args, rng):
    """<u, J v> from one forward sweep against <J^T u, v> from one reverse sweep."""
    inputs = [Tensor(a, requires_grad=True) if _is_float(a) else a for a in args]
    leaves = [x for x in inputs if isinstance(x, Tensor)]
    out = f(*inputs)
    if not out.requires_grad:
        return 0.0
    u = rng.standard_normal(out.shape)
    v = {x: rng.standard_normal(x.shape) for x in leaves}
    jv = forward_sweep(out, v)
    jtu = reverse_sweep([out], [u], wrt=leaves)
    lhs = float(np.sum(u * jv))
    rhs = math.fsum(float(np.sum(jtu[x] * v[x])) for x in leaves if x in jtu)
    return abs(lhs - rhs) / max(1.0, abs(lhs))


def _float32_error(f, args, rng):
    """Run in float32: every value, gradient and tangent must stay float32 and agree with float64."""
    def run(dtype):
        inputs = [Tensor(np.asarray(a, dtype=dtype), requires_grad=True) if _is_float(a) else a
                  for a in args]
        leaves = [x for x in inputs if isinstance(x, Tensor)]
        out = f(*inputs)
        u = np.random.default_rng(1).standard_normal(out.shape).astype(dtype)
        grads = reverse_sweep([out], [u], wrt=leaves) if out.requires_grad else {}
        tangent = forward_sweep(out, {x: np.ones(x.shape, dtype) for x in leaves}) \
            if out.requires_grad else np.zeros(out.shape, dtype)
        return out, [np.asarray(grads.get(x, np.zeros(x.shape, dtype))) for x in leaves], tangent
    out32, grads32, tan32 = run(np.float32)
    out64, grads64, tan64 = run(np.float64)
    produced = [out32.data, tan32] + grads32
    if any(np.asarray(p).dtype != np.float32 for p in produced):
        return np.inf
    pairs = [(out32.data, out64.data), (tan32, tan64)] + list(zip(grads32, grads64))
    return max(_max_rel_error(a, b) for a, b in pairs)


def _batching_error(call, cases_of_examples, params, float32=True):
    """tt.vmap(call) against a loop of call over the examples: the largest relative difference
    over three ways of mapping (every input along axis 0; along its last axis; the first input
    not mapped), in float64 and, where the op keeps dtypes, float32 (inf when a float32 result
    came out in another dtype). `cases_of_examples`: one list of inputs per example."""
    from .vmap import vmap
    n_inputs = len(cases_of_examples[0])
    floats = [_is_float(a) for a in cases_of_examples[0]]
    worst64 = worst32 = 0.0
    variants = ["first"]
    if any(np.ndim(a) > 0 for a in cases_of_examples[0]):
        variants.append("last")
    if n_inputs > 1:
        variants.append("unmapped")
    for dtype in (np.float64, np.float32) if float32 else (np.float64,):
        examples = [[np.asarray(a, dtype) if f else a for a, f in zip(ex, floats)]
                    for ex in cases_of_examples]
        for variant in variants if dtype == np.float64 else variants[:1]:   # float32: its dtype
            if variant == "unmapped":
                examples_v = [[examples[0][0]] + ex[1:] for ex in examples]
                in_axes = (None,) + (0,) * (n_inputs - 1)
            else:
                examples_v = examples
                in_axes = 0
            stacked = [np.stack([ex[i] for ex in examples_v]) for i in range(n_inputs)]
            if variant == "unmapped":
                stacked[0] = examples_v[0][0]
            elif variant == "last":
                stacked = [np.moveaxis(a, 0, -1) for a in stacked]
                in_axes = -1
            batched = _as_array(vmap(lambda *xs: call(*xs, **params), in_axes=in_axes)(*stacked))
            looped = np.stack([_as_array(call(*ex, **params)) for ex in examples_v])
            if dtype == np.float32 and any(floats) and looped.dtype == np.float32 \
                    and batched.dtype != np.float32:
                return worst64, np.inf
            error = _max_rel_error(batched, looped) if batched.shape == looped.shape else np.inf
            if dtype == np.float64:
                worst64 = max(worst64, error)
            else:
                worst32 = max(worst32, error)
    return worst64, worst32


def _missing_modes(prim):
    missing = [mode for mode, rules, joint, how in (("VJP", prim.vjps, prim.joint_vjp, "defvjp"),
                                                    ("JVP", prim.jvps, prim.joint_jvp, "defjvp"))
               if rules is None and joint is None]
    if not missing:
        return None
    if len(missing) == 2:
        return "no VJP rule and no JVP rule (declare them with defvjp and defjvp)"
    have, how = ("JVP", "defvjp") if missing == ["VJP"] else ("VJP", "defjvp")
    return f"{have} rule only: no {missing[0]} rule (declare it with {prim.name}.{how})"


def check_rules(tolerance=1e-5, float32_tolerance=1e-3, verbose=True, raise_on_failure=True,
                examples=None, only=None, batching_tolerance=1e-12):
    """Check every registered primitive (built-in and user) as the test suite does.

    Prints a table: op, cases, VJP error, JVP error, adjoint identity error, float32 error,
    and returns its rows as dicts (key "ok" says whether the row passed). If any row fails,
    raises GradcheckError listing the failed rows after printing the table, unless
    `raise_on_failure=False`. A primitive with a rule for one mode only fails, saying so.
    Built-in primitives use their rows of `specs.OP_SPECS`; a user primitive is tried on the
    inputs `examples` gives it, a dict {primitive or its name: [tuple of arguments, ...]}
    (e.g. {"my_arcsin": [(np.array([-0.5, 0.1, 0.7]),)]}), else on positive inputs of shape (3,).
    `only` (a primitive or its name, or a list of them) checks those rows alone: a test of one
    primitive need not sweep every built-in.

    The batching column checks each primitive's tt.vmap rule against a loop of the unbatched
    call over three examples (in float64 to `batching_tolerance`; in float32 the results stay
    float32, to `float32_tolerance`); "rule" says "native", or "loop" for a primitive declared
    to run once per example, and those are listed by name under the table.

    Examples
    --------
    >>> rows = tt.check_rules(only=tt.exp, verbose=False)
    >>> len(rows) > 0
    True
    """
    from .ops.batching import rule_kind
    from .specs import OP_SPECS, default_cases
    given = {getattr(k, "name", k): v for k, v in (examples or {}).items()}
    unknown = sorted(set(given) - set(REGISTRY))
    if unknown:
        raise ValueError(f"check_rules: examples names no registered primitive {unknown}; "
                         f"keys are primitives or their names")
    chosen = None
    if only is not None:
        chosen = {getattr(k, "name", k) for k in (only if isinstance(only, (list, tuple, set)) else [only])}
        unknown = sorted(chosen - set(REGISTRY))
        if unknown:
            raise ValueError(f"check_rules: only= names no registered primitive {unknown}; "
                             f"give primitives or their names")
    rows = []
    from .ops import BUILTIN
    for name, prim in REGISTRY.items():
        if chosen is not None and name not in chosen:
            continue
        spec = OP_SPECS.get(name) if name in BUILTIN else None   # never another primitive's row
        if name in given:
            cases = [(list(args if isinstance(args, (tuple, list)) else (args,)), {})
                     for args in given[name]]
        else:
            cases = spec.cases() if spec else default_cases(prim)
        worst = {"forward": 0.0, "vjp": 0.0, "jvp": 0.0, "adjoint": 0.0, "float32": 0.0,
                 "batching": 0.0, "batching32": 0.0}
        failure = _missing_modes(prim)
        if name in given:
            example_sets = [[case] for case in cases]
        else:
            more = [spec.cases(seed) for seed in (1, 2)] if spec else [cases, cases]
            example_sets = [[c0, c1, c2] for c0, c1, c2 in zip(cases, *more)]
        for (args, params), examples_of in zip([] if failure else cases, example_sets):
            try:
                errors = check_op(spec.call if spec else prim, args, params,
                                  spec.reference if spec else None,
                                  float32=spec.float32 if spec else True)
            except Exception as err:   # noqa: BLE001 - a broken rule is a finding, not a crash
                failure = f"{type(err).__name__}: {err}"
                break
            try:
                sets = [list(a) for a, _ in examples_of]
                if len(sets) == 1:      # a user's example: three examples from it, scaled
                    sets = [[x * s if _is_float(x) else x for x in sets[0]] for s in (1.0, 0.9, 1.1)]
                errors["batching"], errors["batching32"] = _batching_error(
                    spec.call if spec else prim, sets, params,
                    float32=spec.float32 if spec else True)
            except Exception as err:   # noqa: BLE001 - a broken batching rule is a finding
                failure = f"batching (tt.vmap): {type(err).__name__}: {err}"
                break
            for key, value in errors.items():
                worst[key] = max(worst[key], value)
        ok = (failure is None and max(worst["vjp"], worst["jvp"], worst["adjoint"],
                                      worst["forward"]) <= tolerance
              and worst["float32"] <= float32_tolerance and worst["batching"] <= batching_tolerance
              and worst["batching32"] <= float32_tolerance)
        rows.append({"op": name, "cases": len(cases), **worst, "ok": ok, "error": failure,
                     "default_inputs": not spec and name not in given, "rule": rule_kind(name)})
    if verbose:
        print(f"{'op':<24}{'cases':>6}{'VJP error':>12}{'JVP error':>12}{'adjoint':>12}"
              f"{'float32':>12}{'batching':>12}{'rule':>8}  ok")
        for r in rows:
            if r["error"]:
                print(f"{r['op']:<24}{r['cases']:>6}  FAILED  {r['error'][:70]}")
            else:
                print(f"{r['op']:<24}{r['cases']:>6}{r['vjp']:>12.2e}{r['jvp']:>12.2e}"
                      f"{r['adjoint']:>12.2e}{r['float32']:>12.2e}{r['batching']:>12.2e}"
                      f"{r['rule']:>8}  {'yes' if r['ok'] else 'NO'}")
        looped = [r["op"] for r in rows if r["rule"] == "loop"]
        if looped:
            print(f"declared loop fallback under tt.vmap (once per example, not batched): "
                  f"{', '.join(looped)}")
    failed = [r for r in rows if not r["ok"]]
    if failed and raise_on_failure:
        lines = [f"{r['op']}: {r['error']}" if r["error"] else
                 f"{r['op']}: forward {r['forward']:.2e}, VJP {r['vjp']:.2e}, JVP {r['jvp']:.2e}, "
                 f"adjoint {r['adjoint']:.2e}, float32 {r['float32']:.2e}, batching "
                 f"{r['batching']:.2e} (float32 {r['batching32']:.2e}) (tolerance {tolerance:g}, "
                 f"float32 {float32_tolerance:g}, batching {batching_tolerance:g})" for r in failed]
        lines = [line + (f"; checked on positive inputs of shape (3,): if its rules are right, give it "
                         f"inputs in its domain, check_rules(examples={{{r['op']!r}: [(x,), ...]}})"
                         if r["default_inputs"] else "") for line, r in zip(lines, failed)]
        raise GradcheckError(f"check_rules: {len(failed)} of {len(rows)} primitive(s) failed "
                             f"(pass raise_on_failure=False to get the rows instead):\n  "
                             + "\n  ".join(lines))
    return rows

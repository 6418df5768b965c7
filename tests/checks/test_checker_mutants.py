"""Issue 7: the checker checks itself (mutation testing of the rule checks).

Each mutant replaces one primitive's rules (its `vjps`/`jvps` tuples, or its joint rules) for the
length of one check, then restores them. Families:

* factor   - one rule's result times 1.001 (VJP and JVP, every input of every primitive)
* sign     - one rule's result negated (VJP and JVP, every input)
* dropped  - one rule returns None, i.e. a silently zero gradient or tangent (VJP and JVP)
* missing  - the primitive has no JVP at all
* broadcast- a VJP that reduces a broadcast gradient itself, wrongly, so the engine's unbroadcast
             is bypassed: it keeps the first copy, or averages instead of summing
* transpose- a result transposed (then reshaped to fit, which the engine accepts), matmul/dot/
             linear VJPs that forget the transpose, transpose's rules with the wrong axes

A mutant that changes no rule output on any spec case is equivalent to the original (e.g. the
sign of a zero gradient) and is left out; every other one must be caught by `check_op` at the
sweep's tolerance (1e-6) and by `tt.gradcheck(rtol=1e-6, atol=1e-9)`: 100%.
"""

import contextlib
import functools
from dataclasses import dataclass

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.checks import check_op
from tinytensor.specs import EXTRA_SPECS, OP_SPECS

RULE_FIELDS = ("vjps", "joint_vjp", "jvps", "joint_jvp")
TOLERANCE = 1e-6
GRADCHECK = dict(rtol=1e-6, atol=1e-9)


@contextlib.contextmanager
def replaced_rules(prim, **fields):
    """Temporarily set some of prim's rule fields; always restores all of them."""
    saved = {f: getattr(prim, f) for f in RULE_FIELDS}
    try:
        for name, value in fields.items():
            setattr(prim, name, value)
        yield prim
    finally:
        for name, value in saved.items():
            setattr(prim, name, value)


# ----- which spec rows exercise a primitive ---------------------------------------------------------
def _is_float(a):
    return np.issubdtype(np.asarray(a).dtype, np.floating)


def _recorded_prims(spec):
    args, params = spec.cases()[0]
    out = spec.call(*[tt.tensor(a, requires_grad=True) if _is_float(a) else a for a in args], **params)
    names, stack, seen = set(), [out], set()
    while stack:
        node = stack.pop()
        if id(node) in seen or not isinstance(node, tt.Tensor) or node._prim is None:
            continue
        seen.add(id(node))
        names.add(node._prim.name)
        stack.extend(node._inputs)
    return names


@functools.cache   # each row's forward is run once, not once per mutant
def rows_for(name):
    rows = [OP_SPECS[name]]
    rows += [spec for spec in EXTRA_SPECS.values() if name in _recorded_prims(spec)]
    return [(spec, args, params) for spec in rows for args, params in spec.cases()]


PRIMS = sorted(n for n in OP_SPECS if n in tt.REGISTRY and n in tt.ops.BUILTIN)


def _arity(prim):
    return prim.nargs if prim.nargs is not None else 2     # variadic: mutate the first two inputs


# ----- building mutants ----------------------------------------------------------------------------
def _wrap_rule(rule, i, transform):
    def mutated(c, ans, *xs, **params):
        return transform(rule(c, ans, *xs, **params), np.shape(xs[i]))
    return mutated


def _wrap_joint_vjp(joint, i, transform):
    def mutated(g, ans, *xs, **params):
        parts = list(joint(g, ans, *xs, **params))
        if i < len(xs):                       # a variadic op may have fewer inputs (einsum)
            parts[i] = transform(parts[i], np.shape(xs[i]))
        return tuple(parts)
    return mutated


def _wrap_joint_jvp(joint, i, transform):
    def mutated(ts, ans, *xs, **params):      # change input i's contribution only
        full = joint(ts, ans, *xs, **params)
        if i >= len(xs) or ts[i] is None:
            return full
        own = joint([t if j == i else None for j, t in enumerate(ts)], ans, *xs, **params)
        changed = transform(own, np.shape(xs[i]))
        return full - own if changed is None else full - own + changed
    return mutated


def mutated_fields(prim, kind, i, transform):
    """The rule fields of `prim` with input i's `kind` ("vjp"/"jvp") rule passed through transform."""
    rules, joint = (prim.vjps, prim.joint_vjp) if kind == "vjp" else (prim.jvps, prim.joint_jvp)
    if rules is not None:
        rules = list(rules)
        rules[i] = _wrap_rule(rules[i], i, transform)
        return {kind + "s": tuple(rules)}
    wrap = _wrap_joint_vjp if kind == "vjp" else _wrap_joint_jvp
    return {"joint_" + kind: wrap(joint, i, transform)}


def _factor(r, shape):
    return None if r is None else r * 1.001


def _sign(r, shape):
    return None if r is None else -r


def _dropped(r, shape):
    return None


def _first_copy(r, shape):
    """Reduce a broadcast gradient to `shape` by keeping its first copy instead of summing."""
    if r is None or np.ndim(r) < len(shape) or np.shape(r) == tuple(shape):
        return r
    r = np.asarray(r)
    r = r[(0,) * (r.ndim - len(shape))]
    return r[tuple(slice(0, 1) if n == 1 else slice(None) for n in shape)]


def _mean_copy(r, shape):
    """Reduce a broadcast gradient to `shape` by averaging the copies instead of summing them."""
    if r is None or np.ndim(r) < len(shape) or np.shape(r) == tuple(shape):
        return r
    return tt.unbroadcast(np.asarray(r), tuple(shape)) * (np.prod(shape) / np.size(r))


def _transposed(r, shape):
    """The result with its last two axes swapped, reshaped back (the engine accepts any shape
    of the right size, so only the values can tell)."""
    if r is None or np.ndim(r) < 2:
        return r
    return np.reshape(np.swapaxes(r, -1, -2), np.shape(r))


TRANSFORMS = {   # family: [(name, transform, kinds)]
    "factor 1.001": [("x1.001", _factor, ("vjp", "jvp"))],
    "sign flip": [("negated", _sign, ("vjp", "jvp"))],
    "dropped rule": [("returns None", _dropped, ("vjp", "jvp"))],
    "un-reduced broadcast": [("first copy", _first_copy, ("vjp",)), ("mean of copies", _mean_copy, ("vjp",))],
    "transposed": [("swapped axes", _transposed, ("vjp", "jvp"))],
}


def _missing_jvp(*args, **params):
    raise NotImplementedError("mutant: no JVP rule")


def _matmul_vjp_a_untransposed(g, ans, a, b, *rest):
    return np.matmul(g, b)                    # should be g @ b^T


def _matmul_vjp_b_untransposed(g, ans, a, b, *rest):
    return np.matmul(a, g)                    # should be a^T @ g


def _transpose_vjp_forward_axes(g, ans, x, axes):
    return np.transpose(g, axes)              # should use the inverse permutation


def _transpose_jvp_inverse_axes(t, ans, x, axes):
    return np.transpose(t, None if axes is None else tuple(np.argsort(axes)))


def special_mutants(name, prim):
    """Hand-written mutants: [(family, description, fields)]."""
    out = [("missing JVP", "no JVP rule", {"jvps": None, "joint_jvp": _missing_jvp})]
    if name in ("matmul", "dot", "linear"):
        vjps = list(prim.vjps)
        out.append(("transposed", "VJP a without the transpose",
                    {"vjps": tuple([_matmul_vjp_a_untransposed] + vjps[1:])}))
        out.append(("transposed", "VJP b without the transpose",
                    {"vjps": tuple(vjps[:1] + [_matmul_vjp_b_untransposed] + vjps[2:])}))
    if name == "transpose":
        out.append(("transposed", "VJP with the forward axes", {"vjps": (_transpose_vjp_forward_axes,)}))
        out.append(("transposed", "JVP with the inverse axes", {"jvps": (_transpose_jvp_inverse_axes,)}))
    return out


# ----- equivalent mutants: record every rule output on the spec cases once ---------------------------------
def _recording(prim, samples):
    def keep(kind, i):
        def transform(r, shape):
            samples.setdefault((kind, i), []).append((None if r is None else np.array(r), shape))
            return r
        return transform
    fields = {}
    for kind in ("vjp", "jvp"):
        for i in range(_arity(prim)):
            fields.update(mutated_fields(_with(prim, fields), kind, i, keep(kind, i)))
    return fields


class _with:
    """prim's rule fields with some already replaced (to stack wrappers)."""
    def __init__(self, prim, fields):
        for f in RULE_FIELDS:
            setattr(self, f, fields.get(f, getattr(prim, f)))


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return np.shape(a) == np.shape(b) and np.array_equal(a, b)


def rule_samples(name):
    prim = tt.REGISTRY[name]
    samples = {}
    with replaced_rules(prim, **_recording(prim, samples)):
        for spec, args, params in rows_for(name):
            tt.checks.analytic_jacobians(lambda *xs: spec.call(*xs, **params), *args)
    return samples


@dataclass
class Mutant:
    prim: str
    family: str
    description: str
    fields: dict

    def __str__(self):
        return f"{self.prim}: {self.family}, {self.description}"


def all_mutants():
    """Every non-equivalent mutant, and the number of equivalent ones left out."""
    mutants, equivalent = [], 0
    for name in PRIMS:
        prim = tt.REGISTRY[name]
        samples = rule_samples(name)
        for family, variants in TRANSFORMS.items():
            for label, transform, kinds in variants:
                for kind in kinds:
                    for i in range(_arity(prim)):
                        seen = samples.get((kind, i), [])
                        if any(not _same(transform(r, shape), r) for r, shape in seen):
                            mutants.append(Mutant(name, family, f"{kind.upper()} of input {i} {label}",
                                                  mutated_fields(prim, kind, i, transform)))
                        else:
                            equivalent += 1
        for family, description, fields in special_mutants(name, prim):
            mutants.append(Mutant(name, family, description, fields))
    return mutants, equivalent


# ----- the two checkers ---------------------------------------------------------------------------
def caught_by_check_op(mutant):
    """'value' if check_op reports an error above the tolerance, 'error' if it raises, else None."""
    prim = tt.REGISTRY[mutant.prim]
    with replaced_rules(prim, **mutant.fields):
        for spec, args, params in rows_for(mutant.prim):
            try:
                errors = check_op(spec.call, args, params, spec.reference, float32=False)
            except Exception:   # noqa: BLE001 - a rule that crashes is caught loudly
                return "error"
            if max(errors["vjp"], errors["jvp"], errors["adjoint"]) > TOLERANCE:
                return "value"
    return None


def caught_by_gradcheck(mutant):
    prim = tt.REGISTRY[mutant.prim]
    with replaced_rules(prim, **mutant.fields):
        for spec, args, params in rows_for(mutant.prim):
            try:
                tt.gradcheck(lambda *xs: spec.call(*xs, **params), *args, **GRADCHECK)
            except tt.GradcheckError:
                return "value"
            except Exception:   # noqa: BLE001
                return "error"
    return None


def mutation_report():
    """{family: [mutants, caught by check_op, caught by gradcheck]}, equivalent, the misses."""
    mutants, equivalent = all_mutants()
    table, missed = {}, []
    for m in mutants:
        by_check_op, by_gradcheck = caught_by_check_op(m), caught_by_gradcheck(m)
        row = table.setdefault(m.family, [0, 0, 0])
        row[0] += 1
        row[1] += by_check_op is not None
        row[2] += by_gradcheck is not None
        if by_check_op is None or by_gradcheck is None:
            missed.append((str(m), by_check_op, by_gradcheck))
    return table, equivalent, missed


# ----- tests ----------------------------------------------------------------------------------------
def test_unmutated_primitives_pass_both_checks():
    """Without this, 'caught' would mean nothing."""
    for name in PRIMS:
        for spec, args, params in rows_for(name):
            errors = check_op(spec.call, args, params, spec.reference, float32=False)
            assert max(errors["vjp"], errors["jvp"], errors["adjoint"]) <= TOLERANCE, (name, errors)
            assert tt.gradcheck(lambda *xs: spec.call(*xs, **params), *args, **GRADCHECK)


def test_every_mutant_is_caught_by_check_op_and_gradcheck():
    originals = {name: {f: getattr(tt.REGISTRY[name], f) for f in RULE_FIELDS} for name in PRIMS}
    table, equivalent, missed = mutation_report()
    total = sum(row[0] for row in table.values())
    assert total > 5 * len(PRIMS) and set(table) >= {
        "factor 1.001", "sign flip", "dropped rule", "missing JVP", "un-reduced broadcast", "transposed"}
    assert not missed, "mutants not caught (mutant, check_op, gradcheck):\n" + "\n".join(map(str, missed))
    # every primitive has its own rules back
    for name, fields in originals.items():
        assert all(getattr(tt.REGISTRY[name], f) is v for f, v in fields.items()), name


def test_the_broadcast_family_covers_every_binary_elementwise_op():
    mutants, _ = all_mutants()
    covered = {m.prim for m in mutants if m.family == "un-reduced broadcast"}
    assert covered >= {"add", "sub", "mul", "div", "power", "maximum", "minimum", "broadcast_to", "matmul"}


def test_matmul_vjp_without_the_transpose_is_caught_naming_the_entry():
    a = np.random.default_rng(1).standard_normal((2, 3))
    b = np.random.default_rng(2).standard_normal((3, 4))
    prim = tt.REGISTRY["matmul"]
    with replaced_rules(prim, vjps=(_matmul_vjp_a_untransposed, prim.vjps[1])):
        with pytest.raises(ValueError, match=r"VJP rule of tape entry matmul\(tensor \(2, 3\)"):
            check_op(tt.matmul, [a, b])
        with pytest.raises(ValueError, match="VJP rule of tape entry matmul"):
            tt.gradcheck(tt.matmul, a, b, **GRADCHECK)
    # square: no shape error, the values give it away
    s = np.random.default_rng(3).standard_normal((3, 3))
    with replaced_rules(prim, vjps=(_matmul_vjp_a_untransposed, prim.vjps[1])):
        assert check_op(tt.matmul, [s, s.T.copy() + 1.0])["vjp"] > 0.01
        with pytest.raises(tt.GradcheckError, match="argument 0, mode 'rev'"):
            tt.gradcheck(tt.matmul, s, s.T.copy() + 1.0, **GRADCHECK)
    assert tt.gradcheck(tt.matmul, s, s.T.copy() + 1.0, **GRADCHECK)    # restored


def test_a_factor_of_1_001_on_small_gradients_is_caught_by_both_checks():
    """gradcheck compares element by element (atol + rtol * |numerical|), so a 0.1% error shows
    even where every gradient entry is 1e-4; check_op measures the largest error relative to the
    Jacobian's own scale (down to 1e-3), so it sees it too."""
    prim = tt.REGISTRY["mul"]
    a, b = np.full(3, 1e-4), np.full(3, 2e-4)
    assert tt.gradcheck(tt.mul, a, b, **GRADCHECK)
    assert check_op(tt.mul, [a, b], float32=False)["vjp"] < TOLERANCE
    with replaced_rules(prim, **mutated_fields(prim, "vjp", 0, _factor)):
        with pytest.raises(tt.GradcheckError, match="argument 0, mode 'rev'"):
            tt.gradcheck(tt.mul, a, b, **GRADCHECK)
        assert check_op(tt.mul, [a, b], float32=False)["vjp"] > TOLERANCE
        assert check_op(tt.mul, [a * 1e4, b * 1e4], float32=False)["vjp"] > TOLERANCE

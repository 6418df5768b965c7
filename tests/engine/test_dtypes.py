"""Issue 7: dtype audit. float32 in, float32 out: values, gradients and tangents.

The engine casts what it hands back (`.grad` to the leaf's dtype, `jvp` to the output's), which
would hide a rule that silently computes in float64. So this audit applies every tape entry's
VJP and JVP rules itself, on float32 cotangents and tangents, and checks what each rule returns.
The only primitive allowed to change dtype is listed explicitly: `astype`.
"""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.specs import OP_SPECS

EXPECTED_DTYPE_CHANGES = {"astype": "converts on purpose (its spec row converts to float64)"}
# complex64 is float32's complex counterpart: the complex rows' intermediates (issue 30) stay in it
SINGLE = (np.dtype(np.float32), np.dtype(np.complex64))


def _float_tensor(a):
    return isinstance(a, tt.Tensor) and np.issubdtype(a.dtype, np.floating)


def _entries(out):
    """Every tape entry `out` depends on."""
    found, stack, seen = [], [out], set()
    while stack:
        node = stack.pop()
        if not isinstance(node, tt.Tensor) or node._prim is None or id(node) in seen:
            continue
        seen.add(id(node))
        found.append(node)
        stack.extend(node._inputs)
    return found


def rule_dtypes(node, rng):
    """{'value': dtype, 'vjp i': dtype, 'jvp': dtype} for one tape entry, from its own rules."""
    prim, args, params, ans = node._prim, node._values, node._params, node.data
    result = {"value": ans.dtype}
    g = rng.standard_normal(node.shape).astype(node.dtype)
    if prim.vjps is not None:
        for i, a in enumerate(node._inputs):
            if _float_tensor(a):
                r = prim.vjps[i](g, ans, *args, **params)
                if r is not None:
                    result[f"vjp {i}"] = np.asarray(r).dtype
    else:
        parts = prim.joint_vjp(g, ans, *args, **params)
        for i, (a, r) in enumerate(zip(node._inputs, parts)):
            if _float_tensor(a) and r is not None:
                result[f"vjp {i}"] = np.asarray(r).dtype
    tangents = [rng.standard_normal(a.shape).astype(a.dtype) if _float_tensor(a) else None
                for a in node._inputs]
    if prim.jvps is not None:
        for i, t in enumerate(tangents):
            if t is not None:
                r = prim.jvps[i](t, ans, *args, **params)
                if r is not None:
                    result[f"jvp {i}"] = np.asarray(r).dtype
    else:
        result["jvp"] = np.asarray(prim.joint_jvp(tangents, ans, *args, **params)).dtype
    return result


def float32_audit():
    """{primitive: [(case, what, dtype)]} for everything that did not stay float32."""
    rng = np.random.default_rng(0)
    changes = {}
    for name, spec in OP_SPECS.items():
        for index, (args, params) in enumerate(spec.cases()):
            inputs = [tt.tensor(np.asarray(a, np.float32), requires_grad=True)
                      if np.issubdtype(np.asarray(a).dtype, np.floating) else a for a in args]
            for node in _entries(spec.call(*inputs, **params)):
                for what, dtype in rule_dtypes(node, rng).items():
                    if dtype not in SINGLE:
                        changes.setdefault(node._prim.name, []).append((f"{name}[{index}]", what, dtype))
    return changes


def test_every_primitive_keeps_float32_in_values_gradients_and_tangents():
    changes = float32_audit()
    unexpected = {k: v for k, v in changes.items() if k not in EXPECTED_DTYPE_CHANGES}
    assert not unexpected, f"primitives that leave float32: {unexpected}"
    assert set(changes) == set(EXPECTED_DTYPE_CHANGES)    # and astype really does convert


def test_the_audit_sees_a_rule_that_leaks_float64():
    """The engine would cast this leak away before the user sees it; the audit must not."""
    prim = tt.REGISTRY["tanh"]
    saved = prim.jvps
    prim.jvps = (lambda t, ans, x: t.astype(np.float64) * (1 - ans * ans),)
    try:
        leaks = float32_audit()
        x = tt.tensor(np.ones(2, np.float32), requires_grad=True)
        assert tt.tanh(x).jvp({x: np.ones(2, np.float32)}).dtype == np.float32   # hidden by the cast
    finally:
        prim.jvps = saved
    assert ("tanh[0]", "jvp 0", np.float64) in leaks["tanh"]


def test_every_spec_row_is_audited():
    rng = np.random.default_rng(0)
    seen = set()
    for spec in OP_SPECS.values():
        args, params = spec.cases()[0]
        inputs = [tt.tensor(np.asarray(a, np.float32), requires_grad=True)
                  if np.issubdtype(np.asarray(a).dtype, np.floating) else a for a in args]
        for node in _entries(spec.call(*inputs, **params)):
            rule_dtypes(node, rng)
            seen.add(node._prim.name)
    assert seen >= set(OP_SPECS)


X32 = np.array([[0.5, 1.5, 2.0], [0.25, 3.0, 1.0]], np.float32)


@pytest.mark.parametrize("expr", [
    lambda x: x * 2.0, lambda x: 2.0 * x, lambda x: x / 3, lambda x: 3 / x, lambda x: x + 1,
    lambda x: 1.5 - x, lambda x: x - 0.5, lambda x: -x, lambda x: 2.0 ** x, lambda x: x ** 2,
    lambda x: x ** 0.5, lambda x: x ** x, lambda x: tt.maximum(x, 1.0), lambda x: tt.minimum(1.0, x),
    lambda x: x * np.float32(2), lambda x: tt.mean(x) * 2, lambda x: x @ np.ones((3, 2), np.float32),
    lambda x: tt.softmax_cross_entropy(x, np.array([0, 2])), lambda x: tt.frobenius_norm(x) / 4,
    lambda x: tt.cross_entropy(tt.softmax(x), np.array([1, 1])),
], ids=["x*2.0", "2.0*x", "x/3", "3/x", "x+1", "1.5-x", "x-0.5", "-x", "2.0**x", "x**2", "x**0.5",
        "x**x", "maximum(x,1.0)", "minimum(1.0,x)", "x*float32", "mean*2", "x@float32", "sce",
        "norm/4", "ce(softmax)"])
def test_python_scalars_keep_float32(expr):
    rng = np.random.default_rng(1)
    x = tt.tensor(X32, requires_grad=True)
    out = expr(x)
    assert out.dtype == np.float32
    for node in _entries(out):
        dtypes = rule_dtypes(node, rng)
        assert all(d == np.float32 for d in dtypes.values()), (node._prim.name, dtypes)
    out.backward(np.ones(out.shape, np.float32))
    assert x.grad.dtype == np.float32


def test_numpy_promotion_rules_apply_to_float64_operands():
    """Mixing with a float64 *array* promotes, as in NumPy (NEP 50); a NumPy float64 scalar is weak
    with a Tensor, as a Python float (PyTorch's and NumPy 1's rule: issue 23)."""
    x = tt.tensor(X32)
    assert (x * np.float64(2)).dtype == np.float32
    assert (x + np.ones(3)).dtype == np.float64
    assert (x * 2.0).dtype == np.float32

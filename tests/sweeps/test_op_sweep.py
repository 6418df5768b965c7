"""The sweep: every primitive (and the composite rows) through one check, in both modes.

One row of tinytensor/specs.py per primitive; check_op compares the forward with NumPy, the
VJP and the JVP with central differences in float64, the adjoint identity <u, Jv> = <J^T u, v>,
and a float32 run with the float64 one (dtypes must stay float32).
"""

import pytest

import tinytensor as tt
from tinytensor.checks import check_op
from tinytensor.specs import EXTRA_SPECS, OP_SPECS

ROWS = {**OP_SPECS, **EXTRA_SPECS}
CASES = [pytest.param(name, i, id=f"{name}-{i}")
         for name, spec in ROWS.items() for i in range(len(spec.cases()))]
TOLERANCE = {"forward": 1e-12, "vjp": 1e-6, "jvp": 1e-6, "adjoint": 1e-12, "float32": 1e-4}


def test_every_builtin_primitive_has_a_spec_row():
    missing = sorted(n for n in tt.ops.BUILTIN if n not in OP_SPECS)
    assert not missing, f"primitives without a row in specs.OP_SPECS: {missing}"


def test_every_builtin_primitive_has_both_rules():
    # A missing rule is stored as None (not as a stub that raises), so this can fail.
    missing = [f"{name} ({mode})" for name in sorted(tt.ops.BUILTIN)
               for mode, rules, joint in (("VJP", tt.REGISTRY[name].vjps, tt.REGISTRY[name].joint_vjp),
                                          ("JVP", tt.REGISTRY[name].jvps, tt.REGISTRY[name].joint_jvp))
               if rules is None and joint is None]
    assert not missing, f"primitives without a rule: {missing}"


def test_the_rules_test_can_fail(registry):
    half = tt.primitive(lambda x: x, name="user_half")
    half.defvjp(lambda g, ans, x: g)
    assert half.jvps is None and half.joint_jvp is None


@pytest.mark.parametrize("name, index", CASES)
def test_primitive_rules(name, index):
    spec = ROWS[name]
    args, params = spec.cases()[index]
    errors = check_op(spec.call, args, params, spec.reference, float32=spec.float32)
    for check, error in errors.items():
        assert error <= TOLERANCE[check], f"{name} case {index}: {check} error {error:.3g}"

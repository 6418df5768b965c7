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
    for name in OP_SPECS:
        prim = tt.REGISTRY[name]
        assert prim.vjps is not None or prim.joint_vjp is not None, name
        assert prim.jvps is not None or prim.joint_jvp is not None, name


@pytest.mark.parametrize("name, index", CASES)
def test_primitive_rules(name, index):
    spec = ROWS[name]
    args, params = spec.cases()[index]
    errors = check_op(spec.call, args, params, spec.reference, float32=spec.float32)
    for check, error in errors.items():
        assert error <= TOLERANCE[check], f"{name} case {index}: {check} error {error:.3g}"

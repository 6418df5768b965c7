"""The op sweep on another device, shared by tests/test_device_neutral.py (a stand-in library on
the CPU) and tests/test_gpu.py (CuPy).

Every row of specs.OP_SPECS and specs.EXTRA_SPECS (so rows added later are covered) runs once on
the CPU and once on the device from the same inputs: the value, the VJP of a random cotangent
(reverse mode), the JVP of random tangents (forward mode) and, for scalar outputs, `backward()`.
Each result must live on the device, keep the CPU result's dtype (float32 stays float32) and
agree with it.
"""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import backend
from tinytensor.specs import EXTRA_SPECS, OP_SPECS
from tinytensor.tape import forward_sweep, reverse_sweep

ROWS = {**OP_SPECS, **EXTRA_SPECS}
TOLERANCE = {np.dtype(np.float64): dict(rtol=1e-9, atol=1e-12),
             np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6)}


def sweep_params(marks=()):
    """pytest params (row, case index, dtype) with ids such as "softmax-2-float32"."""
    return [pytest.param(name, i, dtype, id=f"{name}-{i}-{np.dtype(dtype).name}", marks=marks)
            for name, spec in ROWS.items() for i in range(len(spec.cases()))
            for dtype in (np.float64, np.float32)]


def _is_float(a):
    return np.asarray(a).dtype.kind in "fc"


def run_case(name, index, device, dtype):
    """{what: array} for one case on `device`: "value", "tangent", "vjp i", "backward i"."""
    spec = ROWS[name]
    args, params = spec.cases()[index]
    params = {k: (device if k == "device" else v) for k, v in params.items()}   # to_device's row
    values = [backend.to_device(np.asarray(a, dtype=dtype) if _is_float(a) else np.asarray(a), device)
              for a in args]
    inputs = [tt.Tensor(v, requires_grad=True) if _is_float(a) else v for a, v in zip(args, values)]
    leaves = [x for x in inputs if isinstance(x, tt.Tensor)]
    out = spec.call(*inputs, **params)
    results = {"value": out.data}
    if not out.requires_grad:
        return results
    rng = np.random.default_rng(index)
    cotangent = backend.to_device(rng.standard_normal(out.shape).astype(out.dtype), device)
    tangents = {x: backend.to_device(rng.standard_normal(x.shape).astype(x.dtype), device) for x in leaves}
    grads = reverse_sweep([out], [cotangent], wrt=leaves)
    results["tangent"] = forward_sweep(out, tangents)
    for i, x in enumerate(leaves):
        results[f"vjp {i}"] = grads.get(x)
    if out.size == 1:
        out.backward()
        for i, x in enumerate(leaves):
            results[f"backward {i}"] = x.grad
    return results


def check_case(name, index, device, dtype):
    """Run the case on the CPU and on `device` and compare every result."""
    expected = run_case(name, index, "cpu", dtype)
    got = run_case(name, index, device, dtype)
    assert set(got) == set(expected)
    for what, ref in expected.items():
        value = got[what]
        if ref is None:
            assert value is None, f"{what}: None on the CPU, not on {device}"
            continue
        assert backend.device_of(value) == device, \
            f"{what} came back on {backend.device_of(value)!r}, not on {device!r}"
        assert value.dtype == ref.dtype, f"{what}: dtype {value.dtype} on {device}, {ref.dtype} on the CPU"
        np.testing.assert_allclose(backend.to_host(value), np.asarray(ref), err_msg=what,
                                   **TOLERANCE.get(np.dtype(ref.dtype), dict(rtol=0, atol=0)))

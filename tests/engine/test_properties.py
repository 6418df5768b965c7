"""Issue 7: property-based tests. Random compositions of primitives on random broadcastable
shapes, checked against central differences in both modes (`tt.gradcheck`, float64).

A program is a list of steps; each applies a primitive (or a small safe composite of primitives)
to earlier values, chosen by index. Every value has a shape broadcastable to (2, 3), so binary
steps always broadcast; a fixed (3, 3) leaf `m` feeds `x @ m`. Domains are kept safe by
construction (log(x*x + 1), a / (b*b + 1), (a*a + 1) ** tanh(b)); the kinks of relu, abs,
maximum, minimum and max are kept 1e-3 away from the values (hypothesis `assume`), since central
differences are meaningless on a kink.
"""

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import tinytensor as tt

FULL = (2, 3)
SHAPES = [(), (3,), (1, 3), (2, 1), (2, 3)]
KINK = 1e-3
LIMIT = 1e3


class Kink(Exception):
    """The program put a value on (or near) a kink, or let values grow too large."""


def _away_from_zero(v):
    if np.any(np.abs(v) < KINK):
        raise Kink


def _top_two_apart(v, axis):
    if v.shape[axis] > 1:
        top = np.sort(v, axis=axis)
        if np.any(np.take(top, -1, axis) - np.take(top, -2, axis) < KINK):
            raise Kink


# Unary steps: name -> (applies(shape), fn(x, m, check)).
UNARY = {
    "sin": (lambda s: True, lambda x, m, c: tt.sin(x)),
    "cos": (lambda s: True, lambda x, m, c: tt.cos(x)),
    "tanh": (lambda s: True, lambda x, m, c: tt.tanh(x)),
    "sigmoid": (lambda s: True, lambda x, m, c: tt.sigmoid(x)),
    "neg": (lambda s: True, lambda x, m, c: -x),
    "square": (lambda s: True, lambda x, m, c: tt.square(tt.tanh(x)) * 2.0),
    "power-scalar": (lambda s: True, lambda x, m, c: tt.tanh(x) ** 3),
    "scalar-power": (lambda s: True, lambda x, m, c: 2.0 ** tt.tanh(x)),
    "scale": (lambda s: True, lambda x, m, c: 0.5 * x - 1.5),
    "log": (lambda s: True, lambda x, m, c: tt.log(x * x + 1.0)),
    "sqrt": (lambda s: True, lambda x, m, c: tt.sqrt(x * x + 1.0)),
    "exp": (lambda s: True, lambda x, m, c: tt.exp(tt.tanh(x))),
    "reciprocal": (lambda s: True, lambda x, m, c: 1.0 / (tt.square(x) + 1.0)),
    "relu": (lambda s: True, lambda x, m, c: c(_away_from_zero, x) or tt.relu(x)),
    "abs": (lambda s: True, lambda x, m, c: c(_away_from_zero, x) or tt.abs(x)),
    "sum": (lambda s: len(s) >= 1, lambda x, m, c: tt.sum(x, axis=-1, keepdims=True)),
    "sum-all": (lambda s: True, lambda x, m, c: tt.sum(x, axis=None, keepdims=True)),
    "mean": (lambda s: len(s) >= 1, lambda x, m, c: tt.mean(x, axis=0, keepdims=True)),
    "max": (lambda s: len(s) >= 1,
            lambda x, m, c: c(lambda v: _top_two_apart(v, -1), x) or tt.max(x, axis=-1, keepdims=True)),
    "logsumexp": (lambda s: len(s) >= 1, lambda x, m, c: tt.logsumexp(x, axis=-1, keepdims=True)),
    "softmax": (lambda s: len(s) >= 1, lambda x, m, c: tt.softmax(x, axis=-1)),
    "log_softmax": (lambda s: len(s) >= 1, lambda x, m, c: tt.log_softmax(x, axis=0)),
    "matmul": (lambda s: len(s) >= 1 and s[-1] == 3, lambda x, m, c: tt.matmul(x, m) * 0.5),
    "dot": (lambda s: s in ((3,), (2, 3)), lambda x, m, c: tt.dot(x, m) * 0.5),
    "flip": (lambda s: len(s) >= 1, lambda x, m, c: x[..., ::-1]),
    "gather": (lambda s: len(s) == 2 and s[0] == 2, lambda x, m, c: x[np.array([1, 1])]),
    "reshape": (lambda s: True, lambda x, m, c: tt.reshape(tt.reshape(x, (-1,)), x.shape)),
    "transpose": (lambda s: len(s) == 2, lambda x, m, c: tt.transpose(tt.transpose(x) * 1.5)),
    "broadcast": (lambda s: True, lambda x, m, c: tt.broadcast_to(x, FULL)),
    "concatenate": (lambda s: len(s) >= 1,
                    lambda x, m, c: tt.concatenate([x, x * 2.0], axis=-1)[..., 1:1 + x.shape[-1]]),
    "norm": (lambda s: True, lambda x, m, c: tt.frobenius_norm(x * x + 0.5) * x),
    "astype": (lambda s: True, lambda x, m, c: tt.astype(tt.astype(x, np.float64) * 1.5, x.dtype)),
}


def _maximum(a, b, c):
    c(lambda u, v: _away_from_zero(u - v), a, b)
    return tt.maximum(a, b)


def _minimum(a, b, c):
    c(lambda u, v: _away_from_zero(u - v), a, b)
    return tt.minimum(a, b)


BINARY = {
    "add": lambda a, b, c: a + b,
    "sub": lambda a, b, c: a - b,
    "mul": lambda a, b, c: a * b,
    "div": lambda a, b, c: a / (b * b + 1.0),
    "power": lambda a, b, c: (a * a + 1.0) ** tt.tanh(b),
    "maximum": _maximum,
    "minimum": _minimum,
    "stack": lambda a, b, c: tt.sum(tt.stack([tt.broadcast_to(a, FULL), tt.broadcast_to(b, FULL)]), axis=0),
}

STEP = st.tuples(st.sampled_from(sorted(UNARY) + sorted(BINARY)), st.integers(0, 50), st.integers(0, 50))


def run(steps, leaves, check=None):
    """Execute a program on Tensors; `check` (on the first, plain evaluation) vets kinks."""
    def c(fn, *tensors):
        if check is not None:
            fn(*[np.broadcast_to(t.data, np.broadcast_shapes(*[u.shape for u in tensors]))
                 for t in tensors])
    *values, m = leaves
    values = list(values)
    for name, i, j in steps:
        x = values[i % len(values)]
        if name in BINARY:
            out = BINARY[name](x, values[j % len(values)], c)
        else:
            applies, fn = UNARY[name]
            out = fn(x, m, c) if applies(x.shape) else tt.sin(x)
        if check is not None and not np.all(np.abs(out.data) < LIMIT):
            raise Kink
        values.append(out)
    return values[-1]


@st.composite
def programs(draw):
    n = draw(st.integers(1, 3))
    elements = st.floats(-2, 2, allow_nan=False, allow_subnormal=False)
    leaves = [draw(arrays(np.float64, draw(st.sampled_from(SHAPES)), elements=elements)) for _ in range(n)]
    leaves.append(draw(arrays(np.float64, (3, 3), elements=elements)))
    steps = draw(st.lists(STEP, min_size=1, max_size=6))
    return steps, leaves


def _vetted(steps, leaves):
    try:
        run(steps, [tt.tensor(v) for v in leaves], check=True)
    except Kink:
        return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_compositions_match_central_differences_in_both_modes(program):
    steps, leaves = program
    assume(_vetted(steps, leaves))
    assert tt.gradcheck(lambda *xs: run(steps, xs), *leaves, rtol=1e-5, atol=1e-6, modes=("rev", "fwd"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_compositions_satisfy_the_adjoint_identity(program, seed):
    """<u, J v> from one forward sweep equals <J^T u, v> from one reverse sweep, to rounding."""
    steps, leaves = program
    assume(_vetted(steps, leaves))
    rng = np.random.default_rng(seed)
    xs = [tt.tensor(v, requires_grad=True) for v in leaves]
    out = run(steps, xs)
    u = rng.standard_normal(out.shape)
    vs = [rng.standard_normal(x.shape) for x in xs]
    out.backward(u)
    jv = out.jvp(dict(zip(xs, vs)))
    lhs = float(np.sum(u * jv))
    rhs = sum(float(np.sum(x.grad * v)) for x, v in zip(xs, vs) if x.grad is not None)
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs), float(np.sum(np.abs(u * jv))))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_compositions_in_float32_stay_float32_and_agree(program):
    steps, leaves = program
    assume(_vetted(steps, leaves))
    xs64 = [tt.tensor(v, requires_grad=True) for v in leaves]
    xs32 = [tt.tensor(v.astype(np.float32), requires_grad=True) for v in leaves]
    out64, out32 = run(steps, xs64), run(steps, xs32)
    assert out32.dtype == np.float32
    out64.backward(np.ones(out64.shape))
    out32.backward(np.ones(out32.shape, np.float32))
    scale = max(1.0, float(np.max(np.abs(out64.data))))
    np.testing.assert_allclose(out32.data, out64.data, atol=1e-4 * scale, rtol=1e-3)
    for x32, x64 in zip(xs32, xs64):
        if x64.grad is not None:
            assert x32.grad.dtype == np.float32
            gscale = max(1.0, float(np.max(np.abs(x64.grad))))
            np.testing.assert_allclose(x32.grad, x64.grad, atol=1e-3 * gscale, rtol=1e-2)

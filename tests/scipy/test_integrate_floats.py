"""odeint's right-hand side as straight-line Python on floats (tinytensor/scipy/_scalar.py): the
programs against the array programs (values bit for bit where every step is an IEEE operation,
a few ulps elsewhere), the refusals that send a solve back to the array program, and the
numbers of a solve through them against eager ones (replay=False)."""

import numpy as np
import pytest
import scipy.integrate

import tinytensor as tt
from tinytensor.scipy import _scalar, integrate
from tinytensor.scipy.integrate import odeint
from tinytensor.tensor import _make

RNG = np.random.default_rng(30)
EPS = np.finfo(np.float64).eps


def _lv(y, t, theta):
    a, b, c, d = theta[0], theta[1], theta[2], theta[3]
    return tt.stack([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])


# (name, f(y, t, p), D, size of p, exact): one right-hand side per family of _scalar._PRIMITIVES
FAMILIES = [
    ("lotka-volterra", _lv, 2, 4, True),
    ("division, sqrt, square, neg", lambda y, t, p: tt.stack(
        [y[0] / (p[0] + tt.square(y[1])), -tt.sqrt(y[1] * y[1] + p[1]), tt.square(y[0] - p[2])]), 3, 3, True),
    ("reshape, transpose, concatenate, flip", lambda y, t, p: tt.concatenate(
        [tt.reshape(y[:4], (2, 2)).T.reshape(-1) * p[:4], tt.flip(y[4:], 0) - p[4]]), 6, 5, True),
    ("tanh network (matmul, tanh, cos)", lambda y, t, p: tt.tanh(tt.reshape(p[:9], (3, 3)) @ y + p[9:])
        - 0.1 * y * tt.cos(t), 3, 12, False),
    ("exp, log, sin, power, sum, mean", lambda y, t, p: tt.stack(
        [tt.exp(-p[0] * y[0]) * tt.sin(y[1]), tt.log(1.0 + y[0] ** 2) - p[1] * y[1] ** 3,
         tt.sum(y * p[2:5]) - tt.mean(y) * tt.log1p(y[2] * y[2])]), 3, 5, False),
]


def _record(f, y, t, p):
    leaves = [_make(np.asarray(x, dtype=np.float64), requires_grad=True) for x in (y, t, p)]
    with tt.enable_grad():
        out = f(*leaves)
    names = [[f"y{j}" for j in range(y.size)], ["t"], [f"a0_{j}" for j in range(p.size)]]

    def build():
        program = _scalar.build(out, leaves, names)
        program.names = names
        return program
    return build


def _ulps(a, b):
    """|a - b| in ulps of the larger magnitude of the two arrays (their scale)."""
    scale = np.spacing(np.max(np.abs(b)))
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / scale


def _fallback(state, t):
    raise AssertionError("the program on floats raised")


@pytest.mark.parametrize("name, f, D, n, exact", FAMILIES, ids=[fam[0] for fam in FAMILIES])
def test_programs_on_floats_against_the_array_programs(name, f, D, n, exact):
    """At 20 random points each: the values (bit for bit for IEEE-only programs, else 4 ulps of
    the largest entry) and the sensitivity system along the reverse mode's unit directions and
    along random directions (against tt.jvp on arrays)."""
    y, t, p = RNG.uniform(0.5, 1.5, D), 0.3, RNG.uniform(0.5, 1.5, n)
    build = _record(f, y, t, p)
    program = build()
    assert program.exact == exact
    values = _scalar.compile_source(_scalar.values_source(program))(_fallback, *p)
    P = D + n
    unit = [np.concatenate([np.zeros((D, n)), np.eye(n)])]
    moving = [RNG.standard_normal((2, n))]
    for directions in (unit, moving):
        source, bound = _scalar.sensitivity_source(build, D, directions)
        extra = [x for d in bound for x in d.reshape(-1)]
        sens = _scalar.compile_source(source)(_fallback, *p, *extra)
        for _ in range(20):
            y, t = RNG.uniform(0.5, 1.5, D), RNG.uniform(0, 2)
            reference = f(y, t, p)
            ours = values(y, t)
            if exact:
                np.testing.assert_array_equal(ours, reference)
            else:
                assert _ulps(ours, reference) <= 4
            S = RNG.standard_normal((directions[0].shape[0], D))
            state = np.concatenate([y, S.reshape(-1)])
            out = np.asarray(sens(state, t))
            np.testing.assert_array_equal(out[:D], ours)
            expected = [tt.jvp(lambda y, p: f(y, t, p), (y, p), (S[k], directions[0][k]))[1]
                        for k in range(S.shape[0])]
            # exact programs: a few ulps (the Jacobian-first form sums in another order; seen: 4);
            # others: 1e-12 of the largest entry, the check each solve makes (seen: 410 ulps, 9e-14)
            assert _ulps(out[D:], np.concatenate(expected)) <= (8 if exact else 1e-12 / EPS), name
    assert P == unit[0].shape[0]


def test_what_has_no_form_on_floats_is_refused():
    y, p = np.array([1.0, 2.0]), np.array([0.5])
    for f, why in [(lambda y, t, p: tt.maximum(y, p[0]), "maximum"),
                   (lambda y, t, p: tt.where(y > 0, y, -y), "where"),
                   (lambda y, t, p: tt.sigmoid(y) * p, "sigmoid")]:
        with pytest.raises(_scalar.Unscalarizable, match=why):
            _record(f, y, 0.0, p)()


def test_a_float_that_raises_is_computed_by_the_array_program():
    """math.log(-1), 1.0 / 0.0 and math.pow(-1.0, 0.5) raise where NumPy gives nan and inf (and
    Python's ** a complex): that call goes to the fallback (the array program), so the numbers
    are NumPy's."""
    f = lambda y, t, p: tt.stack([tt.log(y[0]) * p[0], p[0] / y[1], y[0] ** 1.5])  # noqa: E731
    program = _record(f, np.array([1.0, 1.0]), 0.0, np.array([2.0]))()
    calls = []

    def fallback(state, t):
        calls.append(state)
        with np.errstate(all="ignore"):
            return f(state, t, np.array([2.0]))
    run = _scalar.compile_source(_scalar.values_source(program))(fallback, 2.0)
    out = run(np.array([-1.0, 0.0]), 0.0)
    assert len(calls) == 1 and np.isnan(out[0]) and out[1] == np.inf and np.isnan(out[2])
    assert run(np.array([np.e, 4.0]), 0.0)[:2] == [2.0, 0.5] and len(calls) == 1
    program = _record(lambda y, t, p: y ** 1.5, np.array([1.0]), 0.0, np.array([2.0]))()
    with np.errstate(invalid="ignore"):
        out = _scalar.compile_source(_scalar.values_source(program))(lambda y, t: y ** 1.5, 2.0)(
            np.array([-1.0]), 0.0)
    assert np.isnan(out[0])


def _floats(func):
    (*_, floats), = integrate._PROGRAMS[func].values()
    return floats


def _fit(f, theta, replay=True):
    y0, t = np.array([10.0, 5.0]), np.linspace(0, 3, 7)
    loss = lambda theta: tt.sum(odeint(f, y0, t, args=(theta,), replay=replay,   # noqa: E731
                                       rtol=1e-10, atol=1e-10) ** 2)
    return tt.value_and_grad(loss)(theta)


def test_a_solve_on_floats_gives_scipys_values_and_the_eager_gradient():
    def lv(y, t, theta):
        return _lv(y, t, theta)
    theta = np.array([1.0, 0.1, 1.5, 0.075])
    ours, eager = _fit(lv, theta), _fit(lv, theta, replay=False)
    assert _floats(lv).why == {}
    assert ours[0] == eager[0]                    # the forward solve: bit for bit
    np.testing.assert_allclose(ours[1], eager[1], rtol=1e-9)
    ys = odeint(lv, np.array([10.0, 5.0]), np.linspace(0, 3, 7), args=(theta,))
    np.testing.assert_array_equal(ys, scipy.integrate.odeint(
        lambda y, t: np.array([y[0] - 0.1 * y[0] * y[1], -1.5 * y[1] + 0.075 * y[0] * y[1]]),
        np.array([10.0, 5.0]), np.linspace(0, 3, 7)))
    tangent = np.array([0.3, -1.2, 0.7, 2.0])     # forward mode, along a direction not 0/1
    fwd = [tt.jvp(lambda th: odeint(lv, np.array([10.0, 5.0]), np.linspace(0, 3, 7), args=(th,),
                                    replay=replay, rtol=1e-10, atol=1e-10), (theta,), (tangent,))[1]
           for replay in (True, False)]
    np.testing.assert_allclose(fwd[0], fwd[1], rtol=1e-9, atol=1e-9)


def test_a_changed_closed_over_number_or_tensor_is_seen():
    """The program on floats holds f's constants; each solve checks it against the array program
    (tt.compile reads closed-over Tensors and guards numbers), so a change writes it again."""
    state = {"rate": 0.5}
    target = tt.tensor([1.0, 2.0])

    def f(y, t, k):
        return -k * state["rate"] * (y - target)
    t, y0 = np.linspace(0, 2, 5), np.array([1.0, 2.0])       # y0 == target: f(y0) = 0 for any rate
    for rate, aim in [(0.5, [1.0, 2.0]), (2.0, [1.0, 2.0]), (2.0, [3.0, -1.0])]:
        state["rate"], target.data = rate, np.array(aim)
        ys = odeint(f, y0, t, args=(np.array(1.3),), rtol=1e-10, atol=1e-10)
        exact = np.asarray(aim) + (y0 - aim) * np.exp(-1.3 * rate * t)[:, None]
        np.testing.assert_allclose(ys.data, exact, rtol=1e-8, atol=1e-9)
        g = tt.grad(lambda k: tt.sum(odeint(f, y0, t, args=(k,), rtol=1e-10, atol=1e-10)))(np.array(1.3))
        dexact = np.sum((y0 - aim) * (-rate * t * np.exp(-1.3 * rate * t))[:, None])
        np.testing.assert_allclose(g, dexact, rtol=1e-6, atol=1e-9)
    assert _floats(f).why == {}


def test_refusals_send_the_solve_to_the_array_program():
    """A branch (tt.compile saw a value read into Python), a mask, float32 args, a large state:
    the solve runs the array program, with eager's numbers, and `why` says so (float32 args:
    the forward solve's; the gradient's solves run in float64 either way)."""
    def branch(y, t, k):
        return -k * y if t < 0.5 else -2.0 * k * y

    def mask(y, t, k):
        return tt.maximum(-k * y, -1.0)

    def wide(y, t, k):
        return -k * y
    cases = [(branch, np.array([0.7, 1.3]), np.array([1.0, 2.0]), "branch"),
             (mask, np.array([0.7, 1.3]), np.array([1.0, 2.0]), "maximum"),
             (wide, np.array([0.7, 1.3], dtype=np.float32), np.array([1.0, 2.0]), "float64"),
             (wide, np.float64(0.7), np.ones(70), "SCALAR_LIMIT")]
    for f, k, y0, why in cases:
        t = np.array([0.0, 0.3, 1.0])
        loss = lambda k, replay: tt.sum(odeint(f, y0, t, args=(k,), replay=replay,   # noqa: E731
                                               rtol=1e-10, atol=1e-10, hmax=0.05) ** 2)
        ours, eager = tt.value_and_grad(loss)(k, True), tt.value_and_grad(loss)(k, False)
        np.testing.assert_allclose(ours[0], eager[0], rtol=1e-12)
        np.testing.assert_allclose(ours[1], eager[1], rtol=1e-6)
        if why == "float64":
            floats = _floats(f)
            floats.values(integrate._RHS(f, integrate.tree_flatten((k,))[1], 1), y0, 0.0, [k])
            reasons = floats.why.values()
        else:
            reasons = _floats(f).why.values()
        assert any(why in reason for reason in reasons), (why, reasons)


def test_closed_over_tensors_are_parameters_of_the_programs_on_floats():
    """The issue's style: the right-hand side closes over the Tensor being differentiated (a
    fresh closure per call). Its closed-over Tensors are leaves of the program on floats, like
    the args; value and gradient (both modes) equal the args style's, and the programs on
    floats were used."""
    y0, t = np.array([10.0, 5.0]), np.linspace(0, 3, 7)
    made = []

    def closing(theta):
        def rhs(y, t):
            return _lv(y, t, theta * np.array([1.0, 1.0, 1.0, 1.0]))     # an intermediate, closed over
        made.append(rhs)
        return tt.sum(odeint(rhs, y0, t, rtol=1e-10, atol=1e-10) ** 2)

    def passing(theta):
        return tt.sum(odeint(_lv, y0, t, args=(theta,), rtol=1e-10, atol=1e-10) ** 2)
    theta = np.array([1.0, 0.1, 1.5, 0.075])
    ours, theirs = tt.value_and_grad(closing)(theta), tt.value_and_grad(passing)(theta)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-10)
    assert _floats(made[-1]).why == {} and len(_floats(made[-1]).makers) == 2
    v = np.array([0.3, -1.2, 0.7, 2.0])
    np.testing.assert_allclose(tt.jvp(closing, (theta,), (v,))[1], ours[1] @ v, rtol=1e-7)
    eager = tt.value_and_grad(lambda th: tt.sum(odeint(lambda y, t: _lv(y, t, th), y0, t, replay=False,
                                                       rtol=1e-10, atol=1e-10) ** 2))(theta)
    np.testing.assert_allclose(ours[1], eager[1], rtol=1e-9)

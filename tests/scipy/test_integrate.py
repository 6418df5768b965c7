"""tt.scipy.integrate.odeint: values as SciPy's, gradients (adjoint VJP, sensitivity JVP) against
central differences and against a fine RK4 differentiated by the tape."""

import numpy as np
import pytest
import scipy.integrate

import tinytensor as tt
from tinytensor.scipy import integrate
from tinytensor.scipy.integrate import odeint

TIGHT = dict(rtol=1e-10, atol=1e-10)


def net(y, t, W, b):                     # an ODE net's dynamics
    return np.tanh(W @ y + b) - 0.1 * y * np.cos(t)


def rk4(y, t, W, b, steps=200):
    """A fine fixed-step RK4 through the same dynamics, on the tape."""
    out = [y]
    for t0, t1 in zip(t[:-1], t[1:]):
        h = (t1 - t0) / steps
        for k in range(steps):
            s = t0 + k * h
            k1 = net(y, s, W, b)
            k2 = net(y + 0.5 * h * k1, s + 0.5 * h, W, b)
            k3 = net(y + 0.5 * h * k2, s + 0.5 * h, W, b)
            k4 = net(y + h * k3, s + h, W, b)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(y)
    return tt.stack(out)


RNG = np.random.default_rng(0)
Y0, T = RNG.standard_normal(3), np.array([0.0, 0.4, 1.0])
W, B = 0.5 * RNG.standard_normal((3, 3)), 0.1 * RNG.standard_normal(3)


def test_values_are_scipys():
    ys = odeint(net, tt.tensor(Y0, requires_grad=True), T, args=(W, B))
    np.testing.assert_allclose(ys.data, scipy.integrate.odeint(net, Y0, T, args=(W, B)), rtol=1e-12)


def test_gradient_matches_a_fine_rk4_on_the_tape(vjp_path):
    weights = RNG.standard_normal((3, 3))
    loss = lambda y0, W, b: tt.sum(odeint(net, y0, T, args=(W, b), **TIGHT) * weights)   # noqa: E731
    reference = lambda y0, W, b: tt.sum(rk4(y0, T, W, b, steps=100) * weights)            # noqa: E731
    ours = tt.grad(loss, argnums=(0, 1, 2))(Y0, W, B)
    theirs = tt.grad(reference, argnums=(0, 1, 2))(Y0, W, B)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


def test_both_modes_against_differences_including_the_times():
    f = lambda y, t, k: -k * y + np.sin(t)      # noqa: E731
    tt.gradcheck(lambda y0, t, k: odeint(f, y0, t, args=(k,), **TIGHT),
                 np.array([1.0, 2.0]), np.array([0.0, 0.3, 1.0]), np.array([0.5, 1.5]))


def _fd_hessian(f, x, eps=1e-5):
    g = tt.grad(f)
    return np.stack([(g(x + eps * e) - g(x - eps * e)) / (2 * eps) for e in np.eye(len(x))])


@pytest.mark.parametrize("wrt", ["y0", "b", "t"])
def test_second_derivatives_against_differences_of_the_gradient(wrt):
    """hessian through odeint (JAX's recorded adjoint system), in y0, in args and in the times."""
    def f(x):
        y0, t, b = (x if wrt == "y0" else Y0), (x if wrt == "t" else T), (x if wrt == "b" else B)
        return tt.sum(odeint(net, y0, t, args=(W, b), **TIGHT) ** 2)
    x = {"y0": Y0, "b": B, "t": T}[wrt]
    H = tt.hessian(f)(x)
    np.testing.assert_allclose(H, _fd_hessian(f, x), atol=2e-6 * np.abs(H).max())
    np.testing.assert_allclose(H, H.T, atol=1e-6 * np.abs(H).max())


def test_hvp_and_a_closed_over_parameter_to_second_order():
    def f(a):
        return tt.sum(odeint(lambda y, t: -a * y + tt.sin(y), np.array([1.0, 0.5]), np.array([0.0, 1.0]),
                             **TIGHT) ** 2)
    a = np.float64(0.7)
    np.testing.assert_allclose(tt.hessian(f)(a), (tt.grad(f)(a + 1e-5) - tt.grad(f)(a - 1e-5)) / 2e-5,
                               rtol=1e-6)
    loss = lambda y0: tt.sum(odeint(net, y0, T, args=(W, B), **TIGHT) ** 2)   # noqa: E731
    v = np.array([1.0, -0.5, 2.0])
    np.testing.assert_allclose(tt.hvp(loss, (Y0,), (v,)), tt.hessian(loss)(Y0) @ v, rtol=1e-8)


# ----- issue 30: closed-over Tensors, stiff systems, options ------------------------------------
def _lotka(a):
    return lambda y, t: tt.stack([a * y[0] - 0.1 * y[0] * y[1], -1.5 * y[1] + 0.075 * y[0] * y[1]])


def test_closed_over_tensors_are_differentiated(vjp_path):
    """The RHS closes over `a` (no args=): its term used to be dropped (grad 2.0, the prior's)."""
    y0, t = np.array([10.0, 5.0]), np.linspace(0, 2, 5)

    def loss(a):
        return tt.sum(odeint(_lotka(a), y0, t, **TIGHT)[-1]) + a ** 2

    def passed(a):
        return tt.sum(odeint(lambda y, t, a: _lotka(a)(y, t), y0, t, args=(a,), **TIGHT)[-1]) + a ** 2

    ours = tt.grad(loss)(1.0)
    np.testing.assert_allclose(ours, tt.numerical_grad(loss, np.float64(1.0), eps=1e-5)[0], rtol=1e-6)
    np.testing.assert_allclose(ours, tt.grad(passed)(1.0), rtol=1e-8)
    assert abs(ours - 2.0) > 10
    fwd = tt.jvp(loss, (np.float64(1.0),), (np.float64(1.0),))[1]      # forward mode too
    np.testing.assert_allclose(fwd, ours, rtol=1e-6)


def test_closed_over_intermediates_count_once():
    """b = 2a and a both closed over: the sweep inside the rule stops at b, so a's share through
    b is counted by the outer sweep alone."""
    y0, t = np.array([1.0]), np.array([0.0, 0.5, 1.0])

    def loss(a):
        b = 2 * a
        return tt.sum(odeint(lambda y, t: -a * y - b * y * y, y0, t, **TIGHT))

    np.testing.assert_allclose(tt.grad(loss)(0.7), tt.numerical_grad(loss, np.float64(0.7))[0], rtol=1e-6)


def test_a_tensor_first_used_later_is_refused():
    a = tt.tensor(1.0, requires_grad=True)
    rhs = lambda y, t: -y if t < 0.5 else -a * y       # noqa: E731
    with pytest.raises(RuntimeError, match="did not use in its first call"):
        tt.sum(odeint(rhs, np.array([1.0]), np.array([0.0, 1.0]))).backward()


def test_args_may_be_a_pytree():
    """autograd's ode_net passes args=(params,), params a list of (W, b) pairs."""
    def dyn(y, t, params):
        (W1, b1), (W2, b2) = params
        return W2 @ np.tanh(W1 @ y + b1) + b2
    params = [(0.5 * RNG.standard_normal((4, 3)), RNG.standard_normal(4)),
              (0.5 * RNG.standard_normal((3, 4)), RNG.standard_normal(3))]
    loss = lambda p: tt.sum(odeint(dyn, Y0, T, args=(p,), **TIGHT) ** 2)   # noqa: E731
    flat = lambda W1, b1, W2, b2: loss([(W1, b1), (W2, b2)])                # noqa: E731
    ours = tt.grad(loss)(params)
    leaves = [x for pair in params for x in pair]
    for g, n in zip([x for pair in ours for x in pair], tt.numerical_grad(flat, *leaves)):
        np.testing.assert_allclose(g, n, rtol=1e-5, atol=1e-7)


def _robertson(y, t, k):
    return tt.stack([-k[0] * y[0] + k[2] * y[1] * y[2],
                     k[0] * y[0] - k[2] * y[1] * y[2] - k[1] * y[1] ** 2,
                     k[1] * y[1] ** 2])


@pytest.fixture(params=["sensitivities", "adjoint"])
def vjp_path(request, monkeypatch):
    """The VJP on arrays either way: forward sensitivities (small problems) or the adjoint on the
    re-solved forward trajectory (forced with SENSITIVITY_LIMIT = 0)."""
    if request.param == "adjoint":
        monkeypatch.setattr(integrate, "SENSITIVITY_LIMIT", 0)
    return request.param


def test_stiff_reverse_mode_equals_forward_mode(vjp_path):
    """Robertson kinetics to t = 1000: neither path integrates the state backward, so the reverse
    mode agrees with the forward sensitivities (it was off by 1e16 before)."""
    k, w = np.array([0.04, 3e7, 1e4]), np.array([1.0, 1e4, 1.0])

    def loss(k):
        return tt.sum(odeint(_robertson, np.array([1.0, 0.0, 0.0]), np.array([0.0, 1000.0]), args=(k,),
                             rtol=1e-10, atol=1e-14, mxstep=50000)[-1] * w)

    rev, fwd = tt.grad(loss)(k), tt.jacobian(loss, mode="fwd")(k)
    np.testing.assert_allclose(rev, fwd, rtol=1e-6)
    np.testing.assert_allclose(rev[0], tt.numerical_grad(loss, k, eps=1e-6)[0][0], rtol=1e-3)   # solver noise


def test_options_apply_to_the_forward_solve():
    """h0 used to reach the backward solve (LSODA: illegal input, gradient exactly 0)."""
    loss = lambda y0: tt.sum(odeint(lambda y, t: -2.0 * y, y0, np.array([0.0, 1.0, 2.0]), h0=1e-3))  # noqa: E731
    np.testing.assert_allclose(tt.grad(loss)(np.array([1.0])), [1 + np.exp(-2) + np.exp(-4)], rtol=1e-6)


def test_a_small_mxstep_limits_the_forward_solve_only():
    t = np.linspace(0, 2, 201)
    loss = lambda a: tt.sum(odeint(lambda y, t, a: -a * y + np.sin(t), np.array([1.0]), t,  # noqa: E731
                                   args=(a,), mxstep=5))
    np.testing.assert_allclose(tt.grad(loss)(np.array([1.0])), tt.numerical_grad(loss, np.array([1.0]))[0],
                               rtol=1e-3)


def test_a_failed_forward_solve_raises_naming_the_option():
    loss = lambda a: tt.sum(odeint(lambda y, t, a: -a * y, np.array([1.0]), np.array([0.0, 2.0]),  # noqa: E731
                                   args=(a,), mxstep=5))
    with pytest.warns(scipy.integrate.ODEintWarning), pytest.raises(RuntimeError, match="mxstep"):
        tt.grad(loss)(np.array([1.0]))


# ----- solve_ivp: the same guarantees ------------------------------------------------------------------
from tinytensor.scipy.integrate import solve_ivp  # noqa: E402


def _lv(t, y, a, b):
    return tt.stack([a * y[0] - b * y[0] * y[1], -1.5 * y[1] + 0.075 * y[0] * y[1]])


def _lv_numpy(t, y, a, b):
    return np.array([a * y[0] - b * y[0] * y[1], -1.5 * y[1] + 0.075 * y[0] * y[1]])


LV0, LV_T = np.array([10.0, 5.0]), np.linspace(0.0, 2.0, 5)


@pytest.mark.parametrize("method", ["RK45", "LSODA", "BDF"])
def test_solve_ivp_values_are_scipys_and_gradients_match_differences(method):
    tight = dict(rtol=1e-10, atol=1e-10)
    ours = solve_ivp(_lv, (0.0, 2.0), tt.tensor(LV0, requires_grad=True), method=method, t_eval=LV_T,
                     args=(1.0, 0.1), **tight)
    theirs = scipy.integrate.solve_ivp(_lv_numpy, (0.0, 2.0), LV0, method=method, t_eval=LV_T,
                                       args=(1.0, 0.1), **tight)
    np.testing.assert_array_equal(ours.y.data, theirs.y)
    np.testing.assert_array_equal(ours.t, theirs.t)
    assert ours.success and ours.y.shape == (2, 5)

    def loss(a, y0):
        sol = solve_ivp(_lv, (0.0, 2.0), y0, method=method, t_eval=LV_T, args=(a, 0.1), **tight)
        return tt.sum(sol.y ** 2)

    ours = tt.grad(loss, argnums=(0, 1))(1.0, LV0)
    for g, n in zip(ours, tt.numerical_grad(loss, np.float64(1.0), LV0, eps=1e-5)):
        np.testing.assert_allclose(g, n, rtol=1e-5)
    second = tt.hessian(lambda a: loss(a, LV0))(1.0)
    fd = (tt.grad(loss)(1.0 + 1e-5, LV0) - tt.grad(loss)(1.0 - 1e-5, LV0)) / 2e-5
    np.testing.assert_allclose(second, fd, rtol=1e-5)


def test_solve_ivp_without_t_eval_and_with_a_closure():
    a = tt.tensor(1.0, requires_grad=True)
    sol = solve_ivp(lambda t, y: _lv(t, y, a, 0.1), (0.0, 2.0), LV0, rtol=1e-8, atol=1e-8)
    reference = scipy.integrate.solve_ivp(_lv_numpy, (0.0, 2.0), LV0, args=(1.0, 0.1), rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(sol.t, reference.t)
    tt.sum(sol.y[:, -1]).backward()
    f = lambda a: tt.sum(solve_ivp(lambda t, y: _lv(t, y, a, 0.1), (0.0, 2.0), LV0, rtol=1e-10,  # noqa: E731
                                   atol=1e-10, t_eval=[2.0]).y)
    np.testing.assert_allclose(a.grad, tt.numerical_grad(f, np.float64(1.0), eps=1e-5)[0], rtol=1e-5)


def test_solve_ivp_in_t_eval():
    loss = lambda te: tt.sum(solve_ivp(_lv, (0.0, 3.0), LV0, t_eval=te, args=(1.0, 0.1),   # noqa: E731
                                       rtol=1e-10, atol=1e-10).y ** 2)
    te = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(tt.grad(loss)(te), tt.numerical_grad(loss, te, eps=1e-5)[0], rtol=1e-6)


def test_solve_ivp_stiff_reverse_equals_forward_mode():
    k, w = np.array([0.04, 3e7, 1e4]), np.array([1.0, 1e4, 1.0])

    def loss(k):
        sol = solve_ivp(lambda t, y, k: _robertson(y, t, k), (0.0, 100.0), np.array([1.0, 0.0, 0.0]),
                        method="BDF", t_eval=[100.0], args=(k,), rtol=1e-10, atol=1e-14)
        return tt.sum(sol.y[:, -1] * w)

    np.testing.assert_allclose(tt.grad(loss)(k), tt.jacobian(loss, mode="fwd")(k), rtol=1e-6)


def test_solve_ivp_refusals_and_failures():
    with pytest.raises(TypeError, match="events"):
        solve_ivp(_lv, (0.0, 1.0), LV0, args=(1.0, 0.1), events=lambda t, y, a, b: y[0])
    with pytest.raises(TypeError, match="t_span"):
        solve_ivp(_lv, (0.0, tt.tensor(1.0, requires_grad=True)), LV0, args=(1.0, 0.1))
    with pytest.raises(ValueError, match="method"):
        solve_ivp(_lv, (0.0, 1.0), LV0, method="Euler", args=(1.0, 0.1))
    blow_up = solve_ivp(lambda t, y: y * y, (0.0, 2.0), tt.tensor([1.0], requires_grad=True))   # y = 1/(1-t)
    assert not blow_up.success and not isinstance(blow_up.y, tt.Tensor)


@pytest.mark.parametrize("path", ["sensitivities", "adjoint"])
def test_replay_gives_the_eager_numbers(path, monkeypatch):
    """odeint(..., replay=True): the right-hand side recorded once by tt.compile, replayed."""
    if path == "adjoint":
        monkeypatch.setattr(integrate, "SENSITIVITY_LIMIT", 0)
    loss = lambda W, b, replay: tt.sum(odeint(net, Y0, T, args=(W, b), replay=replay, **TIGHT) ** 2)  # noqa: E731
    eager = tt.value_and_grad(loss, argnums=(0, 1))(W, B, False)
    replayed = tt.value_and_grad(loss, argnums=(0, 1))(W, B, True)
    np.testing.assert_allclose(replayed[0], eager[0], rtol=1e-12)
    for a, b in zip(replayed[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    second = [tt.hessian(lambda b: loss(W, b, replay))(B) for replay in (True, False)]
    np.testing.assert_allclose(second[0], second[1], rtol=1e-7, atol=1e-10)


def test_decreasing_times_in_both_paths(vjp_path):
    f = lambda y, t, k: -k * y + tt.sin(t)      # noqa: E731
    loss = lambda y0, t, k: tt.sum(odeint(f, y0, t, args=(k,), rtol=1e-12, atol=1e-12) ** 2)   # noqa: E731
    args = (np.array([1.0, 2.0]), np.array([1.0, 0.5, 0.0]), np.array([0.5, 1.5]))
    for g, n in zip(tt.grad(loss, argnums=(0, 1, 2))(*args), tt.numerical_grad(loss, *args, eps=1e-5)):
        np.testing.assert_allclose(g, n, rtol=1e-7)


def test_replay_of_a_branching_right_hand_side_gives_the_eager_numbers():
    """A right-hand side that branches on t records one program per branch; the calls that
    record again mid-solve run eagerly (values, the VJP's sensitivity system, the JVP's), so the
    replayed value and both modes' derivatives equal eager ones."""
    def f(y, t, k):
        return -k * y if t < 0.5 else -2.0 * k * y + tt.sin(t)
    opts = dict(rtol=1e-10, atol=1e-10, hmax=0.05)
    loss = lambda k, replay: tt.sum(odeint(f, np.array([1.0, 2.0]), np.array([0.0, 0.3, 1.0]), args=(k,),  # noqa: E731
                                           replay=replay, **opts) ** 2)
    k = np.array([0.7, 1.3])
    eager, replayed = (tt.value_and_grad(loss)(k, replay) for replay in (False, True))
    np.testing.assert_allclose(replayed[0], eager[0], rtol=1e-12)
    np.testing.assert_allclose(replayed[1], eager[1], rtol=1e-9)
    fwd = tt.jacobian(lambda k: loss(k, True), mode="fwd")(k)
    np.testing.assert_allclose(fwd, eager[1], rtol=1e-6)
    numerical = tt.numerical_grad(lambda k: loss(k, False), k, eps=1e-6)[0]
    np.testing.assert_allclose(eager[1], numerical, rtol=1e-4)


def test_the_gradient_replays_one_recorded_sensitivity_program():
    """The speed of odeint's gradient (issue 30) rests on the sensitivity system's right-hand side
    being replayed, not recorded per call: after two fits, f's values and sensitivity programs
    were each recorded once (the array programs, which check the programs on floats at the start
    of each solve) and the programs on floats were each written once and are in use."""
    def lv(y, t, theta):
        return tt.stack([theta[0] * y[0] - theta[1] * y[0] * y[1], -theta[2] * y[1] + theta[3] * y[0] * y[1]])
    loss = lambda theta: tt.sum(odeint(lv, np.array([10.0, 5.0]), np.linspace(0, 2, 5), args=(theta,)) ** 2)  # noqa: E731
    theta = np.array([1.0, 0.1, 1.5, 0.075])
    first = tt.value_and_grad(loss)(theta)
    second = tt.value_and_grad(loss)(theta * 1.01)
    (values, _, _, sensitivities, floats), = integrate._PROGRAMS[lv].values()
    for program in (values, sensitivities):
        assert program.usable and program.steady and program.compiled.traces == 1
    assert floats.why == {} and [what if isinstance(what, str) else what[0] for _, what in floats.makers] \
        == ["values", "sensitivities"]
    assert np.isfinite(first[1]).all() and not np.allclose(first[1], second[1])


def test_under_tt_compile_odeint_is_solved_on_every_call_and_solve_ivp_refused():
    """odeint's solve is an entry of the program (solved again on each call, eager's numbers and
    types); solve_ivp's result is SciPy's Python object (the solver's own times): refused."""
    def sim(k):
        return integrate.odeint(lambda y, t, k: -k * y, np.array([1.0]), np.array([0.0, 1.0]), args=(k,))
    compiled = tt.compile(sim)
    for i in range(4):
        k = np.array([0.5 + i])
        eager, got = sim(k), compiled(k)
        assert type(got) is type(eager) is np.ndarray
        assert eager.tobytes() == got.tobytes()
    ivp = tt.compile(lambda k: integrate.solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0])).y)
    with pytest.raises(RuntimeError, match="solve_ivp inside a compiled function.*odeint"):
        ivp(np.array([0.5]))


def test_under_tt_compile_odeint_gradients_are_program_lines_and_second_derivatives_refused():
    """odeint's VJP (sensitivities or adjoint) runs whole as one line of the compiled program, as
    its forward solve: a whole training step fitting a rate (closed over, and through args=),
    tt.grad of it, and the compiled loss's own gradient match eager bit for bit as the rate and
    data change. A second derivative of the solve inside (a Hessian) is refused, naming the fix."""
    times = np.linspace(0.0, 1.0, 6)

    def setup():
        m = tt.nn.Module()
        m.k = tt.nn.Parameter(np.array([0.7, 1.3]))
        return m, tt.optim.SGD(m.parameters(), lr=0.1)

    def step_of(m, opt, by_args):
        def step(data):
            opt.zero_grad()
            if by_args:
                ys = integrate.odeint(lambda y, t, k: -k * y, np.array([1.0, 2.0]), times, args=(m.k,))
            else:
                ys = integrate.odeint(lambda y, t: -m.k * y, np.array([1.0, 2.0]), times)
            loss = ((ys - data) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return step

    for by_args in (False, True):
        (m1, o1), (m2, o2) = setup(), setup()
        eager, compiled = step_of(m1, o1, by_args), tt.compile(step_of(m2, o2, by_args))
        for i in range(5):
            data = np.exp(-np.outer(times, [0.5, 1.0 + 0.1 * i]))
            if i == 3:                     # the rate reset outside, in place
                m1.k.data[:] = m2.k.data[:] = 0.9
            a, b = eager(data), compiled(data)
            assert a.data.tobytes() == b.data.tobytes()
            assert m1.k.data.tobytes() == m2.k.data.tobytes()
            assert m1.k.grad.tobytes() == m2.k.grad.tobytes()

    def loss(k):
        ys = integrate.odeint(lambda y, t, k: -k * y, np.array([1.0, 2.0]), times, args=(k,))
        return (ys ** 2).sum()
    by_grad, of_compiled = tt.compile(tt.grad(loss)), tt.grad(tt.compile(loss))
    for i in range(3):
        k = np.array([0.5 + i, 1.0])
        want = np.asarray(tt.grad(loss)(k))
        assert np.asarray(by_grad(k)).tobytes() == want.tobytes()
        assert np.asarray(of_compiled(k)).tobytes() == want.tobytes()
    with pytest.raises(RuntimeError, match="second derivative of tt.scipy.integrate.odeint.*uncompiled"):
        tt.compile(tt.hessian(loss))(np.array([0.5, 1.0]))

"""odeint's value and gradient on Lotka-Volterra: tinytensor against JAX's cached compiled call.

The scientist's fit: four rate parameters theta, y(t) = odeint(lv, y0, t, theta) at 11 times on
[0, 10], the loss sum((y - data)^2); one call computes the loss and its gradient in theta.
  * tinytensor: tt.value_and_grad(loss)(theta) (the forward solve is SciPy's LSODA; the gradient
    one forward sensitivity solve, as the problem is small), with the right-hand side written in
    tt ops: by default recorded once and run as straight-line Python on floats (odeint's programs
    on floats, tinytensor/scipy/_scalar.py), or, with replay=False, run eagerly on every call;
  * JAX (when installed): jax.jit(jax.value_and_grad(loss)) with jax.experimental.ode.odeint
    (Dormand-Prince), timed after its first (compiling) call;
  * two floors of the design, for scale: the same two SciPy solves (LSODA calls Python 441 times
    for the values and ~640 for the sensitivities; it stays non-stiff, so no Jacobian is asked
    for) with the right-hand side and the sensitivity system written by hand, in NumPy on arrays
    and in Python on floats (y.tolist(), scalar arithmetic, a list back);
all at rtol = atol = 1e-8, the gradients checked against each other first. One thread each;
rounds interleaved, medians reported. The target (issue 30): tinytensor within 10x JAX's.

    python benchmarks/bench_odeint.py [--rounds 5]

Measured (2-core AMD EPYC shared with other jobs, loaded: loads 2-5; --rounds 5): see
docs/guides/scipy.md ("Cost against JAX").
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.integrate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # this checkout's tinytensor
import tinytensor as tt  # noqa: E402
from tinytensor.scipy.integrate import odeint  # noqa: E402

Y0 = np.array([10.0, 5.0])
T = np.linspace(0.0, 10.0, 11)
THETA = np.array([1.0, 0.1, 1.5, 0.075])
TOL = dict(rtol=1e-8, atol=1e-8)


def lv(y, t, theta):
    a, b, c, d = theta[0], theta[1], theta[2], theta[3]
    prey, predator = y[0], y[1]
    return tt.stack([a * prey - b * prey * predator, -c * predator + d * prey * predator])


DATA = odeint(lv, Y0, T, args=(THETA * np.array([1.05, 0.95, 1.0, 1.02]),), **TOL)


def tt_loss(theta, replay=True):
    return tt.sum((odeint(lv, Y0, T, args=(theta,), replay=replay, **TOL) - DATA) ** 2)


def jax_step():
    try:
        import jax
        import jax.numpy as jnp
        from jax.experimental.ode import odeint as jax_odeint
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def rhs(y, t, theta):
        prey, predator = y[0], y[1]
        return jnp.stack([theta[0] * prey - theta[1] * prey * predator,
                          -theta[2] * predator + theta[3] * prey * predator])

    def loss(theta):
        return jnp.sum((jax_odeint(rhs, jnp.asarray(Y0), jnp.asarray(T), theta, **TOL) - DATA) ** 2)

    step = jax.jit(jax.value_and_grad(loss))
    step(jnp.asarray(THETA))[1].block_until_ready()        # compile once: the cached call is timed

    def run(theta):
        value, grad = step(theta)
        return float(value), np.asarray(grad.block_until_ready())
    return run


def scipy_by_hand_step(theta):
    """The floor of this design: SciPy's odeint with a hand-written NumPy right-hand side, then
    the same sensitivity system (y, dy/dy0, dy/dtheta) with a hand-written Jacobian: every
    Python call of the solver costs what NumPy costs, nothing of tinytensor's."""
    a, b, c, d = theta

    def f(y, t):
        return np.array([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])

    def system(state, t):
        y, S = state[:2], state[2:].reshape(6, 2)        # rows: d/dy0 (2), d/dtheta (4)
        Jy = np.array([[a - b * y[1], -b * y[0]], [d * y[1], -c + d * y[0]]])
        dS = S @ Jy.T
        dS[2:] += np.array([[y[0], 0.0], [-y[0] * y[1], 0.0], [0.0, -y[1]], [0.0, y[0] * y[1]]])
        return np.concatenate([f(y, t), dS.ravel()])

    ys = scipy.integrate.odeint(f, Y0, T, **TOL)
    S0 = np.concatenate([np.eye(2), np.zeros((4, 2))]).ravel()
    states = scipy.integrate.odeint(system, np.concatenate([Y0, S0]), T, mxstep=500, **TOL)
    g = 2 * (ys - DATA)
    return float(np.sum((ys - DATA) ** 2)), np.einsum("tpd,td->p", states[:, 2:].reshape(len(T), 6, 2), g)[2:]


def scipy_floats_step(theta):
    """The lower floor: the same two solves, the right-hand sides written by hand in Python on
    floats (what a call costs with no NumPy array in it)."""
    a, b, c, d = (float(x) for x in theta)

    def f(y, t):
        y0, y1 = y.tolist()
        return [a * y0 - b * y0 * y1, -c * y1 + d * y0 * y1]

    def system(state, t):
        y0, y1, *S = state.tolist()
        j00, j01, j10, j11 = a - b * y1, -b * y0, d * y1, -c + d * y0
        out = [a * y0 - b * y0 * y1, -c * y1 + d * y0 * y1]
        for p in range(6):
            s0, s1 = S[2 * p], S[2 * p + 1]
            out += [j00 * s0 + j01 * s1, j10 * s0 + j11 * s1]
        out[6] += y0
        out[8] -= y0 * y1
        out[11] -= y1
        out[13] += y0 * y1
        return out

    ys = scipy.integrate.odeint(f, Y0, T, **TOL)
    S0 = np.concatenate([np.eye(2), np.zeros((4, 2))]).ravel()
    states = scipy.integrate.odeint(system, np.concatenate([Y0, S0]), T, mxstep=500, **TOL)
    g = 2 * (ys - DATA)
    return float(np.sum((ys - DATA) ** 2)), np.einsum("tpd,td->p", states[:, 2:].reshape(len(T), 6, 2), g)[2:]


def tt_step(theta):
    value, grad = tt.value_and_grad(tt_loss)(theta)
    return float(value), grad


def tt_eager_step(theta):
    value, grad = tt.value_and_grad(lambda theta: tt_loss(theta, replay=False))(theta)
    return float(value), grad


def timed(fun, repeats):
    start = time.perf_counter()
    for _ in range(repeats):
        fun(THETA)
    return (time.perf_counter() - start) / repeats


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    steps = {"tinytensor": tt_step, "tinytensor replay=False": tt_eager_step,
             "SciPy, NumPy by hand": scipy_by_hand_step, "SciPy, floats by hand": scipy_floats_step}
    ours = tt_step(THETA)
    for floor in (scipy_by_hand_step(THETA), scipy_floats_step(THETA)):
        assert np.allclose(ours[1], floor[1], rtol=1e-6), (ours, floor)
    jax_run = jax_step()
    if jax_run is not None:
        steps["jax (jit, cached)"] = jax_run
        ours, theirs = tt_step(THETA), jax_run(THETA)
        print(f"loss {ours[0]:.10g} (JAX {theirs[0]:.10g}); gradient {ours[1]} (JAX {theirs[1]}), "
              f"largest relative difference {np.max(np.abs(ours[1] / theirs[1] - 1)):.1e}")
    else:
        print("JAX is not installed: tinytensor alone")
    times = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, fun in steps.items():
            times[name].append(timed(fun, 50 if name.startswith("jax") else 5))
    base = statistics.median(times.get("jax (jit, cached)", [float("nan")]))
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:>24}: {median * 1e3:8.2f} ms per value and gradient  ({median / base:.1f}x JAX's)")
    ratio = statistics.median(times["tinytensor"]) / base
    print(f"target: tinytensor within 10x JAX's: {ratio:.1f}x, {'met' if ratio <= 10 else 'NOT met'}")


if __name__ == "__main__":
    main()

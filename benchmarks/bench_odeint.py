"""odeint's value and gradient on Lotka-Volterra: tinytensor against JAX's cached compiled call.

The scientist's fit: four rate parameters theta, y(t) = odeint(lv, y0, t, theta) at 11 times on
[0, 10], the loss sum((y - data)^2); one call computes the loss and its gradient in theta.
  * tinytensor: tt.value_and_grad(loss)(theta) (the forward solve is SciPy's LSODA; the gradient
    one forward sensitivity solve, as the problem is small), with the right-hand side written in
    tt ops, recorded once by tt.compile and replayed (odeint's default) or, with replay=False,
    run eagerly on every call;
  * JAX (when installed): jax.jit(jax.value_and_grad(loss)) with jax.experimental.ode.odeint
    (Dormand-Prince), timed after its first (compiling) call;
  * the floor of the design, for scale: the same two SciPy solves with the right-hand side and
    its Jacobian written by hand in NumPy (what tinytensor's replayed programs would cost if each
    call cost what hand-written NumPy costs);
all at rtol = atol = 1e-8, the gradients checked against each other first. One thread each;
rounds interleaved, medians reported.

    python benchmarks/bench_odeint.py [--rounds 5]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import statistics
import time

import numpy as np
import scipy.integrate

import tinytensor as tt
from tinytensor.scipy.integrate import odeint

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
             "SciPy, NumPy by hand": scipy_by_hand_step}
    ours, floor = tt_step(THETA), scipy_by_hand_step(THETA)
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


if __name__ == "__main__":
    main()

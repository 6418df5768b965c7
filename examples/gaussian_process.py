"""A Gaussian process fitted with SciPy
====================================

A Gaussian process fitted by SciPy's optimiser, with gradients from tinytensor.

Noisy observations of a function; the model y ~ N(0, K + sn^2 I) with a squared-exponential
kernel K_ij = sf^2 exp(-(x_i - x_j)^2 / (2 ell^2)), log-normal priors on the three
hyperparameters. The log posterior is written with tt.scipy.stats, as one would with SciPy:

    stats.multivariate_normal.logpdf(y, mean=0, cov=K + sn^2 I) + sum(stats.norm.logpdf(theta, 0, 2))

and maximised by scipy.optimize.minimize(tt.value_and_grad(loss), theta0, jac=True). The
Hessian at the optimum (tt.hessian) gives a Laplace approximation of the hyperparameters'
uncertainty; the posterior mean and variance use tt.scipy.linalg.cho_factor / cho_solve.

    python examples/gaussian_process.py [--points 40] [--seed 0] [--out docs/gaussian_process.png]
"""

import argparse
import os
import time

import numpy as np
from scipy.optimize import minimize

import tinytensor as tt
from tinytensor.scipy import linalg, stats


def kernel(a, b, log_ell, log_sf):
    d2 = (a[:, None] - b[None, :]) ** 2
    return np.exp(2 * log_sf) * np.exp(-0.5 * d2 * np.exp(-2 * log_ell))


def make_loss(x, y):
    def negative_log_posterior(theta):
        log_ell, log_sf, log_sn = theta[0], theta[1], theta[2]
        cov = kernel(x, x, log_ell, log_sf) + (np.exp(2 * log_sn) + 1e-8) * np.eye(len(x))
        log_likelihood = stats.multivariate_normal.logpdf(y, mean=np.zeros(len(x)), cov=cov)
        log_prior = tt.sum(stats.norm.logpdf(theta, 0.0, 2.0))
        return -(log_likelihood + log_prior)
    return negative_log_posterior


def posterior(x, y, xs, theta):
    log_ell, log_sf, log_sn = theta
    cov = kernel(x, x, log_ell, log_sf) + np.exp(2 * log_sn) * np.eye(len(x))
    factor = linalg.cho_factor(cov, lower=True)
    cross = kernel(xs, x, log_ell, log_sf)
    mean = cross @ linalg.cho_solve(factor, y)
    var = np.exp(2 * log_sf) - np.sum(cross * linalg.cho_solve(factor, cross.T).T, axis=1)
    return np.asarray(mean), np.sqrt(np.maximum(np.asarray(var), 0))


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/gaussian_process.png", help="the figure ('' for none)")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    x = np.sort(rng.uniform(-4, 4, args.points))
    truth = lambda s: np.sin(1.5 * s) + 0.3 * s          # noqa: E731
    y = truth(x) + 0.2 * rng.standard_normal(args.points)

    loss = make_loss(x, y)
    start = time.perf_counter()
    fit = minimize(tt.value_and_grad(loss), np.zeros(3), jac=True, method="L-BFGS-B")
    seconds = time.perf_counter() - start
    hessian = tt.hessian(loss)(fit.x)
    spread = np.sqrt(np.diag(np.linalg.inv(hessian)))
    names = ("lengthscale", "signal sd", "noise sd")
    print(f"L-BFGS-B: {fit.nit} iterations, {fit.nfev} evaluations, {seconds:.2f} s; "
          f"-log posterior {fit.fun:.4f}")
    for name, value, sd in zip(names, fit.x, spread):
        print(f"  {name:12s} {np.exp(value):.3f}  (log: {value:+.3f} +- {sd:.3f}, Laplace)")
    eps = 1e-6
    numerical = [(loss(fit.x + eps * e).item() - loss(fit.x - eps * e).item()) / (2 * eps) for e in np.eye(3)]
    print(f"gradient at the optimum {tt.grad(loss)(fit.x)}, central differences {np.array(numerical)}")

    if args.out:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        xs = np.linspace(-5, 5, 200)
        mean, sd = posterior(x, y, xs, fit.x)
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.fill_between(xs, mean - 2 * sd, mean + 2 * sd, color="C0", alpha=0.2,
                        label="posterior mean +- 2 sd")
        ax.plot(xs, mean, color="C0")
        ax.plot(xs, truth(xs), "k--", lw=1, label="truth")
        ax.plot(x, y, "o", color="C3", ms=4, label="observations")
        ax.set_title("GP fitted with scipy.optimize.minimize(tt.value_and_grad(...), jac=True)", fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        fig.savefig(args.out, dpi=110)
        print(f"figure: {args.out}")


if __name__ == "__main__":
    main()

"""tt.hessian: reverse over reverse against forward over reverse (CPU time, median of 5).

    OPENBLAS_NUM_THREADS=1 python benchmarks/hessian_modes.py
"""

import time

import numpy as np

import tinytensor as tt

rng = np.random.default_rng(0)
X = rng.standard_normal((30, 2))
y = np.sin(X[:, 0])


def nlml(p):   # a GP's negative log marginal likelihood in 3 log-hyperparameters
    ell, sf, sn = np.exp(p[0]), np.exp(p[1]), np.exp(p[2])
    d = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = sf ** 2 * np.exp(-0.5 * d / ell ** 2) + (sn ** 2 + 1e-6) * np.eye(30)
    L = tt.linalg.cholesky(K)
    return 0.5 * tt.sum(y * tt.linalg.solve(K, y)) + tt.sum(np.log(np.diagonal(L)))


def rosen(x):
    return tt.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


CASES = [("gp nlml (3 params)", nlml, np.array([0.1, 0.2, -1.0])),
         ("rosenbrock n=20", rosen, rng.standard_normal(20)),
         ("rosenbrock n=100", rosen, rng.standard_normal(100))]

for name, f, x in CASES:
    res = {}
    for mode in ("fwd", "rev"):
        h = tt.hessian(f, mode=mode)
        H = h(x)
        times = []
        for _ in range(5):
            t0 = time.process_time()
            h(x)
            times.append(time.process_time() - t0)
        res[mode] = (np.median(times) * 1e3, H)
    print(f"{name}: fwd-over-rev {res['fwd'][0]:.1f} ms, rev-over-rev {res['rev'][0]:.1f} ms CPU, "
          f"agree to {np.abs(res['fwd'][1] - res['rev'][1]).max():.2g}")

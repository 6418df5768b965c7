"""`tt.scipy`: SciPy's layout, differentiable (as `jax.scipy` and `autograd.scipy`).

    tt.scipy.special     gammaln, digamma, ..., logsumexp(b=, return_sign=), softmax, log_softmax
    tt.scipy.stats       norm, t, gamma, beta, chi2, poisson, bernoulli, binom,
                         multivariate_normal, dirichlet (logpdf, pdf, cdf, ... as SciPy's)
    tt.scipy.linalg      solve_triangular, cho_factor, cho_solve, cholesky, sqrtm, expm,
                         solve_sylvester, solve_banded
    tt.scipy.integrate   odeint, solve_ivp (closed-over Tensors differentiated; adjoint on the kept
                         forward trajectory, forward sensitivities; second order)
    tt.scipy.signal      convolve (with autograd's axes=, dot_axes=), correlate

SciPy's special-function ufuncs on Tensors (`scipy.special.gammaln(t)`) are recorded as well.
"""

from . import integrate, linalg, signal, special, stats  # noqa: F401

"""`tt.scipy.linalg`: SciPy's matrix functions, differentiable in both modes.

    solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False)   a primitive
    cholesky(a, lower=False), cho_factor(a, lower=False), cho_solve((c, lower), b)
    expm(A)               a primitive; its rules are the Frechet derivative, L(A, E) (JVP) and
                          L(A^T, G) (VJP): SciPy's expm_frechet on arrays, the block-triangular
                          expm([[A, E], [0, A]]) on Tensors, so higher orders are recorded too
    solve_sylvester(a, b, q)   A X + X B = Q, a primitive; every rule is another Sylvester solve
    sqrtm(A)              a primitive: X dX + dX X = dA, so both rules are Sylvester solves
    solve_banded((l, u), ab, b)   composed: the band laid out as the dense matrix (a recorded
                          gather), then tt.linalg.solve; O(n^2) memory, for the gradient's sake

All take 2-D matrices (expm also batches); cho_factor returns a clean triangle (zeros in the
other half, where SciPy leaves what was there).
"""

import numpy as np
import scipy.linalg

from .. import linalg as tt_linalg
from ..ops import defprim
from ..tensor import Tensor


def _same_float(out, like):
    """SciPy's result in the input's float dtype (float32 stays float32)."""
    dtype = like.dtype
    return out.astype(dtype) if dtype.kind == "f" and out.dtype != dtype else out


def _t(m):
    return np.swapaxes(m, -1, -2)


# ----- solve_triangular ------------------------------------------------------------------------------
def _triangle(m, lower, unit):
    """The part of m that a triangular solve reads: its triangle (without the diagonal if unit)."""
    k = -1 if unit else 0
    return np.tril(m, k) if lower else np.triu(m, -k)


def _outer_product(u, x):   # u x^T for matrices, outer(u, x) for vectors
    return u @ _t(x) if np.ndim(x) == 2 else np.expand_dims(u, -1) * np.expand_dims(x, -2)


def _st_forward(a, b, lower=False, unit_diagonal=False):
    return _same_float(scipy.linalg.solve_triangular(a, b, lower=lower, unit_diagonal=unit_diagonal), b)


def _st_vjp_b(g, ans, a, b, lower, unit_diagonal):       # a^-T g
    return _solve_triangular(_t(a), g, lower=not lower, unit_diagonal=unit_diagonal)


def _st_vjp_a(g, ans, a, b, lower, unit_diagonal):       # -tri(a^-T g x^T)
    gb = _st_vjp_b(g, ans, a, b, lower, unit_diagonal)
    return -_triangle(_outer_product(gb, ans), lower, unit_diagonal)


_solve_triangular = defprim(
    _st_forward, "solve_triangular",
    vjp=[_st_vjp_a, _st_vjp_b],
    jvp=[lambda t, ans, a, b, lower, unit_diagonal: -_solve_triangular(
             a, _triangle(t, lower, unit_diagonal) @ ans, lower=lower, unit_diagonal=unit_diagonal),
         lambda t, ans, a, b, lower, unit_diagonal: _solve_triangular(
             a, t, lower=lower, unit_diagonal=unit_diagonal)])


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """x with a x = b (trans=0), a^T x = b (1, "T", or 2, "C" for real a), a triangular (2-D),
    differentiable in a (its triangle) and b.

    Examples
    --------
    >>> a = tt.tensor([[2.0, 0.0], [1.0, 4.0]])
    >>> b = tt.tensor([2.0, 9.0], requires_grad=True)
    >>> x = tt.scipy.linalg.solve_triangular(a, b, lower=True)
    >>> x
    tensor([1., 2.], requires_grad=True)
    >>> x.sum().backward()
    >>> b.grad                                # a^-T ones
    array([0.375, 0.25 ])
    >>> tt.scipy.linalg.solve_triangular(a, tt.tensor([2.0, 9.0]), lower=True, trans=1)   # a^T x = b
    tensor([-0.125,  2.25 ])
    """
    if trans in (1, 2, "T", "C"):
        a, lower = _t(a), not lower
    elif trans not in (0, "N"):
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    return _solve_triangular(a, b, lower=bool(lower), unit_diagonal=bool(unit_diagonal))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor, upper (a = U^T U) by default as SciPy's, lower with lower=True; like
    SciPy's it reads one triangle of a (the upper one by default), where its gradient lands.

    Examples
    --------
    >>> a = tt.tensor([[4.0, 2.0], [2.0, 3.0]], requires_grad=True)
    >>> u = tt.scipy.linalg.cholesky(a)
    >>> u
    tensor([[2.        , 1.        ],
            [0.        , 1.41421356]], requires_grad=True)
    >>> logdet = 2 * tt.log(tt.diagonal(u)).sum()          # log det a = log 8
    >>> logdet.backward()
    >>> a.grad                                # inv(a), its off-diagonal entries added up
    array([[ 0.375, -0.5  ],
           [ 0.   ,  0.5  ]])
    """
    return tt_linalg.cholesky(a, upper=not lower)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower) for cho_solve; c holds the factor, zeros in the other triangle (where SciPy's
    leaves what was there).

    Examples
    --------
    >>> c, lower = tt.scipy.linalg.cho_factor(tt.tensor([[4.0, 2.0], [2.0, 3.0]]))
    >>> c
    tensor([[2.        , 1.        ],
            [0.        , 1.41421356]])
    >>> lower
    False
    """
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a x = b, from cho_factor(a): two triangular solves, differentiable in the factor
    and in b.

    Examples
    --------
    >>> a = tt.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> b = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> x = tt.scipy.linalg.cho_solve(tt.scipy.linalg.cho_factor(a), b)
    >>> x
    tensor([-0.125,  0.75 ], requires_grad=True)
    >>> x.sum().backward()
    >>> b.grad                                # a^-1 ones (a is symmetric)
    array([0.125, 0.25 ])
    """
    c, lower = c_and_lower
    y = solve_triangular(c, b, trans=0 if lower else 1, lower=lower)
    return solve_triangular(c, y, trans=1 if lower else 0, lower=lower)


# ----- expm, with the Frechet derivative --------------------------------------------------------------
def _expm_forward(a):
    return _same_float(np.asarray(scipy.linalg.expm(a)), a)


def _frechet(a, e):
    """L(A, E), the derivative of expm at A along E: SciPy's on arrays, the upper-right block of
    expm([[A, E], [0, A]]) on Tensors (so it is recorded and differentiates again)."""
    if type(a) is np.ndarray and type(e) is np.ndarray and a.ndim == 2:
        return _same_float(scipy.linalg.expm_frechet(a, e, compute_expm=False), a)
    n = np.shape(a)[-1]
    zeros = np.zeros(np.shape(a), dtype=(a.data if isinstance(a, Tensor) else a).dtype)
    top = np.concatenate([a, np.broadcast_to(e, np.shape(a)) if np.shape(e) != np.shape(a) else e], axis=-1)
    block = np.concatenate([top, np.concatenate([zeros, a], axis=-1)], axis=-2)
    return expm(block)[..., :n, n:]


_expm = defprim(_expm_forward, "expm",
                vjp=[lambda g, ans, a: _frechet(_t(a), g)],
                jvp=[lambda t, ans, a: _frechet(a, t)])


def expm(A):
    """The matrix exponential (scipy.linalg.expm), of one matrix or a batch (..., n, n);
    differentiable (the Frechet derivative), to any order.

    Examples
    --------
    >>> generator = tt.tensor([[0.0, 1.0], [-1.0, 0.0]])
    >>> t = tt.tensor(0.5, requires_grad=True)
    >>> rotation = tt.scipy.linalg.expm(t * generator)      # [[cos t, sin t], [-sin t, cos t]]
    >>> rotation
    tensor([[ 0.87758256,  0.47942554],
            [-0.47942554,  0.87758256]], requires_grad=True)
    >>> rotation[0, 1].backward()
    >>> t.grad                                # d/dt sin t = cos t
    array(0.87758256)
    """
    return _expm(A)


# ----- Sylvester equations and the matrix square root -------------------------------------------------
def _sylvester_forward(a, b, q):
    return _same_float(scipy.linalg.solve_sylvester(a, b, q), q)


def _sylvester_adjoint(g, a, b):   # the adjoint of Q -> X: solve A^T Y + Y B^T = G
    return _solve_sylvester(_t(a), _t(b), g)


_solve_sylvester = defprim(
    _sylvester_forward, "solve_sylvester",
    vjp=[lambda g, ans, a, b, q: -(_sylvester_adjoint(g, a, b) @ _t(ans)),
         lambda g, ans, a, b, q: -(_t(ans) @ _sylvester_adjoint(g, a, b)),
         lambda g, ans, a, b, q: _sylvester_adjoint(g, a, b)],
    jvp=[lambda t, ans, a, b, q: _solve_sylvester(a, b, -(t @ ans)),
         lambda t, ans, a, b, q: _solve_sylvester(a, b, -(ans @ t)),
         lambda t, ans, a, b, q: _solve_sylvester(a, b, t)])


def solve_sylvester(a, b, q):
    """X with A X + X B = Q (scipy.linalg.solve_sylvester), differentiable in A, B and Q.

    Examples
    --------
    >>> a = tt.tensor([[1.0, 0.0], [0.0, 2.0]])
    >>> b = tt.tensor([[3.0]])
    >>> q = tt.tensor([[4.0], [5.0]], requires_grad=True)
    >>> x = tt.scipy.linalg.solve_sylvester(a, b, q)
    >>> x                                     # (1 + 3) x0 = 4, (2 + 3) x1 = 5
    tensor([[1.],
            [1.]], requires_grad=True)
    >>> x.sum().backward()
    >>> q.grad                                # 1 / (a_ii + b_00)
    array([[0.25],
           [0.2 ]])
    """
    return _solve_sylvester(a, b, q)


def _sqrtm_forward(a):
    root = scipy.linalg.sqrtm(a)
    if np.iscomplexobj(root):
        if np.abs(root.imag).max() > 1e-8 * max(1.0, np.abs(root.real).max()):
            raise ValueError("sqrtm: this matrix has no real square root (a negative real eigenvalue); "
                             "tt.scipy.linalg.sqrtm differentiates real square roots only")
        root = root.real
    return _same_float(_refined_root(np.asarray(root), np.asarray(a)), a)


def _refined_root(root, a):
    """One Newton step on X^2 = A (X E + E X = A - X^2, a Sylvester solve): SciPy's sqrtm leaves
    a residual of some ulp (since SciPy 1.16), the step brings it below one; kept only where it
    does reduce the residual (a singular root, say, keeps SciPy's)."""
    if root.dtype.kind != "f" or not np.isfinite(root).all():
        return root
    residual = a - root @ root
    with np.errstate(all="ignore"):
        try:
            step = scipy.linalg.solve_sylvester(root, root, residual)
        except (np.linalg.LinAlgError, ValueError):
            return root
        better = root + step
        if not np.isfinite(better).all() or np.abs(a - better @ better).max() >= np.abs(residual).max():
            return root
    return better


_sqrtm = defprim(_sqrtm_forward, "sqrtm",
                 vjp=[lambda g, ans, a: _solve_sylvester(_t(ans), _t(ans), g)],
                 jvp=[lambda t, ans, a: _solve_sylvester(ans, ans, t)])


def sqrtm(A, disp=True, blocksize=64):
    """The principal square root of A (real), differentiable: X dX + dX X = dA. A matrix with no
    real square root (a negative real eigenvalue) raises. SciPy's root refined by one Newton
    step (a Sylvester solve), which leaves a residual X @ X - A below an ulp where SciPy's has
    some.

    Examples
    --------
    >>> a = tt.tensor([[4.0, 1.0], [0.0, 9.0]], requires_grad=True)
    >>> root = tt.scipy.linalg.sqrtm(a)
    >>> root                                  # root @ root == a
    tensor([[2. , 0.2],
            [0. , 3. ]], requires_grad=True)
    >>> tt.trace(root).backward()
    >>> a.grad                                # inv(2 root)^T
    array([[ 0.25      ,  0.        ],
           [-0.01666667,  0.16666667]])
    """
    return _sqrtm(A)


# ----- solve_banded -------------------------------------------------------------------------------------
def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """scipy.linalg.solve_banded: solve a x = b for a banded a given in SciPy's band storage,
    a[i, j] = ab[u + i - j, j]; differentiable in ab and b ((l, u) is static). Composed: the band
    is gathered into the dense matrix, then tt.linalg.solve (both rules of both pieces).

    Examples
    --------
    >>> ab = tt.tensor([[0.0, 1.0, 1.0],     # the upper diagonal (its first entry unused)
    ...                 [4.0, 4.0, 4.0],     # the diagonal
    ...                 [1.0, 1.0, 0.0]],    # the lower diagonal (its last entry unused)
    ...                requires_grad=True)
    >>> x = tt.scipy.linalg.solve_banded((1, 1), ab, tt.tensor([5.0, 6.0, 5.0]))
    >>> x
    tensor([1., 1., 1.], requires_grad=True)
    >>> x.sum().backward()
    >>> ab.grad.shape                         # a gradient for every stored entry
    (3, 3)
    """
    lower, upper = (int(n) for n in l_and_u)
    shape = np.shape(ab.data if isinstance(ab, Tensor) else ab)
    if len(shape) != 2 or shape[0] != lower + upper + 1:
        raise ValueError(f"solve_banded: ab must have l + u + 1 = {lower + upper + 1} rows for (l, u) = "
                         f"({lower}, {upper}), got shape {shape}")
    n = shape[1]
    if np.shape(b.data if isinstance(b, Tensor) else b)[:1] != (n,):
        raise ValueError(f"solve_banded: b must have {n} rows (ab has {n} columns), got shape {np.shape(b)}")
    i, j = np.indices((n, n))
    band = upper + i - j                                # the row of ab that holds a[i, j]
    inside = (band >= 0) & (band <= lower + upper)
    dense = np.where(inside, ab[np.clip(band, 0, lower + upper), j], 0.0)
    return tt_linalg.solve(dense, b)


__all__ = ["solve_triangular", "cholesky", "cho_factor", "cho_solve", "expm", "solve_sylvester", "sqrtm",
           "solve_banded"]

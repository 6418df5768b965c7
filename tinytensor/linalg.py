"""Linear algebra: `tt.einsum tensordot outer inner kron`, and this module is `tt.linalg`.

`tt.linalg.inv solve det slogdet cholesky eigh eigvalsh svd svdvals norm vector_norm matrix_norm
matrix_power multi_dot vecdot matrix_transpose diagonal trace` live here only (as in NumPy, they are not
`tt.inv`); `np.linalg.<name>(tensor)` runs them (`_stands_for` below puts them in
ops.NUMPY_FUNCTIONS). Matrices are the last two axes, leading axes are a batch, as NumPy.

Rules follow the op table (ops/): cotangent (or tangent) first, then the output, the inputs, the static
parameters. They are written with functions that dispatch on Tensors (np.*, methods, the
primitives of this module), so they differentiate again (hvp, grad of grad).

A decomposition with several outputs (slogdet, eigh, svd) is one primitive whose output packs
them into one array; the public function cuts it apart with indexing (recorded), so the rules
see one cotangent holding every output's (zeros for the unused ones).

eigh and cholesky read one triangle of their input, as NumPy does (the lower one by default):
their gradient is that of this function, so it lies in that triangle, the off-diagonal entries
counting twice. Along symmetric directions it agrees with the symmetric gradient of PyTorch/JAX.
"""

import string
from collections import Counter, namedtuple
from functools import lru_cache, wraps

import numpy as np

from . import backend, ops
from .ops.table import _keepdims, _safe, defprim, public
from .ops.table import _swap_last as _mT
from .tape import STATE
from .tensor import Tensor

__all__ = [   # the public names: the API reference lists these (docs/_ext/tt_api.py)
    "inv", "solve", "det", "slogdet", "cholesky", "eigh", "eigvalsh", "svd", "svdvals", "norm",
    "vector_norm", "matrix_norm", "matrix_power", "multi_dot", "vecdot", "matrix_transpose",
    "diagonal", "trace", "SlogdetResult", "EighResult", "SVDResult",
]

# namedtuples with NumPy 2's field names: `w, V = tt.linalg.eigh(a)` and `.eigenvalues` both work
SlogdetResult = namedtuple("SlogdetResult", "sign logabsdet")
EighResult = namedtuple("EighResult", "eigenvalues eigenvectors")
SVDResult = namedtuple("SVDResult", "U S Vh")
SlogdetResult.__doc__ = """What `slogdet` returns: `(sign, logabsdet)`, with det = sign * exp(logabsdet).

Examples
--------
>>> sign, logabsdet = tt.linalg.slogdet(tt.tensor([[2.0, 0.0], [0.0, -3.0]]))
>>> sign, logabsdet
(tensor(-1.), tensor(1.79175947))
>>> tt.linalg.slogdet(tt.eye(2)).logabsdet
tensor(0.)
"""
EighResult.__doc__ = """What `eigh` returns: `(eigenvalues, eigenvectors)`, the values ascending, the
vectors in the columns.

Examples
--------
>>> w, V = tt.linalg.eigh(tt.tensor([[2.0, 1.0], [1.0, 2.0]]))
>>> w
tensor([1., 3.])
>>> tt.linalg.eigh(tt.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues
tensor([1., 3.])
"""
SVDResult.__doc__ = """What `svd` returns: `(U, S, Vh)`, the singular values `S` descending; with
`full_matrices=False`, `a == (U * S[..., None, :]) @ Vh` up to rounding.

Examples
--------
>>> U, S, Vh = tt.linalg.svd(tt.tensor([[3.0, 0.0], [0.0, 4.0]]))
>>> S
tensor([4., 3.])
>>> tt.linalg.svd(tt.tensor([[3.0, 0.0], [0.0, 4.0]])).S
tensor([4., 3.])
"""


def _stands_for(*np_funs):
    """`fun` is what NumPy runs for np.linalg.<name>(tensor) (ops.NUMPY_FUNCTIONS); it stays
    `tt.linalg.<name>` only, not `tt.<name>`. NumPy functions this NumPy lacks are skipped."""
    def register(fun):
        for np_fun in np_funs:
            if np_fun is not None:
                ops.NUMPY_FUNCTIONS[np_fun] = fun
        return fun
    return register


def _shape(x):
    return x.shape if isinstance(x, (Tensor, np.ndarray)) else np.shape(x)


def _array(x):   # lists and numbers as arrays (rules use .ndim and .T); Tensors as they are
    return x if isinstance(x, (Tensor, np.ndarray)) else backend.asarray(x)


def _eye(n, like):
    return backend.namespace(like).eye(n, dtype=like.dtype)


def _real(fun):
    """The NumPy forward `fun`, refusing complex input (tinytensor's rules are for real numbers)."""
    @wraps(fun)
    def forward(a, *args, **params):
        if np.iscomplexobj(a):
            raise TypeError("complex matrices are not supported by tinytensor (real only)")
        return fun(a, *args, **params)
    return forward


def _gap_inverse(w):
    """F[..., i, j] = 1 / (w_j - w_i), and 0 where w_j == w_i (the diagonal, and exactly repeated
    values: there the eigenvector terms are dropped, see the README)."""
    gap = w[..., None, :] - w[..., :, None]
    return (gap != 0) / (gap + (gap == 0))


def _safe_reciprocal(s):   # 1/s, and 0 where s == 0
    return (s != 0) / (s + (s == 0))


def _diagonal_of(x):   # x[..., i, i]
    return (x * _eye(x.shape[-1], x)).sum(axis=-1)


def _on_diagonal(v):   # a matrix with v on its diagonal
    return v[..., None, :] * _eye(v.shape[-1], v)


# ----- einsum --------------------------------------------------------------------------------------
_LETTERS = string.ascii_letters


@lru_cache(maxsize=512)
def _explicit_subscripts(subscripts, shapes):
    """`subscripts` in explicit form with letters only: '...' spelled out with spare letters
    (right-aligned, so the operands' broadcast axes line up) and the implicit output made
    explicit (NumPy's: '...' first, then the letters used once, in alphabetical order)."""
    spec = subscripts.replace(" ", "")
    inputs, arrow, output = spec.partition("->")
    inputs = inputs.split(",")
    if len(inputs) != len(shapes):
        raise ValueError(f"einsum: {subscripts!r} names {len(inputs)} operand(s) but {len(shapes)} "
                         f"were given")
    spare = iter(c for c in _LETTERS if c not in spec)
    n_broadcast = max((len(shape) - len(s) + 3 for s, shape in zip(inputs, shapes) if "..." in s),
                      default=0)
    ellipsis = "".join(next(spare) for _ in range(n_broadcast))
    named = []
    for i, (s, shape) in enumerate(zip(inputs, shapes)):
        if "..." in s:
            k = len(shape) - len(s) + 3
            s = s.replace("...", ellipsis[n_broadcast - k:] if k > 0 else "", 1)
        if len(s) != len(shape):
            raise ValueError(f"einsum: operand {i} has shape {tuple(shape)} ({len(shape)} axes) but "
                             f"its subscripts {inputs[i]!r} name {len(s)}")
        named.append(s)
    if not arrow:
        counts = Counter("".join(named))
        output = ellipsis + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ellipsis))
    elif "..." in output:
        output = output.replace("...", ellipsis)
    elif n_broadcast:
        raise ValueError(f"einsum: the operands of {subscripts!r} have broadcast axes ('...') but the "
                         f"output names none; write '...' in the output")
    return ",".join(named) + "->" + output


def _einsum_forward(*xs, subscripts):
    # NumPy's optimizer finds a contraction order and hands matrix products to BLAS (14x faster
    # at 128x128), at ~8 us a call: worth it from 3 operands, or from 512 entries.
    optimize = len(xs) > 2 or max(np.size(x) for x in xs) >= 512
    return np.einsum(subscripts, *xs, optimize=optimize)


@lru_cache(maxsize=512)
def _adjoint_plan(subscripts, k, shape):
    """How to compute the VJP for operand k (of `shape`): the einsum of the cotangent with the
    other operands, into operand k's subscripts. A repeated index of operand k (a diagonal, 'ii')
    gets a fresh letter tied to it by an identity matrix; an index summed out in the forward
    that appears nowhere else gets a vector of ones (the gradient is spread back along it).
    Returns the subscripts and the extra operands, as ("eye" or "ones", size)."""
    inputs, output = subscripts.split("->")
    inputs = inputs.split(",")
    subs = [output] + [s for j, s in enumerate(inputs) if j != k]
    spare = iter(c for c in _LETTERS if c not in subscripts)
    extras, target = [], ""
    for c, n in zip(inputs[k], shape):
        if c in target:
            d = next(spare)
            extras.append(("eye", n))
            subs.append(c + d)
            c = d
        target += c
    seen = "".join(subs)
    for c, n in zip(target, shape):
        if c not in seen:
            extras.append(("ones", n))
            subs.append(c)
    return ",".join(subs) + "->" + target, tuple(extras)


def _einsum_adjoint(g, xs, k, subscripts):
    spec, extras = _adjoint_plan(subscripts, k, tuple(_shape(xs[k])))
    xp = backend.namespace(g)
    extra = [xp.eye(n, dtype=g.dtype) if kind == "eye" else xp.ones(n, dtype=g.dtype) for kind, n in extras]
    return _einsum(g, *xs[:k], *xs[k + 1:], *extra, subscripts=spec)


def _einsum_vjp(g, ans, *xs, subscripts):
    return tuple(_einsum_adjoint(g, xs, k, subscripts) if np.issubdtype(_dtype(x), np.inexact) else None
                 for k, x in enumerate(xs))


def _dtype(x):
    return x.dtype if isinstance(x, (Tensor, np.ndarray)) or backend.is_array(x) else np.asarray(x).dtype


def _einsum_jvp(tangents, ans, *xs, subscripts):
    total = None
    for k, t in enumerate(tangents):
        if t is not None:
            d = _einsum(*xs[:k], t, *xs[k + 1:], subscripts=subscripts)
            total = d if total is None else total + d
    return total


# Linear in each operand: the JVP is the einsum with the tangent in that operand's place.
_einsum = defprim(_einsum_forward, "einsum", nargs=None, vjp=_einsum_vjp, jvp=_einsum_jvp)


@public(numpy=np.einsum)
def einsum(*args, optimize=False):
    """np.einsum: explicit ('ij,jk->ik') or implicit ('ij,jk') output, repeated indices
    (diagonals 'ii->i', traces 'ii'), '...' broadcasting, any number of operands; also NumPy's
    interleaved form einsum(x, [0, 1], y, [1, 2], [0, 2]). `optimize` is accepted for NumPy's
    signature; more than two operands are contracted in an optimized order anyway.

    Examples
    --------
    >>> tt.einsum("ij,j->i", tt.tensor(np.eye(2)), tt.tensor([1.0, 2.0]))
    tensor([1., 2.])
    """
    if not args:
        raise TypeError("einsum: no subscripts or operands given")
    if isinstance(args[0], str):
        subscripts, operands = args[0], args[1:]
    else:
        subscripts, operands = _interleaved(args)
    spec = _explicit_subscripts(subscripts, tuple(tuple(_shape(x)) for x in operands))
    return _einsum(*operands, subscripts=spec)


def _interleaved(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [sublistout]) as (subscripts, operands)."""
    def letters(sublist):
        return "".join("..." if i is Ellipsis else _LETTERS[i] for i in sublist)
    operands = args[0:len(args) - len(args) % 2:2]
    spec = ",".join(letters(s) for s in args[1::2][:len(operands)])
    if len(args) % 2:
        spec += "->" + letters(args[-1])
    return spec, operands


# ----- products composed from primitives (both modes, every order, for free) ------------------------
def _axis_list(axes, ndim):
    axes = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    return [int(a) % ndim if ndim else int(a) for a in axes]


@public(numpy=np.tensordot)
def tensordot(a, b, axes=2):
    """np.tensordot: sum over a's axes `axes[0]` and b's `axes[1]`; an int N means a's last N
    axes against b's first N. The result has a's free axes, then b's. As NumPy computes it:
    transposes and reshapes around one matrix product (BLAS).

    Examples
    --------
    >>> tt.tensordot(tt.ones((2, 3)), tt.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    sa, sb = tuple(_shape(a)), tuple(_shape(b))
    if isinstance(axes, (int, np.integer)):
        if axes < 0 or axes > min(len(sa), len(sb)):
            raise ValueError(f"tensordot: axes={axes} must lie in 0..{min(len(sa), len(sb))} for shapes "
                             f"{sa} and {sb}")
        axes_a, axes_b = list(range(len(sa) - axes, len(sa))), list(range(axes))
    else:
        try:
            axes_a, axes_b = axes
        except (TypeError, ValueError):
            raise ValueError(f"tensordot: axes must be an int or a pair of axis sequences, got "
                             f"{axes!r}") from None
        axes_a, axes_b = _axis_list(axes_a, len(sa)), _axis_list(axes_b, len(sb))
    if len(axes_a) != len(axes_b) or any(sa[i] != sb[j] for i, j in zip(axes_a, axes_b)):
        raise ValueError(f"tensordot: shape-mismatch for sum: a's axes {axes_a} of shape {sa} do not "
                         f"match b's axes {axes_b} of shape {sb}")
    free_a = [i for i in range(len(sa)) if i not in axes_a]
    free_b = [j for j in range(len(sb)) if j not in axes_b]
    n_sum = int(np.prod([sa[i] for i in axes_a]))
    n_a, n_b = int(np.prod([sa[i] for i in free_a])), int(np.prod([sb[j] for j in free_b]))
    a2 = ops.reshape(_transposed(a, free_a + axes_a), (n_a, n_sum))     # sizes, not -1: size 0 too
    b2 = ops.reshape(_transposed(b, axes_b + free_b), (n_sum, n_b))
    return ops.reshape(ops.matmul(a2, b2), [sa[i] for i in free_a] + [sb[j] for j in free_b])


def _transposed(x, axes):
    return x if axes == sorted(axes) else ops.transpose(x, axes)


@public(numpy=np.outer)
def outer(a, b):
    """np.outer: out[i, j] = a.ravel()[i] * b.ravel()[j].

    Examples
    --------
    >>> tt.outer(tt.tensor([1.0, 2.0]), tt.tensor([3.0, 4.0]))
    tensor([[3., 4.],
            [6., 8.]])
    """
    return ops.mul(ops.reshape(a, (-1, 1)), ops.reshape(b, (1, -1)))


@public(numpy=np.inner)
def inner(a, b):
    """np.inner: the sum over the last axes (a 0-d operand multiplies).

    Examples
    --------
    >>> tt.inner(tt.tensor([1.0, 2.0]), tt.tensor([3.0, 4.0]))
    tensor(11.)
    """
    if len(_shape(a)) == 0 or len(_shape(b)) == 0:
        return ops.mul(a, b)
    return tensordot(a, b, axes=([-1], [-1]))


@public(numpy=np.kron)
def kron(a, b):
    """np.kron: the Kronecker product, block (i, j, ...) being a[i, j, ...] * b (the operand with
    fewer axes gets leading ones). Computed as a broadcast product with the axes interleaved.

    Examples
    --------
    >>> tt.kron(tt.eye(2), tt.tensor([[1.0, 2.0]]))
    tensor([[1., 2., 0., 0.],
            [0., 0., 1., 2.]])
    """
    sa, sb = tuple(_shape(a)), tuple(_shape(b))
    nd = max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    spread_a = ops.reshape(a, [n for s in sa for n in (s, 1)])   # (a0, 1, a1, 1, ...)
    spread_b = ops.reshape(b, [n for s in sb for n in (1, s)])   # (1, b0, 1, b1, ...)
    return ops.reshape(ops.mul(spread_a, spread_b), [m * n for m, n in zip(sa, sb)])


_stands_for(getattr(np.linalg, "tensordot", None))(tensordot)
_stands_for(getattr(np.linalg, "outer", None))(outer)
matmul = _stands_for(getattr(np.linalg, "matmul", None))(ops.matmul)   # tt.linalg.matmul is tt.matmul


# ----- inverse, solve, determinants ------------------------------------------------------------------
# d(A^-1) = -A^-1 dA A^-1.
_inv = defprim(_real(np.linalg.inv), "inv",
               vjp=[lambda g, ans, a: -(_mT(ans) @ g @ _mT(ans))],
               jvp=[lambda t, ans, a: -(ans @ t @ ans)])


@_stands_for(np.linalg.inv)
def inv(a):
    """np.linalg.inv, also as inv(a=...) (a primitive's keywords are parameters, not inputs).

    Examples
    --------
    >>> tt.linalg.inv(tt.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5 , 0.  ],
            [0.  , 0.25]])
    """
    return _inv(a)


def _solve_forward(a, b):
    if np.ndim(b) == 1:   # NumPy 2: a 1-D b is one vector (broadcast against a's batch)
        return _solve_forward(a, b[..., None])[..., 0]
    if type(a) is not np.ndarray and a.shape[:-2] != b.shape[:-2] and min(a.ndim, b.ndim) >= 2:
        # CuPy's solve does not broadcast the batch dimensions as NumPy's does: broadcast them here
        xp, batch = backend.namespace(a), np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a, b = xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:])
    try:
        return np.linalg.solve(a, b)
    except ValueError as err:
        if np.ndim(b) == np.ndim(a) - 1:   # NumPy 1 read this b as a batch of vectors
            raise ValueError(f"{err}; b of shape {np.shape(b)} is read as a batch of matrices (as NumPy "
                             f"2 does); for a batch of vectors pass b[..., None] and take [..., 0]") from err
        raise


def _vector_solve(a, v):   # solve(a, v) for a batch of vectors v (..., n)
    return _solve(a, v[..., None])[..., 0]


def _solve_vjp(g, ans, a, b):
    """x = a^-1 b: gb = a^-T g, ga = -gb x^T (one solve for both)."""
    if b.ndim == 1:
        gb = _vector_solve(_mT(a), g)
        return -(gb[..., :, None] * ans[..., None, :]), gb
    gb = _solve(_mT(a), g)
    return -(gb @ _mT(ans)), gb


def _solve_jvp_a(t, ans, a, b):   # dx = -a^-1 da x
    return -_vector_solve(a, (t @ ans[..., None])[..., 0]) if b.ndim == 1 else -_solve(a, t @ ans)


def _solve_jvp_b(t, ans, a, b):   # dx = a^-1 db
    return _vector_solve(a, t) if b.ndim == 1 else _solve(a, t)


_solve = defprim(_real(_solve_forward), "solve", nargs=2,
                 vjp=_solve_vjp, jvp=[_solve_jvp_a, _solve_jvp_b])


@_stands_for(np.linalg.solve)
def solve(a, b):
    """np.linalg.solve (NumPy 2): x with a @ x = b; a 1-D b is a vector, otherwise b is a
    (batch of) matrices (..., n, k); batches broadcast.

    Examples
    --------
    >>> tt.linalg.solve(tt.tensor([[2.0, 0.0], [0.0, 4.0]]), tt.tensor([2.0, 4.0]))
    tensor([1., 1.])
    """
    return _solve(_array(a), _array(b))


def _inverse_transpose(a):
    return _mT(inv(a))


# d det(A) = det(A) tr(A^-1 dA): the gradient is det(A) A^-T (A must be invertible).
_det = defprim(_real(np.linalg.det), "det",
               vjp=[lambda g, ans, a: (g * ans)[..., None, None] * _inverse_transpose(a)],
               jvp=[lambda t, ans, a: ans * (_inverse_transpose(a) * t).sum(axis=(-2, -1))])


@_stands_for(np.linalg.det)
def det(a):
    """np.linalg.det, also as det(a=...).

    Examples
    --------
    >>> tt.linalg.det(tt.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor(8.)
    """
    return _det(a)


def _slogdet_forward(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return np.stack([sign, logabsdet], axis=-1)


def _slogdet_jvp(t, ans, a):
    d = (_inverse_transpose(a) * t).sum(axis=(-2, -1))
    return d[..., None] * backend.like([0, 1], d, d.dtype)   # the sign's tangent is 0


# Packed [..., (sign, logabsdet)]; d log|det A| = tr(A^-1 dA); the sign has no gradient.
_slogdet = defprim(_real(_slogdet_forward), "slogdet",
                   vjp=[lambda g, ans, a: g[..., 1][..., None, None] * _inverse_transpose(a)],
                   jvp=[_slogdet_jvp])


@_stands_for(np.linalg.slogdet)
def slogdet(a):
    """np.linalg.slogdet: (sign, logabsdet) with det(a) = sign * exp(logabsdet); the gradient
    flows through logabsdet (`sign` is a Tensor that carries none).

    Examples
    --------
    >>> tt.linalg.slogdet(tt.tensor([[2.0, 0.0], [0.0, 4.0]]))
    SlogdetResult(sign=tensor(1.), logabsdet=tensor(2.07944154))
    """
    packed = _slogdet(a)
    if isinstance(packed, Tensor):
        return SlogdetResult(packed.detach()[..., 0], packed[..., 1])
    return SlogdetResult(packed[..., 0], packed[..., 1])


# ----- symmetric matrices: cholesky, eigh ---------------------------------------------------------
def _triangle(n, like, lower=True, strict=False):
    mask = backend.namespace(like).tri(n, k=-1 if strict else 0, dtype=like.dtype)
    return mask if lower else mask.T


def _symmetric_from(t, lower=True):
    """The symmetric matrix a function reading t's lower (upper) triangle sees."""
    n = t.shape[-1]
    return t * _triangle(n, t, lower) + _mT(t * _triangle(n, t, lower, strict=True))


def _triangle_adjoint(G, lower=True):
    """The adjoint of `_symmetric_from`: the gradient in the triangle read, from the gradient G
    of a function of the symmetric matrix (off-diagonal entries count twice)."""
    n = G.shape[-1]
    return (G + _mT(G)) * _triangle(n, G, lower) - G * _eye(n, G)


def _cholesky_vjp(g, ans, a):
    """Murray (2016): A-bar = L^-T phi(L^T L-bar) L^-1, phi = the lower triangle, halved diagonal;
    then the gradient in the lower triangle that NumPy reads."""
    n = ans.shape[-1]
    phi = _triangle(n, ans) - 0.5 * _eye(n, ans)
    P = (_mT(ans) @ g) * phi
    # L^-T P L^-1 by two solves (the general solver: batched, and differentiable again)
    G = _mT(_solve(_mT(ans), _mT(_solve(_mT(ans), P))))
    return _triangle_adjoint(G)


def _cholesky_jvp(t, ans, a):
    """dL = L phi(L^-1 dA L^-T), dA the symmetric matrix the lower triangle of t stands for."""
    n = ans.shape[-1]
    phi = _triangle(n, ans) - 0.5 * _eye(n, ans)
    X = _mT(_solve(ans, _mT(_solve(ans, _symmetric_from(t)))))   # L^-1 dA L^-T
    return ans @ (X * phi)


_cholesky = defprim(_real(np.linalg.cholesky), "cholesky", vjp=[_cholesky_vjp], jvp=[_cholesky_jvp])


@_stands_for(np.linalg.cholesky)
def cholesky(a, upper=False):
    """np.linalg.cholesky: L (lower) with a = L L^T, reading a's lower triangle; `upper=True`
    gives U = L^T from the upper triangle. `a` must be symmetric positive definite.

    Examples
    --------
    >>> tt.linalg.cholesky(tt.tensor([[4.0, 0.0], [0.0, 9.0]]))
    tensor([[2., 0.],
            [0., 3.]])
    """
    return _mT(_cholesky(_mT(_array(a)))) if upper else _cholesky(a)


def _eigh_forward(a, UPLO="L"):
    w, V = np.linalg.eigh(a, UPLO=UPLO)
    return np.concatenate([w[..., None, :], V], axis=-2)   # packed: row 0 holds w, then V


def _eigh_vjp(g, ans, a, UPLO):
    """A-bar = V (diag(w-bar) + F o (V^T V-bar)) V^T, F_ij = 1/(w_j - w_i), in the triangle read."""
    w, V = ans[..., 0, :], ans[..., 1:, :]
    core = _on_diagonal(g[..., 0, :]) + _gap_inverse(w) * (_mT(V) @ g[..., 1:, :])
    return _triangle_adjoint(V @ core @ _mT(V), lower=UPLO == "L")


def _eigh_jvp(t, ans, a, UPLO):
    """dw = diag(V^T dA V), dV = V (F o (V^T dA V))."""
    w, V = ans[..., 0, :], ans[..., 1:, :]
    X = _mT(V) @ _symmetric_from(t, lower=UPLO == "L") @ V
    return ops.concatenate([_diagonal_of(X)[..., None, :], V @ (_gap_inverse(w) * X)], axis=-2)


_eigh = defprim(_real(_eigh_forward), "eigh", nargs=1, vjp=[_eigh_vjp], jvp=[_eigh_jvp])


@_stands_for(np.linalg.eigh)
def eigh(a, UPLO="L"):
    """np.linalg.eigh: (eigenvalues, eigenvectors) of a symmetric matrix, eigenvalues ascending,
    eigenvectors in the columns; reads a's lower triangle (UPLO="U": the upper one).
    Gradients need distinct eigenvalues (terms 1/(w_j - w_i)); see the module docstring and the
    README for exactly repeated ones.

    Examples
    --------
    >>> w, v = tt.linalg.eigh(tt.tensor([[2.0, 0.0], [0.0, 1.0]]))
    >>> w
    tensor([1., 2.])
    """
    packed = _eigh(a, UPLO=UPLO.upper() if isinstance(UPLO, str) else UPLO)   # NumPy takes "u" too
    return EighResult(packed[..., 0, :], packed[..., 1:, :])


@_stands_for(np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    """np.linalg.eigvalsh: the eigenvalues of a symmetric matrix, ascending.

    Examples
    --------
    >>> tt.linalg.eigvalsh(tt.tensor([[2.0, 0.0], [0.0, 1.0]]))
    tensor([1., 2.])
    """
    return eigh(a, UPLO=UPLO).eigenvalues


# ----- singular value decomposition ------------------------------------------------------------------
def _svd_pack(U, s, Vh):
    batch = tuple(s.shape[:-1])          # sizes, not -1: an empty batch too
    return ops.concatenate([U.reshape(batch + (U.shape[-2] * U.shape[-1],)), s,
                            Vh.reshape(batch + (Vh.shape[-2] * Vh.shape[-1],))], axis=-1)


def _svd_unpack(packed, m, n):
    """(U, s, Vh) of the reduced SVD of an (..., m, n) matrix, from the packed array."""
    k = min(m, n)
    batch = tuple(packed.shape[:-1])
    return (packed[..., :m * k].reshape(batch + (m, k)), packed[..., m * k:m * k + k],
            packed[..., m * k + k:].reshape(batch + (k, n)))


def _svd_forward(a):
    return _svd_pack(*np.linalg.svd(a, full_matrices=False))


def _svd_vjp(g, ans, a):
    """The reduced SVD's VJP (Townsend 2016), F_ij = 1/(s_j^2 - s_i^2) (0 where equal):
    A-bar = U [diag(s-bar) + (J + J^T) S + S (K + K^T)] V^T, J = F o (U^T U-bar), K = F o (V^T V-bar),
    plus, for a tall (wide) matrix, the part of U-bar (V-bar) outside the span of U (V)."""
    m, n = a.shape[-2:]
    U, s, Vh = _svd_unpack(ans, m, n)
    gU, gs, gVh = _svd_unpack(g, m, n)
    F = _gap_inverse(s * s)
    J = F * (_mT(U) @ gU)
    K = F * (Vh @ _mT(gVh))
    core = _on_diagonal(gs) + (J + _mT(J)) * s[..., None, :] + s[..., :, None] * (K + _mT(K))
    grad = U @ core @ Vh
    if m > n:
        grad = grad + ((gU - U @ (_mT(U) @ gU)) * _safe_reciprocal(s)[..., None, :]) @ Vh
    if n > m:
        grad = grad + U @ (_safe_reciprocal(s)[..., :, None] * (gVh - (gVh @ _mT(Vh)) @ Vh))
    return grad


def _svd_jvp(t, ans, a):
    """dS = U^T dA V: ds = diag(dS), dU = U (F o (dS S + S dS^T)), dV = V (F o (S dS + dS^T S)),
    plus, for a tall (wide) matrix, dA's part outside the span of U (V)."""
    m, n = a.shape[-2:]
    U, s, Vh = _svd_unpack(ans, m, n)
    V = _mT(Vh)
    dS = _mT(U) @ t @ V
    F = _gap_inverse(s * s)
    dSS, SdS = dS * s[..., None, :], s[..., :, None] * dS
    dU = U @ (F * (dSS + _mT(dSS)))
    dV = V @ (F * (SdS + _mT(SdS)))
    if m > n:
        tV = t @ V
        dU = dU + (tV - U @ (_mT(U) @ tV)) * _safe_reciprocal(s)[..., None, :]
    if n > m:
        tU = _mT(t) @ U
        dV = dV + (tU - V @ (Vh @ tU)) * _safe_reciprocal(s)[..., None, :]
    return _svd_pack(dU, _diagonal_of(dS), _mT(dV))


# Packed [..., U.ravel(), s, Vh.ravel()] of the reduced SVD (full_matrices=False).
_svd = defprim(_real(_svd_forward), "svd", vjp=[_svd_vjp], jvp=[_svd_jvp])


@_stands_for(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """np.linalg.svd: (U, S, Vh) with a = U @ (S[..., None] * Vh), S descending.

    Gradients are those of the reduced SVD (`full_matrices=False`, the same thing for square
    matrices); a non-square `full_matrices=True` SVD of a Tensor that requires gradients is an
    error, since the extra columns of U (rows of Vh) are not determined by `a`. Singular vectors
    need distinct singular values for a gradient (terms 1/(s_j^2 - s_i^2)). `hermitian` is
    accepted for NumPy's signature; the general SVD is used.

    Examples
    --------
    >>> u, s, vh = tt.linalg.svd(tt.tensor([[3.0, 0.0], [0.0, 4.0]]))
    >>> s
    tensor([4., 3.])
    """
    if len(_shape(a)) < 2:
        raise np.linalg.LinAlgError(f"svd: {len(_shape(a))}-dimensional array given; it must be at "
                                    f"least two-dimensional")
    m, n = _shape(a)[-2:]
    if compute_uv and full_matrices and m != n:
        if isinstance(a, Tensor) and a.requires_grad and STATE.grad_enabled:
            raise ValueError(f"svd: full_matrices=True on a {m}x{n} matrix has no gradient (the extra "
                             f"singular vectors are arbitrary); pass full_matrices=False")
        value = a.data if isinstance(a, Tensor) else a
        U, s, Vh = np.linalg.svd(value, full_matrices=True)
        return SVDResult(*(Tensor(x) for x in (U, s, Vh))) if isinstance(a, Tensor) else SVDResult(U, s, Vh)
    U, s, Vh = _svd_unpack(_svd(a), m, n)
    return SVDResult(U, s, Vh) if compute_uv else s


@_stands_for(getattr(np.linalg, "svdvals", None))
def svdvals(a):
    """np.linalg.svdvals: the singular values, descending.

    Examples
    --------
    >>> tt.linalg.svdvals(tt.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor([4., 3.])
    """
    return svd(a, full_matrices=False, compute_uv=False)


# ----- norms ------------------------------------------------------------------------------------
def _norm2_forward(x, axis):
    return np.sqrt(np.sum(x * x, axis=axis))   # as np.linalg.norm computes it


# sqrt(sum(x^2)) over `axis` (the vector 2-norm, or the Frobenius norm over a pair of axes): the
# gradient is x / norm, and 0 where the norm is 0 (as frobenius_norm's).
_norm2 = defprim(_norm2_forward, "norm2", nargs=1,
                 vjp=[lambda g, ans, x, axis: _keepdims(g / _safe(ans), x.shape, axis, False) * x],
                 jvp=[lambda t, ans, x, axis: np.sum(x * t, axis=axis) / _safe(ans)])


def _min(x, axis):
    return -ops.max(-x, axis=axis)


def _root_rule(g, ans, s, p):
    """d s^(1/p) = s^(1/p) / (p s) ds, selected where s != 0: the norm's gradient at 0 is 0, not
    0 * inf. A primitive, so that the selection is made on the values of each call (a comparison
    in composed code would be a constant to tt.compile)."""
    nonzero = s != 0
    return np.where(nonzero, g * (ans / (p * np.where(nonzero, s, 1))), 0)


# s ** (1/p) for the p-norms: one entry, whose rules select (see _root_rule).
_root = defprim(lambda s, p: np.power(s, 1 / p), "norm_root", vjp=[_root_rule], jvp=[_root_rule])


def _vector_norm(x, ord, axis):
    if ord is None or ord == 2:
        return _norm2(x, axis=axis)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    if ord == np.inf:
        if not _shape(x)[axis]:                   # an empty axis: 0, as NumPy
            return ops.sum(ops.abs(x), axis=axis)
        return ops.max(ops.abs(x), axis=axis)
    if ord == -np.inf:
        return _min(ops.abs(x), axis)
    if ord == 0:   # the number of nonzero entries: piecewise constant, no gradient
        value = x.data if isinstance(x, Tensor) else x
        count = np.sum(value != 0, axis=axis).astype(value.dtype)
        return Tensor(count) if isinstance(x, Tensor) else count
    if ord == 1:
        return ops.sum(ops.abs(x), axis=axis)
    return _root(ops.sum(ops.abs(x) ** ord, axis=axis), p=ord)   # sum |x|^p, then its 1/p-th power


def _matrix_norm(x, ord, row, col):
    if ord in (None, "fro", "f"):
        return _norm2(x, axis=(row, col))
    if ord in ("nuc", 2, -2):
        last = [i for i in range(len(_shape(x))) if i not in (row, col)] + [row, col]
        s = svdvals(ops.transpose(x, last))
        return ops.sum(s, axis=-1) if ord == "nuc" else ops.max(s, axis=-1) if ord == 2 else _min(s, -1)
    if ord in (1, -1):     # the largest (smallest) absolute column sum
        sums = ops.sum(ops.abs(x), axis=row)
        return (ops.max if ord == 1 else _min)(sums, axis=col - (col > row))
    if ord in (np.inf, -np.inf):   # the largest (smallest) absolute row sum
        sums = ops.sum(ops.abs(x), axis=col)
        return (ops.max if ord == np.inf else _min)(sums, axis=row - (row > col))
    raise ValueError(f"norm: invalid norm order {ord!r} for matrices")


@_stands_for(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm. Vectors (a 1-D x, or an int `axis`): ord None or 2 (Euclidean), 1, inf,
    -inf, 0 (the count of nonzero entries, no gradient), any other p (sum |x|^p)^(1/p).
    Matrices (a 2-D x, or a pair `axis`): None or "fro", "nuc", 1, -1, inf, -inf, 2, -2 (the
    largest and smallest singular values). axis=None with ord=None is the 2-norm of x flattened,
    whatever its shape. The gradient at x = 0 is 0 (no NaN).

    Examples
    --------
    >>> tt.linalg.norm(tt.tensor([3.0, 4.0]))
    tensor(5.)
    """
    if not isinstance(x, Tensor):
        x = backend.asarray(x)
    if not np.issubdtype(x.dtype, np.inexact):
        x = ops.astype(x, np.float64)
    nd = len(x.shape)
    if axis is None:
        if ord is None or (ord in ("fro", "f") and nd == 2) or (ord == 2 and nd == 1):
            result = ops.frobenius_norm(x)   # flattened; BLAS nrm2, exact from 1e-200 to 1e200
            return ops.reshape(result, (1,) * nd) if keepdims else result
        if nd not in (1, 2):
            raise ValueError(f"norm: improper number of dimensions to norm ({nd}: give axis, or a "
                             f"1-D or 2-D x, for ord={ord!r})")
        axis = tuple(range(nd))
    axes = _axis_list(axis, nd)
    if len(axes) == 1:
        result = _vector_norm(x, ord, axes[0])
    elif len(axes) == 2:
        if axes[0] == axes[1]:
            raise ValueError(f"norm: duplicate axes given ({axis})")
        result = _matrix_norm(x, ord, *axes)
    else:
        raise ValueError(f"norm: improper number of dimensions to norm (axis={axis})")
    if keepdims:
        result = ops.reshape(result, [1 if i in axes else n for i, n in enumerate(x.shape)])
    return result


@_stands_for(getattr(np.linalg, "vector_norm", None))
def vector_norm(x, axis=None, keepdims=False, ord=2):
    """np.linalg.vector_norm (NumPy 2): the vector `ord`-norm over `axis` (None: every axis,
    a tuple: those axes taken together as one vector).

    Examples
    --------
    >>> tt.linalg.vector_norm(tt.tensor([3.0, 4.0]))
    tensor(5.)
    """
    if not isinstance(x, Tensor):
        x = backend.asarray(x)
    if not np.issubdtype(x.dtype, np.inexact):
        x = ops.astype(x, np.float64)
    shape = tuple(x.shape)
    axes = tuple(range(len(shape))) if axis is None else tuple(_axis_list(axis, len(shape)))
    if len(axes) == 1:
        result = _vector_norm(x, ord, axes[0])
    else:   # the axes side by side at the end, as one
        rest = [i for i in range(len(shape)) if i not in axes]
        flat = ops.reshape(ops.transpose(x, rest + list(axes)), [shape[i] for i in rest] + [-1])
        result = _vector_norm(flat, ord, -1)
    if keepdims:
        result = ops.reshape(result, [1 if i in axes else n for i, n in enumerate(shape)])
    return result


@_stands_for(getattr(np.linalg, "matrix_norm", None))
def matrix_norm(x, keepdims=False, ord="fro"):
    """np.linalg.matrix_norm (NumPy 2): the matrix `ord`-norm of the last two axes.

    Examples
    --------
    >>> tt.linalg.matrix_norm(tt.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor(5.)
    """
    if len(_shape(x)) < 2:
        raise ValueError(f"matrix_norm: x must have at least two axes, got shape {tuple(_shape(x))}")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


# ----- more of np.linalg, composed ---------------------------------------------------------------
@_stands_for(np.linalg.matrix_power)
def matrix_power(a, n):
    """np.linalg.matrix_power: a @ a @ ... (n factors) by repeated squaring; n = 0 gives the
    identity (no gradient), n < 0 the powers of inv(a).

    Examples
    --------
    >>> tt.linalg.matrix_power(tt.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    tensor([[1., 3.],
            [0., 1.]])
    """
    if not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: the exponent must be an integer, got {type(n).__name__}")
    shape = tuple(_shape(a))
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise np.linalg.LinAlgError(f"matrix_power: a must be a (batch of) square matrices, got shape "
                                    f"{shape}")
    if n == 0:
        eye = backend.namespace(_array(a)).eye(shape[-1], dtype=_dtype(a))
        identity = np.broadcast_to(eye, shape).copy()
        recorder = STATE.recorder    # (tt.compile: an array argument is a Tensor inside f, eagerly an array)
        eagerly_array = recorder is not None and isinstance(a, Tensor) and recorder.passed_as_array(a)
        return Tensor(identity) if isinstance(a, Tensor) and not eagerly_array else identity
    base, n, result = (inv(a), -n, None) if n < 0 else (a, n, None)
    while n:
        if n & 1:
            result = base if result is None else ops.matmul(result, base)
        n >>= 1
        if n:
            base = ops.matmul(base, base)
    return result


@_stands_for(np.linalg.multi_dot)
def multi_dot(arrays):
    """np.linalg.multi_dot: dot(dot(a, b), c)... of two or more arrays, the first and the last
    possibly 1-D (taken left to right: the same value as NumPy's cheapest order, to rounding).

    Examples
    --------
    >>> tt.linalg.multi_dot([tt.eye(2), tt.ones((2, 3)), tt.ones((3, 1))]).shape
    (2, 1)
    """
    if len(arrays) < 2:
        raise ValueError(f"multi_dot: expecting at least two arrays, got {len(arrays)}")
    result = arrays[0]
    for x in arrays[1:]:
        result = ops.dot(result, x)
    return result


@_stands_for(getattr(np.linalg, "vecdot", None), getattr(np, "vecdot", None))
def vecdot(x1, x2, axis=-1):
    """np.vecdot (NumPy 2): sum(x1 * x2) over `axis`, broadcasting the other axes (real only).

    Examples
    --------
    >>> tt.linalg.vecdot(tt.tensor([1.0, 2.0]), tt.tensor([3.0, 4.0]))
    tensor(11.)
    """
    return ops.sum(ops.mul(x1, x2), axis=axis)


@_stands_for(getattr(np.linalg, "matrix_transpose", None))
def matrix_transpose(x):
    """np.linalg.matrix_transpose (NumPy 2): the last two axes swapped.

    Examples
    --------
    >>> tt.linalg.matrix_transpose(tt.zeros((5, 2, 3))).shape
    (5, 3, 2)
    """
    return ops.swapaxes(x, -1, -2)


@_stands_for(getattr(np.linalg, "diagonal", None))
def diagonal(x, offset=0):
    """np.linalg.diagonal (NumPy 2): the `offset` diagonal of the last two axes (not np.diagonal,
    which takes the first two).

    Examples
    --------
    >>> tt.linalg.diagonal(tt.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([1., 4.])
    """
    n, m = _shape(x)[-2:]
    size = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    rows, cols = (slice(0, size), slice(offset, offset + size)) if offset >= 0 else \
        (slice(-offset, -offset + size), slice(0, size))
    return einsum("...ii->...i", ops.getitem(x, index=(Ellipsis, rows, cols)))


@_stands_for(getattr(np.linalg, "trace", None))
def trace(x, offset=0, dtype=None):
    """np.linalg.trace (NumPy 2): the sum of the `offset` diagonal of the last two axes.

    Examples
    --------
    >>> tt.linalg.trace(tt.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(5.)
    """
    total = ops.sum(diagonal(x, offset=offset), axis=-1)
    return total if dtype is None else ops.astype(total, dtype)

"""OP_SPECS: one row per primitive saying how to exercise it.

This one table drives the parametrised sweep in tests/sweeps/test_op_sweep.py and `tt.check_rules()`.
A row gives the tinytensor call, its NumPy reference (for the forward check), the input
shapes, including 0-d arrays and rank-mismatched broadcast pairs, the static parameters, and a
sampler per input that stays inside the op's domain (positive for log). Adding a primitive
means adding its row here; the sweep fails for a registered primitive without one.
"""

import sys
from dataclasses import dataclass, field
from itertools import product

import numpy as np
import scipy.special

from . import backend, fft, linalg, ops  # noqa: F401  (fft: np.fft on Tensors)
from .ops import elementwise as ew
from .ops import reductions as red
from .ops import shape as ops_shape


# ----- samplers: sample(rng, shape) -> array inside the op's domain ----------------------------------
def normal(rng, shape):
    return rng.standard_normal(shape)


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(rng, shape):   # kinks (relu, abs) and poles (div) stay away from eps
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 2.0, shape)


def distinct(rng, shape):          # no ties for max, so central differences are meaningful
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.37 + rng.uniform(0, 0.1, n)).reshape(shape) - n * 0.15


def inside_unit(rng, shape):       # arcsin, arccos, arctanh: (-1, 1), away from the poles
    return rng.uniform(-0.9, 0.9, shape)


def above_one(rng, shape):         # arccosh
    return rng.uniform(1.2, 3.0, shape)


def moderate(rng, shape):          # tan: away from its poles at +-pi/2
    return rng.uniform(-1.2, 1.2, shape)


def near_zero(rng, shape):         # sinc: both sides of its switch to a series (at 0.08), and tiny
    return rng.uniform(-0.12, 0.12, shape) * rng.choice([1.0, 1e-4], shape)


def with_zeros(rng, shape):        # prod: slices with one zero, with two, and with none
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    x.flat[[i for i in (0, 5, 6) if i < x.size]] = 0.0
    return x


def booleans(rng, shape):          # a constant condition (where)
    return rng.random(shape) < 0.5


def wide(rng, shape):              # clip: x below, inside and above the bounds below/above
    return rng.uniform(-2.5, 2.5, shape)


def below(rng, shape):
    return rng.uniform(-1.5, -0.2, shape)


def above(rng, shape):
    return rng.uniform(0.2, 1.5, shape)


def _prod_others_reference(x, axis):
    """The product of the others, one entry at a time (set it to 1, take the product)."""
    out = np.empty_like(x)
    reduced = range(x.ndim) if axis is None else [a % x.ndim for a in np.atleast_1d(axis)]
    for index in np.ndindex(x.shape):
        y = x.copy()
        y[index] = 1.0
        p = np.prod(y, axis=axis, keepdims=True)
        out[index] = p[tuple(0 if d in reduced else i for d, i in enumerate(index))]
    return out


def _gelu_tanh_reference(x, approximate):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def probabilities(rng, shape):
    p = rng.uniform(0.2, 1.0, shape)
    return p / p.sum(axis=-1, keepdims=True)


def class_indices(classes):
    """A constant input: integer labels in [0, classes)."""
    def sample(rng, shape):
        return rng.integers(0, classes, shape)
    sample.constant = True
    return sample


@dataclass
class OpSpec:
    call: object                  # call(*inputs, **params) -> Tensor
    reference: object             # the same in NumPy, for the forward check (None: skip)
    shapes: list                  # one tuple of input shapes per case
    params: list = field(default_factory=lambda: [{}])   # combined with every shape case
    sample: object = normal       # one sampler, or a tuple with one per input
    pairs: list = None            # explicit (shapes, params) cases instead of the product
    float32: bool = True          # False: the op changes dtype on purpose (astype)

    def cases(self, seed=0):
        """[(inputs, params)] with inputs sampled in float64 (constants as given)."""
        rng = np.random.default_rng(seed)
        combos = self.pairs if self.pairs is not None else list(product(self.shapes, self.params))
        result = []
        for shapes, params in combos:
            samplers = self.sample if isinstance(self.sample, tuple) else (self.sample,) * len(shapes)
            result.append(([s(rng, shape) for s, shape in zip(samplers, shapes)], params))
        return result


def default_cases(prim):
    """For a primitive with no row (a user's): positive inputs of shape (3,)."""
    rng = np.random.default_rng(0)
    return [([positive(rng, (3,)) for _ in range(prim.nargs or 2)], {})]


UNARY = [((),), ((4,),), ((2, 3),)]
BINARY = [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((3,), (2, 3)), ((2, 1), (1, 3)),
          ((), (2, 3)), ((2, 3), ()), ((2, 1, 3), (4, 1))]
REDUCE = [(((3, 4),), dict(axis=None, keepdims=False)), (((3, 4),), dict(axis=1, keepdims=False)),
          (((3, 4),), dict(axis=0, keepdims=True)), (((2, 3, 4),), dict(axis=(0, 2), keepdims=False)),
          (((2, 3, 4),), dict(axis=-1, keepdims=True)), (((),), dict(axis=None, keepdims=False)),
          (((5,),), dict(axis=0, keepdims=False))]
VAR_CASES = [(shapes, dict(params, ddof=ddof)) for shapes, params in REDUCE for ddof in (0, 1)
             if ddof == 0 or shapes != ((),)]
ZERO_CASES = [(((3, 4),), dict(axis=1, keepdims=False)), (((3, 4),), dict(axis=0, keepdims=True)),
              (((3, 4),), dict(axis=None, keepdims=False)), (((5,),), dict(axis=-1, keepdims=False))]
SOFTMAX = [(((4,),), dict(axis=-1)), (((3, 4),), dict(axis=-1)), (((3, 4),), dict(axis=0)),
           (((2, 3, 4),), dict(axis=1)), (((2, 3, 4),), dict(axis=-2))]


def unary(np_fun, tt_fun, sample=normal):
    return OpSpec(tt_fun, np_fun, UNARY, sample=sample)


def binary(np_fun, tt_fun, sample=normal):
    return OpSpec(tt_fun, np_fun, BINARY, sample=sample)


def _ce_reference(p, y, reduction="mean"):
    y = np.asarray(y)
    if np.issubdtype(y.dtype, np.integer):
        y = np.eye(p.shape[-1])[y]
    rows = -np.sum(y * np.log(p), axis=-1)
    return {"mean": np.mean, "sum": np.sum, "none": lambda r: r}[reduction](rows)


def _sce_reference(z, y, reduction="mean"):
    return _ce_reference(scipy.special.softmax(z, axis=-1), y, reduction)


CE_CASES = [(((4, 3), (4, 3)), dict(reduction="mean")), (((3,), (3,)), dict(reduction="mean")),
            (((2, 3, 4), (2, 3, 4)), dict(reduction="none")), (((4, 3), (4, 3)), dict(reduction="sum"))]
CE_INDEX_CASES = [(((4, 3), (4,)), dict(reduction=r)) for r in ("mean", "sum", "none")] + \
                 [(((2, 2, 3), (2, 2)), dict(reduction="mean"))]


# ----- linear algebra (issue 11): samplers of matrices in the last two axes, and the cases ---------
def _orthogonal(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def _spaced(rng, k, low, gap):   # k values at least `gap` apart, in random order
    return rng.permutation(low + gap * np.arange(k) + rng.uniform(0, gap / 4, k))


def matrices(make):
    """A sampler of a (batch of) matrices, each from make(rng, m, n)."""
    def sample(rng, shape):
        return np.array([make(rng, *shape[-2:]) for _ in np.ndindex(shape[:-2])]).reshape(shape)
    return sample


def _invertible(rng, m, n):        # singular values in [0.7, 2]; determinants of either sign
    return (_orthogonal(rng, n) * rng.uniform(0.7, 2.0, n)) @ _orthogonal(rng, n)


def _positive_definite(rng, m, n):  # eigenvalues 1, 1.5, 2, ... (cholesky)
    q = _orthogonal(rng, n)
    return (q * _spaced(rng, n, 1.0, 0.5)) @ q.T


def _symmetric(rng, m, n):         # distinct eigenvalues of both signs, at least 0.6 apart (eigh)
    q = _orthogonal(rng, n)
    return (q * _spaced(rng, n, -1.2, 0.6)) @ q.T


def _distinct_singular(rng, m, n):  # singular values at least 0.5 apart, the smallest >= 0.5 (svd)
    k = min(m, n)
    return (_orthogonal(rng, m)[:, :k] * _spaced(rng, k, 0.5, 0.5)) @ _orthogonal(rng, n)[:k]


def signed_distinct(rng, shape):   # |x| distinct and >= 0.4: no ties for max |x|, no kink of |x|
    n = int(np.prod(shape))
    magnitudes = 0.4 + 0.25 * rng.permutation(n) + rng.uniform(0, 0.05, n)
    return (rng.choice([-1.0, 1.0], n) * magnitudes).reshape(shape)


def _weights(n, like):             # fixed weights in like's dtype, for the combinations below
    return backend.like(np.linspace(0.5, 1.5, n), like, like.dtype)   # on like's device


def _eigh_combination(eigh):
    """V diag(c) V^T + diag(w) from eigh: every output in, and no eigenvector's sign matters."""
    def call(a, **params):
        w, V = eigh(a, **params)
        n = w.shape[-1]
        eye = backend.namespace(w).eye(n, dtype=w.dtype)
        return (V * _weights(n, w)) @ V.swapaxes(-1, -2) + w[..., None, :] * eye
    return call


def _svd_combination(svd):
    """U diag(c) Vh, U diag(c) U^T, V diag(c) Vh and s side by side: every output of the reduced
    SVD in, and no singular vector's sign matters."""
    def call(a):
        U, s, Vh = svd(a, full_matrices=False)
        c, batch = _weights(s.shape[-1], s), tuple(s.shape[:-1])
        parts = [(U * c) @ Vh, (U * c) @ U.swapaxes(-1, -2), (Vh.swapaxes(-1, -2) * c) @ Vh, s]
        return np.concatenate([p.reshape(batch + (-1,)) for p in parts], axis=-1)
    return call


def _signed_logdet(slogdet):
    def call(a):
        sign, logabsdet = slogdet(a)
        return sign * logabsdet
    return call


EINSUM_CASES = [(shapes, dict(subscripts=subscripts)) for subscripts, shapes in [
    ("ij,jk->ik", ((2, 3), (3, 4))), ("ij,jk", ((2, 3), (3, 2))), ("ba", ((2, 3),)),   # implicit
    ("ii->i", ((3, 3),)), ("ii", ((3, 3),)), ("iij->ji", ((3, 3, 2),)),     # diagonals, trace
    ("ij->", ((2, 3),)), ("i,i", ((4,), (4,))), ("i,j->ij", ((2,), (3,))),
    ("...ij,...jk->...ik", ((2, 1, 2, 3), (4, 3, 2))), ("i...->...", ((3, 2, 2),)),
    ("bij,bjk->bik", ((2, 2, 3), (2, 3, 2))), ("ij,jk,kl->il", ((2, 3), (3, 4), (4, 2))),
    ("ij,i,j->", ((2, 3), (2,), (3,))), ("ij,ij->ij", ((1, 3), (2, 3))), (",i->i", ((), (3,)))]]
SQUARE = [((3, 3),), ((2, 3, 3),), ((1, 1),)]
NORM_VECTOR_CASES = [(((5,),), dict(ord=o)) for o in (None, 2, 1, np.inf, -np.inf, 3, -1.5, 0.5)] + [
    (((3, 4),), dict(ord=o, axis=1)) for o in (None, 1, np.inf, 3)] + [
    (((2, 3, 4),), dict(ord=2, axis=-2, keepdims=True)), (((2, 3, 4),), dict(ord=-np.inf, axis=0)),
    (((),), dict()), (((2, 3, 4),), dict()), (((3, 4),), dict(keepdims=True))]
NORM_MATRIX_CASES = [
    (((3, 4),), dict(ord=o)) for o in (None, "fro", "nuc", 1, -1, np.inf, -np.inf, 2, -2)] + [
    (((2, 3, 4),), dict(ord=o, axis=(2, 0), keepdims=True)) for o in ("fro", "nuc", 1, np.inf, 2, -2)] + [
    (((2, 3, 4),), dict(ord=-1, axis=(-1, -2)))]


OP_SPECS = {
    "add": binary(np.add, ops.add),
    "sub": binary(np.subtract, ops.sub),
    "mul": binary(np.multiply, ops.mul),
    "div": binary(np.divide, ops.div, sample=(normal, away_from_zero)),
    "power": binary(np.power, ops.power, sample=(positive, normal)),
    "neg": unary(np.negative, ops.neg),
    "exp": unary(np.exp, ops.exp),
    "log": unary(np.log, ops.log, sample=positive),
    "sin": unary(np.sin, ops.sin),
    "cos": unary(np.cos, ops.cos),
    "tanh": unary(np.tanh, ops.tanh),
    "sigmoid": unary(scipy.special.expit, ops.sigmoid),
    "relu": unary(lambda x: np.maximum(x, 0), ops.relu, sample=away_from_zero),
    "sqrt": unary(np.sqrt, ops.sqrt, sample=positive),
    "square": unary(np.square, ops.square),
    "abs": unary(np.abs, ops.abs, sample=away_from_zero),
    "maximum": binary(np.maximum, ops.maximum, sample=distinct),
    "minimum": binary(np.minimum, ops.minimum, sample=distinct),
    "sum": OpSpec(ops.sum, np.sum, None, pairs=REDUCE),
    "mean": OpSpec(ops.mean, np.mean, None, pairs=REDUCE),
    "max": OpSpec(ops.max, np.max, None, pairs=REDUCE, sample=distinct),
    "logsumexp": OpSpec(ops.logsumexp, scipy.special.logsumexp, None, pairs=REDUCE),
    "softmax": OpSpec(ops.softmax, scipy.special.softmax, None, pairs=SOFTMAX),
    "log_softmax": OpSpec(ops.log_softmax, scipy.special.log_softmax, None, pairs=SOFTMAX),
    "reshape": OpSpec(ops.reshape, np.reshape, None, pairs=[
        (((2, 3),), dict(shape=(3, 2))), (((6,),), dict(shape=(2, -1))),
        (((),), dict(shape=(1, 1))), (((2, 3, 1),), dict(shape=(6,)))]),
    "transpose": OpSpec(ops.transpose, np.transpose, None, pairs=[
        (((2, 3),), dict(axes=None)), (((2, 3, 4),), dict(axes=(1, 0, 2))),
        (((2, 3, 4),), dict(axes=(2, 0, 1))), (((3,),), dict(axes=None)),
        (((2, 3, 4),), dict(axes=(0, -1, 1))), (((3, 4),), dict(axes=(-1, 0)))]),   # negative axes
    "broadcast_to": OpSpec(ops.broadcast_to, np.broadcast_to, None, pairs=[
        (((3,),), dict(shape=(2, 3))), (((2, 1),), dict(shape=(2, 4))), (((),), dict(shape=(3,))),
        (((1, 3),), dict(shape=(2, 4, 3)))]),
    "astype": OpSpec(ops.astype, lambda x, dtype: x.astype(dtype), UNARY,
                     params=[dict(dtype=np.float64)], float32=False),
    "getitem": OpSpec(lambda x, index: x[index], lambda x, index: x[index], None, pairs=[
        (((5,),), dict(index=2)), (((5,),), dict(index=slice(1, 4))),
        (((4, 3),), dict(index=(slice(None), 1))), (((4, 3),), dict(index=np.array([0, 2, 0, 0]))),
        (((4, 3),), dict(index=(np.array([0, 1, 1]), np.array([2, 0, 0])))),
        (((4, 3),), dict(index=np.array([True, False, True, True]))),
        (((2, 3, 4),), dict(index=(Ellipsis, None, 1))), (((3, 4),), dict(index=(slice(None, None, -1),)))]),
    "index_adjoint": OpSpec(ops._index_adjoint, None, None, pairs=[
        (((3,),), dict(index=np.array([0, 2, 0]), shape=(4,))),
        (((2,),), dict(index=slice(1, 3), shape=(4,))),
        (((4, 2),), dict(index=(slice(None), slice(0, 2)), shape=(4, 3)))]),
    "setitem": OpSpec(ops.setitem, None, None, pairs=[
        (((5,), ()), dict(index=2)), (((5,), (3,)), dict(index=slice(1, 4))),
        (((4, 3), (4,)), dict(index=(slice(None), 1))), (((4, 3), (3,)), dict(index=np.array([0, 2]))),
        (((4, 3), (1, 3)), dict(index=np.array([True, False, True, True]))), (((), ()), dict(index=()))]),
    "concatenate": OpSpec(lambda *xs, axis: ops.concatenate(xs, axis=axis),
                          lambda *xs, axis: np.concatenate(xs, axis=axis), None, pairs=[
        (((2, 3), (1, 3), (3, 3)), dict(axis=0)), (((2, 3), (2, 1)), dict(axis=1)),
        (((3,), (2,)), dict(axis=0)), (((2, 2), (2, 3)), dict(axis=-1))]),
    "stack": OpSpec(lambda *xs, axis: ops.stack(xs, axis=axis),
                    lambda *xs, axis: np.stack(xs, axis=axis), None, pairs=[
        (((2, 3), (2, 3)), dict(axis=0)), (((2, 3), (2, 3), (2, 3)), dict(axis=-1)),
        (((), ()), dict(axis=0))]),
    "matmul": OpSpec(ops.matmul, np.matmul, [
        ((2, 3), (3, 4)), ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((5, 2, 3), (3, 4)),
        ((2, 2, 3), (2, 3, 2)), ((2, 1, 2, 3), (3, 3, 2)), ((4, 2, 3), (3,)), ((3,), (2, 3, 4))]),
    "linear": OpSpec(ops._linear, lambda x, W, b: x @ W + b, [
        ((4, 3), (3, 2), (2,)), ((3,), (3, 2), (2,)), ((2, 4, 3), (3, 2), (2,)), ((4, 3), (3, 2), (4, 2))]),
    "dot": OpSpec(ops.dot, np.dot, [((2, 3), (3, 4)), ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4))]),
    "frobeniusNorm": OpSpec(ops.frobenius_norm, np.linalg.norm, [((3, 4),), ((5,),), ((),), ((2, 2, 2),)]),
    "crossEntropy": OpSpec(ops.cross_entropy, _ce_reference, None, sample=(probabilities, positive),
                           pairs=CE_CASES),
    "softmax_cross_entropy": OpSpec(ops._softmax_cross_entropy, _sce_reference, None,
                                    sample=(normal, positive), pairs=CE_CASES),
    # ----- elementwise and reductions (issue 11a) -----
    "log1p": unary(np.log1p, ew.log1p, sample=positive),
    "expm1": unary(np.expm1, ew.expm1),
    "log2": unary(np.log2, ew.log2, sample=positive),
    "log10": unary(np.log10, ew.log10, sample=positive),
    "exp2": unary(np.exp2, ew.exp2),
    "reciprocal": unary(np.reciprocal, ew.reciprocal, sample=away_from_zero),
    "tan": unary(np.tan, ew.tan, sample=moderate),
    "arcsin": unary(np.arcsin, ew.arcsin, sample=inside_unit),
    "arccos": unary(np.arccos, ew.arccos, sample=inside_unit),
    "arctan": unary(np.arctan, ew.arctan),
    "sinh": unary(np.sinh, ew.sinh),
    "cosh": unary(np.cosh, ew.cosh),
    "arcsinh": unary(np.arcsinh, ew.arcsinh),
    "arccosh": unary(np.arccosh, ew.arccosh, sample=above_one),
    "arctanh": unary(np.arctanh, ew.arctanh, sample=inside_unit),
    "sinc": unary(np.sinc, ew.sinc),
    "erf": unary(scipy.special.erf, ew.erf),
    "softplus": unary(lambda x: np.logaddexp(0, x), ew.softplus),
    "gelu": unary(lambda x: x * scipy.special.ndtr(x), ew.gelu),
    "leaky_relu": OpSpec(ew.leaky_relu, lambda x, negative_slope: np.where(x > 0, x, negative_slope * x),
                         UNARY, params=[dict(negative_slope=0.01), dict(negative_slope=0.2)],
                         sample=away_from_zero),
    "clone": unary(np.copy, ew.clone),
    "hypot": binary(np.hypot, ew.hypot),
    "arctan2": binary(np.arctan2, ew.arctan2, sample=away_from_zero),
    "logaddexp": binary(np.logaddexp, ew.logaddexp),
    "logaddexp2": binary(np.logaddexp2, ew.logaddexp2),
    "remainder": binary(np.remainder, ew.remainder, sample=(normal, away_from_zero)),
    "fmax": binary(np.fmax, ew.fmax, sample=distinct),
    "fmin": binary(np.fmin, ew.fmin, sample=distinct),
    "where": OpSpec(ew.where, np.where, [
        ((3,), (3,), (3,)), ((2, 3), (3,), ()), ((2, 1), (1, 3), (2, 3)), ((), (), ()), ((3,), (2, 3), (3,))],
        sample=(booleans, normal, normal)),
    "clip": OpSpec(ew.clip, np.clip, [((3, 4), (3, 4), (3, 4)), ((3, 4), (), ()), ((2, 3), (3,), (2, 1)),
                                      ((), (), ())], sample=(wide, below, above)),
    "min": OpSpec(red.min, np.min, None, pairs=REDUCE, sample=distinct),
    "prod": OpSpec(red.prod, np.prod, None, pairs=REDUCE),
    "prod_others": OpSpec(red._prod_others, _prod_others_reference, None, pairs=[
        (((3, 4),), dict(axis=None)), (((3, 4),), dict(axis=1)), (((2, 3, 4),), dict(axis=(0, -1))),
        (((),), dict(axis=None)), (((5,),), dict(axis=0))]),
    "var": OpSpec(red.var, np.var, None, pairs=VAR_CASES),
    "std": OpSpec(red.std, np.std, None, pairs=VAR_CASES),
    "cumsum": OpSpec(red.cumsum, np.cumsum, None, pairs=[
        (((3, 4),), dict(axis=None)), (((3, 4),), dict(axis=1)), (((3, 4),), dict(axis=0)),
        (((2, 3, 4),), dict(axis=-2)), (((),), dict(axis=None)), (((5,),), dict(axis=0))]),
    # ----- shapes and indexing (issue 11) -----
    "flip": OpSpec(ops_shape.flip, np.flip, None, pairs=[
        (((3, 4),), dict(axis=None)), (((3, 4),), dict(axis=-1)), (((2, 3, 4),), dict(axis=(0, 2))),
        (((),), dict(axis=None)), (((5,),), dict(axis=0))]),
    "roll": OpSpec(ops_shape.roll, np.roll, None, pairs=[
        (((5,),), dict(shift=2, axis=None)), (((3, 4),), dict(shift=-5, axis=None)),
        (((3, 4),), dict(shift=(1, 3), axis=(0, -1))), (((2, 3, 4),), dict(shift=(1, 3), axis=(1, 1))),
        (((),), dict(shift=1, axis=None))]),
    "tril": OpSpec(ops_shape.tril, np.tril, None, pairs=[
        (((4, 4),), dict(k=0)), (((3, 5),), dict(k=1)), (((2, 3, 3),), dict(k=-1)), (((4,),), dict(k=0))]),
    "triu": OpSpec(ops_shape.triu, np.triu, None, pairs=[
        (((4, 4),), dict(k=0)), (((5, 3),), dict(k=-2)), (((2, 3, 3),), dict(k=1)), (((4,),), dict(k=1))]),
    "diag": OpSpec(ops_shape.diag, np.diag, None, pairs=[
        (((3,),), dict(k=0)), (((3,),), dict(k=2)), (((2,),), dict(k=-1)), (((1,),), dict(k=0))]),
    "pad": OpSpec(ops_shape.pad, np.pad, None, pairs=[
        (((3, 4),), dict(pad_width=1)), (((3, 4),), dict(pad_width=((1, 0), (2, 3)))),
        (((5,),), dict(pad_width=(2, 1), constant_values=1.5)), (((),), dict(pad_width=2)),
        (((2, 3, 2),), dict(pad_width=((0, 0), (1, 1), (0, 2)), constant_values=((1, 2), (3, 4), (5, 6))))]),
    # ----- linear algebra (issue 11) -----
    "einsum": OpSpec(lambda *xs, subscripts: linalg.einsum(subscripts, *xs),
                     lambda *xs, subscripts: np.einsum(subscripts, *xs), None, pairs=EINSUM_CASES),
    "norm_root": OpSpec(linalg._root, lambda s, p: s ** (1 / p), UNARY, params=[dict(p=3.0), dict(p=-1.5)],
                        sample=positive),
    "inv": OpSpec(linalg.inv, np.linalg.inv, SQUARE, sample=matrices(_invertible)),
    "solve": OpSpec(linalg.solve, np.linalg.solve, [
        ((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3, 1)), ((3, 3), (2, 3, 2)),
        ((1, 3, 3), (2, 3, 2)), ((1, 1), (1,))], sample=(matrices(_invertible), normal)),
    "det": OpSpec(linalg.det, np.linalg.det, SQUARE, sample=matrices(_invertible)),
    "slogdet": OpSpec(_signed_logdet(linalg.slogdet), _signed_logdet(np.linalg.slogdet), SQUARE,
                      sample=matrices(_invertible)),
    "cholesky": OpSpec(linalg.cholesky, np.linalg.cholesky, SQUARE, params=[{}, dict(upper=True)],
                       sample=matrices(_positive_definite)),
    "eigh": OpSpec(_eigh_combination(linalg.eigh), _eigh_combination(np.linalg.eigh), SQUARE,
                   params=[{}, dict(UPLO="U")], sample=matrices(_symmetric)),
    "svd": OpSpec(_svd_combination(linalg.svd), _svd_combination(np.linalg.svd),
                  [((3, 3),), ((4, 2),), ((2, 4),), ((2, 3, 2),), ((1, 1),)],
                  sample=matrices(_distinct_singular)),
    "norm2": OpSpec(linalg._norm2, lambda x, axis: np.linalg.norm(x, axis=axis), None, pairs=[
        (((3, 4),), dict(axis=1)), (((3, 4),), dict(axis=(0, 1))), (((2, 3, 4),), dict(axis=(2, 0))),
        (((5,),), dict(axis=0)), (((2, 3, 4),), dict(axis=-2))]),
    # The device sweep (tests/device_sweep.py) runs it with the device under test.
    "to_device": OpSpec(ops._to_device, lambda x, device: x, UNARY, params=[dict(device="cpu")]),
}

# Rows that are not single primitives: the fused pattern, the label forms, and composites.
EXTRA_SPECS = {
    "crossEntropy(index labels)": OpSpec(ops.cross_entropy, _ce_reference, None,
                                         sample=(probabilities, class_indices(3)), pairs=CE_INDEX_CASES),
    "crossEntropy(softmax(z), y)": OpSpec(
        lambda z, y, reduction: ops.cross_entropy(ops.softmax(z), y, reduction),
        _sce_reference, None, sample=(normal, positive), pairs=CE_CASES),
    "crossEntropy(softmax(z), labels)": OpSpec(
        lambda z, y, reduction: ops.cross_entropy(ops.softmax(z), y, reduction),
        _sce_reference, None, sample=(normal, class_indices(3)), pairs=CE_INDEX_CASES),
    "softmax_cross_entropy(labels)": OpSpec(ops.softmax_cross_entropy, _sce_reference, None,
                                            sample=(normal, class_indices(3)), pairs=CE_INDEX_CASES),
    "swapaxes": OpSpec(ops.swapaxes, np.swapaxes, None, pairs=[(((2, 3, 4),), dict(axis1=0, axis2=2)),
                                                               (((2, 3, 4),), dict(axis1=-1, axis2=0))]),
    # ----- elementwise and reductions (issue 11a) -----
    "clip(numbers, None)": OpSpec(ew.clip, lambda x, a_min, a_max: np.clip(x, a_min, a_max), None, pairs=[
        (((3, 4),), dict(a_min=-0.5, a_max=0.5)), (((3, 4),), dict(a_min=None, a_max=0.3)),
        (((3, 4),), dict(a_min=-0.3, a_max=None)), (((),), dict(a_min=0.1, a_max=None))]),
    "sinc(near 0)": OpSpec(ew.sinc, np.sinc, [((8,),)], sample=near_zero),
    "softplus(beta)": OpSpec(ew.softplus, lambda x, beta: np.logaddexp(0, beta * x) / beta, UNARY,
                             params=[dict(beta=2.0)]),
    "gelu(tanh)": OpSpec(ew.gelu, _gelu_tanh_reference, UNARY, params=[dict(approximate="tanh")]),
    "x % y (operator)": OpSpec(lambda a, b: a % b, np.remainder, [((2, 3), (3,))],
                               sample=(normal, away_from_zero)),
    "prod(zeros)": OpSpec(red.prod, np.prod, None, pairs=ZERO_CASES, sample=with_zeros),
    "diff": OpSpec(red.diff, np.diff, None, pairs=[
        (((5,),), dict(n=1)), (((3, 4),), dict(n=2, axis=1)), (((3, 4),), dict(n=1, axis=0)),
        (((2, 3, 4),), dict(n=1, axis=-2)), (((3, 4),), dict(n=1, axis=-1, prepend=0.5, append=-1.0))]),
    # ----- shapes and indexing (issue 11) -----
    "moveaxis": OpSpec(ops_shape.moveaxis, np.moveaxis, None, pairs=[
        (((2, 3, 4),), dict(source=0, destination=-1)),
        (((2, 3, 4),), dict(source=(0, 1), destination=(2, 0))), (((3,),), dict(source=-1, destination=0))]),
    "squeeze": OpSpec(ops_shape.squeeze, np.squeeze, None, pairs=[
        (((1, 3, 1),), dict(axis=None)), (((1, 3, 1),), dict(axis=-1)), (((1, 1),), dict(axis=(0, 1))),
        (((),), dict(axis=None))]),
    "expand_dims": OpSpec(ops_shape.expand_dims, np.expand_dims, None, pairs=[
        (((3,),), dict(axis=0)), (((2, 3),), dict(axis=(-1, 1))), (((),), dict(axis=0))]),
    "ravel": OpSpec(ops_shape.ravel, np.ravel, None, pairs=[
        (((2, 3),), dict(order="C")), (((2, 3, 4),), dict(order="F")), (((),), dict(order="C"))]),
    "flatten(start_dim, end_dim)": OpSpec(ops_shape.flatten, lambda x, start_dim, end_dim: x.reshape(
        x.shape[:start_dim] + (-1,) + x.shape[end_dim % x.ndim + 1:]), None, pairs=[
        (((2, 3, 4),), dict(start_dim=1, end_dim=-1)), (((2, 3, 4),), dict(start_dim=0, end_dim=1))]),
    "vstack": OpSpec(lambda *xs: ops_shape.vstack(xs), lambda *xs: np.vstack(xs),
                     [((3,), (2, 3)), ((), ())]),
    "hstack": OpSpec(lambda *xs: ops_shape.hstack(xs), lambda *xs: np.hstack(xs),
                     [((3,), (2,)), ((2, 3), (2, 1))]),
    "dstack": OpSpec(lambda *xs: ops_shape.dstack(xs), lambda *xs: np.dstack(xs),
                     [((3,), (3,)), ((2, 3), (2, 3, 2))]),
    "column_stack": OpSpec(lambda *xs: ops_shape.column_stack(xs), lambda *xs: np.column_stack(xs),
                           [((3,), (3, 2)), ((2,), (2,))]),
    "concatenate(with an array)": OpSpec(
        lambda x, axis: ops.concatenate([x, backend.namespace(x).ones(x.shape, x.dtype)], axis=axis),
        lambda x, axis: np.concatenate([x, np.ones(x.shape)], axis=axis), None,
        pairs=[(((2, 3),), dict(axis=-1)), (((2, 3),), dict(axis=None))]),
    "stack(with an array)": OpSpec(
        lambda x, axis: ops.stack([backend.namespace(x).ones(x.shape, x.dtype), x], axis=axis),
        lambda x, axis: np.stack([np.ones(x.shape), x], axis=axis), None,
        pairs=[(((2, 3),), dict(axis=-1)), (((),), dict(axis=0))]),
    "split": OpSpec(   # the pieces weighted 1, 2, 3, ... and joined again
        lambda x, **p: ops.concatenate(
            [q * (i + 1.0) for i, q in enumerate(ops_shape.split(x, **p))], axis=p["axis"]),
        lambda x, **p: np.concatenate(
            [q * (i + 1.0) for i, q in enumerate(np.split(x, **p))], axis=p["axis"]),
        None, pairs=[(((6,),), dict(indices_or_sections=3, axis=0)),
                     (((2, 5),), dict(indices_or_sections=[1, 3, 3], axis=-1))]),
    "array_split": OpSpec(
        lambda x, **p: ops.concatenate(
            [q * (i + 1.0) for i, q in enumerate(ops_shape.array_split(x, **p))], axis=p["axis"]),
        lambda x, **p: np.concatenate(
            [q * (i + 1.0) for i, q in enumerate(np.array_split(x, **p))], axis=p["axis"]),
        None, pairs=[(((7, 2),), dict(indices_or_sections=3, axis=0))]),
    "tile": OpSpec(ops_shape.tile, np.tile, None, pairs=[
        (((3,),), dict(reps=2)), (((2, 3),), dict(reps=(2, 1, 2))), (((2, 3),), dict(reps=(3,))),
        (((),), dict(reps=(2, 2)))]),
    "repeat": OpSpec(ops_shape.repeat, np.repeat, None, pairs=[
        (((2, 3),), dict(repeats=2, axis=None)), (((2, 3),), dict(repeats=3, axis=-1)),
        (((3, 2),), dict(repeats=[2, 0, 1], axis=0)), (((),), dict(repeats=2, axis=None))]),
    "pad(edge, reflect, symmetric, wrap)": OpSpec(ops_shape.pad, np.pad, None, pairs=[
        (((3, 4),), dict(pad_width=2, mode="edge")),
        (((3, 4),), dict(pad_width=((2, 1), (3, 0)), mode="reflect")),
        (((4,),), dict(pad_width=5, mode="symmetric")),
        (((2, 3),), dict(pad_width=((1, 4), (0, 2)), mode="wrap"))]),
    "diag(matrix)": OpSpec(ops_shape.diag, np.diag, None, pairs=[
        (((3, 3),), dict(k=0)), (((3, 5),), dict(k=1)), (((4, 2),), dict(k=-2))]),
    "diagonal": OpSpec(ops_shape.diagonal, np.diagonal, None, pairs=[
        (((3, 4),), dict(offset=0, axis1=0, axis2=1)), (((3, 4),), dict(offset=-1, axis1=1, axis2=0)),
        (((2, 3, 4),), dict(offset=1, axis1=-1, axis2=0)), (((2, 2),), dict(offset=5, axis1=0, axis2=1))]),
    "trace": OpSpec(ops_shape.trace, np.trace, None, pairs=[
        (((3, 3),), dict(offset=0)), (((3, 4),), dict(offset=1)),
        (((2, 3, 4),), dict(offset=-1, axis1=2, axis2=1)),
        (((2, 3, 4),), dict(offset=0, axis1=-1, axis2=-3))]),
    "take": OpSpec(ops_shape.take, np.take, None, pairs=[
        (((3, 4),), dict(indices=np.array([0, 5, 5, -1]), axis=None)),
        (((3, 4),), dict(indices=np.array([[3, 0], [3, 3]]), axis=-1)),
        (((3, 4),), dict(indices=np.array([4, -5]), axis=0, mode="wrap")),
        (((4,),), dict(indices=2, axis=0))]),
    "take_along_axis": OpSpec(ops_shape.take_along_axis, np.take_along_axis, None, pairs=[
        (((3, 4),), dict(indices=np.array([[0, 3], [1, 1], [2, 0]]), axis=1)),
        (((3, 4),), dict(indices=np.array([[2, 0, 0, 1]]), axis=0)),
        (((2, 3, 2),), dict(indices=np.array([[[1], [0], [1]]]), axis=-1)),
        (((5,),), dict(indices=np.array([4, 4, 0]), axis=None))]),
    # ----- linear algebra (issue 11) -----
    "tensordot": OpSpec(linalg.tensordot, np.tensordot, None, pairs=[
        (((2, 3, 4), (3, 4, 2)), dict(axes=2)), (((2, 3, 4), (4, 5, 2)), dict(axes=([0, 2], [2, 0]))),
        (((3,), (4,)), dict(axes=0)), (((3, 4), (4,)), dict(axes=([-1], [0]))),
        (((2, 3), (2, 3)), dict(axes=([0, 1], [0, 1])))]),
    "outer": OpSpec(linalg.outer, np.outer, [((3,), (4,)), ((2, 2), (3,)), ((), (3,))]),
    "inner": OpSpec(linalg.inner, np.inner,
                    [((3,), (3,)), ((2, 3), (4, 3)), ((), (2, 3)), ((2, 2, 3), (3,))]),
    "kron": OpSpec(linalg.kron, np.kron, [((2, 3), (3, 2)), ((2,), (2, 3)), ((), (3,)), ((2, 1, 2), (2, 3))]),
    "dot(0-d, N-D)": OpSpec(ops.dot, np.dot, [((), (3,)), ((2, 3), ()), ((), ()), ((2, 3, 4), (5, 4, 2)),
                                               ((3, 4), (2, 4, 3)), ((2, 2, 3), (3,)), ((2, 2, 3), (3, 2))]),
    "eigvalsh": OpSpec(linalg.eigvalsh, np.linalg.eigvalsh, SQUARE, sample=matrices(_symmetric)),
    "svdvals": OpSpec(linalg.svdvals, lambda a: np.linalg.svd(a, compute_uv=False),
                      [((3, 3),), ((4, 2),), ((2, 2, 3),)], sample=matrices(_distinct_singular)),
    "norm(vector)": OpSpec(linalg.norm, np.linalg.norm, None, pairs=NORM_VECTOR_CASES,
                           sample=signed_distinct),
    "norm(matrix)": OpSpec(linalg.norm, np.linalg.norm, None, pairs=NORM_MATRIX_CASES,
                           sample=signed_distinct),
    # (NumPy 2 functions: with an older NumPy the reference is None and only the rules are checked)
    "vector_norm": OpSpec(linalg.vector_norm, getattr(np.linalg, "vector_norm", None), None,
                          sample=signed_distinct, pairs=[
        (((2, 3, 4),), dict()), (((2, 3, 4),), dict(axis=(0, 2), keepdims=True, ord=1)),
        (((3, 4),), dict(axis=-1, ord=np.inf)), (((),), dict())]),
    "matrix_norm": OpSpec(linalg.matrix_norm, getattr(np.linalg, "matrix_norm", None), None,
                          sample=signed_distinct, pairs=[
        (((2, 3, 4),), dict()), (((2, 3, 4),), dict(ord="nuc", keepdims=True))]),
    "vecdot": OpSpec(linalg.vecdot, getattr(np, "vecdot", None), None,
                     pairs=[(((2, 3), (3,)), {}), (((3, 2), (3, 2)), dict(axis=0))]),
    "matrix_transpose": OpSpec(linalg.matrix_transpose, getattr(np.linalg, "matrix_transpose", None),
                               [((2, 3),), ((2, 3, 4),)]),
    "linalg.diagonal": OpSpec(linalg.diagonal, getattr(np.linalg, "diagonal", None), None, pairs=[
        (((3, 3),), {}), (((2, 3, 4),), dict(offset=1)), (((4, 3),), dict(offset=-2))]),
    "linalg.trace": OpSpec(linalg.trace, getattr(np.linalg, "trace", None), None, pairs=[
        (((3, 3),), {}), (((2, 3, 4),), dict(offset=-1))]),
    "matrix_power": OpSpec(linalg.matrix_power, np.linalg.matrix_power, None, sample=matrices(_invertible),
                           pairs=[(((3, 3),), dict(n=n)) for n in (1, 2, 5, -2)] + [
                               (((2, 2, 2),), dict(n=3))]),
    "multi_dot": OpSpec(lambda *xs: linalg.multi_dot(xs), lambda *xs: np.linalg.multi_dot(xs),
                        [((3,), (3, 4), (4, 2)), ((2, 3), (3, 4), (4, 2), (2,))]),
    "np.linalg.* on Tensors": OpSpec(lambda a, b: np.linalg.solve(a, b) + np.linalg.inv(a) @ b,
                                     lambda a, b: 2 * np.linalg.solve(a, b), [((3, 3), (3, 2))],
                                     sample=(matrices(_invertible), normal)),
    "np.einsum on Tensors": OpSpec(lambda a, b: np.einsum("ij,kj->ik", a, b), lambda a, b: a @ b.T,
                                   [((2, 3), (4, 3))]),
}

# nn primitives (issue 12)
from .nn import functional as F  # noqa: E402

CONV = [(((2, 3, 5, 5), (4, 3, 3, 3), (4,)), dict(stride=(1, 1), padding=(0, 0))),
        (((2, 2, 6, 5), (3, 2, 3, 2), (3,)), dict(stride=(2, 1), padding=(1, 0))),
        (((1, 1, 4, 4), (2, 1, 2, 2), (2,)), dict(stride=(2, 2), padding=(1, 1)))]
POOL = [(((2, 3, 4, 4),), dict(kernel=(2, 2), stride=(2, 2))),
        (((1, 2, 5, 4),), dict(kernel=(3, 2), stride=(1, 2))),
        (((2, 1, 5, 5),), dict(kernel=(2, 2), stride=(1, 1)))]


def _np_conv2d(x, w, b=None, stride=(1, 1), padding=(0, 0)):
    """A loop over output pixels: slow and obviously right."""
    x = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    kh, kw = w.shape[2:]
    ho, wo = (x.shape[2] - kh) // stride[0] + 1, (x.shape[3] - kw) // stride[1] + 1
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i in range(ho):
        for j in range(wo):
            patch = x[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out if b is None else out + b[:, None, None]


def _np_pool(reduce):
    def pool(x, kernel, stride):
        ho, wo = (x.shape[2] - kernel[0]) // stride[0] + 1, (x.shape[3] - kernel[1]) // stride[1] + 1
        out = np.zeros(x.shape[:2] + (ho, wo))
        for i in range(ho):
            for j in range(wo):
                out[:, :, i, j] = reduce(x[:, :, i * stride[0]:i * stride[0] + kernel[0],
                                           j * stride[1]:j * stride[1] + kernel[1]], axis=(2, 3))
        return out
    return pool




def _unpool_params(shape, kernel, stride):
    """max_unpool2d's static parameters: where the maxima of a random input of `shape` are."""
    x = distinct(np.random.default_rng(1), shape)
    hits = F._first_maxima(x, F._max_pool_forward(x, kernel, stride), kernel, stride)
    return dict(hits=hits, shape=shape, kernel=kernel, stride=stride)


def _unit_interval(rng, shape):
    return rng.uniform(0.1, 0.9, shape)


OP_SPECS.update({
    "conv2d": OpSpec(F.conv2d_prim, _np_conv2d, None, pairs=CONV),
    "conv2d_grad_input": OpSpec(F.conv2d_grad_input, None, None, pairs=[
        (((2, 4, 3, 3), (4, 3, 3, 3)), dict(shape=(2, 3, 5, 5), stride=(1, 1), padding=(0, 0))),
        (((2, 3, 3, 4), (3, 2, 3, 2)), dict(shape=(2, 2, 6, 5), stride=(2, 1), padding=(1, 0)))]),
    "conv2d_grad_weight": OpSpec(F.conv2d_grad_weight, None, None, pairs=[
        (((2, 3, 5, 5), (2, 4, 3, 3)), dict(kernel=(3, 3), stride=(1, 1), padding=(0, 0))),
        (((2, 2, 6, 5), (2, 3, 3, 4)), dict(kernel=(3, 2), stride=(2, 1), padding=(1, 0)))]),
    "max_pool2d": OpSpec(F.max_pool2d_prim, _np_pool(np.max), None, pairs=POOL, sample=distinct),
    "max_unpool2d": OpSpec(F._unpool, None, None, pairs=[
        (((1, 2, 2, 2),), _unpool_params((1, 2, 4, 4), (2, 2), (2, 2))),
        (((1, 1, 3, 2),), _unpool_params((1, 1, 4, 4), (2, 3), (1, 1)))]),
    "avg_pool2d": OpSpec(F.avg_pool2d_prim, _np_pool(np.mean), None, pairs=POOL),
    "avg_unpool2d": OpSpec(F._avg_unpool, None, None, pairs=[
        (((2, 3, 2, 2),), dict(shape=(2, 3, 4, 4), kernel=(2, 2), stride=(2, 2))),
        (((2, 1, 4, 4),), dict(shape=(2, 1, 5, 5), kernel=(2, 2), stride=(1, 1)))]),
    "linear_t": OpSpec(F.linear_prim, lambda x, w, b: x @ w.T + b, [
        ((4, 3), (2, 3), (2,)), ((3,), (2, 3), (2,)), ((2, 4, 3), (2, 3), (2,)), ((4, 3), (2, 3), (4, 2))]),
    "embedding": OpSpec(F.embedding_prim, lambda w, index: w[index], None, pairs=[
        (((5, 3),), dict(index=np.array([0, 2, 2, 4]))), (((4, 2),), dict(index=np.array([[1, 0], [3, 3]]))),
        (((3, 2),), dict(index=np.array(1)))]),
    "binary_cross_entropy": OpSpec(F.binary_cross_entropy_prim,
                                   lambda p, y: -(y * np.log(p) + (1 - y) * np.log(1 - p)),
                                   BINARY[:5], sample=_unit_interval),
})

# recurrent layers' loops over time (issue 23)
from .nn import rnn as _rnn  # noqa: E402

OP_SPECS.update({
    "lstm_seq": OpSpec(_rnn.lstm_seq, None, None, pairs=[(((3, 2, 8), (2, 2), (2, 2), (8, 2)), {}),
                                                         (((1, 1, 4), (1, 1), (1, 1), (4, 1)), {})]),
    "gru_seq": OpSpec(_rnn.gru_seq, None, None, pairs=[(((3, 2, 6), (2, 2), (6, 2), (6,)), {})]),
    "rnn_seq": OpSpec(_rnn.rnn_seq, None, None, pairs=[
        (((3, 2, 2), (2, 2), (2, 2)), {}), (((3, 2, 2), (2, 2), (2, 2)), dict(nonlinearity="relu"))]),
})


# conv2d's dilation (in the three primitives) and groups (a composite), issue 23
def _np_conv2d_dilated_grouped(x, w, b, stride, padding, dilation, groups):
    dilated = np.zeros(w.shape[:2] + ((w.shape[2] - 1) * dilation[0] + 1, (w.shape[3] - 1) * dilation[1] + 1))
    dilated[:, :, ::dilation[0], ::dilation[1]] = w
    ci, co = x.shape[1] // groups, w.shape[0] // groups
    parts = [_np_conv2d(x[:, k * ci:(k + 1) * ci], dilated[k * co:(k + 1) * co], b[k * co:(k + 1) * co],
                        stride, padding) for k in range(groups)]
    return np.concatenate(parts, axis=1)


OP_SPECS["conv2d_grad_input"].pairs.append(
    (((2, 4, 2, 3), (4, 3, 3, 2)), dict(shape=(2, 3, 6, 5), stride=(2, 1), padding=(1, 0), dilation=(2, 2))))
OP_SPECS["conv2d_grad_weight"].pairs.append(
    (((2, 3, 6, 5), (2, 4, 2, 3)), dict(kernel=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 2))))
EXTRA_SPECS["conv2d(dilation, groups)"] = OpSpec(
    F.conv2d, _np_conv2d_dilated_grouped, None, pairs=[
        (((2, 4, 7, 6), (6, 2, 3, 2), (6,)), dict(stride=(1, 2), padding=(2, 1), dilation=(2, 3), groups=2)),
        (((1, 3, 5, 5), (3, 1, 2, 2), (3,)), dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=3)),
        (((1, 2, 6, 6), (3, 2, 2, 2), (3,)), dict(stride=(1, 1), padding=(1, 1), dilation=(2, 2), groups=1))])


# tt.scipy's primitives and composites (issue 24): their rows live next to them
from .scipy.specs import rows as _scipy_rows  # noqa: E402

_scipy_primitives, _scipy_composites, HOST_ONLY_ROWS = _scipy_rows(sys.modules[__name__])
OP_SPECS.update(_scipy_primitives)
# tt.vmap's product of each example's rows by its own matrix (ops/batching.py), on a stack of
# matrices and on a broadcast of one (its one-BLAS-call path).
OP_SPECS["vmatmul"] = OpSpec(ops.batching.vmatmul, lambda a, b: np.matmul(a[..., None, :] if a.ndim == 2
                                                                          else a, b).reshape(
    a.shape[:-1] + b.shape[-1:]), [((3, 4), (3, 4, 2)), ((3, 2, 4), (3, 4, 5))])
EXTRA_SPECS.update(_scipy_composites)


# ----- complex intermediates (issue 30): real inputs, a complex middle, a real output ------------------
# Each row builds z = x * C1 + y * C2 from its real inputs (complex64 constants with exact values, so
# float32 inputs stay single precision), applies the op, and returns real and imaginary parts side by
# side: the sweeps then check both rules, in complex, against central differences on the real inputs.
# Written with NumPy's functions, so the same call is the reference on arrays and records on Tensors.
C1 = np.array([0.5 + 1.25j, -1.0 + 0.5j, 0.75 - 0.25j], np.complex64)
C2 = np.array([1.5 - 0.5j, 0.25 + 1.0j, -0.5 - 1.5j], np.complex64)
C3 = np.array([[0.5 - 1.0j, 1.0 + 0.25j], [-0.25 + 0.5j, 0.75 + 0.0j], [1.0 - 0.5j, -0.5 + 1.0j]],
              np.complex64)
COMPLEX_PAIR = [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (2, 3))]


def _z(x, y):
    return np.multiply(x, C1) + np.multiply(y, C2)


def _parts(w):
    return np.concatenate([np.ravel(np.real(w)), np.ravel(np.imag(w))])


def complex_row(op, shapes=COMPLEX_PAIR, sample=normal, pairs=None):
    call = lambda x, y, **p: _parts(op(_z(x, y), **p))     # noqa: E731
    return OpSpec(call, call, None if pairs else shapes, sample=sample, pairs=pairs)


def _fft_row(fun, cases):
    return complex_row(lambda w, **p: fun(w, **p), pairs=cases)


_FFT_CASES = [(((2, 3), (3,)), dict(n=None, axis=-1, norm=None)),
              (((2, 3), (2, 3)), dict(n=5, axis=-1, norm="ortho")),
              (((2, 3), (3,)), dict(n=2, axis=0, norm="forward")),
              (((3,), (3,)), dict(n=2, axis=-1, norm=None))]
_IRFFT_CASES = [(((2, 3), (3,)), dict(n=None, axis=-1, norm=None)),
                (((2, 3), (3,)), dict(n=5, axis=-1, norm="ortho")),
                (((2, 3), (3,)), dict(n=3, axis=0, norm="forward")),
                (((3,), (3,)), dict(n=8, axis=-1, norm=None))]
OP_SPECS.update({
    "real": complex_row(lambda w: np.real(w) * np.imag(w)),
    "imag": complex_row(lambda w: np.imag(w * w)),
    "conj": complex_row(lambda w: np.conj(w) * C1),
    "angle": complex_row(np.angle, sample=away_from_zero),
    "fft": _fft_row(lambda w, **p: np.fft.fft(w, **p), _FFT_CASES),
    "ifft": _fft_row(lambda w, **p: np.fft.ifft(w, **p), _FFT_CASES),
    "rfft": OpSpec(lambda x, **p: _parts(np.fft.rfft(x, **p)), lambda x, **p: _parts(np.fft.rfft(x, **p)),
                   None, pairs=[((s[0],), p) for s, p in _FFT_CASES]),
    "irfft": _fft_row(lambda w, **p: np.fft.irfft(w, **p), _IRFFT_CASES),
})
EXTRA_SPECS.update({
    "complex mul": complex_row(lambda w: w * w * C1),
    "complex add, sub, neg": complex_row(lambda w: -(w + C1) - C2 * 0.5),
    "complex div": complex_row(lambda w: C1 / w + w / C2, sample=away_from_zero),
    "complex exp": complex_row(np.exp),
    "complex abs": complex_row(lambda w: np.abs(w) * w, sample=away_from_zero),
    "complex real * complex": complex_row(lambda w: np.real(w) * C1 + np.imag(w) * w),
    "complex matmul": complex_row(lambda w: np.matmul(w, C3), shapes=[((3,), (3,)), ((2, 3), (2, 3))]),
    "complex dot": complex_row(lambda w: np.dot(w, C3), shapes=[((3,), (3,)), ((2, 3), (3,))]),
    "complex sum, mean": complex_row(lambda w: np.stack([np.sum(w * w, axis=-1), np.mean(w, axis=-1)]),
                                     shapes=[((2, 3), (3,))]),
    "complex index, reshape, transpose": complex_row(lambda w: np.reshape(w, (-1,))[::-1][1:] * 2.0,
                                                     shapes=[((2, 3), (3,))]),
    "np.fft.fft2": complex_row(lambda w, **p: np.fft.fft2(w, **p), pairs=[
        (((2, 3), (2, 3)), dict(s=None, norm=None)), (((2, 3), (3,)), dict(s=(3, 2), norm="ortho"))]),
    "np.fft.ifft2": complex_row(lambda w, **p: np.fft.ifft2(w, **p), pairs=[
        (((2, 3), (2, 3)), dict(s=None, norm=None)), (((2, 3), (3,)), dict(s=(2, 4), norm="forward"))]),
})
# their constants (C1, C2, C3) are NumPy arrays: not moved to a device yet (tests/device_sweep.py;
# the rfft row has none, and np.fft on a CuPy array is CuPy's: expected to run there)
HOST_ONLY_ROWS.update({name: "the complex rows' constants are NumPy arrays: not moved to a device yet"
                       for name in ("real", "imag", "conj", "angle", "fft", "ifft", "irfft",
                                    *[n for n in EXTRA_SPECS if n.startswith(("complex ", "np.fft."))])})

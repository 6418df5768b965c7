"""OP_SPECS: one row per primitive saying how to exercise it.

This one table drives the parametrised sweep in tests/test_ops.py and `tt.check_rules()`.
A row gives the tinytensor call, its NumPy reference (for the forward check), the input
shapes, including 0-d arrays and rank-mismatched broadcast pairs, the static parameters, and a
sampler per input that stays inside the op's domain (positive for log). Adding a primitive
means adding its row here; the sweep fails for a registered primitive without one.
"""

from dataclasses import dataclass, field
from itertools import product

import numpy as np
import scipy.special

from . import ops


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
SOFTMAX = [(((4,),), dict(axis=-1)), (((3, 4),), dict(axis=-1)), (((3, 4),), dict(axis=0)),
           (((2, 3, 4),), dict(axis=1))]


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
        (((2, 3, 4),), dict(axes=(2, 0, 1))), (((3,),), dict(axes=None))]),
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
    "swapaxes": OpSpec(ops.swapaxes, np.swapaxes, None, pairs=[(((2, 3, 4),), dict(axis1=0, axis2=2))]),
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
    "normal_cdf": unary(scipy.special.ndtr, F.normal_cdf),
    "gelu": unary(lambda x: x * scipy.special.ndtr(x), F.gelu_prim),
    "softplus": OpSpec(F.softplus_prim, lambda x, beta, threshold: np.where(
        x * beta > threshold, x, np.logaddexp(0, x * beta) / beta), UNARY,
        params=[dict(beta=1.0, threshold=20.0), dict(beta=2.0, threshold=1.0)], sample=away_from_zero),
    "leaky_relu": OpSpec(F.leaky_relu_prim, lambda x, negative_slope: np.where(x > 0, x, negative_slope * x),
                         UNARY, params=[dict(negative_slope=0.01), dict(negative_slope=0.2)],
                         sample=away_from_zero),
    "binary_cross_entropy": OpSpec(F.binary_cross_entropy_prim,
                                   lambda p, y: -(y * np.log(p) + (1 - y) * np.log(1 - p)),
                                   BINARY[:5], sample=_unit_interval),
})

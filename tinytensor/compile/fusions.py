"""The one fused pattern of the generated programs: the lecture's crossEntropy(softmax(z), y),
whose softmax and log_softmax share their max, shift, exp and sum (the same NumPy calls as ops'
forwards, so the same numbers), and, for integer class labels, the loss and its VJP written out
with one range check of the labels per call."""

import numpy as np

from .. import tape
from ..ops.softmax_xent import at_labels, ce_vjp_logits, check_class_range, class_indices, reduce_rows
from .tracer import _Ref


def _softmax_cross_entropy_pairs(live, producer):
    """The lecture's crossEntropy(softmax(z), y) computes softmax(z) and, from the same logits,
    log_softmax(z): both start with the same max, subtraction, exp and sum. Returns
    {softmax var: ("softmax", None), crossEntropy var: ("crossEntropy", softmax var)} for each
    such pair, so the program computes those steps once (the same NumPy calls as
    ops' _softmax_forward and _log_softmax_forward, so the same numbers)."""
    softmax, cross_entropy = tape.REGISTRY.get("softmax"), tape.REGISTRY.get("crossEntropy")
    if softmax is None or cross_entropy is None:
        return {}
    pairs = {}
    for e in live:
        if e.fun is not cross_entropy.fun or len(e.args) != 3 or set(e.kwargs) - {"reduction"}:
            continue
        p, z = e.args[0], e.args[2]
        if type(p) is not _Ref or type(z) is not _Ref:
            continue
        a = producer.get(p.var)
        if (a is not None and a.fun is softmax.fun and len(a.args) == 1 and type(a.args[0]) is _Ref
                and a.args[0].var == z.var and set(a.kwargs) <= {"axis"} and a.out not in pairs):
            pairs[a.out] = ("softmax", None)
            pairs[e.out] = ("crossEntropy", a.out)
    return pairs


def _cross_entropy_rows(log_p, z, y, reduction):
    """softmax_xent._rows_from_logits(z, y, reduction) given log_p = log_softmax(z)."""
    index = class_indices(y, z.shape, check=True)
    if index is not None:
        return reduce_rows(-at_labels(log_p, index), reduction)
    y = np.asarray(y)
    if log_p.min() == -np.inf:
        log_p = np.where(y == 0, 0, log_p)
    return reduce_rows(-(y * log_p).sum(axis=-1), reduction)


def _lean_labels(tracer, e, z_arg, y_arg):
    """Whether crossEntropy's rows for these logits and labels can be written inline: integer
    class indices of shape (B,) (B > 0) against (B, C) logits on the CPU, reduced by mean or sum."""
    if type(z_arg) is not _Ref or type(y_arg) is not _Ref:
        return False
    z, y = tracer.values[z_arg.var], tracer.values[y_arg.var]
    return (type(z) is np.ndarray and type(y) is np.ndarray and z.ndim == 2 and y.dtype.kind in "iu"
            and y.shape == z.shape[:1] and y.size > 0
            and e.kwargs.get("reduction", "mean") in ("mean", "sum"))


_label_range_error = check_class_range     # the one label check, with its one message
_CE_VJP_LOGITS = ce_vjp_logits

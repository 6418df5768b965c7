"""As torch.nn.utils: gradient clipping (both rescale `.grad`: new arrays, never written into, as
a .grad may be an array that a user's rule also holds; both skip parameters without one), and
parameters_to_vector / vector_to_parameters."""

import math

import numpy as np

from ...state import replayed_while_recording
from ...tensor import Tensor

__all__ = [   # the public names: the API reference lists these (docs/_ext/tt_api.py)
    "clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
]


def _with_grads(parameters):
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p for p in params if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale all gradients together so that their joint norm (of `norm_type`, inf allowed) is at
    most max_norm: g *= max_norm / (total + 1e-6) when that factor is below 1. Returns the total
    norm before clipping (a 0-d Tensor).

    Examples
    --------
    >>> w = tt.tensor([3.0, 4.0], requires_grad=True)
    >>> (w * w).sum().backward()   # w.grad = [6, 8], norm 10
    >>> tt.nn.utils.clip_grad_norm_([w], max_norm=1.0)   # returns the norm before clipping
    tensor(10.)
    >>> w.grad.round(4)
    array([0.6, 0.8])
    """
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    replayed, out = replayed_while_recording("clip_grad_norm_()", clip_grad_norm_, parameters, max_norm,
                                             norm_type, error_if_nonfinite)
    if replayed:            # inside tt.compile: a line of the program, run on every call
        return out
    params = _with_grads(parameters)
    norm_type = float(norm_type)
    if not params:
        return Tensor(0.0)
    if norm_type == np.inf:
        norms = [np.max(np.abs(p.grad)) if p.grad.size else 0.0 for p in params]
        total = max(float(n) for n in norms)     # one number per parameter, from any device
    else:
        norms = [np.sum(np.abs(p.grad.astype(np.float64)) ** norm_type) for p in params]
        total = math.fsum(float(n) for n in norms) ** (1.0 / norm_type)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} is {total}; "
                           f"pass error_if_nonfinite=False to clip anyway")
    coef = float(max_norm) / (total + 1e-6)
    if coef < 1.0:
        for p in params:
            p.grad = p.grad * coef                   # a Python float: float32 stays float32
    return Tensor(total)


def clip_grad_value_(parameters, clip_value):
    """Clip every gradient entry into [-clip_value, clip_value].

    Examples
    --------
    >>> w = tt.tensor([1.0, -3.0], requires_grad=True)
    >>> (w * w).sum().backward()            # w.grad = [2, -6]
    >>> tt.nn.utils.clip_grad_value_([w], clip_value=1.0)
    >>> w.grad
    array([ 1., -1.])
    """
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    replayed, out = replayed_while_recording("clip_grad_value_()", clip_grad_value_, parameters, clip_value)
    if replayed:            # inside tt.compile: a line of the program, run on every call
        return out
    clip_value = float(clip_value)
    for p in _with_grads(parameters):
        p.grad = np.clip(p.grad, -clip_value, clip_value)


def parameters_to_vector(parameters):
    """One flat Tensor of every parameter, in order (as torch.nn.utils.parameters_to_vector):
    recorded, so a loss of the vector differentiates into the parameters.

    Examples
    --------
    >>> layer = tt.nn.Linear(2, 3, rng=0)
    >>> tt.nn.utils.parameters_to_vector(layer.parameters()).shape
    (9,)
    """
    from ... import ops
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    if not params:
        raise ValueError("parameters_to_vector: no parameters given")
    devices = {p.device for p in params}
    if len(devices) > 1:
        raise TypeError(f"parameters_to_vector: the parameters are on different devices {sorted(devices)}; "
                        f"move them to one (module.to(device))")
    return ops.concatenate([ops.reshape(p, (-1,)) for p in params])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of `vec` (a 1-d Tensor or array) into the parameters' arrays, in
    place and in order (as torch.nn.utils.vector_to_parameters); the lengths must add up.

    Examples
    --------
    >>> layer = tt.nn.Linear(2, 1, rng=0)
    >>> tt.nn.utils.vector_to_parameters(np.array([1.0, 2.0, 3.0]), layer.parameters())
    >>> layer.weight.numpy(), layer.bias.numpy()   # weight (1, 2) first, then bias
    (array([[1., 2.]], dtype=float32), array([3.], dtype=float32))
    """
    from ... import backend
    from ...tensor import mark_modified
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    values = vec.data if isinstance(vec, Tensor) else backend.asarray(vec)
    if values.ndim != 1:
        raise TypeError(f"vector_to_parameters: expected a 1-d vector, got shape {values.shape}")
    total = sum(p.data.size for p in params)
    if values.size != total:
        raise ValueError(f"vector_to_parameters: the vector has {values.size} entries but the "
                         f"parameters hold {total} together")
    from ...state import SHARED, STATE
    recorder = None if SHARED.quiet else STATE.recorder
    start = 0
    for p in params:
        n = p.data.size
        if recorder is not None and recorder._reached(p):   # tt.compile: a line of the program
            piece = vec[start:start + n] if isinstance(vec, Tensor) else values[start:start + n]
            recorder._store(p, piece.reshape(p.data.shape))  # writing it on every call
            start += n
            continue
        piece = values[start:start + n].reshape(p.data.shape)
        np.copyto(p.data, backend.to_device(piece, backend.device_of(p.data)), casting="same_kind")
        mark_modified(p)
        start += n


from . import rnn as rnn  # noqa: E402  (tt.nn.utils.rnn, as torch.nn.utils.rnn)

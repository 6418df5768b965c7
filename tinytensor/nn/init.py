"""Initialisers, as torch.nn.init: each fills a Tensor's array in place and returns the Tensor.

Fans follow PyTorch's layout of the shape: (out, in, *kernel) gives fan_in = in * prod(kernel)
and fan_out = out * prod(kernel). Every layer here keeps PyTorch's layout (nn.Linear.weight is
(out, in), Conv2d's (out, in, kh, kw), MultiheadAttention's in_proj_weight (3 E, E)), so the bounds
are PyTorch's for the same layer.
Every random one takes `rng` (a seed, an np.random.Generator, or None: the global generator,
tt.manual_seed).
"""

import functools
import inspect
import math
import numbers

from ..rng import generator
from ..state import recording, replayed_while_recording
from ..tensor import Tensor, mark_modified

__all__ = [   # the public names: the API reference lists these (docs/_ext/tt_api.py)
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "xavier_uniform_",
    "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
]

_GAINS = {"linear": 1.0, "identity": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
          "selu": 3.0 / 4, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0}


def calculate_gain(nonlinearity, param=None):
    """PyTorch's recommended gain for a nonlinearity (leaky_relu takes its negative slope).

    Examples
    --------
    >>> tt.nn.init.calculate_gain("tanh")
    1.6666666666666667
    >>> round(tt.nn.init.calculate_gain("relu"), 6)
    1.414214
    >>> round(tt.nn.init.calculate_gain("leaky_relu", 0.2), 6)
    1.38675
    """
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity not in _GAINS:
        raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}; one of "
                         f"{sorted(_GAINS) + ['leaky_relu']}")
    return _GAINS[nonlinearity]


def _fans(t):
    shape = t.shape
    if len(shape) < 2:
        raise ValueError(f"fan in and fan out cannot be computed for a tensor of shape {shape} "
                         f"(fewer than 2 dimensions)")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _in_place(init):
    """An initialiser that is, inside tt.compile, a line of the program (it fills the parameter
    again on every call). A random one there takes an int seed: from a generator (rng=None, the
    global one, or an np.random.Generator) the recording's draw and the program's would both
    advance it, so that is refused."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def filled(t, *args, **kwargs):
        if recording():
            bound = signature.bind(t, *args, **kwargs)
            bound.apply_defaults()
            seed = bound.arguments.get("rng", 0)
            if not isinstance(seed, numbers.Integral):
                raise RuntimeError(
                    f"tt.compile: nn.init.{init.__name__}(...) inside a compiled function draws from "
                    f"a generator (rng={seed!r}), which the recording would advance besides the "
                    f"program; pass an int seed (rng=0), or initialise outside the compiled function")
        replayed, _ = replayed_while_recording(f"nn.init.{init.__name__}(...)", _filled, init, t,
                                               *args, **kwargs)
        return t if replayed else init(t, *args, **kwargs)
    return filled


def _filled(init, t, *args, **kwargs):
    init(t, *args, **kwargs)


def _fill(t, values):
    """Write values into t's array in place (object identity of t and t.data kept)."""
    array = t.data if isinstance(t, Tensor) else t
    array[...] = values
    if isinstance(t, Tensor):
        mark_modified(t)
    return t


@_in_place
def uniform_(t, a=0.0, b=1.0, rng=None):
    """Fill `t` in place with draws from U(a, b) and return it (as `torch.nn.init.uniform_`).

    Examples
    --------
    >>> w = tt.nn.init.uniform_(tt.zeros((2, 3)), a=-1.0, b=1.0, rng=0)
    >>> bool((abs(w.numpy()) <= 1).all()), w.shape
    (True, (2, 3))
    """
    return _fill(t, generator(rng).uniform(a, b, t.shape))


@_in_place
def normal_(t, mean=0.0, std=1.0, rng=None):
    """Fill `t` in place with draws from N(mean, std**2) and return it (as `torch.nn.init.normal_`).

    Examples
    --------
    >>> w = tt.nn.init.normal_(tt.zeros(10_000), mean=1.0, std=0.5, rng=0)
    >>> round(w.numpy().mean().item(), 1), round(w.numpy().std().item(), 1)
    (1.0, 0.5)
    """
    return _fill(t, generator(rng).normal(mean, std, t.shape))


@_in_place
def constant_(t, val):
    """Fill `t` in place with `val` and return it (as `torch.nn.init.constant_`).

    Examples
    --------
    >>> layer = tt.nn.Linear(2, 2, rng=0)
    >>> tt.nn.init.constant_(layer.bias, 0.1)
    tensor([0.1, 0.1], dtype=float32, requires_grad=True, name='bias')
    """
    return _fill(t, val)


@_in_place
def zeros_(t):
    """Fill `t` in place with zeros and return it (as `torch.nn.init.zeros_`).

    Examples
    --------
    >>> layer = tt.nn.Linear(3, 2, rng=0)
    >>> tt.nn.init.zeros_(layer.bias)
    tensor([0., 0.], dtype=float32, requires_grad=True, name='bias')
    """
    return _fill(t, 0)


@_in_place
def ones_(t):
    """Fill `t` in place with ones and return it (as `torch.nn.init.ones_`).

    Examples
    --------
    >>> tt.nn.init.ones_(tt.zeros(3))
    tensor([1., 1., 1.])
    """
    return _fill(t, 1)


@_in_place
def xavier_uniform_(t, gain=1.0, rng=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot).

    Examples
    --------
    >>> w = tt.nn.init.xavier_uniform_(tt.zeros((3, 4)), rng=0)
    >>> bool((abs(w.numpy()) <= np.sqrt(6 / 7)).all())
    True
    """
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, rng)


@_in_place
def xavier_normal_(t, gain=1.0, rng=None):
    """N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot).

    Examples
    --------
    >>> w = tt.nn.init.xavier_normal_(tt.zeros((200, 300)), rng=0)
    >>> round(w.numpy().std().item(), 3)    # sqrt(2 / (fan_in + fan_out)) = 0.0632
    0.063
    """
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), rng)


def _kaiming_std(t, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(t)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


@_in_place
def kaiming_uniform_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu", rng=None):
    """U(-b, b) with b = gain * sqrt(3 / fan) (He); a is leaky_relu's negative slope.

    Examples
    --------
    >>> w = tt.nn.init.kaiming_uniform_(tt.zeros((64, 32)), nonlinearity="relu", rng=0)
    >>> bound = np.sqrt(2) * np.sqrt(3 / 32)   # gain * sqrt(3 / fan_in), fan_in = 32 columns
    >>> bool((abs(w.numpy()) <= bound).all())
    True
    """
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound, rng)


@_in_place
def kaiming_normal_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu", rng=None):
    """N(0, std**2) with std = gain / sqrt(fan) (He).

    Examples
    --------
    >>> w = tt.nn.init.kaiming_normal_(tt.zeros((256, 128)), nonlinearity="relu", rng=0)
    >>> round(w.numpy().std().item(), 3)    # gain / sqrt(fan_in) = sqrt(2) / sqrt(128)
    0.125
    """
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity), rng)

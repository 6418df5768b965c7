"""HIPS autograd's import names over tinytensor, the way autograd's own programs spell them
(`import autograd.numpy as np`, `from autograd.scipy import stats`): a namespace that answers
each name from tinytensor first and from NumPy/SciPy second.

A NumPy or SciPy function reached through the second lookup still sees Tensors: NumPy dispatches
them to tinytensor's recorded ops (`__array_function__`/`__array_ufunc__`), and a function with no
tinytensor rule raises tinytensor's TypeError naming the fix, so nothing is silently detached.

hips_scipy_cases.py (autograd's SciPy tests) and hips_examples.py (its example programs) use
these namespaces where autograd's code imports `autograd.numpy`, `autograd.scipy.*`.
"""

import types

import numpy
import scipy.integrate
import scipy.linalg
import scipy.signal
import scipy.special
import scipy.stats

import tinytensor as tt
import tinytensor.scipy.integrate
import tinytensor.scipy.linalg
import tinytensor.scipy.signal
import tinytensor.scipy.special
import tinytensor.scipy.stats


class Namespace(types.ModuleType):
    """A module whose names come from `first`, else from `second` (None: no fallback)."""

    def __init__(self, name, first, second=None, **extra):
        super().__init__(name)
        self._first, self._second = first, second
        self.__dict__.update(extra)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        for source in (self._first, self._second):
            if source is not None and hasattr(source, name):
                return getattr(source, name)
        raise AttributeError(f"{self.__name__}.{name}: neither tinytensor nor its fallback has it")


def ndim(x):
    return numpy.ndim(x.data if isinstance(x, tt.Tensor) else x)


def shape(x):
    return tuple(x.shape) if isinstance(x, tt.Tensor) else numpy.shape(x)


numpy_ns = Namespace("autograd.numpy", tt, numpy, random=numpy.random, linalg=Namespace(
    "autograd.numpy.linalg", tt.linalg, numpy.linalg), ndim=ndim, shape=shape)
special = Namespace("autograd.scipy.special", tinytensor.scipy.special, scipy.special)
stats = Namespace("autograd.scipy.stats", tinytensor.scipy.stats, None)
linalg = Namespace("autograd.scipy.linalg", tinytensor.scipy.linalg, scipy.linalg)
signal = Namespace("autograd.scipy.signal", tinytensor.scipy.signal, None)
integrate = Namespace("autograd.scipy.integrate", tinytensor.scipy.integrate, None)
scipy_ns = Namespace("autograd.scipy", None, None, special=special, stats=stats, linalg=linalg,
                     signal=signal, integrate=integrate)

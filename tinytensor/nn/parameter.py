"""`nn.Parameter`: the first thing a PyTorch user writes in a custom module.

A Parameter is a leaf `tt.Tensor` (isinstance holds) that requires a gradient; assigned to a
Module attribute (or put in a list or dict there) it is one of the module's parameters, frozen
(`requires_grad=False`) or not, as PyTorch's. Operations on it give plain Tensors.
"""

import numpy as np

from .. import backend
from ..tensor import Tensor, _make


class Parameter(Tensor):
    """Parameter(data, requires_grad=True): a leaf Tensor on `data`'s array (shared, as
    PyTorch's `nn.Parameter(tensor)` shares the tensor's storage; a list or a scalar is copied
    into a new array). Only floating-point data can require a gradient.

    Examples
    --------
    >>> w = tt.nn.Parameter(np.zeros(2))
    >>> w
    Parameter containing:
    tensor([0., 0.], requires_grad=True)
    >>> w.requires_grad, w.is_leaf
    (True, True)
    """

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = np.empty(0, np.float32)
        if isinstance(data, Tensor):
            data = data.data
        if not backend.is_array(data):
            data = np.array(data)
        if requires_grad and data.dtype.kind not in "fc":
            raise TypeError(f"nn.Parameter: only floating-point data can require gradients; got "
                            f"dtype {data.dtype} (convert first, e.g. np.asarray(x, np.float32), or "
                            f"pass requires_grad=False)")
        _make(data, requires_grad=bool(requires_grad), into=self)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

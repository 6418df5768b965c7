"""Torch objects a user hands over, taken without importing torch (duck-typed).

A torch tensor is anything with `.detach().cpu().numpy()` that is not a tt.Tensor; a torch dtype is
recognised by its str ('torch.float32'). `host_array` and `numpy_dtype` convert them once, where a
user hands them to tinytensor: `tt.tensor`, `load_state_dict`, an optimizer's `load_state_dict`,
`.to()` and `dtype=`."""

import numpy as np

# torch's dtype names that NumPy spells otherwise, or has not
_NAMES = {"half": "float16", "float": "float32", "double": "float64", "long": "int64", "int": "int32",
          "short": "int16", "bool": "bool", "cfloat": "complex64", "cdouble": "complex128"}


def is_torch_tensor(x):
    """True for a torch.Tensor (or anything with detach/cpu/numpy that is not an ndarray)."""
    return (not isinstance(x, np.ndarray) and type(x).__module__.split(".")[0] == "torch"
            and all(hasattr(x, a) for a in ("detach", "cpu", "numpy")))


def host_array(x):
    """A torch tensor as a NumPy array (a copy: never shares torch's memory); anything else as is."""
    if not is_torch_tensor(x):
        return x
    try:
        return np.array(x.detach().cpu().numpy())
    except TypeError as e:                       # bfloat16 and friends have no NumPy dtype
        raise TypeError(f"a torch tensor of dtype {x.dtype} has no NumPy dtype; convert it first: "
                        f"t.float() (or t.double())") from e


def is_torch_dtype(d):
    return type(d).__module__.split(".")[0] == "torch" and str(d).startswith("torch.")


def numpy_dtype(d):
    """`d` as np.dtype; a torch dtype ('torch.float32', torch.long) by its name. None stays None."""
    if d is None:
        return None
    if is_torch_dtype(d) or (isinstance(d, str) and d.startswith("torch.")):
        name = str(d)[len("torch."):]
        name = _NAMES.get(name, name)
        try:
            return np.dtype(name)
        except TypeError:
            raise TypeError(f"torch dtype {d} has no NumPy equivalent; use torch.float32, "
                            f"torch.float64, an integer type or torch.bool") from None
    return np.dtype(d)

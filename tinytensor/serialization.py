"""Checkpoints: `tt.save(obj, path)` and `tt.load(path)`, one `.npz` file and never pickle.

    tt.save({"model": model.state_dict(), "opt": opt.state_dict(),
             "sched": sched.state_dict(), "epoch": epoch}, "ckpt.npz")
    ckpt = tt.load("ckpt.npz")

`obj` is a nested structure of dicts, lists and tuples holding arrays, Tensors, NumPy scalars,
Python numbers, strings, booleans and None. Each array is one entry of the npz ("a0", "a1",
...); the structure is JSON text in the entry "__structure__", with a tag per container, so
dict keys keep their type (int, float, str, bool, None, tuples of those) and tuples stay tuples.
Loading uses `np.load(allow_pickle=False)` and builds only these types: a checkpoint cannot run
code. Object arrays cannot be saved, and a file holding one is refused.
"""

import json
import os

import numpy as np

from . import backend
from .tensor import Tensor

_STRUCTURE = "__structure__"
_FORMAT = "tinytensor-checkpoint-1"


def _encode(obj, arrays, path):
    """JSON-able form of obj; arrays go to `arrays` and are referred to by key."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return {"int": str(obj)}            # any size, exactly
    if isinstance(obj, float):
        return {"float": repr(obj)}         # repr round-trips, inf and nan included
    if isinstance(obj, (Tensor, np.ndarray, np.generic)) or backend.is_array(obj):
        array = backend.to_host(obj.data if isinstance(obj, Tensor) else obj)   # a GPU's: copied home
        if array.dtype.hasobject:
            raise TypeError(f"tt.save: {path} is an object array, which only pickle could store; "
                            f"convert it to a numeric or string dtype")
        key = f"a{len(arrays)}"
        arrays[key] = array
        kind = "tensor" if isinstance(obj, Tensor) else "scalar" if isinstance(obj, np.generic) else "array"
        entry = {kind: key}
        if isinstance(obj, Tensor) and obj.requires_grad:
            entry["requires_grad"] = True
        return entry
    if isinstance(obj, dict):
        return {"dict": [[_encode(k, arrays, f"{path} key"), _encode(v, arrays, f"{path}[{k!r}]")]
                         for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, arrays, f"{path}[{i}]") for i, v in enumerate(obj)]
        return {"tuple" if isinstance(obj, tuple) else "list": items}
    raise TypeError(f"tt.save: {path} is a {type(obj).__name__}; a checkpoint holds dicts, lists, "
                    f"tuples, arrays, Tensors, numbers, strings, booleans and None (save a model's or "
                    f"optimizer's state_dict(), not the object)")


def save(obj, path):
    """Write `obj` (see the module docstring) to `path`, one .npz file (NumPy adds the suffix
    when `path` has none)."""
    arrays = {}
    structure = {"format": _FORMAT, "root": _encode(obj, arrays, "obj")}
    arrays[_STRUCTURE] = np.array(json.dumps(structure))
    np.savez(os.fspath(path), **arrays)


def _decode(node, arrays):
    if node is None or isinstance(node, (bool, str)):
        return node
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise ValueError(f"tt.load: malformed checkpoint structure near {str(node)[:80]}")
    kind = next(iter(node))
    value = node[kind]
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind in ("array", "scalar", "tensor"):
        array = arrays[value]
        if kind == "scalar":
            return array[()]
        if kind == "tensor":
            return Tensor(array, requires_grad=bool(node.get("requires_grad", False)))
        return array
    if kind == "list":
        return [_decode(v, arrays) for v in value]
    if kind == "tuple":
        return tuple(_decode(v, arrays) for v in value)
    if kind == "dict":
        return {_key(_decode(k, arrays)): _decode(v, arrays) for k, v in value}
    raise ValueError(f"tt.load: unknown entry {kind!r} in the checkpoint structure")


def _key(key):
    return tuple(_key(k) for k in key) if isinstance(key, list) else key


def load(path):
    """Read what `save` wrote. Never unpickles: a file that would need pickle (an object array)
    raises ValueError. `path` is the one given to `save` (its ".npz" suffix may be left out)."""
    path = os.fspath(path)
    if not os.path.exists(path) and os.path.exists(path + ".npz"):   # save("model.pt") wrote model.pt.npz
        path += ".npz"
    with np.load(path, allow_pickle=False) as npz:
        if _STRUCTURE not in npz.files:
            raise ValueError(f"tt.load: {path} is not a tinytensor checkpoint (no {_STRUCTURE} "
                             f"entry; it has {npz.files[:5]})")
        arrays = {}
        for name in npz.files:
            try:
                arrays[name] = npz[name]
            except ValueError as err:       # NumPy: "Object arrays cannot be loaded when allow_pickle=False"
                raise ValueError(f"tt.load: entry {name!r} of {path} is an object array, which only "
                                 f"pickle could read; refused (a checkpoint must not run code)") from err
            if not isinstance(arrays[name], np.ndarray):   # a member that is not .npy: NumPy's raw bytes
                raise ValueError(f"tt.load: entry {name!r} of {path} is not a .npy array (the file "
                                 f"is corrupted or was not written by tt.save)")
    try:
        structure = json.loads(str(arrays.pop(_STRUCTURE)))
        if not isinstance(structure, dict) or structure.get("format") != _FORMAT:
            raise ValueError(f"tt.load: {path} has an unknown checkpoint format")
        return _decode(structure["root"], arrays)
    except RecursionError:
        raise ValueError(f"tt.load: the structure of {path} is nested too deeply to read (deeper than "
                         f"Python's recursion limit); a checkpoint is a few levels of dicts and "
                         f"lists") from None
    except KeyError as err:
        raise ValueError(f"tt.load: the structure of {path} refers to a missing array {err}") from err

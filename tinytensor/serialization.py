"""Checkpoints: `tt.save(obj, path)` and `tt.load(path)`, one `.npz` file and never pickle; or
the safetensors format (PyTorch's and Hugging Face's) for a path ending in ".safetensors".

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

from . import backend, distributed
from .state import SHARED, STATE
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


def _refuse_while_recording(what, does, fix):
    """A file read or written while tt.compile records: refused (the program would keep this
    call's contents, or not write again on later calls)."""
    if not SHARED.quiet and STATE.recorder is not None:
        raise RuntimeError(f"tt.compile: {what} inside a compiled function {does}. {fix}, or call "
                           f"the function uncompiled")


def _refuse_reading(what):
    _refuse_while_recording(what, "reads a file, which may change between calls; the program "
                            "would keep this call's contents", "Load it outside the compiled "
                            "function and pass the values in (or close over what it gave)")


def _refuse_writing(what):
    _refuse_while_recording(what, "writes a file, which the program would not write again on later "
                            "calls", "Save after the compiled call (return what to save)")


def save(obj, path, metadata=None):
    """Write `obj` (see the module docstring) to `path`, one .npz file (NumPy adds the suffix
    when `path` has none). A path ending in ".safetensors" writes the safetensors format instead
    (a flat dict of arrays, as a state dict; `metadata`: an optional dict of strings).

    In a data-parallel run (tt.distributed with several ranks), a path that names the rank
    (`f"ckpt_{rank}.npz"`, `f"rank{rank}/ckpt.npz"`: the rank's number standing alone or after
    "rank" in the file's or its folder's name) is written by every rank; a path that does not
    (`"ckpt.npz"`, the same file on every rank) is written by the main rank only: the others
    return at once, with one warning per process (call tt.distributed.barrier() before another
    rank reads the file). The file is written under a temporary name and renamed, so a reader
    never sees half a file.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "checkpoint.npz")
    >>> tt.save({"epoch": 3, "w": np.arange(3.0)}, path)
    >>> tt.load(path)
    {'epoch': 3, 'w': array([0., 1., 2.])}
    """
    _refuse_writing("tt.save(...)")
    if not distributed._writes_files(path):
        return
    if _is_safetensors(path):
        return save_safetensors(obj, path, metadata)
    arrays = {}
    structure = {"format": _FORMAT, "root": _encode(obj, arrays, "obj")}
    arrays[_STRUCTURE] = np.array(json.dumps(structure))
    final = os.fspath(path)
    final = final if final.endswith(".npz") else final + ".npz"      # as np.savez names it
    partial = f"{final}.{os.getpid()}.partial"
    try:
        try:
            f = open(partial, "wb")
        except OSError as err:              # named by the file asked for, not the temporary one
            raise type(err)(err.errno, err.strerror, final) from None
        with f:
            np.savez(f, **arrays)
        os.replace(partial, final)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


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


def _refuse_torch_file(path):
    """A torch.save file (a zip holding data.pkl, or a bare pickle) needs pickle, which tt.load
    never runs: say how to convert it once, with torch itself."""
    import zipfile
    with open(path, "rb") as f:
        head = f.read(2)
    torch_zip = False
    if head == b"PK" and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            torch_zip = any(n.endswith("data.pkl") for n in z.namelist())
    if torch_zip or head[:1] == b"\x80":
        raise ValueError(
            f"tt.load: {path} was written by torch.save (pickle), which tt.load never unpickles (a file "
            f"must not run code). Convert it once where torch is installed:\n"
            f"    sd = torch.load({path!r}, map_location='cpu')\n"
            f"    tt.save({{k: v.numpy() for k, v in sd.items()}}, {os.path.splitext(path)[0] + '.npz'!r})\n"
            f"(or pass sd itself to model.load_state_dict: torch tensors are accepted there)")


def load(path):
    """Read what `save` wrote. Never unpickles: a file that would need pickle (an object array)
    raises ValueError. `path` is the one given to `save` (its ".npz" suffix may be left out).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), 'model.safetensors')
    >>> tt.save({'w': np.arange(3.0)}, path)
    >>> tt.load(path)
    {'w': array([0., 1., 2.])}
    """
    _refuse_reading("tt.load(...)")
    if _is_safetensors(path):
        return load_safetensors(path)
    path = os.fspath(path)
    if not os.path.exists(path) and os.path.exists(path + ".npz"):   # save("model.pt") wrote model.pt.npz
        path += ".npz"
    _refuse_torch_file(path)
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


# ----- safetensors ---------------------------------------------------------------------------------
# The format (https://github.com/huggingface/safetensors, "Format"): an 8-byte little-endian
# unsigned header length N, N bytes of JSON {name: {"dtype": "F32", "shape": [...], "data_offsets":
# [begin, end]}, "__metadata__": {str: str}} (padded with spaces), then the tensors' bytes,
# little-endian, C order, offsets relative to the end of the header, with no gaps. Written here
# with NumPy alone (the runtime stays numpy + scipy; the format is 40 lines), as the reference
# writer does: sorted by dtype size then name, the header padded to a multiple of 8 bytes.
_ST_DTYPES = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "I16": "<i2", "U16": "<u2", "F16": "<f2",
              "I32": "<i4", "U32": "<u4", "F32": "<f4", "F64": "<f8", "I64": "<i8", "U64": "<u8"}
_ST_NAMES = {np.dtype(v).newbyteorder("=") if v[0] == "<" else np.dtype(v): k for k, v in _ST_DTYPES.items()}
_ST_MAX_HEADER = 100_000_000


def _is_safetensors(path):
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith(".safetensors")


def save_safetensors(tensors, path, metadata=None):
    """Write a flat dict {name: array or Tensor} in the safetensors format (no pickle, no code)."""
    _refuse_writing("tt.save_safetensors(...)")
    if not isinstance(tensors, dict):
        raise TypeError(f"tt.save(..., '*.safetensors'): safetensors holds a flat dict of arrays (a "
                        f"state_dict), got a {type(tensors).__name__}; save other objects as .npz")
    arrays = {}
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"tt.save: safetensors names must be strings, got {name!r}")
        if not (isinstance(value, (Tensor, np.ndarray, np.generic)) or backend.is_array(value)):
            raise TypeError(f"tt.save: {name!r} is a {type(value).__name__}; safetensors holds arrays "
                            f"only (put numbers and strings in metadata=, or save as .npz)")
        array = np.asarray(backend.to_host(value.data if isinstance(value, Tensor) else value))
        if array.dtype.newbyteorder("=") not in _ST_NAMES and array.dtype not in _ST_NAMES:
            raise TypeError(f"tt.save: {name!r} has dtype {array.dtype}, which safetensors cannot hold "
                            f"(one of {sorted(_ST_DTYPES)})")
        arrays[name] = array
    order = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, n))
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in order:
        a = arrays[name]
        nbytes = a.size * a.dtype.itemsize
        native = a.dtype.newbyteorder("=") if a.dtype.byteorder == ">" else a.dtype
        header[name] = {"dtype": _ST_NAMES[native],
                        "shape": list(a.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(os.fspath(path), "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name in order:
            a = arrays[name]
            little = a.astype(a.dtype.newbyteorder("<"), copy=False) if a.dtype.itemsize > 1 else a
            f.write(np.ascontiguousarray(little).tobytes())


def load_safetensors(path):
    """Read a safetensors file: {name: ndarray} in file order (BF16 becomes float32, exactly).
    The header's `__metadata__` is not returned (read_safetensors_metadata has it)."""
    header, data = _read_safetensors(path)
    out = {}
    for name, entry in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                              key=lambda item: item[1]["data_offsets"][0]):
        dtype, shape = entry.get("dtype"), tuple(entry.get("shape", ()))
        begin, end = entry["data_offsets"]
        if dtype == "BF16":             # NumPy has no bfloat16: its bits are float32's upper half
            raw = np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint32) << 16
            out[name] = raw.view(np.float32).reshape(shape)
            continue
        if dtype not in _ST_DTYPES:
            raise ValueError(f"tt.load: {path}: {name!r} has dtype {dtype!r}, not supported here "
                             f"(one of {sorted(_ST_DTYPES) + ['BF16']})")
        want = np.dtype(_ST_DTYPES[dtype])
        if end - begin != int(np.prod(shape)) * want.itemsize:
            raise ValueError(f"tt.load: {path}: {name!r} has {end - begin} bytes for shape {shape} "
                             f"of {dtype}; the file is damaged")
        array = np.frombuffer(data[begin:end], dtype=want).reshape(shape)
        out[name] = array.astype(want.newbyteorder("="), copy=True)
    return out


def read_safetensors_metadata(path):
    """The `__metadata__` dict of a safetensors file ({} if none)."""
    return dict(_read_safetensors(path)[0].get("__metadata__", {}))


def _read_safetensors(path):
    _refuse_reading("reading a safetensors file")
    with open(os.fspath(path), "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"tt.load: {path} is too short to be a safetensors file")
    n = int.from_bytes(blob[:8], "little")
    if n > _ST_MAX_HEADER or 8 + n > len(blob):
        raise ValueError(f"tt.load: {path} is not a safetensors file (header length {n})")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"tt.load: {path} has a malformed safetensors header: {err}") from err
    if not isinstance(header, dict):
        raise ValueError(f"tt.load: {path} has a malformed safetensors header")
    data = memoryview(blob)[8 + n:]
    spans = sorted(tuple(v["data_offsets"]) for k, v in header.items() if k != "__metadata__")
    expected = 0
    for begin, end in spans:
        if begin != expected or end < begin:
            raise ValueError(f"tt.load: {path}: the tensors' data offsets overlap or leave gaps")
        expected = end
    if expected != len(data):
        raise ValueError(f"tt.load: {path}: the header describes {expected} bytes of data, the file "
                         f"holds {len(data)}")
    return header, data

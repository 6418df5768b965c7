"""Subscripts NumPy runs in C: a plain NumPy array read or written through values computed from
traced data (`m[x.data > 0] = 0`, `m[:, 0] = h.data[:, 0]`, `W[mask]`).

A traced NumPy value (`t.data`, a comparison's mask) is an ndarray, so NumPy's C indexing uses
its buffer directly: no method of ours runs and the recording cannot see the read or the write.
While recording, user code is traced opcode by opcode; at each subscript the expression is taken
from the source (the instruction's position is the Subscript node's), its container evaluated
without running user code (names, attributes from `__dict__`, constant indices) and its index
and assigned value searched for traced values. A plain-array container with a traced operand is
refused, naming the line and the fix. A container that cannot be evaluated that way (a call's
result) is taken as plain when its expression holds a plain array and nothing traced."""
import ast
import linecache
import os

import numpy as np

from ..tensor import Tensor

_SUBSCRIPTS = {"BINARY_SUBSCR": "reads", "STORE_SUBSCR": "writes into", "DELETE_SUBSCR": "deletes from"}
_SITES = {}          # code -> {offset: (kind, container node, operand nodes, line)} or None
_FILES = {}          # filename -> {(line, col, end line, end col): (Subscript node, assigned value)}
_UNKNOWN = object()


def sites(code):
    """The subscripts of `code` whose expression the source gives, by instruction offset."""
    found = _SITES.get(code, _UNKNOWN)
    if found is _UNKNOWN:
        try:
            found = _find(code)
        except (SyntaxError, ValueError, RecursionError):
            found = None                  # no readable source: not checked
        _SITES[code] = found
    return found


def _find(code):
    import dis
    subscripts = [i for i in dis.get_instructions(code) if i.opname in _SUBSCRIPTS]
    if not subscripts:
        return None
    nodes = _nodes(code.co_filename)
    found = {}
    for ins in subscripts:
        p = ins.positions
        hit = None if p is None or p.lineno is None else nodes.get(
            (p.lineno, p.col_offset, p.end_lineno, p.end_col_offset))
        if hit is not None:
            node, assigned = hit
            operands = [node.slice] + ([assigned] if ins.opname == "STORE_SUBSCR" and assigned else [])
            found[ins.offset] = (_SUBSCRIPTS[ins.opname], node.value, operands, p.lineno)
    return found or None


def _nodes(filename):
    nodes = _FILES.get(filename)
    if nodes is None:
        text = "".join(linecache.getlines(filename))
        nodes = _FILES[filename] = {}
        if text:
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Subscript):
                    nodes.setdefault(_span(node), (node, None))
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                    for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        for sub in ast.walk(target):
                            if isinstance(sub, ast.Subscript):
                                nodes[_span(sub)] = (sub, node.value)
    return nodes


def _span(node):
    return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


# ----- evaluating an expression without running user code -----
def _lookup(frame, name):
    code = frame.f_code
    if name in code.co_varnames or name in code.co_cellvars or name in code.co_freevars:
        return frame.f_locals.get(name, _UNKNOWN)
    value = frame.f_globals.get(name, _UNKNOWN)
    if value is _UNKNOWN:
        builtins = frame.f_builtins
        value = builtins.get(name, _UNKNOWN) if isinstance(builtins, dict) else _UNKNOWN
    return value


def _evaluate(node, frame):
    """node's value where it is a name, an attribute held in a __dict__, or an index with
    constant parts of a container: no user code runs. _UNKNOWN otherwise."""
    if isinstance(node, ast.Name):
        return _lookup(frame, node.id)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute):
        base = _evaluate(node.value, frame)
        if base is _UNKNOWN:
            return _UNKNOWN
        if isinstance(base, np.ndarray) and node.attr in ("T", "real", "imag", "flat"):
            return getattr(base, node.attr)
        held = getattr(base, "__dict__", None)
        return held.get(node.attr, _UNKNOWN) if isinstance(held, dict) else _UNKNOWN
    if isinstance(node, ast.Subscript):
        base = _evaluate(node.value, frame)
        if type(base) not in (dict, list, tuple, np.ndarray):
            return _UNKNOWN
        index = _static_index(node.slice, frame)
        if index is _UNKNOWN:
            return _UNKNOWN
        try:
            return base[index]
        except (LookupError, TypeError, ValueError):
            return _UNKNOWN
    return _UNKNOWN


def _static_index(node, frame):
    """An index made of constants, plain ints, slices and tuples of them; _UNKNOWN otherwise."""
    if isinstance(node, ast.Slice):
        parts = [None if p is None else _static_index(p, frame) for p in (node.lower, node.upper, node.step)]
        return _UNKNOWN if _UNKNOWN in parts else slice(*parts)
    if isinstance(node, ast.Tuple):
        parts = [_static_index(p, frame) for p in node.elts]
        return _UNKNOWN if builtins_any(p is _UNKNOWN for p in parts) else tuple(parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _static_index(node.operand, frame)
        return -inner if type(inner) is int else _UNKNOWN
    value = _evaluate(node, frame) if isinstance(node, (ast.Name, ast.Constant, ast.Attribute)) else _UNKNOWN
    return value if value is None or value is Ellipsis or type(value) in (int, str) else _UNKNOWN


def builtins_any(values):
    for v in values:
        if v:
            return True
    return False


_STATIC_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "size", "device", "requires_grad", "is_leaf",
                                "itemsize", "nbytes", "name"})
_STATIC_CALLS = frozenset({"len", "range", "isinstance", "type", "id"})
_STATIC_METHODS = frozenset({"size", "dim", "numel"})


def _held(node, frame):
    """The values an expression reads (names and attribute chains on them), leaving out what reads
    no value: shapes, dtypes, len(x), x.size(1)."""
    if isinstance(node, ast.Attribute) and node.attr in _STATIC_ATTRIBUTES:
        return
    if isinstance(node, ast.Call) and (
            isinstance(node.func, ast.Name) and node.func.id in _STATIC_CALLS
            or isinstance(node.func, ast.Attribute) and node.func.attr in _STATIC_METHODS):
        return
    if isinstance(node, (ast.Name, ast.Attribute)):
        value = _evaluate(node, frame)
        if value is not _UNKNOWN:
            yield value
            return
    for child in ast.iter_child_nodes(node):
        yield from _held(child, frame)


# ----- the check -----
def check(frame, site, traced):
    """The refusal message for subscript `site` about to run in `frame`, or None. `traced(v)`
    says whether v is a traced value."""
    kind, container_node, operands, line = site
    container = _evaluate(container_node, frame)
    if container is _UNKNOWN:
        held = list(_held(container_node, frame))
        if builtins_any(traced(v) for v in held) or not builtins_any(
                type(v) is np.ndarray for v in held):
            return None
    elif type(container) is not np.ndarray:
        return None                 # a Tensor, a traced array, a list or dict: seen or not NumPy's
    for operand in operands:
        if _unseen(operand, frame, traced):
            what = "an index" if operand is operands[0] else "a value"
            where = f"{os.path.basename(frame.f_code.co_filename)}:{line}"
            return (f"{kind} the NumPy array `{_text(container_node)}` with {what} computed from traced "
                    f"data at {where} (`{_text(operand)}`): NumPy does that in C, where the recording "
                    f"cannot see it, so the program would keep this call's values. Compute it with "
                    f"np.where(...) or tt.where(...) (recorded), index a Tensor instead "
                    f"(tt.tensor(array)[...]), or call the function uncompiled")
    return None


def _unseen(operand, frame, traced):
    """Whether operand may hand NumPy a traced value it reads without a hook: a traced NumPy
    array held by name, or an expression on traced values (`x.data > 0`, `h.data[:, 0]`). A
    Tensor held by name is not: NumPy converts it through its __array__ or __index__, which
    are guards (X[idx], a minibatch from a closed-over data set by an index argument)."""
    if isinstance(operand, ast.Tuple):
        return builtins_any(_unseen(e, frame, traced) for e in operand.elts)
    if isinstance(operand, (ast.Name, ast.Attribute)):
        value = _evaluate(operand, frame)
        if value is not _UNKNOWN:
            return traced(value) and not isinstance(value, Tensor)
    return builtins_any(traced(v) for v in _held(operand, frame))


def _text(node):
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def tracer(is_user, on_site):
    """A sys.settrace function that traces, opcode by opcode, the user frames with subscripts
    (`is_user(code)`), calling `on_site(frame, site)` before each of those subscripts."""
    def local(frame, event, arg):
        if event == "opcode":
            site = _SITES[frame.f_code].get(frame.f_lasti)
            if site is not None:
                on_site(frame, site)
        return local

    def start(frame, event, arg):
        code = frame.f_code
        found = _SITES.get(code, _UNKNOWN)
        if found is _UNKNOWN:
            found = sites(code) if is_user(code) else None
            _SITES[code] = found
        if found is None:
            return None
        frame.f_trace_lines = False
        frame.f_trace_opcodes = True
        return local
    return start

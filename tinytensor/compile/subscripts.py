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

from ..state import STATE
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
    listed = list(dis.get_instructions(code))
    subscripts = [i for i in listed if i.opname in _SUBSCRIPTS]
    found = _scalar_calls(listed)
    if not subscripts:
        return found or None
    nodes = _nodes(code.co_filename)
    for ins in subscripts:
        p = ins.positions
        hit = None if p is None or p.lineno is None else nodes.get(
            (p.lineno, p.col_offset, p.end_lineno, p.end_col_offset))
        if hit is not None:
            node, assigned = hit
            operands = [node.slice] + ([assigned] if ins.opname == "STORE_SUBSCR" and assigned else [])
            site = (_SUBSCRIPTS[ins.opname], node.value, operands, p.lineno)
            found[ins.offset] = ("mark+", site) if ins.offset in found else site   # (np.int64(d[0]))
    return found or None


# ----- NumPy's scalar types called on one value: np.int64(t.data.argmax()), np.float32(s) --------
# Of a traced 0-d array of the type's own dtype NumPy makes the scalar in C with no method or
# protocol of ours on the way (of another dtype, the cast shows: tracer._cast_in_c). The call is
# found in the bytecode: a "mark" site at the instruction that pushes the argument notes how many
# traced arrays exist then, and the "scalar" site at the call takes the argument (a name's value,
# or the traced array that instruction made) and makes its value a guard (tracer.scalar_call).
_SCALAR_NAMES = frozenset(n for n, t in vars(np).items() if isinstance(t, type) and issubclass(t, np.generic))
_SKIPPED = frozenset({"PRECALL", "CACHE", "NOP", "EXTENDED_ARG"})


def _scalar_calls(listed):
    """{offset: site} for the calls of a NumPy scalar type on one argument in `listed`."""
    import dis
    found = {}
    for k, ins in enumerate(listed):
        if ins.opname != "CALL" or ins.arg != 1:
            continue
        j = k - 1
        while j >= 0 and listed[j].opname in _SKIPPED:
            j -= 1
        if j < 0 or listed[j].opname == "KW_NAMES":
            continue
        producer, depth, i = listed[j], 0, j      # the argument's instructions: net one value
        while i >= 0:
            ins_i = listed[i]
            if ins_i.is_jump_target and i != j or ins_i.opname.startswith(("JUMP", "POP_JUMP", "RETURN")):
                i = -1
                break
            if ins_i.opname not in ("CACHE", "NOP", "EXTENDED_ARG"):
                try:
                    depth += dis.stack_effect(ins_i.opcode, ins_i.arg)
                except ValueError:
                    i = -1
                    break
                if depth == 1:
                    break
            i -= 1
        i -= 1
        while i >= 0 and listed[i].opname in _SKIPPED:
            i -= 1
        if i < 0 or listed[i].argval not in _SCALAR_NAMES or listed[i].opname not in (
                "LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST"):
            continue
        found[producer.offset] = ("mark",)
        found[ins.offset] = ("scalar", producer, listed[i].argval)
    return found


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


def _evaluate(node, frame, container=False):
    """node's value where it is a name, an attribute held in a __dict__, or an index with
    constant parts of a container: no user code runs. _UNKNOWN otherwise."""
    if isinstance(node, ast.Name):
        return _lookup(frame, node.id)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute):
        base = _evaluate(node.value, frame, container)
        if base is _UNKNOWN:
            return _UNKNOWN
        if isinstance(base, np.ndarray) and node.attr in ("T", "real", "imag", "flat"):
            return getattr(base, node.attr)
        if container and isinstance(base, Tensor) and node.attr == "data":
            return base.data          # t.data[0] = ...: the array written (read from here: no note)
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
    if isinstance(container_node, ast.Attribute) and container_node.attr == "data":
        owner = _evaluate(container_node.value, frame)
        rec = STATE.recorder
        if isinstance(owner, Tensor) and rec is not None and rec._reached(owner):
            return None        # p.data[...] = v of a parameter: its traced p.data records the write
    container = _evaluate(container_node, frame, container=True)
    if container is _UNKNOWN:
        held = list(_held(container_node, frame))
        made = isinstance(container_node, ast.Call) and (getattr(
            _evaluate(container_node.func, frame), "__module__", None) or "").startswith("numpy")
        if builtins_any(traced(v) for v in held) or not made and not builtins_any(
                type(v) is np.ndarray for v in held):
            return None             # (np.eye(5)[labels]: NumPy's new array, plain, is checked)
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


_STATIC, _HOOKED, _UNSEEN = 0, 1, 2
_PYTHON_READS = frozenset({"float", "int", "bool", "len", "round", "str", "range", "isinstance", "type",
                           "id", "repr", "abs", "min", "max", "sum"})
_READ_METHODS = frozenset({"item", "tolist", "size", "dim", "numel", "ndimension"})


def _unseen(operand, frame, traced):
    """Whether operand may hand NumPy a traced value it reads without a hook (a traced NumPy
    array: `x.data > 0`, `h.data[:, 0]`, a mask held by name)."""
    return _kind(operand, frame, traced) == _UNSEEN


def _kind(node, frame, traced):
    """What an expression gives, from its source and the values its names hold now: _STATIC (no
    traced value, or a Python number read from one: float(t), t.item(), which are guards),
    _HOOKED (a Tensor: NumPy converts it through its __array__ or __index__, guards) or _UNSEEN
    (a traced NumPy array, whose buffer NumPy reads directly; where unsure, this)."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        value = _evaluate(node, frame)
        if value is not _UNKNOWN:
            if not traced(value):
                return _STATIC
            return _HOOKED if isinstance(value, Tensor) else _UNSEEN
        if isinstance(node, ast.Attribute):
            if node.attr in _STATIC_ATTRIBUTES:
                return _STATIC
            base = _kind(node.value, frame, traced)
            return _UNSEEN if base == _HOOKED and node.attr == "data" else base
        return _UNSEEN
    if isinstance(node, ast.Constant):
        return _STATIC
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id in _PYTHON_READS:
            return _STATIC                      # a Python value read from it: a guard
        if isinstance(node.func, ast.Attribute) and node.func.attr in _READ_METHODS:
            return _STATIC
        parts = [_kind(a, frame, traced) for a in node.args] + [_kind(k.value, frame, traced)
                                                                 for k in node.keywords]
        if isinstance(node.func, ast.Attribute):
            parts.append(_kind(node.func.value, frame, traced))
        return _UNSEEN if builtins_any(p != _STATIC for p in parts) else _STATIC
    if isinstance(node, ast.Compare):
        parts = [_kind(node.left, frame, traced)] + [_kind(c, frame, traced) for c in node.comparators]
        return _UNSEEN if builtins_any(p != _STATIC for p in parts) else _STATIC   # a Tensor's mask
    if isinstance(node, ast.Subscript):
        return _kind(node.value, frame, traced)  # (its own index is checked where it runs)
    parts = [_kind(c, frame, traced) for c in ast.iter_child_nodes(node)
             if not isinstance(c, (ast.operator, ast.unaryop, ast.boolop, ast.expr_context))]
    return max(parts, default=_STATIC)


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
        return frame.f_trace     # (local itself: not named here, which would make local a cycle
        #                          that keeps on_site's object, and what it holds, alive)

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

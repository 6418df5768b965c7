"""Looking at the tape: the Wengert list of a computation, and its graph in Graphviz DOT."""

import numpy as np

from .tape import _tape_of
from .tensor import Tensor


def _names(output):
    """The recorded nodes in evaluation order, each with a name: its own, or a generated one
    (x1, x2, ... for leaves, z1, z2, ... for results, as in the lecture's lists)."""
    nodes = _tape_of([output])
    nodes.reverse()
    names, counts = {}, {"x": 0, "z": 0}
    for node in nodes:
        if node.name is None:
            kind = "x" if node._prim is None else "z"
            counts[kind] += 1
            names[node] = f"{kind}{counts[kind]}"
        else:
            names[node] = node.name
    return nodes, names


def _argument(a, names, constants):
    if isinstance(a, Tensor):
        if a not in names:   # an input that needs no gradient
            names[a] = a.name or f"c{len(constants) + 1}"
            constants.append(a)
        return names[a]
    if a is None or isinstance(a, (int, float, bool, np.number)):
        return repr(a)
    constants.append(a)
    return f"c{len(constants)}"


def wengert_list(output):
    """The recorded computation as (lhs, op, args) tuples in evaluation order,
    e.g. [("z1", "dot", ("x", "W")), ...]; names come from Tensor.name where set."""
    nodes, names = _names(output)
    constants = []
    entries = []
    for node in nodes:
        if node._prim is None:
            continue
        shown = node._inputs[:node._prim.shown_nargs]
        entries.append((names[node], node._prim.name,
                        tuple(_argument(a, names, constants) for a in shown)))
    return entries


def to_dot(output):
    """Graphviz DOT source of output's graph: one node per value (name, op, shape)."""
    nodes, names = _names(output)
    lines = ["digraph tinytensor {", "  rankdir=LR;", '  node [shape=box, fontname="monospace"];']
    constants = []
    for node in nodes:
        op = "input" if node._prim is None else node._prim.name
        lines.append(f'  "{names[node]}" [label="{names[node]}\\n{op}\\n{node.shape}"];')
    for node in nodes:
        if node._prim is None:
            continue
        for a in node._inputs[:node._prim.shown_nargs]:
            arg = _argument(a, names, constants)
            if not (isinstance(a, Tensor) and a.requires_grad):
                shape = np.shape(a.data if isinstance(a, Tensor) else a)
                lines.append(f'  "{arg}" [label="{arg}\\nconstant\\n{shape}", style=dashed];')
            lines.append(f'  "{arg}" -> "{names[node]}";')
    lines.append("}")
    return "\n".join(lines) + "\n"

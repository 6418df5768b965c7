"""Looking at the tape: the Wengert list, the lecture's evaluation trace (with forward-mode
tangents and reverse-mode adjoints), and the graph as Graphviz DOT or a picture.

Every view is built from the same labelling (`_Labels`): nodes are told apart by identity,
never by name. A label is the name the user gave (through `names=` or `Tensor.name`), made
unique with a suffix when two tensors share it (`W`, `W_2`), or a generated one that no user
name takes (`x1, x2, ...` for leaves, `z1, ...` or `v1, ...` for results, `c1, ...` for
constants).
"""

import os
from collections import namedtuple

import numpy as np

from .ops.table import HIDDEN_INPUTS
from .scalar import _number
from .tape import _tape_of, forward_sweep, reverse_sweep
from .tensor import Tensor

_NUMBERS = (int, float, bool, complex, np.number, np.bool_)


def _recorded(output, who):
    """The tape of `output` in evaluation order (leaves included); a clear error if there is none."""
    if not isinstance(output, Tensor):
        raise TypeError(f"{who}: expected the Tensor whose computation to show, got {type(output).__name__}")
    if not output.requires_grad:
        raise ValueError(
            f"{who}: nothing was recorded for this tensor (shape {output.shape}): no input it depends "
            f"on has requires_grad=True, or it was computed under tt.no_grad(). Make the inputs with "
            f"requires_grad=True, e.g. x = tt.tensor(2.0, requires_grad=True), and compute it again.")
    nodes = _tape_of([output])
    nodes.reverse()
    return nodes


def _shown_inputs(node):
    hidden = HIDDEN_INPUTS.get(node._prim)      # crossEntropy's logits: the engine's, not the user's
    return node._inputs[:-hidden] if hidden else node._inputs


def _given_names(names, who):
    """{id(tensor): label} from `names`, a mapping label -> Tensor (or Tensor -> label)."""
    given = {}
    if names is None:
        return given
    if not hasattr(names, "items"):
        raise TypeError(f"{who}: names must map labels to Tensors, e.g. dict(model.named_parameters()); "
                        f"got {type(names).__name__}")
    for key, value in names.items():
        if isinstance(key, Tensor) and isinstance(value, str):
            key, value = value, key
        if not isinstance(value, Tensor):
            raise TypeError(f"{who}: names must map labels to Tensors, e.g. dict(model.named_parameters()); "
                            f"{key!r} maps to {type(value).__name__}")
        given.setdefault(id(value), str(key))   # a tensor listed twice keeps its first label
    return given


def _values_shown(nodes):
    """Every value the views show, in evaluation order, each once, with its kind: "x" a leaf,
    "z" a result, "c" a constant an entry uses (a Tensor that needs no gradient, an array;
    numbers are shown as themselves)."""
    values, seen = [], set()
    for node in nodes:
        shown = [] if node._prim is None else [
            (a, "c") for a in _shown_inputs(node)
            if not (isinstance(a, _NUMBERS) or a is None or isinstance(a, Tensor) and a.requires_grad)]
        for value, kind in shown + [(node, "x" if node._prim is None else "z")]:
            if id(value) not in seen:
                seen.add(id(value))
                values.append((value, kind))
    return values


class _Labels:
    """One unique label per value on the tape of `output`, keyed by identity (`id`; the values
    stay alive in `items`). A user name is kept by the first value that has it, a repeated one
    gets `_2`, `_3`, ...; unnamed values get generated names that no user name takes."""

    def __init__(self, nodes, names=None, result_prefix="z", who="wengert_list"):
        given = _given_names(names, who)
        kinds = _values_shown(nodes)
        self.items = [value for value, _ in kinds]
        preferred = {id(v): given.get(id(v)) or (v.name if isinstance(v, Tensor) else None)
                     for v in self.items}
        self.label, taken = {}, set()

        def assign(value, name):
            self.label[id(value)] = name
            taken.add(name)

        for value in self.items:                      # user names, first come
            name = preferred[id(value)]
            if name and name not in taken:
                assign(value, name)
        for value in self.items:                      # repeated user names, suffixed
            name = preferred[id(value)]
            if name and id(value) not in self.label:
                k = 2
                while f"{name}_{k}" in taken:
                    k += 1
                assign(value, f"{name}_{k}")
        counters, prefixes = {"x": 0, "z": 0, "c": 0}, {"x": "x", "z": result_prefix, "c": "c"}
        for value, kind in kinds:                     # generated names, skipping taken ones
            if id(value) not in self.label:
                counters[kind] += 1
                while f"{prefixes[kind]}{counters[kind]}" in taken:
                    counters[kind] += 1
                assign(value, f"{prefixes[kind]}{counters[kind]}")

    def __getitem__(self, value):
        if isinstance(value, _NUMBERS) or value is None:
            return repr(value.item() if isinstance(value, np.generic) else value)
        return self.label[id(value)]

    def arguments(self, node):
        return tuple(self[a] for a in _shown_inputs(node))


def wengert_list(output, names=None):
    """The recorded computation as (lhs, op, args) tuples in evaluation order,
    e.g. [("z1", "dot", ("x", "W")), ...].

    Parameters
    ----------
    output : Tensor
        The result whose tape is read.
    names : dict, optional
        Label to Tensor, e.g. ``dict(model.named_parameters())``. Otherwise labels come from
        `Tensor.name`, made unique (`W`, `W_2`); unnamed leaves are x1, x2, ..., results z1,
        z2, ..., constants c1, ....

    Returns
    -------
    list of tuple

    Raises
    ------
    ValueError
        When nothing was recorded.

    Examples
    --------
    >>> a = tt.tensor([1.0, 2.0], name="a")
    >>> b = tt.tensor([3.0, 4.0], requires_grad=True, name="b")
    >>> tt.wengert_list(tt.dot(a, b) + 1)
    [('z1', 'dot', ('a', 'b')), ('z2', 'add', ('z1', '1'))]
    """
    nodes = _recorded(output, "wengert_list")
    labels = _Labels(nodes, names, "z", "wengert_list")
    return [(labels[node], node._prim.name, labels.arguments(node))
            for node in nodes if node._prim is not None]


# ----- the evaluation trace -----------------------------------------------------------------------
class TraceRow(namedtuple("TraceRow", "label op args value tangent adjoint")):
    """One line of `evaluation_trace`: a leaf (op "input", args ()) or a tape entry. `value`,
    `tangent` (d entry along the input's tangent) and `adjoint` (dy/d entry) are floats for 0-d
    entries and arrays otherwise; `tangent`/`adjoint` are None when not asked for.
    Fields can be read by name (`row.value`), position or key (`row["value"]`)."""

    __slots__ = ()

    def __getitem__(self, key):
        return getattr(self, key) if isinstance(key, str) else super().__getitem__(key)


def _plain(array):
    """A float for a 0-d array, else a copy of the array (a trace keeps what it printed)."""
    array = np.asarray(array)
    return array.item() if array.ndim == 0 else np.array(array)


def _summary(value, shape=True):
    """Numbers as the lecture prints them; arrays as their shape and a short summary."""
    if value is None:
        return ""
    if isinstance(value, _Fused):
        return value.describe()
    if not isinstance(value, np.ndarray):
        value = np.asarray(value)
    if value.ndim == 0:
        return _number(float(value)) if value.dtype.kind in "fiub" else str(value)
    head = f"{value.shape} " if shape else ""
    if value.size == 0:
        return f"{head}empty"
    if value.dtype.kind not in "fiub":
        return f"{head}{value.dtype}"
    if value.size <= 4:
        return f"{head}[{', '.join(_number(float(v)) for v in value.ravel())}]"
    return f"{head}in [{_number(float(np.min(value)))}, {_number(float(np.max(value)))}]"


def _adjoints(output, nodes):
    """{node: dy/d node} for every node on the tape (y = output; the seed is ones, so for a
    non-scalar y it is the gradient of y.sum()). Leaves every .grad as it was.

    A node that a fused entry steps over gets the name of that entry instead of a number:
    crossEntropy(softmax(z), y) sends its gradient straight to z (exact and stable), so the
    sweep never forms dy/d softmax(z), and a zero there would be a wrong number.
    """
    saved = [(node, node.grad) for node in nodes]
    try:
        seed = np.ones(output.shape, dtype=output.dtype)
        found = reverse_sweep([output], [seed], wrt=nodes)
    finally:
        for node, grad in saved:
            node.grad = grad
    adjoints = {}
    for node in nodes:
        g = found.get(node)
        adjoints[node] = np.zeros_like(node.data) if g is None else g
        prim = node._prim
        if HIDDEN_INPUTS.get(prim):   # an entry with hidden inputs
            hidden = [h for h in node._inputs[-HIDDEN_INPUTS[prim]:] if isinstance(h, Tensor)]
            for a in _shown_inputs(node):
                if (isinstance(a, Tensor) and a._prim is not None
                        and any(h is i for h in hidden for i in a._inputs)):
                    adjoints[a] = _Fused(prim.name)
    return adjoints


class _Fused(str):
    """In place of an adjoint the sweep did not form: the name of the fused entry."""

    def describe(self):
        return f"skipped (fused into {self})"


def _seeds(wrt, who):
    """The input tangents: {Tensor: array}; a Tensor alone is seeded with ones (the lecture's
    dx1/dx1 = 1)."""
    if isinstance(wrt, Tensor):
        wrt = {wrt: np.ones(wrt.shape, dtype=wrt.dtype)}
    if not hasattr(wrt, "items"):
        raise TypeError(f"{who}: wrt must be an input Tensor or a dict {{input: tangent}}, "
                        f"got {type(wrt).__name__}")
    seeds = {}
    for x, t in wrt.items():
        if not isinstance(x, Tensor):
            raise TypeError(f"{who}: wrt must be keyed by Tensors, got {type(x).__name__}")
        if not x.requires_grad:
            raise ValueError(f"{who}: wrt={x.name or 'the input'} (shape {x.shape}) does not require grad, "
                             f"so nothing computed from it was recorded; make it with requires_grad=True")
        t = np.asarray(t.data if isinstance(t, Tensor) else t, dtype=x.dtype)
        if t.shape != x.shape:
            raise ValueError(f"{who}: the tangent for {x.name or 'an input'} has shape {t.shape} but the "
                             f"input has shape {x.shape}")
        seeds[x] = t
    return seeds


def evaluation_trace(output, wrt=None, adjoints=False, names=None):
    """Print the lecture's evaluation trace of `output` and return its rows (`TraceRow`s).

    One row per value on the tape, in evaluation order: the leaves (op "input"), then each
    entry, `v3 = add(v1, v2) = 10.693`. With `wrt` (an input Tensor, seeded with ones, or a dict
    {input: tangent}), each row's tangent d entry / d input by forward mode along the tape; with
    `adjoints=True`, each row's adjoint dy / d entry (y = output; y.sum() for a non-scalar y) by
    reverse mode (None, printed as "skipped", for the softmax output of a fused
    crossEntropy(softmax(z), y), whose gradient goes straight to z). Scalars print as numbers
    (3 decimals), arrays as shape and range. Every `.grad` is left as it was. Labels as in
    `wengert_list`, with results named v1, v2, ....

    Examples
    --------
    >>> x1 = tt.tensor(2.0, requires_grad=True, name='x1')
    >>> x2 = tt.tensor(5.0, requires_grad=True, name='x2')
    >>> rows = tt.evaluation_trace(tt.log(x1) + x1 * x2, wrt=x1)
    x1 = 2                      dx1/dx1 = 1
    x2 = 5                      dx2/dx1 = 0
    v1 = log(x1) = 0.693        dv1/dx1 = 0.5
    v2 = mul(x1, x2) = 10       dv2/dx1 = 5
    v3 = add(v1, v2) = 10.693   dv3/dx1 = 5.5
    """
    who = "evaluation_trace"
    nodes = _recorded(output, who)
    labels = _Labels(nodes, names, "v", who)
    seeds = None if wrt is None else _seeds(wrt, who)
    for x in seeds or ():
        if id(x) not in labels.label:
            raise ValueError(f"{who}: wrt={x.name or 'the input'} (shape {x.shape}) is not an input of "
                             f"this output's computation (its trace has no row for it); pass one of "
                             f"the Tensors it was computed from")
    found = _adjoints(output, nodes) if adjoints else None
    rows = []
    for node in nodes:
        tangent = adjoint = None
        if seeds is not None:   # forward mode along the tape, one sweep per entry
            tangent = _plain(seeds[node] if node in seeds else forward_sweep(node, seeds))
        if found is not None and not isinstance(found[node], _Fused):
            adjoint = _plain(found[node])
        if node._prim is None:
            rows.append(TraceRow(labels[node], "input", (), _plain(node.data), tangent, adjoint))
        else:
            rows.append(TraceRow(labels[node], node._prim.name, labels.arguments(node),
                                 _plain(node.data), tangent, adjoint))
    wrt_label = None   # "dv/dx1" for the lecture's seed dx1/dx1 = 1; "dv" for another tangent
    if seeds is not None and len(seeds) == 1 and all(np.all(t == 1) for t in seeds.values()):
        wrt_label = labels[next(iter(seeds))]
    table = []
    for node, row in zip(nodes, rows):   # `x1 = 2`, `v3 = add(v1, v2) = 10.693`, then the columns
        rhs = "" if row.op == "input" else f"{row.op}({', '.join(row.args)}) = "
        line = [f"{row.label} = {rhs}{_summary(row.value)}"]
        if seeds is not None:
            d = f"d{row.label}/d{wrt_label}" if wrt_label else f"d{row.label}"
            line.append(f"{d} = {_summary(row.tangent)}")
        if found is not None:
            line.append(f"dy/d{row.label} = {_summary(found[node])}")
        table.append(line)
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    text = ["   ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    if found is not None:
        text.append(f"(y = {labels[output]})")
    print("\n".join(text))
    return rows


# ----- pictures -----------------------------------------------------------------------------------
def _dot_string(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_label(*parts):
    return _dot_string("\n".join(parts)).replace("\n", "\\n")


def to_dot(output, values=False, grads=False, names=None):
    """Graphviz DOT source of output's graph: one node per distinct value (identity, not name),
    labelled with its name, op and shape; with `values=True` its value and with `grads=True`
    its gradient dy/d value (y = output, computed by a reverse sweep that leaves .grad alone),
    as micrograd's drawing does. Constants are dashed. Raises ValueError when nothing was
    recorded. Render with `tt.draw(y, "graph.svg")` or `dot -Tsvg`.

    Examples
    --------
    >>> x = tt.tensor([1.0, 2.0], requires_grad=True, name='x')
    >>> tt.to_dot((x * x).sum()).startswith('digraph')
    True
    """
    nodes = _recorded(output, "to_dot")
    labels = _Labels(nodes, names, "z", "to_dot")
    found = _adjoints(output, nodes) if grads else None
    lines = ["digraph tinytensor {", "  rankdir=LR;", '  node [shape=box, fontname="monospace"];']
    for value in labels.items:
        name = labels[value]
        data = value.data if isinstance(value, Tensor) else np.asarray(value)
        if isinstance(value, Tensor) and value.requires_grad:
            parts = [name, "input" if value._prim is None else value._prim.name, str(data.shape)]
            style = ""
        else:
            parts, style = [name, "constant", str(data.shape)], ", style=dashed"
        if values:
            parts.append(f"value {_summary(data, shape=False)}")
        if found is not None and isinstance(value, Tensor) and value.requires_grad:
            parts.append(f"grad {_summary(found[value], shape=False)}")
        lines.append(f"  {_dot_string(name)} [label={_dot_label(*parts)}{style}];")
    numbers, taken = 0, set(labels.label.values())
    for node in nodes:
        if node._prim is None:
            continue
        for a in _shown_inputs(node):
            if isinstance(a, _NUMBERS) or a is None:   # each use of a number its own small node
                numbers += 1
                while f"#number{numbers}" in taken:    # (a label could be anything)
                    numbers += 1
                source = _dot_string(f"#number{numbers}")
                lines.append(f"  {source} [label={_dot_label(labels[a])}, shape=plain];")
            else:
                source = _dot_string(labels[a])
            lines.append(f"  {source} -> {_dot_string(labels[node])};")
    lines.append("}")
    return "\n".join(lines) + "\n"


_INSTALL = ('install Graphviz: the program (apt-get install graphviz; macOS: brew install graphviz; '
            'conda: conda install graphviz) and the Python package (pip install -e ".[viz]", or '
            'pip install graphviz)')


def draw(output, path, format=None, **options):
    """Render `to_dot(output, **options)` (values=, grads=, names=) to `path` with Graphviz.

    The format is `format` or the file's extension (svg, png, pdf). Returns the path.
    Needs the `graphviz` Python package (`pip install -e ".[viz]"`) and the Graphviz `dot`
    program (`apt-get install graphviz`); without them, an error that says so.

    Examples
    --------
    >>> import os, tempfile
    >>> x = tt.tensor([1.0, 2.0], requires_grad=True, name="x")
    >>> y = (x * x).sum()
    >>> path = os.path.join(tempfile.mkdtemp(), "y.svg")
    >>> try:
    ...     tt.draw(y, path, values=True) == path
    ... except (ImportError, RuntimeError) as e:   # no Graphviz here: the error says how to get it
    ...     "apt-get install graphviz" in str(e)
    True
    """
    path = os.fspath(path)
    fmt = (format or os.path.splitext(path)[1].lstrip(".")).lower()
    if fmt not in ("svg", "png", "pdf"):
        raise ValueError(f"draw: cannot tell the picture format from {path!r}; give the path an .svg, "
                         f".png or .pdf extension, or pass format='svg'")
    source = to_dot(output, **options)
    try:
        import graphviz
    except ImportError:
        raise ImportError(f"draw: the graphviz Python package is not installed; {_INSTALL}. "
                          f"tt.to_dot(y) gives the DOT source without it.") from None
    try:
        picture = graphviz.Source(source).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise RuntimeError(f"draw: the Graphviz program `dot` was not found on PATH; {_INSTALL}. "
                           f"tt.to_dot(y) gives the DOT source without it.") from None
    with open(path, "wb") as f:
        f.write(picture)
    return path

"""The lecture's scalar engine: one `Node` per number, on plain Python floats (math only).

It is the teaching baseline that tinytensor is benchmarked against and cross-checked with
(`benchmarks/bench_scalar.py`, `tests/scalar/test_scalar_engine.py`). In the lecture's words:

* A `Node` holds a numerical `value`, its `parent_nodes`, its `child_nodes`, the `operator`
  that made it ("input" for a node made by `Node(value)`, else e.g. "mul"), `grad_wrt_parents`
  (d node / d parent, one per parent, computed when the node is made), `partial_derivative`
  (set by forward mode) and `grad` (set by reverse mode). `node.data` is `value` under
  micrograd's name.
* Nodes are named as the NTU reference names them: `x1, x2, ...` for inputs and `v1, v2, ...`
  for the others, in creation order. `reset_names()` (or `Node.reset()`, or the reference's
  `Node.input_count = Node.intermediate_count = 0`) starts again at x1/v1;
  `Node(value, name="a")` or `node.name = "a"` names one yourself.
* Wrapping functions (`add sub mul div neg power log exp sin cos tanh relu sqrt sigmoid abs`,
  and the operators `+ - * / **` with numbers on either side) compute a value, create exactly
  one Node and write it back into the child nodes of its parents.
* Forward mode, `forward(x)`: the nodes reachable from `x` through child nodes in topological
  order, then the chain rule along that order: d v/d x = sum over parents u of dv/du * du/dx.
* Reverse mode, `y.backward()`: the nodes `y` depends on, newest first; each node's adjoint
  d y/d v is the sum of the partial adjoints its children pass back (CS6216's `node_to_grad`).
* `Node.verbose = True` prints the lecture's tables as the reference implementation does: each
  node as it is made (`v2 = mul['x1', 'x2'] = 10`), each chain rule in `forward(x)`, and each
  adjoint as a sum of partial adjoints in `backward()`. Numbers are rounded to 3 decimals.
  Off, it costs one flag test per node made.

Both sweeps are iterative (no recursion), so a graph may be 100,000 nodes deep.

Choices the lecture leaves open:

* A child is linked from its parents by a weak reference, so a parent does not keep its
  children alive: a leaf (a weight) reused for many training steps does not collect every
  graph ever built from it. Only the edges child -> parent are strong, as on tinytensor's tape.
* `backward` *sets* `.grad` (as the lecture does), it does not accumulate: after
  `y.backward()`, every node `y` depends on holds exactly dy/dnode, however often it was
  called before. Nodes outside y's graph keep whatever they held. To get the gradient of a sum
  of losses, backward the sum.
* Comparisons (`<`, `==`, ...) compare values, as for floats; use `is` for identity.
"""

import itertools
import math
import weakref

from .weakid import IdentityWeakMap

__all__ = ["Node", "add", "sub", "mul", "div", "neg", "power", "log", "exp", "sin", "cos", "tanh",
           "relu", "sqrt", "sigmoid", "forward", "backward", "topological_order",
           "reverse_topological_order", "reset_names"]
# (`abs` is left out of `import *` so that it does not hide the builtin; `abs(node)` works.)

# Which forward-mode pass is current; a partial derivative stamped with an older pass reads 0.
_forward_pass = 0


def reset_names(input_count=0, intermediate_count=0):
    """Start naming nodes again at x1 and v1 (for a new example); nodes made before keep theirs.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> scalar.reset_names()
    >>> scalar.Node(1.0).name, scalar.Node(2.0).name
    ('x1', 'x2')
    """
    global _next_input_number, _next_value_number
    _next_input_number = itertools.count(input_count + 1).__next__
    _next_value_number = itertools.count(intermediate_count + 1).__next__


reset_names()


def _count(which):
    """How many names of one kind were given so far (read without losing the place)."""
    global _next_input_number, _next_value_number
    if which == "input":
        n = _next_input_number() - 1
        _next_input_number = itertools.count(n + 1).__next__
    else:
        n = _next_value_number() - 1
        _next_value_number = itertools.count(n + 1).__next__
    return n


class _NodeType(type):
    """`Node.input_count` and `Node.intermediate_count`, the NTU reference's class attributes:
    how many inputs and other nodes were named so far; assigning one (say 0) restarts it."""

    input_count = property(lambda cls: _count("input"),
                           lambda cls, n: reset_names(n, _count("intermediate")))
    intermediate_count = property(lambda cls: _count("intermediate"),
                                  lambda cls, n: reset_names(_count("input"), n))


class Node(metaclass=_NodeType):
    """One number in the computational graph.

    Node(value) makes an input (operator "input", no parents); the wrapping functions make the
    others, as Node(value, parent_nodes, operator, grad_wrt_parents).

    Examples
    --------
    >>> from tinytensor import scalar
    >>> scalar.reset_names()
    >>> x1, x2 = scalar.Node(2.0), scalar.Node(5.0)
    >>> y = scalar.log(x1) + x1 * x2 - scalar.sin(x2)
    >>> round(y.value, 3)
    11.652
    >>> order = scalar.forward(x1)  # forward mode: partial_derivative = dnode/dx1
    >>> y.partial_derivative
    5.5
    >>> y.backward()                # reverse mode: grad = dy/dnode
    >>> x1.grad, round(x2.grad, 3)
    (5.5, 1.716)
    """

    verbose = False   # True: print the evaluation trace, forward and reverse mode as they run
    reset = staticmethod(reset_names)

    __slots__ = ("value", "parent_nodes", "operator", "grad_wrt_parents", "grad", "_label",
                 "_child_refs", "_prune_at", "_partial_derivative", "_pass", "__weakref__")

    def __init__(self, value, parent_nodes=(), operator="input", grad_wrt_parents=(), name=None):
        self.value = float(value)
        # The wrapping functions hand over fresh lists: kept as they are (as the reference does),
        # which saves two copies per node; anything else becomes a list.
        self.parent_nodes = parent_nodes if parent_nodes.__class__ is list else list(parent_nodes)
        self.operator = operator
        self.grad_wrt_parents = (grad_wrt_parents if grad_wrt_parents.__class__ is list
                                 else list(grad_wrt_parents))
        self.grad = 0.0
        self._child_refs = []     # weak references to the children, in creation order
        self._prune_at = 8        # drop dead references once the list grows past this
        self._pass = -1           # no forward pass yet: partial_derivative reads 0
        # The name's number, taken now (creation order); the string is made only when asked for.
        if name is None:
            self._label = _next_input_number() if operator == "input" else _next_value_number()
        else:
            self._label = str(name)
        for parent in self.parent_nodes:   # write this node back into its parents' child nodes
            parent._add_child(self)
        if Node.verbose:
            print(_creation_line(self))

    @property
    def name(self):
        """x1, x2, ... for inputs, v1, v2, ... for the others, unless named."""
        label = self._label
        if label.__class__ is int:
            return f"{'x' if self.operator == 'input' else 'v'}{label}"
        return label

    @name.setter
    def name(self, name):
        self._label = str(name)

    # micrograd's name for the value, so its update `p.data -= lr * p.grad` works as written
    data = property(lambda self: self.value, lambda self, value: setattr(self, "value", float(value)))

    # ----- child nodes, held weakly ------------------------------------------------------------
    def _add_child(self, child):
        refs = self._child_refs
        refs.append(weakref.ref(child))
        if len(refs) > self._prune_at:   # amortised O(1): the list stays at most ~2x the live ones
            refs[:] = [r for r in refs if r() is not None]
            self._prune_at = 2 * len(refs) + 8

    @property
    def child_nodes(self):
        """The children still alive, in creation order."""
        children = []
        for ref in self._child_refs:
            child = ref()
            if child is not None:
                children.append(child)
        return children

    # ----- forward mode's member --------------------------------------------------------------
    @property
    def partial_derivative(self):
        """d self / d x, for the input x of the latest `forward(x)` call.

        Nodes that call did not reach (not reachable from x) read 0: they do not depend on x.
        (After the function `backward(y)`, as in the reference, it holds dy / d self instead.)
        """
        return self._partial_derivative if self._pass == _forward_pass else 0.0

    @partial_derivative.setter
    def partial_derivative(self, value):
        self._partial_derivative = value
        self._pass = _forward_pass

    # ----- reverse mode -----------------------------------------------------------------------
    def backward(self):
        """Reverse mode: set `.grad` = d self / d node on every node self depends on (itself: 1)."""
        _BACKWARD_DONE[self] = True    # float(self) is allowed from now on (a loss to log)
        if Node.verbose:
            return _backward_verbose(self)
        node_to_grad = {self: 1.0}   # adjoint of each node: the sum of its partial adjoints
        for node in reversed(_depth_first_postorder(self, _parents)):   # each before its parents
            adjoint = node_to_grad.pop(node)   # complete: all of node's children came earlier
            node.grad = adjoint
            for parent, dnode_dparent in zip(node.parent_nodes, node.grad_wrt_parents):
                # the partial adjoint parent -> node, summed per parent
                node_to_grad[parent] = node_to_grad.get(parent, 0.0) + adjoint * dnode_dparent

    # ----- operators: numbers on either side become constant input nodes ----------------------
    def __add__(self, other): return add(self, other)
    def __radd__(self, other): return add(other, self)
    def __sub__(self, other): return sub(self, other)
    def __rsub__(self, other): return sub(other, self)
    def __mul__(self, other): return mul(self, other)
    def __rmul__(self, other): return mul(other, self)
    def __truediv__(self, other): return div(self, other)
    def __rtruediv__(self, other): return div(other, self)
    def __pow__(self, exponent): return power(self, exponent)
    def __rpow__(self, base): return power(base, self)
    def __neg__(self): return neg(self)
    def __pos__(self): return self
    def __abs__(self): return abs(self)

    # Comparisons are by value, as for floats (micrograd's MLP code compares nodes to numbers).
    # Hashing stays by identity, so nodes still key dictionaries and sets one node each.
    def __lt__(self, other): return self.value < _value(other)
    def __le__(self, other): return self.value <= _value(other)
    def __gt__(self, other): return self.value > _value(other)
    def __ge__(self, other): return self.value >= _value(other)
    def __eq__(self, other): return self.value == _value(other)
    def __ne__(self, other): return self.value != _value(other)
    __hash__ = object.__hash__

    def __float__(self):
        """Refused, as micrograd's Value refuses: float(node), and math.sin(node) & co. which call
        it, would make a constant of the node and lose its gradient without a word. `node.value`
        is the number on request; after y.backward(), float(y) is a number to log."""
        if self not in _BACKWARD_DONE:
            raise TypeError(
                f"float({self.name}) (also math.sin, math.exp, ... on a Node, which call it) would turn "
                f"the Node into a plain number and its gradient would be lost without a word. Use "
                f"{self.name}.value for the number (explicitly off the graph), or the engine's functions "
                f"to stay on it: sin({self.name}), exp({self.name}), log, cos, tanh, sqrt, sigmoid, relu "
                f"from tinytensor.scalar, or the methods {self.name}.sin(), {self.name}.exp(), ... "
                f"(float(y) works after y.backward())")
        return self.value

    def __int__(self):
        return int(self.__float__())

    def __format__(self, spec):   # f"{loss:.4f}" prints the number, as for a one-element Tensor
        return format(self.value, spec) if spec else str(self)

    def log(self): return log(self)
    def exp(self): return exp(self)
    def sin(self): return sin(self)
    def cos(self): return cos(self)
    def tanh(self): return tanh(self)
    def relu(self): return relu(self)
    def sqrt(self): return sqrt(self)
    def sigmoid(self): return sigmoid(self)

    def __repr__(self):
        return f"Node({self.value!r}, name={self.name!r}, operator={self.operator!r})"


# Nodes that were the output of backward(): float() on them is allowed.
_BACKWARD_DONE = IdentityWeakMap()


def _as_node(x):
    return x if isinstance(x, Node) else Node(x)


def _value(x):
    return x.value if isinstance(x, Node) else x


def _parents(node):
    return node.parent_nodes


def _children(node):
    return node.child_nodes


# ----- wrapping functions: a value, one new Node, and d new node / d parent for each parent -----
def add(node1, node2):
    """A new Node, `node1 + node2`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> scalar.reset_names()
    >>> x1, x2 = scalar.Node(2.0), scalar.Node(5.0)
    >>> y = scalar.add(scalar.log(x1), scalar.mul(x1, x2))
    >>> y.backward()
    >>> x1.grad, x2.grad
    (5.5, 2.0)
    """
    node1, node2 = _as_node(node1), _as_node(node2)
    return Node(node1.value + node2.value, [node1, node2], "add", [1.0, 1.0])


def sub(node1, node2):
    """A new Node, `node1 - node2`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.sub(scalar.Node(2.0), scalar.Node(5.0))
    >>> y.value, y.grad_wrt_parents
    (-3.0, [1.0, -1.0])
    """
    node1, node2 = _as_node(node1), _as_node(node2)
    return Node(node1.value - node2.value, [node1, node2], "sub", [1.0, -1.0])


def mul(node1, node2):
    """A new Node, `node1 * node2`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.mul(scalar.Node(2.0), scalar.Node(5.0))
    >>> y.value, y.operator, y.grad_wrt_parents
    (10.0, 'mul', [5.0, 2.0])
    """
    node1, node2 = _as_node(node1), _as_node(node2)
    return Node(node1.value * node2.value, [node1, node2], "mul", [node2.value, node1.value])


def div(node1, node2):
    """A new Node, `node1 / node2`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.div(scalar.Node(1.0), scalar.Node(4.0))
    >>> y.value, y.grad_wrt_parents
    (0.25, [0.25, -0.0625])
    """
    node1, node2 = _as_node(node1), _as_node(node2)
    value = node1.value / node2.value
    return Node(value, [node1, node2], "div", [1.0 / node2.value, -value / node2.value])


def neg(node):
    """A new Node, `-node`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> scalar.neg(scalar.Node(2.0)).value
    -2.0
    """
    node = _as_node(node)
    return Node(-node.value, [node], "neg", [-1.0])


def power(node, exponent):
    """node ** exponent; the exponent a number (a constant) or a Node (then d/d exponent too).

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.power(scalar.Node(3.0), 2)
    >>> y.value, y.grad_wrt_parents
    (9.0, [6.0])
    """
    node = _as_node(node)
    base = node.value
    if isinstance(exponent, Node):
        # d a^b / d b = a^b log a: defined for a > 0 (and 0 at a = 0, b > 0)
        if base < 0:
            raise ValueError(f"scalar.power: {node.name} ** {exponent.name} with a Node exponent needs a "
                             f"base >= 0 (d/d exponent = a**b log a), got {base}; for a constant "
                             f"exponent write {node.name} ** float({exponent.name})")
        value = base ** exponent.value
        return Node(value, [node, exponent], "pow",
                    [_power_slope(base, exponent.value), value * math.log(base) if base else 0.0])
    value = base ** exponent
    if isinstance(value, complex):
        raise ValueError(f"scalar.power: {base} ** {exponent} is not a real number")
    return Node(value, [node], "pow", [_power_slope(base, exponent)])


def _power_slope(base, exponent):
    """d base**exponent / d base; at base 0 with 0 < exponent < 1 the slope is inf (as sqrt's and
    PyTorch's), not a ZeroDivisionError when the node is made."""
    if exponent == 0:
        return 0.0
    if base == 0 and exponent < 1:
        return math.inf
    return exponent * base ** (exponent - 1)


def log(node):
    """A new Node, `ln(node)`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.log(scalar.Node(2.0))
    >>> round(y.value, 3), y.grad_wrt_parents
    (0.693, [0.5])
    """
    node = _as_node(node)
    try:
        value = math.log(node.value)
    except ValueError:
        raise ValueError(f"scalar.log: log({node.name}) of {node.value} is undefined; "
                         f"log needs a positive number") from None
    return Node(value, [node], "log", [1.0 / node.value])


def exp(node):
    """A new Node, `exp(node)`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.exp(scalar.Node(0.0))
    >>> y.value, y.grad_wrt_parents
    (1.0, [1.0])
    """
    node = _as_node(node)
    value = math.exp(node.value)
    return Node(value, [node], "exp", [value])


def sin(node):
    """A new Node, `sin(node)`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.sin(scalar.Node(0.0))
    >>> y.value, y.grad_wrt_parents
    (0.0, [1.0])
    """
    node = _as_node(node)
    return Node(math.sin(node.value), [node], "sin", [math.cos(node.value)])


def cos(node):
    """A new Node, `cos(node)`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.cos(scalar.Node(0.0))
    >>> y.value, y.grad_wrt_parents
    (1.0, [-0.0])
    """
    node = _as_node(node)
    return Node(math.cos(node.value), [node], "cos", [-math.sin(node.value)])


def tanh(node):
    """A new Node, `tanh(node)`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.tanh(scalar.Node(0.0))
    >>> y.value, y.grad_wrt_parents
    (0.0, [1.0])
    """
    node = _as_node(node)
    value = math.tanh(node.value)
    return Node(value, [node], "tanh", [1.0 - value * value])


def relu(node):
    """A new Node, `max(node, 0)`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> scalar.relu(scalar.Node(-1.0)).value, scalar.relu(scalar.Node(2.0)).value
    (0.0, 2.0)
    """
    node = _as_node(node)
    positive = node.value > 0
    return Node(node.value if positive else 0.0, [node], "relu", [1.0 if positive else 0.0])


def sqrt(node):
    """A new Node, `sqrt(node)`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.sqrt(scalar.Node(4.0))
    >>> y.value, y.grad_wrt_parents
    (2.0, [0.25])
    """
    node = _as_node(node)
    if node.value < 0:
        raise ValueError(f"scalar.sqrt: sqrt({node.name}) of {node.value} is not a real number")
    value = math.sqrt(node.value)
    return Node(value, [node], "sqrt", [0.5 / value if value else math.inf])


def sigmoid(node):
    """A new Node, `1 / (1 + exp(-node))`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> y = scalar.sigmoid(scalar.Node(0.0))
    >>> y.value, y.grad_wrt_parents
    (0.5, [0.25])
    """
    node = _as_node(node)
    x = node.value
    if x >= 0:   # the two forms keep exp from overflowing
        value = 1.0 / (1.0 + math.exp(-x))
    else:
        e = math.exp(x)
        value = e / (1.0 + e)
    return Node(value, [node], "sigmoid", [value * (1.0 - value)])


def abs(node):  # noqa: A001 (the lecture's name; `abs(node)` with the builtin also lands here)
    """A new Node, `|node|`, with its partial derivatives with respect to its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> scalar.abs(scalar.Node(-2.0)).value
    2.0
    """
    node = _as_node(node)
    x = node.value
    return Node(math.fabs(x), [node], "abs", [1.0 if x > 0 else -1.0 if x < 0 else 0.0])


# ----- the two orders -------------------------------------------------------------------------------
def _depth_first_postorder(start, next_nodes):
    """Every node reachable from `start` through `next_nodes`, each after all the nodes it
    reaches (depth-first search, with an explicit stack instead of recursion)."""
    ordering, visited = [], {start}
    stack = [(start, iter(next_nodes(start)))]
    while stack:
        node, pending = stack[-1]
        for nxt in pending:
            if nxt not in visited:
                visited.add(nxt)
                stack.append((nxt, iter(next_nodes(nxt))))
                break
        else:   # every node reachable from `node` is in `ordering`: now `node` can follow
            stack.pop()
            ordering.append(node)
    return ordering


def topological_order(root_node):
    """The nodes reachable from `root_node` through child nodes, each before its children.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> scalar.reset_names()
    >>> x1 = scalar.Node(2.0)
    >>> y = scalar.exp(scalar.log(x1))
    >>> [node.name for node in scalar.topological_order(x1)]
    ['x1', 'v1', 'v2']
    """
    ordering = _depth_first_postorder(root_node, _children)
    ordering.reverse()
    return ordering


def reverse_topological_order(output_node):
    """The nodes `output_node` depends on, itself first, each before its parents.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> scalar.reset_names()
    >>> x1 = scalar.Node(2.0)
    >>> y = scalar.exp(scalar.log(x1))
    >>> [node.name for node in scalar.reverse_topological_order(y)]
    ['v2', 'v1', 'x1']
    """
    ordering = _depth_first_postorder(output_node, _parents)
    ordering.reverse()
    return ordering


# ----- forward mode -------------------------------------------------------------------------------
def forward(root_node):
    """Forward mode: set every node's `partial_derivative` to d node / d root_node.

    Walks the nodes reachable from `root_node` in topological order, applying the chain rule
    d v = sum over parents u of (d v / d u) * (d u / d root). Nodes not reachable read 0, so
    calling it again from another input on the same graph is correct. Returns the ordering.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> x1, x2 = scalar.Node(2.0), scalar.Node(5.0)
    >>> y = x1 * x2 + x1
    >>> order = scalar.forward(x1)   # sets every node's partial_derivative, d node / d x1
    >>> y.partial_derivative
    6.0
    """
    global _forward_pass
    _forward_pass += 1
    ordering = topological_order(root_node)
    root_node.partial_derivative = 1.0
    verbose = Node.verbose
    for node in ordering[1:]:
        partial_derivative = 0.0
        for parent, dnode_dparent in zip(node.parent_nodes, node.grad_wrt_parents):
            partial_derivative += dnode_dparent * parent.partial_derivative
        node.partial_derivative = partial_derivative
        if verbose:
            print(_chain_rule_lines(node, root_node))
    return ordering


# ----- reverse mode, as the reference spells it -----------------------------------------------------
def backward(output_node):
    """Reverse mode as a function, as in the NTU reference: `output_node.backward()`, and, as the
    reference does, each node's dy/d node also left in its `partial_derivative`.

    Examples
    --------
    >>> from tinytensor import scalar
    >>> x1, x2 = scalar.Node(2.0), scalar.Node(5.0)
    >>> y = x1 * x2 + x1
    >>> scalar.backward(y)
    >>> x1.grad, x2.grad
    (6.0, 2.0)
    """
    global _forward_pass
    output_node.backward()
    _forward_pass += 1
    for node in _depth_first_postorder(output_node, _parents):
        node.partial_derivative = node.grad


# ----- printing the lecture's tables (only when Node.verbose is True) -------------------------------
def _number(x):
    """A number as the lecture prints it: rounded to 3 decimals, no trailing zeros (10, 0.693)."""
    x = round(x, 3)
    if x == 0:
        return "0"   # also -0.0
    if not math.isfinite(x):
        return str(x)
    return f"{x:.3f}".rstrip("0").rstrip(".")


def _creation_line(node):
    """`v2 = mul['x1', 'x2'] = 10`, in the reference's columns."""
    parents = str([p.name for p in node.parent_nodes])
    return f"{node.name:<2} = {node.operator + parents:<18} = {_number(node.value):<8}"


def _chain_rule_lines(node, root):
    """`dv3/dx1 = (dv3/dv1)(dv1/dx1) + (dv3/dv2)(dv2/dx1)`, then the numbers on the next line."""
    symbols, numbers = [], []
    for parent, dnode_dparent in zip(node.parent_nodes, node.grad_wrt_parents):
        symbols.append(f"(d{node.name}/d{parent.name})(d{parent.name}/d{root.name})")
        numbers.append(f"({_number(dnode_dparent)})({_number(parent.partial_derivative)})")
    return (f"d{node.name:<2}/d{root.name:<2} = {' + '.join(symbols):<45} \n"
            f"\t= {' + '.join(numbers):<30} = {_number(node.partial_derivative):<5}")


def _backward_verbose(output):
    """`Node.backward` that prints each adjoint as the sum of its partial adjoints (CS6216):

        Δx2 = Δv4 × ∂v4/∂x2 + Δv2 × ∂v2/∂x2
            = (-1)(0.284) + (1)(2)          = 1.716

    then dy/dx for every input, y being `output`. Same arithmetic, same order as the fast path.
    """
    print(f"Δ{output.name} = dy/d{output.name} = 1")
    partials = {output: []}   # node -> its partial adjoints so far: (child, Δchild, ∂child/∂node)
    inputs = []
    for node in reverse_topological_order(output):
        terms = partials.pop(node)
        adjoint = 1.0 if node is output else 0.0
        for _, child_adjoint, dchild_dnode in terms:
            adjoint = adjoint + child_adjoint * dchild_dnode
        node.grad = adjoint
        if terms:
            symbols = " + ".join(f"Δ{c.name} × ∂{c.name}/∂{node.name}" for c, _, _ in terms)
            numbers = " + ".join(f"({_number(a)})({_number(d)})" for _, a, d in terms)
            print(f"Δ{node.name:<2} = {symbols:<45} \n\t= {numbers:<30} = {_number(adjoint):<5}")
        if node.operator == "input":
            inputs.append(node)
        for parent, dnode_dparent in zip(node.parent_nodes, node.grad_wrt_parents):
            partials.setdefault(parent, []).append((node, adjoint, dnode_dparent))
    inputs.sort(key=lambda x: (0, x._label, "") if x._label.__class__ is int else (1, 0, x._label))
    for x in inputs:
        print(f"dy/d{x.name} = {_number(x.grad)}")

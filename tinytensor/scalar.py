"""The lecture's scalar engine: one `Node` per number, on plain Python floats (math only).

It is the teaching baseline that tinytensor is benchmarked against and cross-checked with
(`benchmarks/bench_scalar.py`, `tests/test_scalar.py`). In the lecture's words:

* A `Node` holds a numerical `value`, its `parent_nodes`, its `child_nodes`, the `operator`
  that made it (e.g. "mul"), `grad_wrt_parents` (d node / d parent, one per parent, computed
  when the node is made) and `partial_derivative` (set by forward mode).
* Wrapping functions (`add sub mul div neg log exp sin cos tanh`, and the operators
  `+ - * / **` with numbers on either side) compute a value, create exactly one Node and write
  it back into the child nodes of its parents.
* Forward mode, `forward(x)`: the nodes reachable from `x` through child nodes in topological
  order, then the chain rule along that order: d v/d x = sum over parents u of dv/du * du/dx.
* Reverse mode, `y.backward()`: the nodes `y` depends on, newest first; each node's adjoint
  d y/d v is the sum of the partial adjoints its children pass back (CS6216's `node_to_grad`).

Both sweeps are iterative (no recursion), so a graph may be 100,000 nodes deep.

Two choices the lecture leaves open:

* A child is linked from its parents by a weak reference, so a parent does not keep its
  children alive: a leaf (a weight) reused for many training steps does not collect every
  graph ever built from it. Only the edges child -> parent are strong, as on tinytensor's tape.
* `backward` *sets* `.grad` (as the lecture does), it does not accumulate: after
  `y.backward()`, every node `y` depends on holds exactly dy/dnode, however often it was
  called before. Nodes outside y's graph keep whatever they held. To get the gradient of a sum
  of losses, backward the sum.
"""

import math
import weakref

__all__ = ["Node", "add", "sub", "mul", "div", "neg", "power", "log", "exp", "sin", "cos", "tanh",
           "forward", "topological_order"]

# Which forward-mode pass is current; a partial derivative stamped with an older pass reads 0.
_forward_pass = 0


class Node:
    """One number in the computational graph.

    Node(value) makes an input (a leaf: no parents, `operator` None); the wrapping functions
    make the others.
    """

    __slots__ = ("value", "parent_nodes", "operator", "grad_wrt_parents", "grad",
                 "_child_refs", "_prune_at", "_partial_derivative", "_pass", "__weakref__")

    def __init__(self, value, parent_nodes=(), operator=None, grad_wrt_parents=()):
        self.value = float(value)
        self.parent_nodes = list(parent_nodes)
        self.operator = operator
        self.grad_wrt_parents = list(grad_wrt_parents)
        self.grad = 0.0
        self._child_refs = []     # weak references to the children, in creation order
        self._prune_at = 8        # drop dead references once the list grows past this
        self._partial_derivative = 0.0
        self._pass = -1
        for parent in self.parent_nodes:   # write this node back into its parents' child nodes
            parent._add_child(self)

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
        """
        return self._partial_derivative if self._pass == _forward_pass else 0.0

    @partial_derivative.setter
    def partial_derivative(self, value):
        self._partial_derivative = value
        self._pass = _forward_pass

    # ----- reverse mode -----------------------------------------------------------------------
    def backward(self):
        """Reverse mode: set `.grad` = d self / d node on every node self depends on (itself: 1)."""
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
    def __neg__(self): return neg(self)

    def log(self): return log(self)
    def exp(self): return exp(self)
    def sin(self): return sin(self)
    def cos(self): return cos(self)
    def tanh(self): return tanh(self)

    def __repr__(self):
        op = f", operator={self.operator!r}" if self.operator else ""
        return f"Node({self.value!r}{op})"


def _as_node(x):
    return x if isinstance(x, Node) else Node(x)


def _parents(node):
    return node.parent_nodes


def _children(node):
    return node.child_nodes


# ----- wrapping functions: a value, one new Node, and d new node / d parent for each parent -----
def add(node1, node2):
    node1, node2 = _as_node(node1), _as_node(node2)
    return Node(node1.value + node2.value, [node1, node2], "add", [1.0, 1.0])


def sub(node1, node2):
    node1, node2 = _as_node(node1), _as_node(node2)
    return Node(node1.value - node2.value, [node1, node2], "sub", [1.0, -1.0])


def mul(node1, node2):
    node1, node2 = _as_node(node1), _as_node(node2)
    return Node(node1.value * node2.value, [node1, node2], "mul", [node2.value, node1.value])


def div(node1, node2):
    node1, node2 = _as_node(node1), _as_node(node2)
    value = node1.value / node2.value
    return Node(value, [node1, node2], "div", [1.0 / node2.value, -value / node2.value])


def neg(node):
    node = _as_node(node)
    return Node(-node.value, [node], "neg", [-1.0])


def power(node, exponent):
    """node ** exponent for a constant (number) exponent."""
    if isinstance(exponent, Node):
        raise TypeError("scalar.power: the exponent must be a number; "
                        "write exp(b * log(a)) for a ** b with b a Node")
    node = _as_node(node)
    return Node(node.value ** exponent, [node], "pow", [exponent * node.value ** (exponent - 1)])


def log(node):
    node = _as_node(node)
    return Node(math.log(node.value), [node], "log", [1.0 / node.value])


def exp(node):
    node = _as_node(node)
    value = math.exp(node.value)
    return Node(value, [node], "exp", [value])


def sin(node):
    node = _as_node(node)
    return Node(math.sin(node.value), [node], "sin", [math.cos(node.value)])


def cos(node):
    node = _as_node(node)
    return Node(math.cos(node.value), [node], "cos", [-math.sin(node.value)])


def tanh(node):
    node = _as_node(node)
    value = math.tanh(node.value)
    return Node(value, [node], "tanh", [1.0 - value * value])


# ----- forward mode -------------------------------------------------------------------------------
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
    """The nodes reachable from `root_node` through child nodes, each before its children."""
    ordering = _depth_first_postorder(root_node, _children)
    ordering.reverse()
    return ordering


def forward(root_node):
    """Forward mode: set every node's `partial_derivative` to d node / d root_node.

    Walks the nodes reachable from `root_node` in topological order, applying the chain rule
    d v = sum over parents u of (d v / d u) * (d u / d root). Nodes not reachable read 0, so
    calling it again from another input on the same graph is correct. Returns the ordering.
    """
    global _forward_pass
    _forward_pass += 1
    ordering = topological_order(root_node)
    root_node.partial_derivative = 1.0
    for node in ordering[1:]:
        partial_derivative = 0.0
        for parent, dnode_dparent in zip(node.parent_nodes, node.grad_wrt_parents):
            partial_derivative += dnode_dparent * parent.partial_derivative
        node.partial_derivative = partial_derivative
    return ordering

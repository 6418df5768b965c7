"""A small right-hand side as straight-line Python on floats, for the ODE solvers' callbacks.

LSODA calls the right-hand side ~1,100 times per value and gradient of a small fit, so the cost
of one call is the cost of the fit: a replayed NumPy program on arrays of 2 costs ~10 us (values)
to ~30 us (the sensitivity system), hand-written Python on floats ~1 us. This module writes the
latter from the recorded program, for any right-hand side, with nothing written twice:

* `func` is recorded once on the tape (fresh leaves for y, t and the args' leaves);
* each entry is run again with every element a `_Sym`, a named float: the primitive's own
  forward (`prim.fun`, its NumPy code on object arrays) and its own JVP rules (`prim.jvp`) call
  the `_Sym` operators, each of which writes one line (`v7 = v3 * v5`) or folds a constant
  (`0.0 * x` is `0.0`, `1.0 * x` is `x`, as JAX's symbolic zeros);
* the lines the outputs need become one Python function (`values_source`,
  `sensitivity_source`), compiled once per source text (`compile_source`).

Whatever has no form on floats refuses (`Unscalarizable`), and the caller runs the array program:
a primitive outside `_PRIMITIVES`, a comparison or a mask (`x > 0`, `np.where`), a complex
value, a state larger than the caller's limit. So nothing is computed off the recorded values:
a rule that reads a value into Python cannot bake it in. A call that raises on floats where NumPy
gives inf or nan (`math.log(-1.0)`, `1.0 / 0.0`) is run by the array program instead (the caller's
`except ArithmeticError, ValueError`).

Numbers: +, -, *, /, negation, sqrt, abs (its value; its JVP is a mask), squaring, indexing and
stacking are IEEE operations in both, so a program of only those (`exact`) equals the array
program bit for bit where the values are finite (folding `0.0 * x` to 0.0 differs only where x
is inf or nan). exp, log, the trigonometric functions, powers (`math` against NumPy's own loops)
and sums (in order, against NumPy's pairwise or BLAS order) may differ in the last bits; the
caller checks each program against the array program on its first call (see integrate.py).
"""

import functools
import math

import numpy as np

from ..tensor import Tensor


class Unscalarizable(Exception):
    """The program has a step with no form on Python floats; use the array program."""


# Primitives whose forward and JVP rules run on object arrays of _Sym: shape operations (the
# NumPy function moves the _Syms), arithmetic, and the functions of `math` below. `exact`: an
# IEEE operation, bit for bit the array program's.
_PRIMITIVES = {
    **dict.fromkeys(("getitem", "stack", "concatenate", "reshape", "transpose", "broadcast_to",
                     "index_adjoint", "flip", "clone", "add", "sub", "mul", "div", "neg", "square",
                     "reciprocal", "sqrt", "abs"), True),
    **dict.fromkeys(("exp", "log", "sin", "cos", "tan", "tanh", "sinh", "cosh", "arcsin", "arccos",
                     "arctan", "arcsinh", "arccosh", "arctanh", "log1p", "expm1", "log2", "log10",
                     "exp2", "power", "sum", "mean", "matmul", "dot"), False),
}

# NumPy's object loops call the method of the ufunc's name (np.exp(a) calls a.exp()).
_MATH = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh",
         "sinh": "sinh", "cosh": "cosh", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
         "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "log1p": "log1p",
         "expm1": "expm1", "log2": "log2", "log10": "log10", "exp2": "exp2"}


class _Lines:
    """The program being written: one line per operation, common subexpressions shared."""

    def __init__(self):
        self.lines = []           # (name, expression, names it reads)
        self.known = {}           # expression -> its _Sym
        self.exact = True

    def emit(self, expression, reads, exact=True):
        sym = self.known.get(expression)
        if sym is None:
            sym = self.known[expression] = _Sym(f"v{len(self.lines)}", self)
            self.lines.append((sym.name, expression, reads))
        self.exact = self.exact and exact
        return sym

    def function(self, inputs, outputs, bound=()):
        """Source of `make(_fallback, *bound)`, which returns `program(state, t)`: it unpacks
        `state.tolist()` into `inputs` (names; t is "t"), returns the list of `outputs`, and hands
        a call that raises on floats (where NumPy gives inf or nan) to `_fallback(state, t)`."""
        needed = {o.name for o in outputs if isinstance(o, _Sym)}
        body = []
        for target, expression, reads in reversed(self.lines):
            if target in needed:
                body.append(f"{target} = {expression}")
                needed.update(reads)
        body.reverse()
        state = [n if n in needed else "_" for n in inputs]
        return "\n".join(
            [f"def make({', '.join(['_fallback', *bound])}):",
             "    def program(state, t):",
             "        try:",
             f"            {', '.join(state)}, = state.tolist()",
             *[f"            {line}" for line in body],
             f"            return [{', '.join(_text(o) for o in outputs)}]",
             "        except (ArithmeticError, ValueError):",
             "            return _fallback(state, t)",
             "    return program"])


def _text(x):
    if isinstance(x, _Sym):
        return x.name
    if not math.isfinite(x):
        raise Unscalarizable(f"the constant {x} (no literal)")
    return repr(x) if x >= 0 else f"({x!r})"


def _constant(x):
    """A Python float for a number (bool and complex refused), else the _Sym itself."""
    if isinstance(x, _Sym):
        return x
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise Unscalarizable(f"a value of type {type(x).__name__} (a mask or a complex number)")
    return float(x)


def _is(x, value):
    return not isinstance(x, _Sym) and x == value


def _binary(op, a, b):
    a, b = _constant(a), _constant(b)
    sym = a if isinstance(a, _Sym) else b
    if not isinstance(sym, _Sym):                      # two constants, folded as NumPy computes
        if op == "**" or op == "/" and b == 0.0:
            raise Unscalarizable(f"a constant {op} (NumPy's inf, nan or power)")
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0.0}[op]
    if op == "+" and (_is(a, 0.0) or _is(b, 0.0)):
        return b if _is(a, 0.0) else a
    if op == "-" and _is(b, 0.0):
        return a
    if op == "-" and _is(a, 0.0):
        return -b
    if op == "*":
        if _is(a, 0.0) or _is(b, 0.0):
            return 0.0                 # a symbolic zero (a constant direction's tangent), as JAX's
        if _is(a, 1.0) or _is(b, 1.0):
            return b if _is(a, 1.0) else a
        if _is(a, -1.0) or _is(b, -1.0):
            return -(b if _is(a, -1.0) else a)
    if op == "/" and _is(b, 1.0):
        return a
    if op == "/" and _is(a, 0.0):
        return 0.0
    if op == "**" and _is(b, 1.0):
        return a
    if op == "**" and _is(b, 2.0):
        return sym.lines.emit(f"{_text(a)} * {_text(a)}", _reads(a), exact=False)
    if op == "**":       # math.pow raises where NumPy gives nan (Python's ** would give a complex)
        return sym.lines.emit(f"_pow({_text(a)}, {_text(b)})", _reads(a, b), exact=False)
    return sym.lines.emit(f"{_text(a)} {op} {_text(b)}", _reads(a, b))


def _reads(*xs):
    return [x.name for x in xs if isinstance(x, _Sym)]


class _Sym:
    """One float of the program, by name; its operators write lines (with an array, NumPy's
    operator runs them element by element)."""
    __slots__ = ("name", "lines")

    def __init__(self, name, lines):
        self.name, self.lines = name, lines

    def __add__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("+", self, other)

    def __radd__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("+", other, self)

    def __sub__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("-", self, other)

    def __rsub__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("-", other, self)

    def __mul__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("*", self, other)

    def __rmul__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("*", other, self)

    def __truediv__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("/", self, other)

    def __rtruediv__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("/", other, self)

    def __pow__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("**", self, other)

    def __rpow__(self, other):
        return NotImplemented if isinstance(other, np.ndarray) else _binary("**", other, self)

    def __neg__(self):
        return self.lines.emit(f"-{self.name}", [self.name])

    def __pos__(self):
        return self

    def __abs__(self):
        return self.lines.emit(f"abs({self.name})", [self.name])

    def absolute(self):
        return abs(self)

    def sqrt(self):
        return self.lines.emit(f"_sqrt({self.name})", [self.name])

    def square(self):
        return self.lines.emit(f"{self.name} * {self.name}", [self.name])

    def reciprocal(self):
        return _binary("/", 1.0, self)

    def conjugate(self):
        return self

    def __bool__(self):
        raise Unscalarizable("a value read into Python (a branch)")

    def __float__(self):
        raise Unscalarizable("a value read into Python")

    def _compare(self, other):
        raise Unscalarizable("a comparison (a mask or a branch)")

    __lt__ = __le__ = __gt__ = __ge__ = _compare
    __eq__ = __ne__ = _compare
    __hash__ = None


def _math_method(name, function):
    def method(self):
        return self.lines.emit(f"_math.{function}({self.name})", [self.name], exact=False)
    method.__name__ = name
    return method


for _name, _function in _MATH.items():
    setattr(_Sym, _name, _math_method(_name, _function))


def _symbols(array):
    """An object array of the same shape (floats and _Syms), from whatever a rule returned."""
    out = np.empty(np.shape(array), dtype=object)
    out[...] = array
    return out


def record_graph(out, leaves, start=None):
    """The recorded entries from `leaves` to `out`, in the order recorded; refuses a Tensor
    recorded before id `start` (func's call; default: the first leaf) that is not a leaf (one
    closed over), or a primitive outside the table."""
    start = min(x._id for x in leaves) if start is None else start
    stack, seen, nodes = [out], set(), []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if any(node is x for x in leaves):
            continue
        if node._id < start or node._prim is None:
            raise Unscalarizable("a Tensor made outside the right-hand side (closed over)")
        if node._prim.name not in _PRIMITIVES:
            raise Unscalarizable(f"primitive {node._prim.name!r} (no form on floats)")
        nodes.append(node)
        stack.extend(a for a in node._inputs if isinstance(a, Tensor) and a.requires_grad)
    nodes.sort(key=lambda n: n._id)
    return nodes


class Scalarized:
    """func's recorded program on floats: `values(state, t)` and, along P directions,
    `sensitivities(state, t)` (state = [y, S], S holding P rows of D), each built by `make`."""

    def __init__(self, nodes, out, leaves, lines, leaf_syms):
        self.nodes, self.out, self.leaves, self.lines, self.leaf_syms = nodes, out, leaves, lines, leaf_syms
        self.primal = {x: s for x, s in zip(leaves, leaf_syms)}
        exact = all(_PRIMITIVES[n._prim.name] for n in nodes)
        for node in nodes:
            self.primal[node] = _symbols(node._prim.fun(*self._inputs(node, self.primal), **node._params))
        self.exact = exact and lines.exact
        self.values = self._value_outputs()

    def _inputs(self, node, known):
        return [known[a] if isinstance(a, Tensor) and a in known else _symbols(v)
                for a, v in zip(node._inputs, node._values)]

    def _value_outputs(self):
        out = self.primal.get(self.out)
        if out is None:
            raise Unscalarizable("the result does not depend on the state (a constant)")
        return list(out.reshape(-1))

    def tangent(self, directions):
        """d out along `directions` {leaf: object array or None}: the engine's JVP rules on _Syms."""
        tangent = dict(directions)
        for node in self.nodes:
            ts = [tangent.get(a) if isinstance(a, Tensor) else None for a in node._inputs]
            if all(t is None for t in ts):
                continue
            d = node._prim.jvp(ts, self.primal[node], self._inputs(node, self.primal), node._params)
            if d is not None:
                tangent[node] = _symbols(np.broadcast_to(_symbols(d), node.data.shape))
        t = tangent.get(self.out)
        return [0.0] * self.out.size if t is None else list(t.reshape(-1))

def build(out, leaves, names, start=None):
    """Scalarized for func's output `out` recorded on `leaves` (fresh ones for y, t and the
    args' leaves, then the closed-over Tensors it reaches), their elements named `names` (one
    list per leaf, row-major); `start`: as record_graph's."""
    lines = _Lines()
    leaf_syms = [np.array([_Sym(n, lines) for n in leaf_names] or [], dtype=object).reshape(leaf.shape)
                 for leaf, leaf_names in zip(leaves, names)]
    return Scalarized(record_graph(out, leaves, start), out, leaves, lines, leaf_syms)


@functools.lru_cache(maxsize=256)
def compile_source(source):
    """`make` from the source: `make(*bound)` gives the function. Kept by source text: a closure
    made afresh on every call (a loss that defines its right-hand side) writes the same text."""
    namespace = {"_math": math, "_sqrt": math.sqrt, "_pow": math.pow}
    exec(compile(source, "<tinytensor scalar program>", "exec"), namespace)     # noqa: S102
    return namespace["make"]


def values_source(program):
    """Source of `make(_fallback, *args' entries)` -> program(y, t): dy/dt as a list."""
    return program.lines.function(program.names[0], program.values, [n for a in program.names[2:] for n in a])


def sensitivity_source(build_program, D, arg_tangents):
    """Source of `make(_fallback, *args' entries, *moving tangents)` -> program(state, t) for the
    sensitivity system: state = [y, S] with S holding P rows of D, row p the tangent of y along
    direction p, in which arg leaf k moves by arg_tangents[k][p]; returns [f, dS]. Tangent
    entries that are 0 or 1 are folded in (the reverse mode's unit directions); others are
    inputs. Written two ways, the shorter kept: the JVP along each direction (the engine's rules
    on _Syms), or the Jacobian's columns first (one JVP per unit direction of y and of each arg
    entry that moves) and then dS[p] = J S[p] + J_args d[p]."""
    P = arg_tangents[0].shape[0] if arg_tangents else None
    best = None
    for jacobian_first in (False, True):
        program = build_program()
        lines, leaves = program.lines, program.leaves
        P = P if P is not None else 0
        S = [[_Sym(f"s{p}_{j}", lines) for j in range(D)] for p in range(P)]
        bound = [n for a in program.names[2:] for n in a]
        moves = []                   # per arg leaf: its tangent along each direction, as _Syms/floats
        for k, d in enumerate(arg_tangents):
            d = np.asarray(d, dtype=np.float64)
            if np.all((d == 0.0) | (d == 1.0)):
                moves.append(_symbols(d))
            else:
                names = [f"d{k}_{i}" for i in range(d.size)]
                bound += names
                moves.append(np.array([_Sym(n, lines) for n in names], dtype=object).reshape(d.shape))
        outputs = list(program.values)
        if not jacobian_first:
            for p in range(P):
                directions = {leaves[0]: np.array(S[p], dtype=object)}
                directions.update({leaf: m[p] for leaf, m in zip(leaves[2:], moves)})
                outputs += program.tangent(directions)
        else:
            columns = []               # J[:, j] for y's entries, then J_args[:, i] for moving entries
            for j in range(D):
                columns.append(program.tangent({leaves[0]: _symbols(np.eye(D)[j])}))
            entries = []               # (leaf, flat index) of arg entries some direction moves
            for leaf, m in zip(leaves[2:], moves):
                flat = m.reshape(P, -1)
                for i in range(flat.shape[1]):
                    if any(not _is(x, 0.0) for x in flat[:, i]):
                        unit = np.zeros(leaf.shape).reshape(-1)
                        unit[i] = 1.0
                        columns.append(program.tangent({leaf: _symbols(unit.reshape(leaf.shape))}))
                        entries.append(flat[:, i])
            for p in range(P):
                for r in range(D):
                    total = 0.0
                    for j in range(D):
                        total = total + columns[j][r] * S[p][j]
                    for c, moved in zip(columns[D:], entries):
                        total = total + c[r] * moved[p]
                    outputs.append(total)
        source = lines.function(program.names[0] + [s.name for row in S for s in row], outputs, bound)
        if best is None or source.count("\n") < best.count("\n"):
            best = source
    return best, [m for m in arg_tangents if not np.all((np.asarray(m) == 0) | (np.asarray(m) == 1))]

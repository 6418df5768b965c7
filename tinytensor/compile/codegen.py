"""Code generation: the recorded Wengert list as one straight-line Python function over NumPy
(`_generate`), live entries only, each a line `name = expression  # comment`, compiled once.
`_Program` runs it and words its errors as the eager engine does."""

import ast
import builtins
import collections
import contextlib
import dis
import functools
import inspect
import itertools
import keyword
import math
import operator
import struct
import types
import warnings

import numpy as np

from .. import tape, transforms
from ..ops import core, softmax_xent
from ..tape import unbroadcast
from ..tensor import Tensor, _make
from .fusions import (
    _CE_VJP_LOGITS,
    _cross_entropy_rows,
    _label_range_error,
    _lean_labels,
    _softmax_cross_entropy_pairs,
    fuse_normalizations,
    gather_piece_cotangents,
    keep_gelu_cdf,
    softmax_into,
    softmax_rule_into,
    where_into,
    where_rule_into,
)
from .tracer import _SLOT_DATA, _SLOT_GRAD, _WRAPPED, _Accumulate, _Call, _Ref, _refs, declared


# ----- generating the program --------------------------------------------------------------------
class _Program:
    """One generated program: `run(arrays)` gives the results from the array leaves."""

    def __init__(self, function, source, contexts=()):
        self.function = function
        self.source = source
        self.trace_seconds = None
        self.contexts = contexts    # per statement: what the eager engine says when it fails
        self.reads = False          # whether f read traced values into Python (check=True)
        self.guard = None           # () -> what else the program depends on (guards.py) ...
        self.modes = None           # ... and its value when recorded: another one re-records
        self.undo = None            # (generators, buffer Tensors) to put back when a guard fails
        self.first = None           # the program of the call that recorded this one (a cache filled)
        self.changed_state = False  # f changed Python state it reads while recorded
        self.alternatives = []      # programs of the same key with other guard outcomes
        self.side_effects = False   # whether it draws or writes buffers (an error then stays one)
        self.warns = None           # the user's warnings f gave while recorded, shown on every call
        self.returns = None         # {result leaf: input}: Tensor arguments f returns as they are
        self.first_effect = None    # the line of the first statement that draws or writes
        self.code = getattr(function, "__code__", None)   # the generated function's code

    def clean_failure(self, err):
        """Whether `err`, raised by the program, came from a line before any draw or write (the
        call changed nothing: f can run eagerly instead, catching it itself, as eagerly)."""
        code, line = self.code, None
        tb = err.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code is code:
                line = tb.tb_lineno
            tb = tb.tb_next
        return line is not None and self.first_effect is not None and line < self.first_effect

    def run_undoable(self, arrays):
        """Run a program whose value guards may fail after it drew numbers or wrote buffers:
        on a failure, the generators and buffers are put back as the call found them."""
        generators, buffers = self.undo
        states = [g.bit_generator.state for g in generators]
        saved = [(t, t.data, t.data.copy()) for t in buffers]
        try:
            return self.function(*arrays)
        except Retrace:
            for g, state in zip(generators, states):
                g.bit_generator.state = state
            for t, array, copy in saved:
                array[...] = copy
                t.data = array
            raise

    def run(self, arrays):
        try:
            if self.undo is not None:
                return self.run_undoable(arrays)
            return self.function(*arrays)
        except Retrace:
            raise
        except Exception as err:
            raise self.error(err) from err

    def error(self, err):
        """The eager engine's error for an exception raised by the program: the statement that
        raised names its tape entry (a rule) or its primitive and inputs, as eagerly."""
        if getattr(err, "_tinytensor_entry", False) or isinstance(err, FloatingPointError):
            return err
        tb, line = err.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code is self.function.__code__:
                line = tb.tb_lineno
            tb = tb.tb_next
        context = self.contexts[line - 2] if line is not None and 0 <= line - 2 < len(self.contexts) else None
        if context is None:
            return err
        if context[0] == "prim":          # (a message that names its op already keeps one name)
            text = str(err) if str(err).startswith(f"{context[1]}:") else f"{context[1]}: {err}"
            new = tape._same_kind(err, f"{text} (inputs: {context[2]})")
            new._tinytensor_entry = True
            return new
        return tape._entry_error(err, context[1])


class _Body(list):
    """The program's statements (lhs, expression, comment), each with the entry it computes."""
    entry = None

    def append(self, statement):
        super().append((*statement, self.entry))


def _context_text(e):
    """("prim", name, inputs) or ("rule", "in the VJP rule of tape entry ...") for an entry."""
    if e is None or e.context is None or e.kind == "guard":
        return None
    if e.kind in ("prim", "prim0"):
        name, args = e.context
        return ("prim", name, tape._describe(args))
    node, kind, i = e.context
    return ("rule", tape._rule_context(node, kind, i))


# Hot primitives and rules whose code is one NumPy expression for the argument ranks seen at
# trace time: emitted inline instead of a call through their Python wrapper. Keyed by the
# function object, so a primitive redefined elsewhere simply gets no shortcut. Each expression
# is the same NumPy call the wrapper makes (the op-sweep test compares compiled and eager bit
# for bit, so a drift between a rule and its line here fails that test).
def _special_forms():
    table = {}

    def put(fun, form):
        if fun is not None:
            table[id(fun)] = (fun, form)

    def rule(name, i, kind="vjps"):
        return declared(name, kind, i)

    def fun(name):
        return declared(name, "fun")

    for name, op in (("add", "+"), ("sub", "-"), ("mul", "*"), ("div", "/")):
        put(fun(name), lambda x, nd, op=op: f"{x[0]} {op} {x[1]}")
    put(fun("neg"), lambda x, nd: f"-{x[0]}")
    put(fun("relu"), lambda x, nd: f"np.maximum({x[0]}, 0)")
    put(fun("dot"), lambda x, nd: f"np.dot({x[0]}, {x[1]})" if nd[0] in (1, 2) and nd[1] in (1, 2) else None)
    # core._matmul_forward: np.matmul unless a stack of matrices meets one matrix (ndim > 2)
    put(fun("matmul"), lambda x, nd: f"np.matmul({x[0]}, {x[1]})" if len(x) == 2 and nd[0] <= 2 else None)
    # VJP rules: x = (g, ans, *inputs)
    for kind in ("vjps", "jvps"):
        put(rule("add", 0, kind), lambda x, nd: x[0])
        put(rule("add", 1, kind), lambda x, nd: x[0])
        put(rule("sub", 0, kind), lambda x, nd: x[0])
        put(rule("sub", 1, kind), lambda x, nd: f"-{x[0]}")
        put(rule("neg", 0, kind), lambda x, nd: f"-{x[0]}")
        put(rule("exp", 0, kind), lambda x, nd: f"{x[0]} * {x[1]}")
        put(rule("tanh", 0, kind), lambda x, nd: f"{x[0]} * (1 - {x[1]} * {x[1]})")
        put(rule("sigmoid", 0, kind), lambda x, nd: f"{x[0]} * ({x[1]} * (1 - {x[1]}))")
    put(rule("mul", 0), lambda x, nd: f"{x[0]} * {x[3]}")
    put(rule("mul", 1), lambda x, nd: f"{x[0]} * {x[2]}")
    put(rule("mul", 0, "jvps"), lambda x, nd: f"{x[0]} * {x[3]}")
    put(rule("mul", 1, "jvps"), lambda x, nd: f"{x[2]} * {x[0]}")
    put(rule("div", 0), lambda x, nd: f"{x[0]} / {x[3]}")
    for name in ("dot", "matmul", "linear"):     # 2-D operands: g @ b.T and a.T @ g
        put(rule(name, 0), lambda x, nd: f"{x[0]} @ {x[3]}.T" if nd[2] == 2 and nd[3] == 2 else None)
        put(rule(name, 1), lambda x, nd: f"{x[2]}.T @ {x[0]}" if nd[2] == 2 and nd[3] == 2 else None)
    put(rule("linear", 2), lambda x, nd: x[0])
    # g * w / _safe(ans); `ans + (ans == 0)` is _safe: the norm, or 1 where it is 0
    put(rule("frobeniusNorm", 0), lambda x, nd: f"{x[0]} * {x[2]} / ({x[1]} + ({x[1]} == 0))")
    return table


def _type_comment(e, tracer):
    value = tracer.values[e.out]
    return f"{e.label}: {value.dtype}{tuple(np.shape(value))}".replace(",)", ")")


def _atom(text):
    """A name or a non-negative number: safe inside an expression without parentheses."""
    return text.isidentifier() or text.replace(".", "", 1).replace("e", "", 1).isdigit()


def _unbroadcast_form(n, x, g_shape, shape):
    """tape.unbroadcast's branch for these shapes, as one expression (None: call it)."""
    lead = len(g_shape) - len(shape)
    if lead == 1 and tuple(g_shape[1:]) == tuple(shape):    # a bias: sum over the batch axis
        return f"{_sum_of(n)}({x}, axis=0)"
    return None


# ndarray.sum and .max are Python functions (numpy/_core/_methods.py) calling these ufunc
# reductions with the same arguments: the program calls the reductions themselves (the same
# loops, the same numbers, a Python frame less per reduction)
_SUM, _MAX, _MIN = np.add.reduce, np.maximum.reduce, np.minimum.reduce


def _sum_of(n):
    return n.function(_SUM, "sum_of")


def _max_of(n):
    return n.function(_MAX, "max_of")


_SPECIAL = None
_MAKE_ARRAYS = (np.asarray, np.array, np.asanyarray, np.ascontiguousarray)
_ARITHMETIC = {id(declared(name, "fun")) for name in ("add", "sub", "mul", "div")}


def _vjp_rule(name, i):
    return declared(name, "vjps", i)


_FROBENIUS_VJP = _vjp_rule("frobeniusNorm", 0)
_SCALAR_USERS = {id(_FROBENIUS_VJP)}    # arithmetic on their inputs (and the rules' ans): + - * /
for _name in ("add", "sub", "mul", "div"):
    _prim = declared(_name)
    _SCALAR_USERS |= {id(f) for f in [getattr(_prim, "fun", None), *(getattr(_prim, "vjps", None) or ()),
                                      *(getattr(_prim, "jvps", None) or ())] if f is not None}


def _frobenius_scalar(tracer, e, live):
    """frobeniusNorm's forward (core._frobenius_forward: BLAS nrm2 of the raveled array, as a 0-d
    array of its dtype) as the NumPy scalar of the same value, `dtype.type(nrm2(w.ravel()))`, when
    every live use of it is an inline arithmetic form (add, sub, mul, div, its own VJP), where a
    scalar and a 0-d array give the same numbers and the scalar's arithmetic skips the ufunc
    machinery. Returns the expression's parts (nrm2, the scalar type) or None."""
    fun = declared("frobeniusNorm", "fun")
    nrm2s = core._NRM2
    if (e.fun is not fun or fun is None or e.kind not in ("prim", "prim0") or len(e.args) != 1
            or e.kwargs or not nrm2s):
        return None
    w = e.args[0]
    value = tracer.values[w.var] if type(w) is _Ref else None
    if type(value) is not np.ndarray or not value.size or value.dtype not in nrm2s:
        return None
    for user in live:
        if e.out in _refs(user.args, []) + _refs(user.kwargs, []):
            if id(user.fun) not in _SCALAR_USERS or user.kind == "numpy" or user.kwargs:
                return None
    return nrm2s[value.dtype], value.dtype.type
_IDENTITY_VJPS = {id(f) for f in (_vjp_rule("add", 0), _vjp_rule("add", 1), _vjp_rule("sub", 0)) if f}


def _seed_value(tracer, producer, g):
    """The value of cotangent `g` when it is the seed (a constant of the program), passed on
    unchanged by add/sub VJPs; else None."""
    while type(g) is _Ref:
        e = producer.get(g.var)
        if e is None:
            return None
        if e.kind == "seed":
            value = e.args[0] if e.args else None     # the program's constant
            return value if type(value) is np.ndarray and value.ndim == 0 else None
        if e.kind != "rule" or id(e.fun) not in _IDENTITY_VJPS:
            return None
        g = e.args[0]
    return None


_RELU_RULES = {id(f) for f in (_vjp_rule("relu", 0),
                                declared("relu", "jvps", 0)) if f}


def _relu_rule_form(tracer, e, args, n):
    """relu's rule, table._select(x > 0, g), written out for an array g of one dimension or more:
    g * (x > 0) where g's sum is finite, else np.where (no inf * 0)."""
    if e.kind != "rule" or id(e.fun) not in _RELU_RULES or len(e.args) != 3 or e.kwargs:
        return None
    g = e.args[0]
    value = tracer.values[g.var] if type(g) is _Ref else None
    if type(value) is not np.ndarray or value.ndim == 0 or type(tracer.values[e.out]) is not np.ndarray:
        return None
    g, x = [a if _atom(a) else f"({a})" for a in (args[0], args[2])]
    isfinite = n.function(math.isfinite, "isfinite")
    return f"{g} * ({x} > 0) if {isfinite}(np.add.reduce({g}, axis=None)) else np.where({x} > 0, {g}, 0)"


_SPREAD_VJPS = {id(f) for f in (_vjp_rule("sum", 0), _vjp_rule("mean", 0)) if f}


def _folded_spread(tracer, producer, e):
    """sum's or mean's VJP (core._spread: the cotangent, / n for the mean, copied back along the
    reduced axes) of the seed: a function of the seed (a constant) and shapes alone, computed
    here once by the rule itself. Returns that array, or None."""
    if e.kind != "rule" or id(e.fun) not in _SPREAD_VJPS or not e.args:
        return None
    if type(tracer.values[e.out]) is not np.ndarray or _seed_value(tracer, producer, e.args[0]) is None:
        return None
    if any(type(v) is _Ref for v in e.kwargs.values()):
        return None
    args = [tracer.values[a.var] if type(a) is _Ref else a for a in e.args]
    value = e.fun(*args, **e.kwargs)     # not the recorded value: f may have written into that one
    return value if type(value) is np.ndarray else None


def _mean_form(tracer, e, args, n):
    """core._mean_forward on an array of at least one dimension, as one expression: its sum,
    divided by the count of the values reduced into each result (fixed by the shapes)."""
    fun = declared("mean", "fun")
    if e.fun is not fun or fun is None or e.kind not in ("prim", "prim0") or len(e.args) != 1:
        return None
    x, ans = e.args[0], tracer.values[e.out]
    value = tracer.values[x.var] if type(x) is _Ref else None
    if type(value) is not np.ndarray or value.ndim == 0 or set(e.kwargs) - {"axis", "keepdims"}:
        return None
    axis, keepdims = e.kwargs.get("axis"), e.kwargs.get("keepdims", False)
    count = value.size // max(np.size(ans), 1)
    return f"{_sum_of(n)}({args[0]}, axis={n.emit(axis)}, keepdims={n.emit(keepdims)}) / {count}"


def _unit_seed(tracer, producer, g, w):
    """Whether cotangent `g` is the seed 1 (passed on unchanged by add/sub VJPs) and a 0-d
    array whose product with w has w's dtype, so that g * w is w bit for bit."""
    while type(g) is _Ref:
        e = producer.get(g.var)
        if e is None:
            return False
        if e.kind == "seed":
            value, w_value = tracer.values[g.var], tracer.values[w.var] if type(w) is _Ref else w
            return (type(value) is np.ndarray and value.ndim == 0 and value == 1
                    and np.result_type(value, w_value) == np.asarray(w_value).dtype)
        if e.kind != "rule" or id(e.fun) not in _IDENTITY_VJPS:
            return False
        g = e.args[0]
    return False


def _generate(tracer, out, fname, plain=(), fuse=False, raw=()):
    """The recorded program of `tracer` (its Wengert list, with the rule applications of any
    gradient taken inside) as one straight-line NumPy function returning `out`'s structure.

    Four steps: `_live_entries` keeps the entries the results (or a side effect) need;
    `_names` gives every argument and live entry a unique Python name; `_emit_body` writes one
    `name = expression  # comment` row per entry (hot primitives and rules inline, the fused
    softmax/crossEntropy in steps); `_assemble` frees temporaries after their last use
    (`_release_and_reuse`), writes the function and compiles it into a `_Program`.
    Results come back as f gave them eagerly: a Tensor as a Tensor (a parameter f returns: that
    Tensor itself), an array as an array, a NumPy scalar as a NumPy scalar; except the positions
    in `plain`, returned as arrays for the caller to make Tensors on the tape (taped.py), and
    those in `raw`, returned as they are (a number argument a backward program reads, as the
    eager rule reads the number itself).
    """
    leaves, out_structure = transforms.tree_flatten(out)
    out_refs = [tracer.template(x) for x in leaves]
    tensors = _eagerly_tensors(tracer)
    kinds = [_result_kind(tracer, x, k in plain, tensors) if k not in raw else "raw"
             for k, x in enumerate(leaves)]
    first = {}
    for k, x in enumerate(leaves):     # a Tensor returned twice ((h, h)): one object, as eagerly
        if isinstance(x, Tensor) and type(kinds[k]) is str and kinds[k] in ("tensor", "leaf") \
                or type(x) is np.ndarray and type(out_refs[k]) is np.ndarray and kinds[k] is None:
            j = first.setdefault(id(x), k)        # (an array made from constants: its copy, once)
            if j != k:
                kinds[k] = ("again", j)
    for k in _fresh_results(tracer, leaves, out_refs, kinds):
        kinds[k] = "copy" if kinds[k] is None else kinds[k] + "+copy"
    live, producer = _live_entries(tracer, out_refs)
    outputs = {r.var for r in out_refs if type(r) is _Ref}
    if fuse and not getattr(tracer, "stepped", False):   # (tt.compile(fuse=True); never in a whole
        live = fuse_normalizations(tracer, live, producer, outputs)   # training step): these two
        live = keep_gelu_cdf(tracer, live)                            # are eager's to a few ulp
    live = gather_piece_cotangents(tracer, live, outputs)
    names = _names(tracer, live)
    body = _emit_body(tracer, live, producer, names)
    finish = _loss_as_tensor(tracer, out, fname, names) if getattr(tracer, "stepped", False) else None
    program = _assemble(tracer, live, body, names, out_refs, out_structure, fname, finish, kinds)
    program.made_tensor = finish is not None
    return program


def _eagerly_tensors(tracer):
    """The variables that f, called eagerly, holds as Tensors. Inside the recording every traced
    value is a Tensor, but eagerly tinytensor's operations on NumPy arrays give NumPy arrays (and
    NumPy scalars for 0-d results), as NumPy's: a primitive's result is a Tensor where one of its
    operands is (an argument passed as a Tensor, a parameter, a Tensor made inside f); a rule's
    (a gradient a transform hands out) and NumPy's results are arrays."""
    tensors = tracer.tensor_arguments | tracer.live_vars | tracer.tensor_vars
    made = tracer.tensor_constants
    for e in tracer.entries:
        if e.out in tensors or e.kind not in ("prim", "prim0", "store") and e.out not in tracer.numpy_tensors:
            continue
        arrays = tracer.array_operands.get(e.out, ())
        for i, a in enumerate(itertools.chain(e.args, e.kwargs.values())):
            if i in arrays:
                continue
            if (a.var in tensors) if type(a) is _Ref else id(a) in made or _holds(a, tensors, made):
                tensors.add(e.out)
                break
    return tensors


def _holds(a, tensors, made):
    """Whether operand list/tuple `a` (tt.stack's, tt.concatenate's) holds a Tensor's value."""
    return type(a) in (list, tuple) and builtins.any(
        (v.var in tensors) if type(v) is _Ref else id(v) in made for v in a)


def _fresh_results(tracer, leaves, out_refs, kinds):
    """The results that are arrays of their own eagerly but one value of the program: a value
    returned a second time as another object (the gradients of a and b in a + b), or an argument
    handed back as a new array (a pullback returning its cotangent, `u + 0`'s). Returned as a copy
    (eager's own arrays: the caller's write into one is not seen in the other or in its input)."""
    seen, fresh = {}, []
    arguments = set(tracer.arguments)
    made = None       # the arrays f made from constants, which the program holds as its own

    def memory(x):
        return _SLOT_DATA.__get__(x) if isinstance(x, Tensor) else x

    def of_a_constant(value):
        """A line gave back (part of) an array f made from constants, np.histogram's edges
        from np.linspace bins: eagerly a new array each call, in the program that one array."""
        nonlocal made
        if made is None:
            held = getattr(tracer, "held_arrays", ())
            made = [a for e in tracer.entries for a in transforms.tree_flatten((e.args, e.kwargs))[0]
                    if type(a) is np.ndarray and a.size and not _held(a, held)]
        return builtins.any(np.may_share_memory(value, a) for a in made)

    for k, (x, ref) in enumerate(zip(leaves, out_refs)):
        if type(ref) is not _Ref or not (kinds[k] is None or type(kinds[k]) is str and kinds[k] == "tensor") \
                or not isinstance(memory(x), np.ndarray):
            continue
        j = seen.setdefault(ref.var, k)
        other = memory(leaves[j]) if j != k else (tracer.values[ref.var] if ref.var in arguments else None)
        if other is not None and memory(x) is not other and not np.may_share_memory(memory(x), other):
            fresh.append(k)     # (sharing memory while recording: the same array eagerly too)
        elif other is None and j == k and isinstance(tracer.values[ref.var], np.ndarray) \
                and of_a_constant(tracer.values[ref.var]):
            fresh.append(k)
    return fresh


def _result_kind(tracer, x, plain, tensors):
    """How the program returns result x (f's own result, while recording): "tensor" (a new
    Tensor on the value), x itself (a Tensor made before the call: that Tensor), "scalar" (a
    NumPy scalar, as NumPy's operations give for 0-d results), or None (as computed)."""
    if isinstance(x, Tensor):
        if plain:
            return None
        if x._id < tracer.start:
            return x                                      # made before the call: itself
        var = tracer.var_of(x)
        if x.requires_grad and x._prim is None and x._id >= tracer.start:
            return "leaf"                                 # tt.tensor(..., requires_grad=True)
        if id(x) in tracer.inner_tensors:     # kept from inside a transform: on its graph eagerly
            return "inner" if x.requires_grad else "tensor"
        if var is None or var in tensors:
            return "tensor"
        return "scalar" if var in tracer.generic_prims else None   # eagerly NumPy's array or scalar
    if isinstance(x, np.ndarray) and tracer.var_of(x) in tracer.generic_vars:
        return "scalar"
    if isinstance(x, np.ndarray) and x.ndim == 0 and tracer.var_of(x) is not None:
        # NumPy on NumPy scalars (a number argument's tt.exp, and sums of such) gives a scalar
        var = tracer.var_of(x)
        entry = next((e for e in reversed(tracer.entries) if e.out == var), None)
        refs = [] if entry is None or entry.kind != "numpy" or entry.fun in _MAKE_ARRAYS else (
            _refs(entry.args, []) + _refs(entry.kwargs, []))     # (np.asarray of one: an array)
        if refs and builtins.all(r in tracer.generic_vars or r in tracer.generic_prims for r in refs):
            tracer.generic_vars.add(var)
            return "scalar"
    if isinstance(x, np.generic) and tracer.var_of(x) is not None:
        return "scalar"                                   # a number argument's arithmetic
    return None


def _zero_d_array(tracer, var, value):
    """Whether result `var`, a 0-d array when recorded, is one eagerly though the program may
    compute it as a NumPy scalar (its arithmetic on 0-d values gives scalars, where eagerly a
    Tensor holds a 0-d array): a tinytensor operation's result, or NumPy's function (not a
    ufunc, which gives scalars for 0-d arrays too) of values that are arrays eagerly
    (tt.hessian of a function of one number ends in a reshape of one)."""
    if value.ndim:
        return False
    entry = next((e for e in reversed(tracer.entries) if e.out == var), None)
    if entry is None or entry.kind != "numpy":
        return True
    if isinstance(entry.fun, np.ufunc):
        return False
    refs = _refs(entry.args, []) + _refs(entry.kwargs, [])
    return not builtins.any(r in tracer.generic_vars or r in tracer.generic_prims for r in refs)


def _held(a, held):
    """Whether array a is one f holds from before the call, or a view of one."""
    base = a if a.base is None else a.base
    return builtins.any(a is h or base is h or base is h.base for h in held)


def _numpy_scalar(a):
    """A 0-d result as NumPy gives it eagerly (np.float64, np.bool_)."""
    return a[()]


def _loss_as_tensor(tracer, out, fname, n):
    """A whole training step that returns the loss itself, computed from parameters: the loss
    made a Tensor that requires grad, on the tape entry taped.spent gives it, by the program's
    return line (a call less than wrapping the program's result; its entry says whether f called
    its backward(): taped.spent_entry). A function of the return expression, or None."""
    from . import taped  # taped imports this module
    found = taped.spent_entry(tracer, out, fname)
    if found is None:
        return None
    entry, inputs = found
    make, held = n.function(_make, "make_tensor"), n.function(entry, "loss_entry")
    names = n.function(inputs, "parameters")
    values = ", ".join(f"{_tensor_name(n, tracer, t)}.data" for t in inputs)
    return lambda ret: f"{make}({ret}, {held}, {names}, [{values}], {{}}, True)"


def _tensor_name(n, tracer, t):
    """The program's name for Tensor t, one of its live inputs (W_leaf for the input named W)."""
    lives = {id(x): var for var, x in tracer.lives}
    return n.function(t, f"{n.names[lives[id(t)]]}_leaf" if id(t) in lives else "leaf")


def _live_entries(tracer, out_refs):
    """The entries the results need (dead entries dropped; random draws and stores are side
    effects, always kept), in recording order, and {variable: the entry that computes it}."""
    producer = {e.out: e for e in tracer.entries}
    needed = set()
    stack = [r.var for r in out_refs if type(r) is _Ref]
    stack += [e.out for e in tracer.entries if e.kind in ("draw", "store", "guard", "effect")]   # effects
    while stack:
        var = stack.pop()
        if var in needed:
            continue
        needed.add(var)
        e = producer.get(var)
        if e is not None:
            stack += _refs(e.args, []) + _refs(e.kwargs, [])
    return [e for e in tracer.entries if e.out in needed], producer


class _Namer:
    """The generated program's names and namespace: `names[var]` is a variable's name; functions
    and constants the program calls or reads get a name in `namespace` on first use; every name
    is unique (no builtin or keyword is shadowed). `emit(x)` is x as program text."""

    def __init__(self, tracer):
        self.tracer = tracer
        self.namespace = {"np": np}
        self.used = set(dir(builtins)) | set(keyword.kwlist) | {"np"}
        self.names = {}
        self.functions = {}
        self.constants = {}
        self.scalars = set()    # variables computed as a NumPy scalar where the tape holds a 0-d array

    def fresh(self, base):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in str(base)) or "v"
        if base[0].isdigit():
            base = "_" + base
        name, k = base, 1
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    def function(self, fun, name):
        key = id(fun)
        if key not in self.functions:
            self.functions[key] = self.fresh(name)
            self.namespace[self.functions[key]] = fun
        return self.functions[key]

    def constant(self, value):
        key = id(value)
        if key not in self.constants:
            self.constants[key] = self.fresh(f"c{len(self.constants) + 1}")
            self.namespace[self.constants[key]] = value
            self.tracer.alive.append(value)
        return self.constants[key]

    def emit(self, x):
        t = type(x)
        if t is _Ref:
            return self.names[x.var]
        if t in _WRAPPED:         # a number argument inside a constant (a slice): a key
            self.tracer.number_read(x, "a constant of the program (a slice, a parameter)")
            return self.emit(x.value)
        if x is None or t is bool or t is int or t is str:
            return repr(x)
        if t is float and np.isfinite(x):
            return repr(x)
        if t is tuple:
            inner = ", ".join(self.emit(v) for v in x)
            return f"({inner},)" if len(x) == 1 else f"({inner})"
        if t is list:
            return "[" + ", ".join(self.emit(v) for v in x) + "]"
        if t is dict and all(type(k) is str for k in x):
            return "{" + ", ".join(f"{k!r}: {self.emit(v)}" for k, v in x.items()) + "}"
        if t is slice:
            return f"slice({self.emit(x.start)}, {self.emit(x.stop)}, {self.emit(x.step)})"
        if x is Ellipsis:
            return "..."
        return self.constant(x)

    def label(self, text):
        """An entry's label as program text: "@12" stands for the name of variable 12."""
        out, i = [], 0
        while i < len(text):
            if text[i] == "@" and text[i + 1:i + 2].isdigit():
                j = i + 1
                while j < len(text) and text[j].isdigit():
                    j += 1
                out.append(self.names.get(int(text[i + 1:j]), "?"))
                i = j
            else:
                out.append(text[i])
                i += 1
        return "".join(out)


def _names(tracer, live):
    """A _Namer holding a name for each argument (its hint) and each live entry: its hint, the
    g_/t_ prefix on the name of the variable a gradient or tangent is of, or z1, z2, ..."""
    n = _Namer(tracer)
    z = itertools.count(1)
    for var in tracer.arguments:
        n.names[var] = n.fresh(tracer.hints[var])
    for var, _ in tracer.lives:
        n.names[var] = n.fresh(tracer.hints[var])
    for e in live:
        hint = tracer.hints[e.out]
        if hint is None:
            base = f"z{next(z)}"
        elif hint.startswith(("g_@", "t_@")):
            base = hint[:2] + n.names.get(int(hint[3:]), "v")
        else:
            base = hint
        n.names[e.out] = n.fresh(base)
    return n


def _emit_body(tracer, live, producer, n):
    """The program's statements, a _Body of (lhs, expression, comment) rows, one per live entry
    (several for the fused softmax/crossEntropy pieces, none of lhs for a check or an in-place
    write). Hot primitives and rules are one NumPy expression (_SPECIAL); the rest are calls."""
    global _SPECIAL
    if _SPECIAL is None:
        _SPECIAL = _special_forms()
    names = n.names
    fused = _softmax_cross_entropy_pairs(live, producer)
    shared = _shared_softmax_cross_entropy(tracer, live)
    pieces = {}
    rows = {}   # (labels variable, classes) -> the hoisted np.arange(B), once the range check is in
    body = _Body()
    for e in live:
        body.entry = e
        args = [n.emit(a) for a in e.args]
        expr = None
        special = _SPECIAL.get(id(e.fun))
        if e.out in shared:                       # softmax_cross_entropy whose VJP reads its softmax
            pieces[e.out] = _emit_softmax_cross_entropy_in_steps(body, tracer, e, args, n, rows)
            continue
        if id(e) in shared and (e.args[3].var, tracer.values[e.args[2].var].shape[1]) in rows:
            p = pieces[shared[id(e)]]
            _emit_cross_entropy_vjp(body, tracer, e, [args[0], args[1], p, args[3]], n, rows,
                                    _seed_value(tracer, producer, e.args[0]))
            continue
        if e.out in fused:                        # softmax whose logits crossEntropy reuses
            kind, other = fused[e.out]
            if kind == "softmax":
                pieces[e.out] = _emit_softmax_in_steps(body, tracer, e, args, n)
                continue
            special = None
            expr = _emit_fused_cross_entropy(body, tracer, n, pieces[other], rows, e.args[2], e.args[1],
                                             e.kwargs.get("reduction", "mean"))
        if e.out in tracer.scalar_operators:
            # eagerly NumPy scalars' own operator (x[0] ** 3, x.sum() + y.sum() of array arguments):
            # `**`'s last bit and `+`'s NaN of two are not the ufunc's
            op = tracer.scalar_operators[e.out]
            expr = f"{n.function(op, op.__name__)}({', '.join(args)})"
        elif special is not None and special[0] is e.fun and e.kind != "numpy":
            ranks = [np.ndim(tracer.values[a.var]) if type(a) is _Ref else np.ndim(a) for a in e.args]
            expr = special[1]([a if _atom(a) else f"({a})" for a in args], ranks)
            if id(e.fun) in _ARITHMETIC and not builtins.any(ranks):
                # 0-d values (of Tensors, or np.add(x.sum(), y.sum())): eagerly the ufunc, whose NaN
                # of two is not the one NumPy scalars' operator keeps (the program may hold NumPy
                # scalars): called
                expr = None
            if e.fun is _FROBENIUS_VJP and _unit_seed(tracer, producer, e.args[0], e.args[2]):
                expr = expr[expr.index("* ") + 2:]    # 1 * w is w, exactly: one pass over w less
        elif (e.fun is _CE_VJP_LOGITS and e.kind == "rule" and type(e.args[3]) is _Ref
              and type(e.args[2]) is _Ref and type(e.args[0]) is _Ref
              and np.ndim(tracer.values[e.args[0].var]) == 0 and np.ndim(tracer.values[e.args[2].var]) == 2
              and (e.args[3].var, tracer.values[e.args[2].var].shape[1]) in rows):
            _emit_cross_entropy_vjp(body, tracer, e, args, n, rows, _seed_value(tracer, producer, e.args[0]))
            continue
        elif (scalar := _frobenius_scalar(tracer, e, live)) is not None:
            nrm2, kind = scalar
            expr = f"{n.function(kind, kind.__name__)}({n.function(nrm2, 'nrm2')}({args[0]}.ravel()))"
            n.scalars.add(e.out)
        elif (relu := _relu_rule_form(tracer, e, args, n)) is not None:
            expr = relu
        elif (folded := _folded_spread(tracer, producer, e)) is not None:
            expr = f"{n.constant(folded)}.copy()"    # a fresh array: the program may write into it
        elif (mean := _mean_form(tracer, e, args, n)) is not None:
            expr = mean
        elif e.fun is unbroadcast:
            g = e.args[0]
            g_shape = np.shape(tracer.values[g.var]) if type(g) is _Ref else np.shape(g)
            expr = _unbroadcast_form(n, args[0], g_shape, e.args[1])
        if e.kind == "effect":
            _emit_effect(body, tracer, e, args, n)
            continue
        if e.kind == "guard":
            body.append((None, _guard_line(n, e, args[0]), n.label(e.label)))
            continue
        if expr is not None:
            pass
        elif e.kind in ("seed", "state"):
            expr = args[0]
        elif e.kind == "part":
            expr = f"{args[0]}[{args[1]}]"
        elif e.fun is operator.add:
            expr = f"{args[0]} + {args[1]}"
        else:
            unused = _unused_parameters(e.fun)      # (a rule's ans, mostly): not kept alive for it
            call_args = ["None" if i in unused else a for i, a in enumerate(args)]
            call_args += [f"{k}={n.emit(v)}" for k, v in e.kwargs.items()]
            expr = f"{n.function(e.fun, e.name)}({', '.join(call_args)})"

        lhs = names[e.out]
        if e.kind in ("prim", "prim0"):
            comment = _type_comment(e, tracer)
        else:
            comment = n.label(e.label)
        body.append((lhs, expr, comment))
    return body


def _emit_effect(body, tracer, e, args, n):
    """A whole training step's effect (backward()'s accumulation into `.grad`, an optimizer's
    or scheduler's method, clipping), as a line calling it. backward()'s hand-over of fresh
    gradients to leaves whose `.grad` is None (after zero_grad) is written out (_handed_over);
    a method whose result was None (an optimizer's zero_grad() and step()) is called directly."""
    fun, lhs, comment = e.fun, n.names[e.out], n.label(e.label)
    if type(fun) is _Accumulate:
        handed = _handed_over(tracer, e, args, n)
        if handed is not None:
            test, handing = handed
            body.append((None, f"{handing} if {test} else {n.function(fun, e.name)}({', '.join(args)})",
                         f"{comment}: a fresh gradient becomes a .grad that is None"))
            return
    elif type(fun) is _Call and tracer.values[e.out] is None:
        # no value to convert (an optimizer's step or zero_grad, a scheduler's step): the method
        # itself, bound to its arguments, without _Call's layer
        call = fun.call
        fun = call.func if not call.args and not call.keywords else call
    body.append((lhs, f"{n.function(fun, e.name)}({', '.join(args)})", comment))


def _handed_over(tracer, e, args, n):
    """backward()'s accumulation when every gradient is an array the program makes on each call
    (a rule's or primitive's result, not a constant, an argument or a Tensor's value), fresh
    (not a view) and of its leaf's dtype, and no two are the same array: each is handed over as
    the leaf's `.grad` where that is None (tape.accumulate's own case), tested on every call
    as tape._is_fresh does (`.grad is None`, `.base is None`, writeable; the type and dtype are
    the program's), else _Accumulate does it all. Returns (test, the hand-over expression) or
    None."""
    fun, producer = e.fun, {x.out: x for x in tracer.entries}
    if len(args) != len(fun.leaves) or not args:
        return None
    seen = set()
    for leaf, g in zip(fun.leaves, e.args):
        made = producer.get(g.var) if type(g) is _Ref else None
        value = tracer.values[g.var] if made is not None else None
        if (made is None or made.kind not in ("prim", "prim0", "rule", "add") or type(value) is not np.ndarray
                or value.base is not None or not value.flags.writeable or value.dtype != leaf.data.dtype
                or id(value) in fun.ids or id(value) in seen):
            return None
        seen.add(id(value))
    get, put = n.function(_SLOT_GRAD.__get__, "grad_of"), n.function(_SLOT_GRAD.__set__, "set_grad")
    leaves = [_tensor_name(n, tracer, leaf) for leaf in fun.leaves]
    test = " and ".join(f"{get}({leaf}) is None and {g}.base is None and {g}.flags.writeable"
                        for leaf, g in zip(leaves, args))
    handing = [f"{put}({leaf}, {g})" for leaf, g in zip(leaves, args)]
    return test, handing[0] if len(handing) == 1 else f"({', '.join(handing)})"


_LOADS = ("LOAD_", "DELETE_", "STORE_")


@functools.cache
def _unused_parameters_of(code):
    if code.co_flags & inspect.CO_VARARGS or {"locals", "vars", "eval", "exec"} & set(code.co_names):
        return frozenset()
    names = set(code.co_cellvars)       # read by an inner function
    for ins in dis.get_instructions(code):
        if ins.opname.startswith(_LOADS):
            names.update(ins.argval if type(ins.argval) is tuple else (ins.argval,))
    return frozenset(i for i, p in enumerate(code.co_varnames[:code.co_argcount]) if p not in names)


def _unused_parameters(fun):
    """The positions of a plain function's positional parameters its code never reads (a
    matmul rule's `ans`, softmax's `x`): the program passes None there, so the array is freed
    (or written in place) after its last real use instead of being held for a call that ignores
    it. Nothing for anything else (a method, a partial, a builtin, *args, locals())."""
    return _unused_parameters_of(fun.__code__) if type(fun) is types.FunctionType else frozenset()


def _row_forms(n, value, axis):
    """Two functions giving the text of ops' row_max(x, axis) and row_sum(x, axis) for arrays
    like `value`: their calls where they take their fast branch for this shape, else the NumPy
    method they call (no Python call for a small array's softmax)."""
    fast = softmax_xent.row_forms(value, axis) if type(axis) is int else (False, False)
    a = n.emit(axis)

    def form(fun, reduction, fast):
        name = n.function(fun, fun.__name__) if fast else reduction(n)
        if fast:
            return lambda x: f"{name}({x}, {a})"
        return lambda x: f"{name}({x}, axis={a}, keepdims=True)"     # x.max(axis=a, keepdims=True)

    return form(softmax_xent.row_max, _max_of, fast[0]), form(softmax_xent.row_sum, _sum_of, fast[1])


def _emit_softmax_in_steps(body, tracer, e, args, n):
    """A softmax whose logits the crossEntropy after it reuses, in steps (shift, exp, sums,
    divide); returns the names of the shifted logits and the sums, which that loss reads."""
    z = args[0]
    lhs = n.names[e.out]
    shifted, total = n.fresh(f"{lhs}_shifted"), n.fresh(f"{lhs}_sum")
    row_max, row_sum = _row_forms(n, tracer.values[e.args[0].var], e.kwargs.get("axis", -1))
    body.append((shifted, f"{z} - {row_max(z)}", "softmax in steps, shared with log_softmax"))
    body.append((lhs, f"np.exp({shifted})", "softmax: exp"))
    body.append((total, row_sum(lhs), "softmax: the sums"))
    body.append((lhs, f"np.divide({lhs}, {total}, out={lhs})", _type_comment(e, tracer)))
    return shifted, total, e.kwargs.get("axis", -1)


def _shared_softmax_cross_entropy(tracer, live):
    """{softmax_cross_entropy variable: True, id(its VJP entry for the logits): that variable}
    for each one with integer class labels (see _lean_labels) whose logits' VJP the program
    applies with a 0-d cotangent: the forward computes the softmax in steps and keeps it, and
    the VJP reads it instead of computing it again (ops' _softmax_minus_labels of _softmax(z))."""
    sce = declared("softmax_cross_entropy")
    if sce is None:
        return {}
    found = {}
    for e in live:
        if (e.kind == "rule" and e.fun is sce.vjps[0] and e.context and e.context[1] == "VJP"
                and len(e.args) == 4 and all(type(a) is _Ref for a in (e.args[0], e.args[2], e.args[3]))
                and np.ndim(tracer.values[e.args[0].var]) == 0):
            found.setdefault(tracer.var_of(e.context[0]), []).append(e)
    shared = {}
    for e in live:
        if (e.kind in ("prim", "prim0") and e.fun is sce.fun and len(e.args) == 2 and e.out in found
                and set(e.kwargs) <= {"reduction"}
                and _lean_labels(tracer, e.kwargs.get("reduction", "mean"), e.args[0], e.args[1])
                and all(r.args[2].var == e.args[0].var and r.args[3].var == e.args[1].var
                        for r in found[e.out])):
            shared[e.out] = True
            shared.update({id(r): e.out for r in found[e.out]})
    return shared


def _emit_softmax_cross_entropy_in_steps(body, tracer, e, args, n, rows):
    """softmax_cross_entropy(z, y) in steps: ops' _log_softmax_forward (shift, exp, sums, log)
    with the loss at the labels written out (_emit_fused_cross_entropy), then the softmax as ops'
    _softmax_forward makes it, from the same shift, exp and sums; returns the softmax's name."""
    z, lhs = args[0], n.names[e.out]
    shifted, p, total = n.fresh(f"{lhs}_shifted"), n.fresh(f"{lhs}_softmax"), n.fresh(f"{lhs}_sum")
    row_max, row_sum = _row_forms(n, tracer.values[e.args[0].var], -1)
    body.append((shifted, f"{z} - {row_max(z)}", "softmax_cross_entropy in steps: the shift"))
    body.append((p, f"np.exp({shifted})", "softmax_cross_entropy: exp"))
    body.append((total, row_sum(p), "softmax_cross_entropy: the sums"))
    expr = _emit_fused_cross_entropy(body, tracer, n, (shifted, total, -1), rows, e.args[0], e.args[1],
                                     e.kwargs.get("reduction", "mean"))
    body.append((lhs, expr, _type_comment(e, tracer)))
    body.append((p, f"np.divide({p}, {total}, out={p})", "softmax_cross_entropy: the softmax, for its VJP"))
    return p


def _emit_fused_cross_entropy(body, tracer, n, piece, rows, z_arg, y_arg, reduction):
    """The expression of a crossEntropy of logits `z_arg` and labels `y_arg` (entry arguments)
    from the softmax in steps `piece` (its log-softmax); for class indices, the range check is
    emitted first and the sum written out."""
    shifted, total, axis = piece
    y = n.emit(y_arg)
    expr = (f"{n.function(_cross_entropy_rows, 'cross_entropy_rows')}"
            f"({shifted} - np.log({total}), {n.emit(z_arg)}, {y}, {n.emit(reduction)})")
    if _lean_labels(tracer, reduction, z_arg, y_arg):
        # ops._rows_from_logits for class indices, its NumPy calls written out: the range
        # check (one max over the labels seen as unsigned: a negative label is huge
        # there), then -log_p at the labels, summed (and / B for the mean).
        labels = tracer.values[y_arg.var]
        batch, classes = tracer.values[z_arg.var].shape
        if labels.dtype.kind == "u":
            test = f"{_max_of(n)}({y}, axis=None) >= {classes}"
        elif classes <= 2 ** (8 * labels.itemsize - 1):   # every negative label maps above
            test = f"{_max_of(n)}({y}.view(np.uint{8 * labels.itemsize}), axis=None) >= {classes}"
        else:
            test = (f"{n.function(_MIN, 'min_of')}({y}, axis=None) < 0 or "
                    f"{_max_of(n)}({y}, axis=None) >= {classes}")
        body.append((None, f"if {test}: "
                     f"{n.function(_label_range_error, 'label_range_error')}({y}, {classes})",
                     "crossEntropy: the labels must lie in [0, classes)"))
        rows[y_arg.var, classes] = n.constant(np.arange(batch))
        at = rows[y_arg.var, classes]
        if type(axis) is int and axis in (-1, 1):     # the sums are (B, 1): log_p at the labels only
            expr = f"{_sum_of(n)}(-({shifted}[{at}, {y}] - np.log({total}).ravel()), axis=None)"
        else:
            expr = f"{_sum_of(n)}(-({shifted} - np.log({total}))[{at}, {y}], axis=None)"
        if reduction == "mean" and batch != 1:    # x / 1 is x
            expr += f" / {batch}"
    return expr


def _emit_cross_entropy_vjp(body, tracer, e, args, n, rows, seed=None):
    """ops._softmax_minus_labels for class indices the forward checked above: p * scale, then
    minus scale at each row's label. Where the cotangent is the seed (`seed`, a constant), the
    scale is computed here, once, as the program would (g / B); a scale of exactly 1 that keeps
    p's dtype makes p * scale a copy of p (and no copy where p dies there, see _release_and_reuse)."""
    g, p, y = args[0], args[2], args[3]
    lhs = n.names[e.out]
    scale = g
    batch = np.shape(tracer.values[e.args[2].var])[0]
    mean = e.kwargs.get("reduction", "mean") == "mean"
    if seed is not None:
        value = seed / batch if mean else seed
        scale = n.constant(value)
        p_value = tracer.values[e.args[2].var]
        unit = value == 1 and np.result_type(p_value, value) == p_value.dtype
        body.append((lhs, f"{p}.copy()" if unit else f"{p} * {scale}", n.label(e.label)))
    else:
        if mean:
            scale = n.fresh(f"{lhs}_scale")
            body.append((scale, f"{g} / {batch}", "crossEntropy VJP: the cotangent of each row"))
        body.append((lhs, f"{p} * {scale}", n.label(e.label)))
    at = rows[e.args[3].var, tracer.values[e.args[2].var].shape[1]]
    body.append((None, f"{lhs}[{at}, {y}] -= {scale}", "crossEntropy VJP: minus the labels"))


def _in_errstate(tracer, e, n, statement):
    """The statement, inside f's own `with np.errstate(...)` (and its own warning filters:
    `with warnings.catch_warnings(): warnings.simplefilter("ignore")`) where f recorded its
    entry there."""
    state = tracer.errstates.get(e.out) if e is not None else None
    filters = tracer.warning_filters.get(e.out) if e is not None else None
    if not (state or filters) or statement.startswith(("if ", "with ")):    # (a check: no arithmetic)
        return statement
    contexts = []
    if state:
        settings = ", ".join(f"{k}={v!r}" for k, v in sorted(state.items()))
        contexts.append(f"{n.function(np.errstate, 'errstate')}({settings})")
    if filters:
        contexts.append(f"{n.function(_with_filters, 'with_filters')}({n.constant(filters)})")
    return f"with {', '.join(contexts)}: {statement}"


@contextlib.contextmanager
def _with_filters(filters):
    """The warning filters f added around a line (its catch_warnings and simplefilter)."""
    with warnings.catch_warnings():
        warnings.filters[:0] = filters
        warnings._filters_mutated()
        yield


def _assemble(tracer, live, body, n, out_refs, out_structure, fname, finish=None, kinds=None):
    """The function's text from the body (temporaries freed after their last use, see
    _release_and_reuse), its results in `out`'s structure (given to `finish`, a function of the
    return expression's text, where there is one), compiled into a _Program."""
    names = n.names
    producer_kind = {e.out: e.kind for e in live}
    results, again = [], {j for kind in kinds or () if type(kind) is tuple for j in kind[1:]}
    repeated = collections.Counter(r.var for r, kind in zip(out_refs, kinds or [None] * len(out_refs))
                                   if type(r) is _Ref and not (type(kind) is str and kind.endswith("copy")))
    made = set()
    for k, (ref, kind) in enumerate(zip(out_refs, kinds or [None] * len(out_refs))):
        if isinstance(kind, Tensor):            # a parameter, a closed-over Tensor: itself
            results.append(n.constant(kind))
            continue
        if type(kind) is tuple:                 # the same Tensor as result j (evaluated before)
            results.append(f"_result{kind[1]}")
            continue
        if type(kind) is str and kind.endswith("copy"):          # (see _fresh_results)
            kind = None if kind == "copy" else kind[:-len("+copy")]
            copied = True
        else:
            copied = False
        if type(ref) is _Ref:
            name = names[ref.var]   # NumPy gives scalars for 0-d results: results are arrays
            value = tracer.values[ref.var]
            scalar = kind != "raw" and (type(value) is not np.ndarray or _zero_d_array(tracer, ref.var, value)
                                        or producer_kind.get(ref.var) == "prim0" or ref.var in n.scalars)
            text = f"np.array({name})" if copied else f"np.asarray({name})" if scalar else name
            if scalar and not copied and repeated[ref.var] > 1:   # one 0-d array for all of them (s
                text = f"(_array{ref.var} := {text})" if ref.var not in made else f"_array{ref.var}"
                made.add(ref.var)                                  # and s.detach(): eagerly one)
        elif isinstance(ref, np.ndarray):     # an array f holds (or a view of it): itself, as
            held = _held(ref, getattr(tracer, "held_arrays", ()))      # eagerly; else a fresh
            text = n.constant(ref) if held else f"{n.constant(ref)}.copy()"   # copy each call
        else:
            results.append(n.emit(ref))
            continue
        if kind == "tensor":
            text = f"{n.function(_make, 'make_tensor')}({text})"
        elif kind == "leaf":
            text = f"{n.function(_make, 'make_tensor')}({text}, requires_grad=True)"
        elif kind == "inner":           # requires grad, on an entry whose backward() is refused
            from . import taped  # (taped imports this module)
            entry = n.constant(taped.kept_from_a_transform(fname))
            text = f"{n.function(_make, 'make_tensor')}({text}, {entry}, (), [], {{}}, True)"
        elif kind == "scalar":
            text = f"{n.function(_numpy_scalar, 'numpy_scalar')}({text})"
        results.append(f"(_result{k} := {text})" if k in again else text)
    namespace = n.namespace
    ret = _emit_structure(out_structure, iter(results), namespace, n.fresh)
    if finish is not None:
        ret = finish(ret)
    params = [names[v] for v in tracer.arguments]
    held = list(tracer.values) + [v for v in namespace.values() if isinstance(v, np.ndarray)]
    producers = {names[e.out]: e for e in live}
    body = _release_and_reuse(body, ret, {names[e.out]: tracer.values[e.out] for e in live}, held,
                              n.function, lambda name: _may_alias_elsewhere(tracer, producers.get(name)))
    prologue = _prologue(tracer, n, live, {r.var for r in out_refs if type(r) is _Ref})
    statements = [(_in_errstate(tracer, e, n, expr if lhs is None else f"{lhs} = {expr}"), comment)
                  for lhs, expr, comment, e in body]
    statements = prologue + statements
    contexts = [None] * len(prologue) + [_context_text(e) for *_, e in body]   # statement k: line k + 2
    width = max([len(text) for text, _ in statements] + [0])
    lines = [f"def {n.fresh(fname if fname.isidentifier() else 'f')}({', '.join(params)}):"]
    lines += [f"    {text:<{width}}  # {comment}" for text, comment in statements]
    lines.append(f"    return {ret}")
    source = "\n".join(lines) + "\n"
    code = builtins.compile(source, f"<tt.compile {fname}>", "exec")
    exec(code, namespace)
    run = namespace[lines[0][4:lines[0].index("(")]]
    program = _Program(run, source, contexts)
    # the first statement that draws, writes or steps: an error raised before it left no trace
    # of the call (tt.compile runs f eagerly then, as for a program without side effects)
    effects = [k for k, (*_, e) in enumerate(body) if e is not None and e.kind in ("draw", "store", "effect")]
    program.first_effect = (len(prologue) + effects[0] + 2) if effects else None
    return program


# ----- guards: what the program checks before (and while) it runs --------------------------------
class Retrace(Exception):
    """A guard of the program failed: the call needs another program (why: the reason)."""

    def __init__(self, why):
        super().__init__(why)
        self.why = why


def _retrace(why):
    raise Retrace(why)


def _same(a, b):
    """A guard's comparison: the same bits for floats and NumPy scalars (a zero's sign, a NaN's
    sign and payload: what copysign or struct can read), item by item for lists and tuples
    (t.tolist()), equal otherwise."""
    t = type(a)
    if t is not type(b):
        return a == b or (a != a and b != b)
    if t is float:
        if a == b:
            return a != 0.0 or _FLOAT.pack(a) == _FLOAT.pack(b)
        return a != a and _FLOAT.pack(a) == _FLOAT.pack(b)
    if t is list or t is tuple:
        return len(a) == len(b) and builtins.all(_same(u, v) for u, v in zip(a, b))
    if isinstance(a, np.generic):
        return a.tobytes() == b.tobytes()
    return a == b or (a != a and b != b)


_FLOAT = struct.Struct("<d")


def _guard_line(n, e, x):
    """`if conversion(x) differs from what it was when recorded: re-record`, one statement."""
    value = e.context
    why = n.constant(n.label(e.label))
    retrace = n.function(_retrace, "retrace")
    conv = n.function(e.fun, getattr(e.fun, "__name__", "read").strip("_"))
    if type(value) is bool:
        return f"if {conv}({x}) is not {value}: {retrace}({why})"
    if type(value) in (int, str) or value is None:
        return f"if {conv}({x}) != {value!r}: {retrace}({why})"
    return f"if not {n.function(_same, 'same')}({conv}({x}), {n.constant(value)}): {retrace}({why})"


def _prologue(tracer, n, live, outputs=()):
    """The program's first statements: each live input (a Tensor made before the recording:
    a parameter, a buffer, a closed-over Tensor) that a line reads or f returns, read through
    its object, `W = t_W.data`, and its shape, dtype (and, under grad mode, that it still needs
    no gradient) checked."""
    lines = []
    used = set(outputs)
    for e in live:
        _refs(e.args, used_list := [])
        _refs(e.kwargs, used_list)
        used.update(used_list)
    lives = [(var, t) for var, t in tracer.lives if var in used or var in tracer.flags_read]
    retrace = n.function(_retrace, "retrace") if lives else None
    for var, t in lives:
        name = n.names[var]
        holder = n.fresh(f"{name}_tensor")
        n.namespace[holder] = t
        value = tracer.values[var]
        dtype = n.constant(value.dtype)
        why = n.constant(f"{name} (a Tensor the function reads) is no longer {value.dtype}{value.shape}"
                         + f" or its requires_grad is no longer {bool(t.requires_grad)}")
        test = f"{name}.shape != {tuple(value.shape)!r} or {name}.dtype != {dtype}"
        test = f"{holder}.requires_grad is not {bool(t.requires_grad)} or {test}"   # read by f too
        lines.append((f"{name} = {holder}.data", f"read anew on every call: {_describe_live(t)}"))
        lines.append((f"if {test}: {retrace}({why})", "its shape and dtype, as recorded"))
    return lines


def _describe_live(t):
    return f"{type(t).__name__} {t.data.dtype}{t.data.shape}"


# ----- memory: free each temporary after its last use, and write into the ones nobody else holds --
RELEASE_BYTES = 1 << 14    # smaller temporaries are left to the return: a `del` costs more than it frees
_AUGMENTED = {ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/="}
_COMMUTATIVE = (ast.Add, ast.Mult)
# `a op b` written into b: NumPy's ufunc with out=b, operands in eager's order (b += a would give
# b's NaN where both are NaN: x86 hands on the first operand's NaN, sign and payload)
_INTO_RIGHT = {ast.Add: "np.add", ast.Mult: "np.multiply"}


def _names_in(text):
    """(names read, names written) by one generated statement or expression."""
    read, written = set(), set()
    for node in ast.walk(ast.parse(text)):
        if type(node) is ast.Name:
            (written if type(node.ctx) is ast.Store else read).add(node.id)
    return read, written


def _into_forms():
    """{id(function): (its form writing into one argument, that argument's position)}: calls the
    program may make into an array read for the last time (see _release_and_reuse)."""
    table = {}
    softmax, where = declared("softmax"), declared("where")
    if softmax is not None:
        table[id(softmax.fun)] = (softmax_into, 0)
        for rule in (*softmax.vjps, *softmax.jvps):
            table[id(rule)] = (softmax_rule_into, 0)
    if where is not None:
        table[id(where.fun)] = (where_into, 1)
        table[id(where.vjps[1])] = (where_rule_into, 0)
    return table


_INTO = None


def _may_alias_elsewhere(tracer, e):
    """Whether entry e's result, a fresh array while recording, may be a view of one of its
    inputs when the program runs: reshape, ravel or asarray copy a non-contiguous array (an
    argument passed as a view, say) but return a view of a contiguous one, so a program recorded
    on the one and run on the other must not write into that result. Where every array input was
    C-contiguous while recording, the recording saw the layout most prone to views; otherwise
    e's function is run again on C- and F-ordered copies of its inputs, and a result sharing
    memory with one of them says yes (as does any error)."""
    if e is None or e.kind in ("seed", "state", "draw", "store", "add", "part", "guard", "effect"):
        return False
    refs = _refs(e.args, []) + _refs(e.kwargs, [])
    traced_index = e.name == "getitem" and _refs(e.kwargs.get("index", ()), [])
    if not traced_index and all(type(tracer.values[v]) is not np.ndarray
                                or tracer.values[v].flags.c_contiguous for v in refs):
        return False        # (an index computed while recording (B[:, i[0]]) may make a view when run)
    for order in ("C", "F"):
        copies = {v: np.array(tracer.values[v], order=order) if type(tracer.values[v]) is np.ndarray
                  else tracer.values[v] for v in refs}
        if traced_index:       # a 0-d index is a NumPy scalar when the program runs: basic indexing
            copies.update({v: copies[v][()] for v in traced_index
                           if type(copies[v]) is np.ndarray and copies[v].ndim == 0})

        def sub(x):
            if type(x) is _Ref:
                return copies[x.var]
            if type(x) in (tuple, list):
                return type(x)(sub(y) for y in x)
            return {k: sub(y) for k, y in x.items()} if type(x) is dict else x

        try:
            result = e.fun(*sub(tuple(e.args)), **sub(dict(e.kwargs)))
        except Exception:
            return True
        if any(type(c) is np.ndarray and np.may_share_memory(result, c) for c in copies.values()):
            return True
    return False


def _release_and_reuse(body, ret, temporaries, held, name_of=None, may_alias=None):
    """Liveness over the straight-line program `body` ((lhs, expr, comment, tape entry) rows).

    * After the last statement that reads a temporary array of RELEASE_BYTES or more, `del` it,
      so the program holds what eager mode holds (each array is freed once nothing needs it)
      instead of every intermediate and gradient temporary until it returns.
    * `t = a op b` (op in + - * /) where `a` is read for the last time, owns its memory (no view
      or alias of it among the traced values) and has the result's shape and dtype becomes
      `a op= b; t = a`: the same ufunc, the same numbers, no new array (gradient contributions
      accumulate in place; elementwise chains reuse one buffer). For + and *, `b` may be the one.
    * A call to softmax, where or their rules (_INTO) given such an array becomes the call of its
      form writing into it (`name_of(function, name)` names that form in the program): the same
      ufuncs on the same values.
    `temporaries` maps each statement-defined name to its traced value; `held` lists every array
    the program can reach (traced values, arguments, constants), for the alias test;
    `may_alias(name)`: whether that value may be a view of another when the program runs, though
    it was not while recording (_may_alias_elsewhere).
    """
    owners = {}
    for value in held:
        if isinstance(value, np.ndarray):
            owner = value if value.base is None else value.base
            owners[id(owner)] = owners.get(id(owner), 0) + 1   # the array itself and its views
    uses = [_names_in(expr if lhs is None else f"{lhs} = {expr}") for lhs, expr, *_ in body]
    last = {}
    for i, (read, _) in enumerate(uses):
        for name in read:
            last[name] = i
    returned, _ = _names_in(ret)

    def dying(name, i):
        return name in temporaries and last.get(name) == i and name not in returned

    def owned(name, like):       # the array, or the one C-ordered view of an array nothing else
        value = temporaries.get(name)    # holds (a matmul's reshaped product: C order, as a b's is)
        return (type(value) is np.ndarray and value.ndim > 0 and value.flags.writeable
                and (value.base is None or value.flags.c_contiguous)
                and owners.get(id(value if value.base is None else value.base)) == 1
                and type(like) is np.ndarray and like.shape == value.shape and like.dtype == value.dtype
                and like.strides == value.strides      # eager's layout: a later sum adds in its order
                and not (may_alias is not None and may_alias(name)))

    global _INTO
    if _INTO is None:
        _INTO = _into_forms()
    out = []
    for i, (lhs, expr, comment, entry) in enumerate(body):
        node = ast.parse(expr, mode="eval").body if lhs is not None else None
        into = _INTO.get(id(entry.fun)) if entry is not None and name_of is not None else None
        if (into is not None and type(node) is ast.Call and type(node.func) is ast.Name
                and len(node.args) > into[1]):
            target = node.args[into[1]]
            others = [ast.unparse(a) for k, a in enumerate(node.args) if k != into[1]]
            others += [ast.unparse(k.value) for k in node.keywords]
            if (type(target) is ast.Name and dying(target.id, i) and owned(target.id, temporaries.get(lhs))
                    and not any(target.id in _names_in(o)[0] for o in others)):
                node.func.id = name_of(into[0], into[0].__name__)
                expr = ast.unparse(node)
                comment += f" (into {target.id}: its last use)"
        sides = []
        if type(node) is ast.BinOp and type(node.op) in _AUGMENTED:
            sides = [(node.left, node.right)] + ([(node.right, node.left)]
                                                 if isinstance(node.op, _COMMUTATIVE) else [])
        if (type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "copy"
                and not node.args and not node.keywords and type(node.func.value) is ast.Name
                and dying(node.func.value.id, i) and owned(node.func.value.id, temporaries.get(lhs))):
            sides = []    # the copy of an array read for the last time: that array itself
            expr = node.func.value.id
            comment += " (the array itself: its last use)"
        for side, other in sides:
            other = ast.unparse(other)
            if (type(side) is ast.Name and dying(side.id, i) and owned(side.id, temporaries.get(lhs))
                    and side.id not in _names_in(other)[0]):
                text = f"{side.id} {_AUGMENTED[type(node.op)]} {other}" if side is node.left else \
                    f"{_INTO_RIGHT[type(node.op)]}({other}, {side.id}, out={side.id})"
                out.append((None, text, comment + " (in place)", entry))
                out.append((lhs, side.id, "the same array", entry))
                break
        else:
            out.append((lhs, expr, comment, entry))
        free = sorted(n for n in uses[i][0] if dying(n, i) and n != lhs
                      and getattr(temporaries[n], "nbytes", 0) >= RELEASE_BYTES)
        if free:
            out.append((None, f"del {', '.join(free)}", "their last use", entry))
    return out


def _name_for(obj, namespace, fresh):
    name = fresh(getattr(obj, "__name__", "key"))
    namespace[name] = obj
    return name


def _emit_structure(structure, results, namespace, fresh):
    if structure is transforms.LEAF:
        return next(results)
    if structure is None:
        return "None"
    if isinstance(structure, dict):
        items = []
        for k, v in structure.items():
            key = repr(k) if type(k) in (str, int, bool) else _name_for(k, namespace, fresh)
            items.append(f"{key}: {_emit_structure(v, results, namespace, fresh)}")
        text = "{" + ", ".join(items) + "}"
        if isinstance(structure, collections.defaultdict):     # (with its factory)
            factory = _name_for(structure.default_factory, namespace, fresh)
            text = f"{_name_for(type(structure), namespace, fresh)}({factory}, {text})"
        elif type(structure) is not dict:
            text = f"{_name_for(type(structure), namespace, fresh)}({text})"
        return text
    parts = [_emit_structure(v, results, namespace, fresh) for v in structure]
    if isinstance(structure, list):
        return "[" + ", ".join(parts) + "]"
    if hasattr(structure, "_fields"):
        return f"{_name_for(type(structure), namespace, fresh)}({', '.join(parts)})"
    return f"({', '.join(parts)},)" if len(parts) == 1 else f"({', '.join(parts)})"

"""The fused patterns of the generated programs.

* The lecture's crossEntropy(softmax(z), y), whose softmax and log_softmax share their max,
  shift, exp and sum (the same NumPy calls as ops' forwards, so the same numbers), and, for
  integer class labels, the loss and its VJP written out with one range check of the labels.
* A normalisation y = c / sqrt(mean(c * c) + eps) (layer, batch and RMS norm): the ten passes of
  its backward's rule chain as one entry of four (fuse_normalizations): eager to rounding.
* The exact GELU: Phi(x) computed once in the forward and kept for the backward (keep_gelu_cdf).
* Pieces cut from one array (q, k and v from one projection): their cotangents written into one
  array (gather_piece_cotangents) instead of one array of zeros each, added up."""

import numpy as np

from .. import tape
from ..ops.core import _is_basic
from ..ops.elementwise import ONE_OVER_SQRT_2PI, _ndtr
from ..ops.softmax_xent import (
    at_labels,
    ce_vjp_logits,
    check_class_range,
    class_indices,
    reduce_rows,
    row_max,
    row_sum,
)
from ..tape import unbroadcast
from .tracer import _Ref, _refs, declared


def _softmax_cross_entropy_pairs(live, producer):
    """The lecture's crossEntropy(softmax(z), y) computes softmax(z) and, from the same logits,
    log_softmax(z): both start with the same max, subtraction, exp and sum. Returns
    {softmax var: ("softmax", None), crossEntropy var: ("crossEntropy", softmax var)} for each
    such pair, so the program computes those steps once (the same NumPy calls as
    ops' _softmax_forward and _log_softmax_forward, so the same numbers)."""
    softmax, cross_entropy = declared("softmax"), declared("crossEntropy")
    if softmax is None or cross_entropy is None:
        return {}
    pairs = {}
    for e in live:
        if e.fun is not cross_entropy.fun or len(e.args) != 3 or set(e.kwargs) - {"reduction"}:
            continue
        p, z = e.args[0], e.args[2]
        if type(p) is not _Ref or type(z) is not _Ref:
            continue
        a = producer.get(p.var)
        if (a is not None and a.fun is softmax.fun and len(a.args) == 1 and type(a.args[0]) is _Ref
                and a.args[0].var == z.var and set(a.kwargs) <= {"axis"} and a.out not in pairs):
            pairs[a.out] = ("softmax", None)
            pairs[e.out] = ("crossEntropy", a.out)
    return pairs


def _cross_entropy_rows(log_p, z, y, reduction):
    """softmax_xent._rows_from_logits(z, y, reduction) given log_p = log_softmax(z)."""
    index = class_indices(y, z.shape, check=True)
    if index is not None:
        return reduce_rows(-at_labels(log_p, index), reduction)
    y = np.asarray(y)
    if log_p.min() == -np.inf:
        log_p = np.where(y == 0, 0, log_p)
    return reduce_rows(-(y * log_p).sum(axis=-1), reduction)


def _lean_labels(tracer, reduction, z_arg, y_arg):
    """Whether crossEntropy's rows for these logits and labels can be written inline: integer
    class indices of shape (B,) (B > 0) against (B, C) logits on the CPU, reduced by mean or sum."""
    if type(z_arg) is not _Ref or type(y_arg) is not _Ref:
        return False
    z, y = tracer.values[z_arg.var], tracer.values[y_arg.var]
    return (type(z) is np.ndarray and type(y) is np.ndarray and z.ndim == 2 and y.dtype.kind in "iu"
            and y.shape == z.shape[:1] and y.size > 0
            and reduction in ("mean", "sum"))


_label_range_error = check_class_range     # the one label check, with its one message
_CE_VJP_LOGITS = ce_vjp_logits


# ----- normalisation: y = c / sqrt(mean(c * c) + eps), its backward in four passes --------------
def normalized_vjp(g, y, s, axis):
    """The cotangent of c in y = c / s, s = sqrt(mean(c * c, axis, keepdims=True) [+ eps]), from
    y's cotangent g: (g - y * mean(g * y, axis)) / s. The chain of rules it stands for (div's
    two, sqrt's, mean's, mul's two and their sums) makes ten passes over c's shape; this, four."""
    out = y * _mean_along(g * y, axis)
    np.subtract(g, out, out=out)
    out /= s
    return out


def centred_normalized_vjp(g, y, s, axis):
    """The same for c = x - mean(x, axis): x's whole cotangent from the norm, (the above) minus
    its mean, where eager mode negates it, sums it, spreads it back and adds."""
    out = normalized_vjp(g, y, s, axis)
    out -= _mean_along(out, axis)
    return out


def _mean_along(a, axis):
    if type(a) is np.ndarray and axis in (-1, a.ndim - 1, (-1,), (a.ndim - 1,)):
        m = row_sum(a, -1)
        m /= a.shape[-1]
        return m
    return np.mean(a, axis=axis, keepdims=True)


def _prim(producer, ref, name, nargs):
    """The entry computing `ref` if it is primitive `name`'s forward on `nargs` arguments."""
    e = producer.get(ref.var) if type(ref) is _Ref else None
    if e is None or e.kind != "prim" or e.fun is not tape.REGISTRY[name].fun or len(e.args) != nargs:
        return None
    return e


def _normalization(tracer, e, producer):
    """For y = c / s (entry e) with s = sqrt(v), v = var [+ a constant], var = mean(c * c, axis,
    keepdims=True), all recorded forwards: ({variable: its role}, c, s, axis); else None. (Layer
    and batch norm are this with c = x - mean(x); RMS norm with c = x.)"""
    if e.kind != "prim" or e.fun is not tape.REGISTRY["div"].fun or len(e.args) != 2 or e.kwargs:
        return None
    c, s = e.args
    s_e = _prim(producer, s, "sqrt", 1) if type(c) is _Ref else None
    if s_e is None or s_e.kwargs:
        return None
    roles = {e.out: "div", s.var: "sqrt"}
    var_ref = s_e.args[0]
    add_e = _prim(producer, var_ref, "add", 2)
    if add_e is not None:
        refs = [a for a in add_e.args if type(a) is _Ref]
        if len(refs) != 1 or any(type(a) is not float and np.ndim(a) for a in add_e.args if a is not refs[0]):
            return None
        roles[add_e.out], var_ref = "add", refs[0]
    var_e = _prim(producer, var_ref, "mean", 1)
    if var_e is None or var_e.kwargs.get("keepdims") is not True or set(var_e.kwargs) - {"axis", "keepdims"}:
        return None
    sq_e = _prim(producer, var_e.args[0], "mul", 2)
    if sq_e is None or not all(type(a) is _Ref and a.var == c.var for a in sq_e.args):
        return None
    y, cv = tracer.values[e.out], tracer.values[c.var]
    if (type(y) is not np.ndarray or type(cv) is not np.ndarray or y.shape != cv.shape or y.dtype != cv.dtype
            or y.dtype.kind != "f"):
        return None
    roles[var_e.out], roles[sq_e.out] = "mean", "mul"
    return roles, c.var, s.var, var_e.kwargs.get("axis")


def fuse_normalizations(tracer, live, producer, outputs):
    """`live` with the backward of each normalisation (_normalization) written as one entry,
    normalized_vjp, in place of the chain of rule applications between y's cotangent and c's
    total cotangent, where that chain is exactly the normalisation's own: div's two rules, sqrt's,
    the constant's add (if any), mean's, mul's two, unbroadcasts and sums, nothing else adding to
    c's cotangent, nothing else reading a cotangent inside it, none of them a result. The forward
    is left as recorded (the values are eager's bit for bit); the gradient is eager's to rounding
    (a few ulp), not bit for bit."""
    reg = tape.REGISTRY
    rules = {role: {id(f): (role, k) for k, f in enumerate(reg[role].vjps)}
             for role in ("div", "sqrt", "add", "mean", "mul")}
    consumers = {}
    for e in live:
        for var in _refs(e.args, []) + _refs(e.kwargs, []):
            consumers.setdefault(var, []).append(e)
    replace, renamed = {}, {}
    for e in live:
        found = _normalization(tracer, e, producer)
        if found is None:
            continue
        roles, c, s, axis = found
        chain, applied, g_y = _normalization_chain(tracer, roles, rules, c, consumers, producer)
        expected = {("div", 0), ("div", 1), ("sqrt", 0), ("mean", 0), ("mul", 0), ("mul", 1)}
        if chain is None or {a for a in applied if a[0] != "add"} != expected or (
                any(a[0] == "add" for a in applied) != ("add" in roles.values())):
            continue
        total = chain[-1].out
        inner = {x.out for x in chain} - {total}
        if inner & outputs or any(u not in chain for var in inner for u in consumers.get(var, ())):
            continue
        args = (_Ref(g_y), _Ref(e.out), _Ref(s))
        centring = _centring(tracer, c, total, axis, consumers, producer, outputs)
        if centring is None:
            entry = type(e)(normalized_vjp, "normalized_vjp", args, {"axis": axis}, total,
                            f"normalisation VJP: adjoint of @{e.out} to @{c}, fused", "rule")
            replace.update({id(x): entry if x.out == total else None for x in chain})
            producer[total] = entry
            continue
        to_x, dropped, add, other = centring       # c = x - mean(x): x's whole cotangent in one
        entry = type(e)(centred_normalized_vjp, "centred_normalized_vjp", args, {"axis": axis}, to_x.out,
                        f"normalisation VJP: adjoint of @{e.out} to @{to_x.args[2].var}, fused", "rule")
        replace.update({id(x): None for x in chain + dropped + [add]})
        replace[id(to_x)] = entry
        producer[to_x.out] = entry
        renamed[add.out] = other
    if not replace:
        return live
    out = [replace.get(id(x), x) for x in live if replace.get(id(x), x) is not None]
    return [_renamed(x, renamed) for x in out] if renamed else out


def _renamed(e, renamed):
    """Entry e reading renamed[v] wherever it read variable v (a new entry where it changes)."""
    def sub(a):
        if type(a) is _Ref:
            var = a.var
            while var in renamed:
                var = renamed[var]
            return a if var == a.var else _Ref(var)
        if type(a) in (tuple, list):
            return type(a)(sub(b) for b in a)
        return {k: sub(b) for k, b in a.items()} if type(a) is dict else a
    args, kwargs = sub(tuple(e.args)), sub(dict(e.kwargs))
    if _refs(args, []) == _refs(tuple(e.args), []) and _refs(kwargs, []) == _refs(dict(e.kwargs), []):
        return e
    return type(e)(e.fun, e.name, args, kwargs, e.out, e.label, e.kind, e.context)


def _centring(tracer, c, total, axis, consumers, producer, outputs):
    """For c = x - mean(x, axis, keepdims=True) (the axis the norm's variance is over), whose
    total cotangent `total` only c's own two rules read: (the identity rule to x, the entries of
    the other path to x (negation, unbroadcast, mean's rule), the add that joins that path to
    x's other contributions, that add's other operand); else None."""
    reg = tape.REGISTRY
    c_e = _prim(producer, _Ref(c), "sub", 2)
    x, mu = c_e.args if c_e is not None else (None, None)
    mu_e = _prim(producer, mu, "mean", 1) if type(x) is _Ref else None
    if (mu_e is None or type(mu_e.args[0]) is not _Ref or mu_e.args[0].var != x.var
            or mu_e.kwargs.get("axis") != axis or mu_e.kwargs.get("keepdims") is not True
            or set(mu_e.kwargs) - {"axis", "keepdims"}):
        return None

    def only(var, test):
        users = consumers.get(var, [])
        return users[0] if len(users) == 1 and var not in outputs and test(users[0]) else None

    def rule_of(node, k):
        return lambda r: (r.kind == "rule" and r.fun is reg[node[0]].vjps[k] and r.context
                          and r.context[1] == "VJP" and tracer.var_of(r.context[0]) == node[1])

    users = consumers.get(total, [])
    to_x = next((r for r in users if rule_of(("sub", c), 0)(r)), None)
    neg = next((r for r in users + consumers.get(getattr(to_x, "out", None), [])
                if rule_of(("sub", c), 1)(r)), None)
    if to_x is None or neg is None or any(r not in (to_x, neg) for r in users):
        return None
    spread = only(neg.out, lambda r: r.kind == "rule" and r.fun is unbroadcast)
    back = spread and only(spread.out, rule_of(("mean", mu.var), 0))
    add = back and only(back.out, lambda r: r.kind == "add")
    if not add or add.out in outputs:
        return None
    other = [a for a in add.args if not (type(a) is _Ref and a.var == back.out)]
    if len(other) != 1 or type(other[0]) is not _Ref:
        return None
    return to_x, [neg, spread, back], add, other[0].var


def _normalization_chain(tracer, roles, rules, c, consumers, producer):
    """The entries computing c's total cotangent from y's (in program order), the (role, rule)
    pairs among them, and y's cotangent variable; (None, None, None) where the chain holds
    anything else."""
    nothing = None, None, None
    own = [x for x in consumers.get(c, ()) if x.kind == "rule" and x.context and x.context[1] == "VJP"
           and tracer.var_of(x.context[0]) == c and type(x.args[0]) is _Ref]
    totals = {x.args[0].var for x in own} - {x.out for x in own}   # (an identity rule's result is
    # the array it was given: the next rule of c reads it under its new name)
    y = next(var for var, role in roles.items() if role == "div")
    starts = [x for x in consumers.get(y, ()) if x.kind == "rule" and x.context and x.context[1] == "VJP"
              and tracer.var_of(x.context[0]) == y and type(x.args[0]) is _Ref]
    if len(totals) != 1 or not starts or len({x.args[0].var for x in starts}) != 1:
        return nothing
    g_y = starts[0].args[0].var
    chain, applied, stack, seen = [], set(), [totals.pop()], set()
    while stack:
        var = stack.pop()
        if var == g_y or var in seen:
            continue
        seen.add(var)
        x = producer.get(var)
        if x is None:
            return nothing
        if x.kind == "add":
            stack += [a.var for a in x.args if type(a) is _Ref]
        elif x.kind == "rule" and x.fun is unbroadcast and type(x.args[0]) is _Ref:
            stack.append(x.args[0].var)
        elif x.kind == "rule" and x.context and x.context[1] == "VJP" and type(x.args[0]) is _Ref:
            rule = rules.get(roles.get(tracer.var_of(x.context[0])), {}).get(id(x.fun))
            if rule is None:
                return nothing
            applied.add(rule)
            stack.append(x.args[0].var)
        else:
            return nothing
        chain.append(x)
    order = {id(x): i for i, x in enumerate(tracer.entries)}
    return sorted(chain, key=lambda x: order[id(x)]), applied, g_y


# ----- GELU: Phi(x) kept from the forward for the backward -------------------------------------
def gelu_vjp_with_cdf(g, x, cdf):
    """gelu's VJP, g * (Phi(x) + x phi(x)), with the forward's own Phi(x) (eager mode reads it
    back as ans / x, three more passes), in one temporary written in place: the same operations
    in the same order as ops.elementwise._gelu_deriv on that Phi."""
    t = x * x
    t *= -0.5
    np.exp(t, out=t)
    t *= ONE_OVER_SQRT_2PI
    t *= x
    t += cdf
    t *= g
    return t


def keep_gelu_cdf(tracer, live):
    """`live` with each exact GELU whose VJP the program applies written as cdf = Phi(x) (the
    forward's own _ndtr call) and x * cdf, and its VJP as gelu_vjp_with_cdf: the values stay
    eager's bit for bit, the gradient eager's to rounding (Phi exact instead of ans / x, within
    3 ulp). Arrays of one dimension or more whose cotangent has x's shape and dtype only."""
    gelu, mul = declared("gelu"), declared("mul")
    if gelu is None or mul is None:
        return live
    rules = {}
    for e in live:
        if (e.kind == "rule" and e.fun is gelu.vjps[0] and e.context and e.context[1] == "VJP"
                and type(e.args[0]) is _Ref and type(e.args[2]) is _Ref):
            rules.setdefault(tracer.var_of(e.context[0]), []).append(e)
    out, replaced = [], {}
    for e in live:
        if id(e) in replaced:
            out.append(replaced[id(e)])
            continue
        gelu_prim = e.kind == "prim" and e.fun is gelu.fun and len(e.args) == 1 and not e.kwargs
        x = e.args[0] if gelu_prim else None
        value = tracer.values[x.var] if type(x) is _Ref else None
        mine = rules.get(e.out, [])
        if (type(value) is not np.ndarray or value.ndim == 0 or value.dtype.kind != "f" or not mine
                or any(np.shape(tracer.values[r.args[0].var]) != value.shape
                       or np.asarray(tracer.values[r.args[0].var]).dtype != value.dtype for r in mine)):
            out.append(e)
            continue
        cdf = _Ref(tracer._new(_ndtr(value), "cdf"))
        out.append(type(e)(_ndtr, "ndtr", (x,), {}, cdf.var, "gelu: Phi(x), kept for its VJP", "numpy"))
        out.append(type(e)(mul.fun, "gelu", (x, cdf), {}, e.out, "gelu", "prim", e.context))
        for r in mine:      # (new entries: the tracer's own stay as recorded)
            replaced[id(r)] = type(r)(gelu_vjp_with_cdf, r.name, (r.args[0], x, cdf), {}, r.out, r.label,
                                      "rule", r.context)
    return out


# ----- forms writing into an argument read for the last time (codegen._release_and_reuse) ------
def softmax_into(x, axis=-1):
    """ops' softmax forward, computed in x's buffer: the same ufuncs on the same values."""
    if x.size:
        x -= row_max(x, axis)
    np.exp(x, out=x)
    x /= row_sum(x, axis) if x.size else 1
    return x


def softmax_rule_into(g, ans, x, axis):
    """ops' softmax rule ans * (g - sum(g * ans)), written into g."""
    np.subtract(g, row_sum(g * ans, axis), out=g)
    g *= ans
    return g


def where_into(condition, x, y):
    """np.where(condition, x, y) written into x (of the result's shape and dtype)."""
    np.copyto(x, y, where=np.logical_not(condition))
    return x


def where_rule_into(g, ans, c, x, y):
    """where's rule for x, np.where(c, g, 0), written into g."""
    np.copyto(g, 0, where=np.logical_not(c))
    return g


# ----- pieces cut from one array (q, k, v from one projection): one buffer for their cotangents -
def scatter_pieces(*gs, indices, shape):
    """The cotangent of an array whose pieces at basic `indices` (pairwise disjoint) have
    cotangents `gs`: each written into one array of zeros, where eager mode makes one array of
    zeros per piece (getitem's VJP) and adds them up."""
    out = np.zeros(shape, dtype=gs[0].dtype)
    for g, index in zip(gs, indices):
        piece = out[index]
        if type(piece) is not np.ndarray:    # one element
            out[index] = g
            continue
        if piece.shape != np.shape(g):       # g before its reshape VJP: written through a view of the
            try:                         # piece in g's shape where one exists (one copy, not two)
                piece = np.reshape(piece, g.shape, copy=False)
            except ValueError:
                g = g.reshape(piece.shape)
        piece[...] = g
    if len(gs) > 1:        # eagerly each element went through an addition (its piece's and zeros):
        out += 0.0         # a -0.0 there is +0.0
    return out


def gather_piece_cotangents(tracer, live, outputs):
    """`live` with each sum of getitem VJPs into the same array (basic, pairwise disjoint indices,
    one dtype, added up by the sweep and by nothing else) written as one scatter_pieces entry at
    the sum's place: eager's values (each element is one piece's plus 0, or 0), one array instead of
    one per piece and the sums."""
    getitem = declared("getitem")
    if getitem is None:
        return live
    groups = {}
    for e in live:
        if (e.kind == "rule" and e.fun is getitem.vjps[0] and len(e.args) == 3 and type(e.args[0]) is _Ref
                and type(e.args[2]) is _Ref and set(e.kwargs) == {"index"} and _is_basic(e.kwargs["index"])):
            groups.setdefault(e.args[2].var, []).append(e)
    consumers = {}
    for e in live:
        for var in _refs(e.args, []) + _refs(e.kwargs, []):
            consumers.setdefault(var, []).append(e)
    reshape = declared("reshape")
    producer = {e.out: e for e in live}
    replace = {}
    for x, leaves in groups.items():
        adds, members = [], {e.out for e in leaves}
        for e in live:
            if e.kind == "add" and all(type(a) is _Ref and a.var in members for a in e.args):
                adds.append(e)
                members.add(e.out)
        root = adds[-1].out if adds else None
        pieces = {e.out for e in leaves} | {e.out for e in adds}
        shape, values = np.shape(tracer.values[x]), [tracer.values[e.args[0].var] for e in leaves]
        if (len(leaves) < 2 or len(adds) != len(leaves) - 1 or (pieces - {root}) & outputs
                or any(len(consumers.get(v, ())) != 1 or consumers[v][0] not in adds for v in pieces - {root})
                or not all(isinstance(v, (np.ndarray, np.generic)) for v in values)   # NumPy's, not a GPU's
                or len({v.dtype for v in values}) != 1 or not _disjoint(shape, leaves)):
            continue
        label = f"getitem VJPs: adjoint of {len(leaves)} pieces to @{x}, in one array"
        gs = []
        for e in leaves:     # a piece's reshape VJP, read by nothing else: the scatter reshapes
            r = producer.get(e.args[0].var)
            if (reshape is not None and r is not None and r.kind == "rule" and r.fun is reshape.vjps[0]
                    and type(r.args[0]) is _Ref and consumers.get(r.out) == [e] and r.out not in outputs
                    and type(tracer.values[r.args[0].var]) is np.ndarray):
                replace[id(r)] = None
                gs.append(r.args[0])
            else:
                gs.append(e.args[0])
        entry = type(leaves[0])(scatter_pieces, "scatter_pieces", tuple(gs),
                                {"indices": tuple(e.kwargs["index"] for e in leaves), "shape": tuple(shape)},
                                root, label, "rule")
        replace.update({id(e): None for e in leaves + adds})
        replace[id(adds[-1])] = entry
    if not replace:
        return live
    return [replace.get(id(e), e) for e in live if replace.get(id(e), e) is not None]


def _disjoint(shape, leaves):
    hits = np.zeros(shape, dtype=np.int16)
    for e in leaves:
        hits[e.kwargs["index"]] += 1
    return hits.max(initial=0) <= 1

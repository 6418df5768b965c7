"""Round 7: cases that combine the issue's classes in one program (issue 29).

Each case is run eagerly and compiled by ``matrix_harness`` and must be equal bit for bit or
refused naming tt.compile and a fix. The scripted change happens on call ``k`` (2, 3, 10, 40).
"""

from __future__ import annotations

import numpy as np
import pytest

import tinytensor as tt
from tests.compile.matrix_harness import Case, classify

nn = tt.nn
KS = (2, 3, 10, 40)


def _f(t):
    return t.item() if hasattr(t, "item") and not getattr(t, "requires_grad", False) else float(t.detach())


def _lin(i, o, seed):
    return nn.Linear(i, o, rng=seed, dtype=np.float64)


def _x(i, shape=(4, 3), sign=1.0):
    return sign * (np.random.default_rng(100 + i).standard_normal(shape) + 0.5)


# A: a value-dependent branch AND a tape entry AND a module change (weight replaced at k)
def b_branch_tape_module(C, k):
    m = _lin(3, 2, 0)
    f = C(lambda x: (m(x) ** 2).sum() if bool(m(x).sum() > 0) else m(x).sum() * 3)

    def step(i):
        if i + 1 == k:
            m.weight = nn.Parameter(m.weight.data * -1.5)
        m.zero_grad()
        loss = f(_x(i, sign=(-1) ** i))
        loss.backward()
        return loss, m
    return step


# B: a guard on a closed-over list AND an in-place parameter update AND Dropout
def b_list_inplace_dropout(C, k):
    m, d, cfg = _lin(3, 3, 1), nn.Dropout(0.3, rng=np.random.default_rng(5)), [0.5]
    f = C(lambda x: d(m(x)) * cfg[0])

    def step(i):
        if i + 1 == k:
            cfg[0] = 2.0
        with tt.no_grad():
            out = f(_x(i))
        m.weight.data -= 0.01 * np.ones_like(m.weight.data)
        return out, m
    return step


# C: a changing float argument AND a branch on _f(loss)
def b_float_arg_branch(C, k):
    m = _lin(3, 1, 2)

    def g(x, lr):
        loss = (m(x) ** 2).mean()
        return loss * lr if _f(loss) > 1.0 else -loss * lr
    f = C(g)

    def step(i):
        lr = 0.1 * (1 + np.cos(i / 7))
        scale = 3.0 if i + 1 >= k else 0.2
        m.zero_grad()
        out = f(_x(i) * scale, float(lr))
        out.backward()
        return out, m
    return step


# D: a method compiled on an object whose attribute Tensor gets replaced
def b_method_attr_tensor(C, k):
    class Obj:
        def __init__(self):
            self.w = tt.Tensor(np.arange(6.0).reshape(3, 2))

        def fwd(self, x):
            y = tt.dot(x, self.w)
            return y * 2 if bool(y.sum() > 0) else y

    o = Obj()
    f = C(o.fwd)

    def step(i):
        if i + 1 == k:
            o.w = tt.Tensor(-np.ones((3, 2)))
        if i + 1 == k + 1:
            o.w.data = o.w.data * 0.5
        return f(_x(i))
    return step


# E: nested compiled functions where the inner one re-records
def b_nested_inner_rerecords(C, k):
    inner = C(lambda x: x * 2 if bool(x.sum() > 0) else x * 3)
    outer = C(lambda x: inner(x) + 1)

    def step(i):
        sign = -1.0 if i + 1 >= k else 1.0
        return outer(_x(i, sign=sign)), inner(_x(i + 7, sign=-sign))
    return step


# F: a compiled function's result fed to another compiled function, on the tape
def b_chain_compiled(C, k):
    m1, m2 = _lin(3, 4, 3), _lin(4, 1, 4)
    f1 = C(lambda x: tt.tanh(m1(x)))
    f2 = C(lambda h: (m2(h) ** 2).mean() if bool(h.sum() > 0) else m2(h).mean())

    def step(i):
        if i + 1 == k:
            m1.bias.data = m1.bias.data - 5.0
        m1.zero_grad()
        m2.zero_grad()
        loss = f2(f1(_x(i)))
        loss.backward()
        return loss, m1, m2
    return step


# G: calls alternating between two argument shapes AND two branches
def b_alt_shapes_branches(C, k):
    def g(x):
        s = float(x.sum())
        return x * s if s > 0 else x - s
    f = C(g)

    def step(i):
        shape = (4, 3) if i % 2 else (2, 5)
        sign = (-1) ** (i // 2) if i + 1 >= k else 1.0
        return f(_x(i, shape, sign))
    return step


# H: a module switched train/eval on every call (Dropout + BatchNorm), tape entry
def b_train_eval_toggle(C, k):
    net = nn.Sequential(_lin(3, 4, 5), nn.BatchNorm1d(4, dtype=np.float64),
                        nn.Dropout(0.25, rng=np.random.default_rng(7)), _lin(4, 1, 6))
    f = C(lambda x: (net(x) ** 2).mean())

    def step(i):
        net.train(i % 2 == 0 or i + 1 < k)
        net.zero_grad()
        loss = f(_x(i, (6, 3)))
        loss.backward()
        return loss, net
    return step


# I: hooks added at call k and removed at k+2
def b_hooks_add_remove(C, k):
    m = _lin(3, 2, 7)
    f = C(lambda x: (m(x) ** 2).sum())
    handle = [None]

    def step(i):
        if i + 1 == k:
            handle[0] = m.register_forward_hook(lambda mod, inp, out: out * 3)
        if i + 1 == k + 2:
            handle[0].remove()
        m.zero_grad()
        loss = f(_x(i))
        loss.backward()
        return loss, m
    return step


# J: parameters frozen and unfrozen on alternate calls (from k on)
def b_freeze_alternate(C, k):
    m = _lin(3, 2, 8)
    f = C(lambda x: (m(x) ** 2).sum() if bool(m(x).max() > -10) else m(x).sum())

    def step(i):
        m.weight.requires_grad = not (i + 1 >= k and i % 2 == 1)
        m.zero_grad()
        loss = f(_x(i))
        loss.backward()
        with tt.no_grad():
            m.bias.data -= 0.1 * m.bias.grad
        return loss, m
    return step


# K: tt.no_grad alternating with grad mode, branch and an in-place update
def b_nograd_alternate(C, k):
    m = _lin(3, 2, 9)
    f = C(lambda x: tt.relu(m(x)).sum() * (2.0 if bool(m(x).mean() > 0) else 0.5))

    def step(i):
        m.zero_grad()
        if i + 1 >= k and i % 2:
            with tt.no_grad():
                out = f(_x(i))
        else:
            out = f(_x(i))
            out.backward()
            m.weight.data -= 0.05 * m.weight.grad
        return out, m
    return step


# L: the cache limit crossed, then values going back to the recorded ones
def b_limit_cross_back(C, k):
    m = _lin(3, 1, 10)

    def g(x, a):
        y = m(x) * a
        return y.sum() if bool(y.mean() > 0) else -y.sum()
    f = C(g)

    def step(i):
        a = float(i % 12) if i + 1 >= k else 1.0
        m.zero_grad()
        out = f(_x(i), a)
        out.backward()
        return out, m
    return step


# M: check=True with a branch that flips on call k and a module whose mode changes
def b_check_true(C, k):
    m = _lin(3, 2, 11)
    d = nn.Dropout(0.5, rng=np.random.default_rng(3))
    f = C(lambda x: d(m(x)).sum() if bool(x.sum() > 0) else m(x).sum(), check=True)

    def step(i):
        if i + 1 == k + 1:
            d.eval()
        with tt.no_grad():
            return f(_x(i, sign=-1.0 if i + 1 >= k else 1.0)), d
    return step


# N: global config dict changed at k AND a BatchNorm buffer update AND a branch on loss
CFG = {"scale": 1.0}


def b_global_dict_bn(C, k):
    CFG["scale"] = 1.0
    net = nn.Sequential(_lin(3, 4, 12), nn.BatchNorm1d(4, dtype=np.float64))

    def g(x):
        y = net(x) * CFG["scale"]
        loss = (y ** 2).mean()
        return loss if bool(loss < 50) else loss.sqrt()
    f = C(g)

    def step(i):
        if i + 1 == k:
            CFG["scale"] = 10.0
        net.zero_grad()
        loss = f(_x(i, (5, 3)))
        loss.backward()
        return loss, net
    return step


# O: submodule replaced at k AND parameter rebound via .data AND branch
def b_submodule_swap(C, k):
    net = nn.Sequential(_lin(3, 3, 13), nn.Tanh(), _lin(3, 1, 14))
    f = C(lambda x: net(x).sum() * (1 if bool(net(x).sum() > 0) else -1))

    def step(i):
        if i + 1 == k:
            setattr(net, "1", nn.ReLU())
        if i + 1 == k + 1:
            net[0].weight.data = net[0].weight.data.T.copy()
        net.zero_grad()
        loss = f(_x(i))
        loss.backward()
        return loss, net
    return step


# P: tt.randn inside + a closed-over generator rebound at k + grad mode alternation
def b_randn_rng_rebound(C, k):
    state = {"rng": np.random.default_rng(1)}
    m = _lin(3, 3, 15)
    f = C(lambda x: (m(x) + tt.randn(4, 3, rng=state["rng"])).sum())

    def step(i):
        if i + 1 == k:
            state["rng"] = np.random.default_rng(99)
        m.zero_grad()
        out = f(_x(i))
        if i % 2 == 0:
            out.backward()
        return out, m, state["rng"]
    return step


BUILDERS = [b_branch_tape_module, b_list_inplace_dropout, b_float_arg_branch,
            b_method_attr_tensor, b_nested_inner_rerecords, b_chain_compiled,
            b_alt_shapes_branches, b_train_eval_toggle, b_hooks_add_remove, b_freeze_alternate,
            b_nograd_alternate, b_limit_cross_back, b_check_true, b_global_dict_bn,
            b_submodule_swap, b_randn_rng_rebound]


# Q: backward after an in-place update of a layer the backward reads (residual aliasing)
def b_backward_after_inplace(C, k):
    m1, m2 = _lin(3, 4, 16), _lin(4, 1, 17)
    f = C(lambda x: (m2(tt.tanh(m1(x))) ** 2).sum() if bool(m1(x).sum() > -1e9) else m1(x).sum())

    def step(i):
        m1.zero_grad()
        m2.zero_grad()
        loss = f(_x(i))
        if i + 1 >= k:
            m2.weight.data -= 0.5
        loss.backward()
        return loss, m1, m2
    return step


# R: the same compiled function twice in one graph, grads accumulated without zero_grad
def b_twice_in_graph(C, k):
    m = _lin(3, 2, 18)
    f = C(lambda x: (tt.tanh(m(x)) ** 2).sum() * (1.0 if (m(x).mean() > 0) else 2.0))

    def step(i):
        a, b = f(_x(i)), f(_x(i + 50, sign=-1.0 if i + 1 >= k else 1.0))
        (a * 2 + b * a).backward()
        return a, b, m
    return step


# S: Dropout's p changed at k AND the module put in eval at k+1 AND an in-place update
def b_dropout_p_change(C, k):
    m, d = _lin(3, 3, 19), nn.Dropout(0.5, rng=np.random.default_rng(11))
    f = C(lambda x: (d(m(x)) ** 2).sum())

    def step(i):
        if i + 1 == k:
            d.p = 0.1
        if i + 1 == k + 1:
            d.eval()
        m.zero_grad()
        loss = f(_x(i))
        loss.backward()
        m.weight.data -= 0.01 * m.weight.grad
        return loss, m, d
    return step


# T: model.to(float32) at k AND a branch AND a tape entry
def b_dtype_change(C, k):
    m = _lin(3, 2, 20)
    f = C(lambda x: (m(x) ** 2).mean() if (m(x).sum() > 0).all() else tt.abs(m(x)).mean())

    def step(i):
        if i + 1 == k:
            m.to(np.float32)
        m.zero_grad()
        loss = f(_x(i).astype(np.float32))
        loss.backward()
        return loss, m
    return step


# U: a global helper function rebound at k AND a closed-over tensor requires_grad toggled
def _helper(y):
    return y * 2


def b_global_helper_rebound(C, k):
    global _helper
    orig = _helper
    w = tt.Tensor(np.linspace(-1, 1, 6).reshape(3, 2), requires_grad=True)
    f = C(lambda x: _helper(tt.dot(x, w)).sum())

    def step(i):
        global _helper
        if i + 1 == k:
            _helper = lambda y: y * 3  # noqa: E731
        if i + 1 == k + 1:
            w.requires_grad = False
        w.grad = None
        out = f(_x(i))
        if w.requires_grad:
            out.backward()
        if i + 1 == max(k + 3, 6) - 1:
            _helper = orig
        return out, w
    return step


# V: f.__defaults__ mutated at k AND calls alternating shapes
def b_defaults_shapes(C, k):
    def g(x, scale=1.0):
        return (x * scale).sum(axis=0)
    f = C(g)

    def step(i):
        if i + 1 == k:
            g.__defaults__ = (5.0,)
        return f(_x(i, (3, 2) if i % 2 else (4, 2)))
    return step


# W: a forward pre-hook that reads a closed-over list changed at k, hook removed at k+1
def b_prehook_list(C, k):
    m, cfg = _lin(3, 2, 21), [1.0]
    h = m.register_forward_pre_hook(lambda mod, inp: (inp[0] * cfg[0],))
    f = C(lambda x: (m(x) ** 2).sum())

    def step(i):
        if i + 1 == k:
            cfg[0] = -2.0
        if i + 1 == k + 1:
            h.remove()
        m.zero_grad()
        loss = f(_x(i))
        loss.backward()
        return loss, m
    return step


# X: decorator-compiled method, one per instance, attribute Tensor replaced on one instance
def b_decorated_method_two_instances(C, k):
    class Obj:
        def __init__(self, s):
            self.w = tt.Tensor(np.full((3, 2), s))

        @C
        def fwd(self, x):
            y = tt.dot(x, self.w)
            return y if bool(y.sum() > 0) else -y

    a, b = Obj(1.0), Obj(-1.0)

    def step(i):
        if i + 1 == k:
            a.w = tt.Tensor(np.full((3, 2), -2.0))
        return a.fwd(_x(i)), b.fwd(_x(i))
    return step


# Y: limit crossed by shapes under alternating no_grad, then back to the first shape
def b_limit_shapes_nograd(C, k):
    m = _lin(3, 1, 22)
    f = C(lambda x: (m(x) ** 2).sum())

    def step(i):
        n = 2 + (i % 11) if i + 1 >= k else 2
        m.zero_grad()
        if i % 2:
            with tt.no_grad():
                return f(_x(i, (n, 3))), m
        loss = f(_x(i, (n, 3)))
        loss.backward()
        return loss, m
    return step


# Z: a branch on t.tolist() of a comparison AND BatchNorm train/eval AND check=True
def b_tolist_bn_check(C, k):
    net = nn.Sequential(_lin(3, 3, 23), nn.BatchNorm1d(3, dtype=np.float64))

    def g(x):
        y = net(x)
        flags = (y.detach() > 0).tolist()
        return y.sum() if flags[0][0] else (y * 2).sum()
    f = C(g, check=True)

    def step(i):
        net.train(i + 1 < k or i % 3 == 0)
        net.zero_grad()
        loss = f(_x(i, (5, 3), sign=(-1) ** i))
        loss.backward()
        return loss, net
    return step


BUILDERS += [b_backward_after_inplace, b_twice_in_graph, b_dropout_p_change, b_dtype_change,
             b_global_helper_rebound, b_defaults_shapes, b_prehook_list,
             b_decorated_method_two_instances, b_limit_shapes_nograd, b_tolist_bn_check]


# AA: check=True with BatchNorm in training mode (buffers must update once) AND an in-place update
def b_check_bn_train(C, k):
    net = nn.Sequential(_lin(3, 3, 24), nn.BatchNorm1d(3, dtype=np.float64))
    f = C(lambda x: (net(x) ** 2).mean(), check=True)

    def step(i):
        if i + 1 == k:
            net.eval()
        net.zero_grad()
        loss = f(_x(i, (5, 3)))
        loss.backward()
        net[0].weight.data -= 0.1 * net[0].weight.grad
        return loss, net
    return step


# AB: the lr read off opt.param_groups inside, a scheduler stepped outside, a tape entry
def b_param_groups_sched(C, k):
    m = _lin(3, 1, 25)
    opt = tt.optim.SGD(m.parameters(), lr=0.1)
    f = C(lambda x: (m(x) ** 2).mean() * opt.param_groups[0]["lr"])

    def step(i):
        if i + 1 == k:
            opt.param_groups[0]["lr"] = 0.5
        opt.zero_grad()
        loss = f(_x(i))
        loss.backward()
        opt.step()
        return loss, m, opt
    return step


# AC: a module held in a closed-over dict swapped for another at k, swapped back at k+2
def b_module_in_dict(C, k):
    a, b = _lin(3, 2, 26), _lin(3, 2, 27)
    held = {"m": a}
    f = C(lambda x: (held["m"](x) ** 2).sum())

    def step(i):
        if i + 1 == k:
            held["m"] = b
        if i + 1 == k + 2:
            held["m"] = a
        a.zero_grad()
        b.zero_grad()
        loss = f(_x(i))
        loss.backward()
        return loss, a, b
    return step


# AD: a closed-over NumPy array updated in place (read by a tinytensor op) AND no_grad alternation
def b_closed_array_inplace(C, k):
    c = np.ones(3)
    m = _lin(3, 3, 28)
    f = C(lambda x: (m(x) * c).sum())

    def step(i):
        if i + 1 >= k:
            c[:] = c + 1.0
        m.zero_grad()
        if i % 2:
            with tt.no_grad():
                return f(_x(i)), m
        loss = f(_x(i))
        loss.backward()
        return loss, m
    return step


# AE: the results mutated in place by the caller (a constant, an argument, a gradient) each call
def b_mutate_results(C, k):
    f = C(lambda x: (x * 2, tt.ones(3), tt.grad(lambda z: (z * 3).sum())(x)))

    def step(i):
        x = _x(i, (3,), sign=-1.0 if i + 1 >= k else 1.0)
        a, b, g = f(x)
        out = (np.array(a), np.array(b), np.array(g))
        for r in (a, b, g):
            r = r.data if isinstance(r, tt.Tensor) else r
            r[...] = 99.0
        return out
    return step


# AF: grad mode switched off globally for a span of calls AND a branch AND Dropout
def b_grad_span_off(C, k):
    m, d = _lin(3, 2, 29), nn.Dropout(0.2, rng=np.random.default_rng(13))
    f = C(lambda x: (d(m(x)) ** 2).sum() if bool(m(x).sum() > 0) else d(m(x)).sum())

    def step(i):
        with tt.set_grad_enabled(not (k <= i + 1 < k + 3)):
            m.zero_grad()
            out = f(_x(i, sign=(-1) ** (i // 3)))
        if isinstance(out, tt.Tensor) and out.requires_grad:
            out.backward()
        return out, m
    return step


# AG: a submodule's training flag set directly (attribute, not .eval()) AND a raising branch
def b_training_attr_raise(C, k):
    from tests.compile.matrix_harness import UserError
    net = nn.Sequential(_lin(3, 3, 30), nn.Dropout(0.5, rng=np.random.default_rng(17)))

    def g(x):
        y = net(x)
        if bool((y.detach() > 100).any()):
            raise UserError("too big")
        return (y ** 2).sum()
    f = C(g)

    def step(i):
        if i + 1 == k:
            net[1].training = False
        net.zero_grad()
        loss = f(_x(i) * (1000.0 if i + 1 == k + 1 else 1.0))
        loss.backward()
        return loss, net
    return step


# AH: a compiled function fed the no_grad result of another compiled function, shapes alternate
def b_chain_nograd_shapes(C, k):
    m = _lin(3, 3, 31)
    f1 = C(lambda x: tt.relu(m(x)))
    f2 = C(lambda h: h.sum(axis=0) * (2.0 if bool(h.mean() > 0.3) else -1.0))

    def step(i):
        if i + 1 == k:
            m.bias.data = m.bias.data + 1.0
        with tt.no_grad():
            h = f1(_x(i, (4, 3) if i % 2 else (6, 3)))
            return f2(h), h
    return step


BUILDERS += [b_check_bn_train, b_param_groups_sched, b_module_in_dict, b_closed_array_inplace,
             b_mutate_results, b_grad_span_off, b_training_attr_raise, b_chain_nograd_shapes]


# AI: a guard that fails midway after a draw and a buffer update (BN + Dropout), signs flip
def b_midway_guard_bn_drop(C, k):
    lin, bn = _lin(3, 4, 32), nn.BatchNorm1d(4, dtype=np.float64)
    d = nn.Dropout(0.3, rng=np.random.default_rng(19))

    def g(x):
        y = d(bn(lin(x)))
        z = y * 2 if bool(y.sum() > 0) else y * -3
        return (z ** 2).mean() if bool(x.mean() > 0) else z.mean()
    f = C(g)

    def step(i):
        sign = (-1) ** i if i + 1 >= k else 1.0
        lin.zero_grad()
        bn.zero_grad()
        loss = f(_x(i, (6, 3), sign))
        loss.backward()
        return loss, lin, bn, d
    return step


# AJ: the limit crossed by a float argument with BN + Dropout in the program, then values repeat
def b_limit_bn_drop(C, k):
    net = nn.Sequential(_lin(3, 4, 33), nn.BatchNorm1d(4, dtype=np.float64),
                        nn.Dropout(0.4, rng=np.random.default_rng(23)))
    f = C(lambda x, a: (net(x) * a).sum())

    def step(i):
        a = float(i % 11) if i + 1 >= k else 0.5
        net.zero_grad()
        loss = f(_x(i, (5, 3)), a)
        loss.backward()
        return loss, net
    return step


# AK: a compiled function called inside tt.grad (inlined) alternating with direct calls
def b_inside_grad_alternate(C, k):
    w = tt.Tensor(np.linspace(-1, 2, 6).reshape(3, 2))
    f = C(lambda x: (tt.tanh(tt.dot(x, w)) ** 2).sum() if bool(x.sum() > 0) else tt.dot(x, w).sum())

    def step(i):
        x = _x(i, sign=-1.0 if i + 1 >= k and i % 2 else 1.0)
        if i % 2:
            return tt.grad(f)(x), f(x)
        return f(x)
    return step


# AL: forward hook that closes over a counter dict read (not written) and changed outside at k
def b_hook_reads_dict(C, k):
    m, state = _lin(3, 2, 34), {"gain": 1.0}
    m.register_forward_hook(lambda mod, inp, out: out * state["gain"])
    d = nn.Dropout(0.5, rng=np.random.default_rng(29))
    f = C(lambda x: (d(m(x)) ** 2).sum())

    def step(i):
        if i + 1 == k:
            state["gain"] = 4.0
        m.zero_grad()
        loss = f(_x(i))
        loss.backward()
        m.weight.data -= 0.01 * m.weight.grad
        return loss, m
    return step


BUILDERS += [b_midway_guard_bn_drop, b_limit_bn_drop, b_inside_grad_alternate, b_hook_reads_dict]


# AM: check=True with BatchNorm in training mode under no_grad (buffers must update once per call)
def b_check_bn_nograd(C, k):
    net = nn.Sequential(_lin(3, 3, 35), nn.BatchNorm1d(3, dtype=np.float64))
    f = C(lambda x: net(x).sum(axis=0) * (1.0 if bool(x.sum() > 0) else 2.0), check=True)

    def step(i):
        if i + 1 == k:
            net[0].weight.data = net[0].weight.data * 2
        with tt.no_grad():
            return f(_x(i, (5, 3), sign=-1.0 if i + 1 >= k else 1.0)), net
    return step


# AN: check=True with a tt.randn draw in the program (the check's eager run must not draw twice)
def b_check_randn(C, k):
    g = np.random.default_rng(41)
    f = C(lambda x: x + tt.randn(4, 3, rng=g), check=True)

    def step(i):
        return f(_x(i) * (2.0 if i + 1 >= k else 1.0)), g
    return step


BUILDERS += [b_check_bn_nograd, b_check_randn]

CASES = [Case(f"{b.__name__[2:]}_k{k}", 7, b, "either", k=k,
              n=max(k + 4, 24 if "limit" in b.__name__ else 6))
         for b in BUILDERS for k in KS]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_round7(case):
    r = classify(case)
    assert r.outcome in ("equal", "refused"), f"{case.name}: {r.outcome}: {r.detail}"

"""The issue 29 compile-vs-eager cases, classes 1-7 (see matrix_harness.py for the rules).

Each builder ``build(C, k)`` makes fresh state, wraps what a user would compile with ``C`` and
returns ``step(i)`` (i = 0, 1, ...: call i + 1), which makes the scripted change and calls the
function; what it returns is compared between the eager and the compiled run, bit for bit.
"""

from __future__ import annotations

import functools
import math
import random

import numpy as np
from matrix_harness import Case, UserError

import tinytensor as tt

nn = tt.nn
F = tt.nn.functional
optim = tt.optim
sched = tt.optim.lr_scheduler
f64 = np.float64

CASES: list[Case] = []
KS = (3, 10, 40)


def case(cls, want="equal", ks=(None,), n=None, note="", max_traces=None):
    """Register ``build`` once per change call in ``ks`` (None: no scripted call)."""
    def deco(build):
        for k in ks:
            name = build.__name__ + (f"@{k}" if k is not None else "")
            calls = n if n is not None else (max(6, k + 2) if k is not None else 6)
            CASES.append(Case(name, cls, build, want, calls, k, note, max_traces))
        return build
    return deco


def rng(seed=0):
    return np.random.default_rng(seed)


def data(i, *shape, seed=0):
    """Deterministic per-call data (the same in both runs)."""
    return np.random.default_rng(1000 * seed + i).standard_normal(shape)


def lin(i, o, seed=0, bias=True):
    return nn.Linear(i, o, bias=bias, rng=seed, dtype=f64)


def mlp(seed=0):
    return nn.Sequential(lin(3, 5, seed), nn.Tanh(), lin(5, 2, seed + 1))


# module-level globals, reset by the builders that read them
G_SCALE = 1.0
G_NP = f64(0.5)
G_LIST = [1.0, 2.0]
G_DICT = {"scale": 1.0, "act": "tanh"}
G_FLAG = True
G_ACT = tt.tanh
G_MODEL = None
G_GEN = None
G_THRESH = 0.0


# ====================================================================== class 1
# Python control flow on tensor values


@case(1, ks=KS)
def branch_on_loss(C, k):
    """The README's own example: a Python `if` on a Tensor loss."""
    def f(x):
        loss = (x * x).mean()
        return loss * 2 if loss > 1 else loss * 3
    g = C(f)

    def step(i):
        return g(data(i, 4) * (3.0 if i + 1 >= k else 0.1))
    return step


@case(1, ks=KS)
def branch_on_loss_inside_value_and_grad(C, k):
    def loss(w, x):
        v = ((x @ w) ** 2).mean()
        if v > 1:
            return tt.sqrt(v)
        return v
    g = C(tt.value_and_grad(loss))
    w = data(0, 3, 2)

    def step(i):
        return g(w, data(i, 4, 3) * (5.0 if i + 1 >= k else 0.1))
    return step


@case(1, ks=(3, 10))
def while_sum_below(C, k):
    def f(x):
        y = x
        while y.sum() < 10:
            y = y * 2
        return y
    g = C(f)

    def step(i):
        return g(np.full(3, 0.5 if i + 1 < k else 0.01) + 0.001 * data(i, 3) ** 2)
    return step


@case(1, n=6)
def newton_sqrt_with_break(C):
    def f(a):
        x = a
        for _ in range(50):
            nx = 0.5 * (x + a / x)
            err = tt.abs(nx - x)
            x = nx
            if err.max() < 1e-12:
                break
        return x
    g = C(f)

    def step(i):
        return g(np.abs(data(i, 4)) * 10 ** i + 0.5)
    return step


@case(1, ks=KS)
def all_positive_branch(C, k):
    def f(x):
        if (x > 0).all():
            return tt.log(x).sum()
        return (x * x).sum()
    g = C(f)

    def step(i):
        x = np.abs(data(i, 5)) + 0.1
        if i + 1 == k:
            x[2] = -1.0
        return g(x)
    return step


@case(1, ks=(3, 10))
def raise_on_negative_any(C, k):
    def f(x):
        if (x < 0).any():
            raise UserError("negative input")
        return tt.sqrt(x).sum()
    g = C(f)

    def step(i):
        x = np.abs(data(i, 4))
        if i + 1 == k:
            x[0] = -2.0
        return g(x)
    return step


@case(1, ks=(3, 10))
def raise_on_nan_loss(C, k):
    def f(x):
        loss = tt.log(x).sum()
        if not np.isfinite(loss.item()):
            raise UserError("loss is not finite")
        return loss
    g = C(f)

    def step(i):
        x = np.abs(data(i, 4)) + 0.1
        if i + 1 == k:
            x[1] = -1.0
        with np.errstate(invalid="ignore"):
            return g(x)
    return step


@case(1, want="either")
def float_of_sum_used_in_arithmetic(C):
    g = C(lambda x: x * float(x.sum()))

    def step(i):
        return g(data(i, 3))
    return step


@case(1, want="either")
def int_of_tensor_scales(C):
    g = C(lambda x, n: x * (int(n.sum()) % 3))

    def step(i):
        return g(data(i, 3), tt.tensor(np.array([i, 1.0])))
    return step


@case(1, want="either")
def item_as_learning_rate(C):
    def f(w, g_, lr):
        return w - lr.item() * g_
    g = C(f)

    def step(i):
        return g(data(0, 3), data(i, 3), tt.tensor(0.1 * (i + 1)))
    return step


@case(1, want="either")
def tolist_indexing(C):
    def f(x, s):
        vals = s.tolist()
        return x * vals[0] + vals[1]
    g = C(f)

    def step(i):
        return g(data(i, 3), tt.tensor(data(i, 2, seed=1)))
    return step


@case(1, want="either")
def np_asarray_then_numpy(C):
    def f(x, t):
        a = np.asarray(t)
        return x * np.exp(a)
    g = C(f)

    def step(i):
        return g(data(i, 3), tt.tensor(data(i, 3, seed=2)))
    return step


@case(1, want="either")
def data_read_of_argument(C):
    g = C(lambda x: x * x.data.mean())

    def step(i):
        return g(tt.tensor(data(i, 4)))
    return step


@case(1, ks=(3, 10))
def bool_of_0d_comparison(C, k):
    def f(x):
        if x[0] > 0:
            return x * 2
        return x - 1
    g = C(f)

    def step(i):
        x = np.abs(data(i, 3))
        if i + 1 >= k:
            x[0] = -x[0]
        return g(x)
    return step


@case(1, ks=(3,))
def bool_of_mask_any_numpy(C, k):
    def f(x):
        mask = x > 1
        if np.any(mask):
            return tt.where(mask, 1.0, x)
        return x * 3
    g = C(f)

    def step(i):
        return g(data(i, 4) * (0.1 if i + 1 < k else 10))
    return step


@case(1, want="either")
def argmax_item_as_index(C):
    def f(x):
        j = int(x.argmax())
        return x[j] * 2 + x.sum()
    g = C(f)

    def step(i):
        return g(data(i, 5))
    return step


@case(1, want="either")
def math_on_float_of_tensor(C):
    g = C(lambda x: x / math.sqrt(float((x * x).sum())))

    def step(i):
        return g(data(i, 4))
    return step


@case(1, want="either")
def python_max_of_floats(C):
    g = C(lambda a, b: a * max(float(a.sum()), float(b.sum())))

    def step(i):
        return g(data(i, 3), data(i, 3, seed=1))
    return step


@case(1, want="either")
def range_of_tensor_count(C):
    def f(x, n):
        y = x
        for _ in range(int(n)):
            y = tt.tanh(y) + x
        return y
    g = C(f)

    def step(i):
        return g(data(i, 3), tt.tensor(float(i % 4)))
    return step


@case(1, want="either")
def sorted_tolist(C):
    def f(x):
        s = sorted(x.tolist())
        return x * s[-1]
    g = C(f)

    def step(i):
        return g(data(i, 4))
    return step


@case(1)
def shape_branch_is_static(C):
    def f(x):
        if x.shape[0] > 3:
            return x.sum()
        return x.mean()
    g = C(f)

    def step(i):
        return g(data(i, 2 + i % 4))
    return step


@case(1, ks=KS)
def early_return_if_loss_small(C, k):
    m = lin(3, 1)

    def f(x, y):
        loss = ((m(x) - y) ** 2).mean()
        if loss < 1e-3:
            return loss * 0
        return loss
    g = C(f)

    def step(i):
        x = data(i, 4, 3)
        y = m(x).data if i + 1 >= k else data(i, 4, 1)
        with tt.no_grad():
            return g(x, y)
    return step


@case(1, ks=(10,))
def module_forward_with_value_branch(C, k):
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = lin(3, 3)

        def forward(self, x):
            h = self.l(x)
            if h.mean() > 0:
                return tt.relu(h)
            return tt.tanh(h)
    m = Gate()
    g = C(m)

    def step(i):
        with tt.no_grad():
            return g(data(i, 2, 3) + (3.0 if i + 1 >= k else -3.0))
    return step


@case(1, ks=(3,))
def nan_guard_skips_update(C, k):
    w = tt.tensor(data(0, 3), requires_grad=True)

    def f(x):
        loss = (w * x).sum()
        return tt.zeros(()) if np.isnan(loss.data) else loss
    g = C(f)

    def step(i):
        x = data(i, 3)
        if i + 1 == k:
            x[0] = np.nan
        with tt.no_grad():
            return g(x)
    return step


@case(1, want="either")
def float_of_mask_mean(C):
    g = C(lambda x: x * float((x > 0).mean()))

    def step(i):
        return g(data(i, 6))
    return step


@case(1, ks=(3, 40))
def branch_on_argument_tensor_comparison(C, k):
    def f(x, thresh):
        if (x.sum() > thresh).item():
            return x * 2
        return -x
    g = C(f)

    def step(i):
        return g(np.ones(3), tt.tensor(100.0 if i + 1 < k else -100.0))
    return step


# ====================================================================== class 2
# gradients to closed-over parameters


def _sq_loss_model(C, m):
    return C(lambda x: (m(x) ** 2).mean())


@case(2)
def compiled_loss_backward_linear(C):
    m = lin(3, 2)
    g = _sq_loss_model(C, m)

    def step(i):
        m.zero_grad()
        loss = g(data(i, 4, 3))
        loss.backward()
        return loss, m
    return step


@case(2)
def compiled_loss_plus_regulariser_outside(C):
    m = lin(3, 2)
    g = _sq_loss_model(C, m)

    def step(i):
        m.zero_grad()
        total = g(data(i, 4, 3)) + 0.01 * (m.weight ** 2).sum()
        total.backward()
        return total, m
    return step


@case(2)
def compiled_mlp_backward_sgd_outside(C):
    m = mlp()
    opt = optim.SGD(m.parameters(), lr=0.1)
    g = C(lambda x, y: ((m(x) - y) ** 2).mean())

    def step(i):
        opt.zero_grad()
        loss = g(data(i, 4, 3), data(i, 4, 2, seed=1))
        loss.backward()
        opt.step()
        return loss, m, opt
    return step


@case(2, n=10)
def compiled_mlp_backward_adam_outside(C):
    m = mlp()
    opt = optim.Adam(m.parameters(), lr=0.01)
    g = C(lambda x, y: ((m(x) - y) ** 2).mean())

    def step(i):
        opt.zero_grad()
        loss = g(data(i, 4, 3), data(i, 4, 2, seed=1))
        loss.backward()
        opt.step()
        return loss, m, opt
    return step


@case(2)
def grads_accumulate_over_two_compiled_calls(C):
    m = lin(3, 2)
    g = _sq_loss_model(C, m)

    def step(i):
        (g(data(i, 4, 3)) + g(data(i, 4, 3, seed=1))).backward()
        return m
    return step


@case(2)
def tt_grad_wrt_argument_of_compiled_closing_over_params(C):
    W = tt.tensor(data(0, 3, 2), requires_grad=True)
    g = C(lambda x: tt.tanh(x @ W).sum())
    dg = tt.grad(lambda x: g(x))

    def step(i):
        return dg(data(i, 4, 3)), W
    return step


@case(2)
def tt_grad_wrt_closed_over_param(C):
    W = tt.tensor(data(0, 3, 2), requires_grad=True)
    g = C(lambda x: tt.tanh(x @ W).sum())

    def outer(scale):
        return g(data(0, 4, 3)) * scale
    dg = tt.grad(outer)

    def step(i):
        W.grad = None
        out = outer(tt.tensor(2.0))
        out.backward()
        return dg(np.array(1.0 + i)), W
    return step


@case(2)
def compiled_with_argument_requiring_grad(C):
    g = C(lambda x: (tt.sin(x) * x).sum())

    def step(i):
        x = tt.tensor(data(i, 4), requires_grad=True)
        y = g(x)
        y.backward()
        return y, x
    return step


@case(2)
def compiled_nonscalar_backward_with_cotangent(C):
    m = lin(3, 2)
    g = C(lambda x: tt.tanh(m(x)))

    def step(i):
        m.zero_grad()
        y = g(data(i, 4, 3))
        y.backward(data(i, 4, 2, seed=3))
        return y, m
    return step


@case(2)
def compiled_returns_tuple_backward_first(C):
    m = lin(3, 2)

    def f(x):
        h = m(x)
        return (h ** 2).mean(), h.sum()
    g = C(f)

    def step(i):
        m.zero_grad()
        loss, aux = g(data(i, 4, 3))
        loss.backward()
        return loss, aux, m
    return step


@case(2)
def frozen_and_trainable_params(C):
    a, b = lin(3, 3), lin(3, 1, seed=1)
    a.weight.requires_grad_(False)
    g = C(lambda x: (b(tt.relu(a(x))) ** 2).mean())

    def step(i):
        a.zero_grad()
        b.zero_grad()
        g(data(i, 4, 3)).backward()
        return a, b
    return step


@case(2, ks=(3, 10))
def requires_grad_toggled_at_call_k(C, k):
    m = lin(3, 2)
    g = _sq_loss_model(C, m)

    def step(i):
        if i + 1 == k:
            m.bias.requires_grad_(False)
            m.bias.grad = None
        m.weight.grad = None
        g(data(i, 4, 3)).backward()
        return m
    return step


@case(2)
def layernorm_model_backward(C):
    m = nn.Sequential(lin(3, 4), nn.LayerNorm(4, dtype=f64), nn.GELU(), lin(4, 1, 1))
    g = C(lambda x: (m(x) ** 2).sum())

    def step(i):
        m.zero_grad()
        loss = g(data(i, 5, 3))
        loss.backward()
        return loss, m
    return step


@case(2)
def batchnorm_model_backward(C):
    m = nn.Sequential(lin(3, 4), nn.BatchNorm1d(4, dtype=f64), nn.ReLU(), lin(4, 1, 1))
    g = C(lambda x: (m(x) ** 2).mean())

    def step(i):
        m.zero_grad()
        loss = g(data(i, 6, 3))
        loss.backward()
        return loss, m
    return step


@case(2)
def embedding_model_backward(C):
    emb = nn.Embedding(7, 3, rng=0, dtype=f64)
    head = lin(3, 1)
    g = C(lambda idx: (head(emb(idx)) ** 2).mean())

    def step(i):
        emb.zero_grad()
        head.zero_grad()
        g(np.array([i % 7, 2, 2, (3 * i) % 7])).backward()
        return emb, head
    return step


@case(2)
def conv_model_backward(C):
    conv = nn.Conv2d(1, 2, 3, padding=1, rng=0, dtype=f64)
    g = C(lambda x: (conv(x) ** 2).mean())

    def step(i):
        conv.zero_grad()
        g(data(i, 2, 1, 4, 4)).backward()
        return conv
    return step


@case(2)
def hvp_of_compiled_closed_over(C):
    W = tt.tensor(data(0, 3), requires_grad=True)
    g = C(lambda x: (tt.tanh(x * W) ** 2).sum())

    def step(i):
        return tt.hvp(g, (data(i, 3),), (np.ones(3),))
    return step


@case(2)
def compiled_under_no_grad_then_grad(C):
    m = lin(3, 2)
    g = _sq_loss_model(C, m)

    def step(i):
        m.zero_grad()
        if i % 2:
            with tt.no_grad():
                return g(data(i, 4, 3)), m
        loss = g(data(i, 4, 3))
        loss.backward()
        return loss, m
    return step


@case(2)
def retain_grad_on_compiled_output(C):
    m = lin(3, 2)
    g = C(lambda x: m(x))

    def step(i):
        m.zero_grad()
        h = g(data(i, 4, 3))
        h.retain_grad()
        (h ** 2).sum().backward()
        return h, m
    return step


@case(2)
def compiled_inside_value_and_grad_of_params_dict(C):
    m = lin(3, 2)
    g = C(lambda p, x: (nn.functional_call(m, p, x) ** 2).mean())
    params = {k: v.data for k, v in m.named_parameters()}

    def step(i):
        return tt.value_and_grad(g)(params, data(i, 4, 3))
    return step


@case(2)
def rnn_backward(C):
    r = nn.RNN(3, 4, batch_first=True, dtype=f64)
    g = C(lambda x: (r(x)[0] ** 2).mean())

    def step(i):
        r.zero_grad()
        g(data(i, 2, 3, 3)).backward()
        return r
    return step


@case(2)
def two_compiled_functions_sharing_params(C):
    m = lin(3, 2)
    g1 = C(lambda x: (m(x) ** 2).mean())
    g2 = C(lambda x: tt.abs(m(x)).sum())

    def step(i):
        m.zero_grad()
        (g1(data(i, 4, 3)) * g2(data(i, 4, 3, seed=1))).backward()
        return m
    return step


@case(2)
def compiled_output_used_in_eager_graph_of_arg(C):
    g = C(lambda x, w: tt.exp(x * w).sum())

    def step(i):
        w = tt.tensor(data(0, 3), requires_grad=True)
        x = tt.tensor(data(i, 3), requires_grad=True)
        y = tt.tanh(x) * 2
        out = g(y, w) + (w ** 2).sum()
        out.backward()
        return out, x, w
    return step


# ====================================================================== class 3
# parameter identity


@case(3, n=8)
def lecture_data_rebind_update(C):
    w = tt.tensor(data(0, 3, 2), requires_grad=True)
    g = C(lambda x: ((x @ w) ** 2).mean())

    def step(i):
        w.grad = None
        loss = g(data(i, 4, 3))
        loss.backward()
        w.data = w.data - 0.1 * w.grad
        return loss, w
    return step


@case(3, n=8)
def lecture_data_rebind_with_value_and_grad(C):
    w = tt.tensor(data(0, 3, 2), requires_grad=True)
    g = C(lambda x: ((x @ w) ** 2).mean())

    def step(i):
        with tt.no_grad():
            out = g(data(i, 4, 3))
        w.data = w.data * 0.9
        return out, w
    return step


@case(3, ks=KS)
def data_rebound_at_call_k(C, k):
    w = tt.tensor(data(0, 3))
    g = C(lambda x: (x * w).sum())

    def step(i):
        if i + 1 == k:
            w.data = data(99, 3)
        return g(data(i, 3))
    return step


@case(3, ks=(3, 10))
def model_to_float64(C, k):
    m = nn.Linear(3, 2, rng=0)

    def step(i):
        if i + 1 == k:
            m.to(np.float64)
        with tt.no_grad():
            return g(data(i, 4, 3)), m
    g = C(lambda x: m(x))
    return step


@case(3, ks=(3, 10))
def model_to_float64_then_backward(C, k):
    m = nn.Linear(3, 2, rng=0)
    g = C(lambda x: (m(x) ** 2).mean())

    def step(i):
        if i + 1 == k:
            m.to(np.float64)
        m.zero_grad()
        loss = g(data(i, 4, 3))
        loss.backward()
        return loss, m
    return step


@case(3, ks=KS)
def weight_replaced_by_new_parameter(C, k):
    m = lin(3, 2)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.weight = nn.Parameter(data(7, 2, 3))
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(3, ks=(3, 10))
def buffer_data_rebound(C, k):
    bn = nn.BatchNorm1d(3, dtype=f64)
    bn.eval()
    g = C(lambda x: bn(x))

    def step(i):
        if i + 1 == k:
            bn.running_mean.data = np.full(3, 0.5)
        with tt.no_grad():
            return g(data(i, 4, 3)), bn
    return step


@case(3, ks=(3, 10))
def buffer_reassigned_with_new_array(C, k):
    bn = nn.BatchNorm1d(3, dtype=f64)
    bn.eval()
    g = C(lambda x: bn(x))

    def step(i):
        if i + 1 == k:
            bn.running_var = tt.tensor(np.full(3, 4.0))
        with tt.no_grad():
            return g(data(i, 4, 3)), bn
    return step


@case(3, ks=(3, 10))
def inplace_update_of_closed_over_tensor(C, k):
    w = tt.tensor(data(0, 3))
    g = C(lambda x: (x * w).sum())

    def step(i):
        if i + 1 >= k:
            w.data *= 0.5
        return g(data(i, 3))
    return step


@case(3)
def inplace_no_grad_sgd_every_call(C):
    w = tt.tensor(data(0, 3), requires_grad=True)
    g = C(lambda x: ((x * w) ** 2).sum())

    def step(i):
        nonlocal w
        w.grad = None
        g(data(i, 3)).backward()
        with tt.no_grad():
            w -= 0.1 * w.grad
        return w
    return step


@case(3, ks=(3, 10))
def inplace_update_of_closed_over_array(C, k):
    a = data(0, 3)
    g = C(lambda x: x * a)

    def step(i):
        if i + 1 == k:
            a[1] = 42.0
        return g(data(i, 3))
    return step


@case(3, ks=(3, 10))
def closed_over_tensor_variable_rebound(C, k):
    w = tt.tensor(data(0, 3))
    g = C(lambda x: (x * w).sum())

    def step(i):
        nonlocal w
        if i + 1 == k:
            w = tt.tensor(data(5, 3))
        return g(data(i, 3))
    return step


@case(3, ks=(3, 10))
def load_state_dict_at_call_k(C, k):
    m = lin(3, 2)
    other = lin(3, 2, seed=5)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.load_state_dict(other.state_dict())
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(3, ks=(3,))
def init_normal_inplace_at_call_k(C, k):
    m = lin(3, 2)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            nn.init.normal_(m.weight, rng=3)
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(3, ks=(3, 10))
def param_dtype_changed_via_data(C, k):
    w = tt.tensor(data(0, 3))
    g = C(lambda x: x * w)

    def step(i):
        if i + 1 == k:
            w.data = w.data.astype(np.float32)
        return g(data(i, 3).astype(np.float32))
    return step


@case(3, ks=(3, 10))
def param_shape_changed_via_data(C, k):
    w = tt.tensor(data(0, 3))
    g = C(lambda x: (w * 2).sum() + x.sum())

    def step(i):
        if i + 1 == k:
            w.data = data(1, 5)
        return g(data(i, 2))
    return step


@case(3, ks=(3, 10))
def tie_weights_at_call_k(C, k):
    a, b = lin(3, 3), lin(3, 3, seed=1)
    g = C(lambda x: b(a(x)))

    def step(i):
        if i + 1 == k:
            b.weight = a.weight
        with tt.no_grad():
            return g(data(i, 2, 3))
    return step


@case(3, ks=(3,))
def vector_to_parameters_at_call_k(C, k):
    m = lin(3, 2)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            nn.utils.vector_to_parameters(np.arange(8.0), m.parameters())
        with tt.no_grad():
            return g(data(i, 4, 3)), m
    return step


@case(3, ks=(3, 10))
def closed_over_dict_of_tensors_entry_replaced(C, k):
    P = {"w": tt.tensor(data(0, 3)), "b": tt.tensor(0.5)}
    g = C(lambda x: x * P["w"] + P["b"])

    def step(i):
        if i + 1 == k:
            P["w"] = tt.tensor(data(3, 3))
        return g(data(i, 3))
    return step


@case(3, ks=(3, 10))
def setitem_into_param_no_grad(C, k):
    m = lin(3, 2)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            with tt.no_grad():
                m.weight[...] = data(8, 2, 3)
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(3)
def object_style_readme_pattern_functional_call(C):
    m = nn.Sequential(lin(2, 8), nn.Tanh(), lin(8, 1, 1))
    opt = optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    named = dict(m.named_parameters())
    params = {n_: p.data for n_, p in named.items()}
    mse = nn.MSELoss()
    step_ = C(tt.value_and_grad(lambda p, x, y: mse(nn.functional_call(m, p, x), y)))

    def step(i):
        x = data(i, 8, 2)
        loss, grads = step_(params, x, np.sin(x[:, :1]))
        for n_, gr in grads.items():
            named[n_].grad = gr
        opt.step()
        return loss, m, opt
    return step


@case(3, ks=(3, 10))
def optimizer_after_to_float64(C, k):
    m = nn.Linear(3, 1, rng=0)
    g = C(lambda x, y: ((m(x) - y) ** 2).mean())

    def step(i):
        if i + 1 == k:
            m.to(np.float64)
        m.zero_grad()
        loss = g(data(i, 4, 3), data(i, 4, 1, seed=1))
        loss.backward()
        with tt.no_grad():
            for p in m.parameters():
                p -= 0.1 * p.grad
        return loss, m
    return step


# ====================================================================== class 4
# guards


@case(4, ks=KS)
def closed_over_np_float64_scale(C, k):
    scale = 1 / np.sqrt(f64(4))
    g = C(lambda x: x * scale)

    def step(i):
        nonlocal scale
        if i + 1 == k:
            scale = 1 / np.sqrt(f64(9))
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def closed_over_python_float(C, k):
    scale = 2.0
    g = C(lambda x: x * scale)

    def step(i):
        nonlocal scale
        if i + 1 == k:
            scale = 5.0
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def closed_over_list_mutated(C, k):
    coef = [1.0, 2.0]
    g = C(lambda x: x * coef[0] + coef[1])

    def step(i):
        if i + 1 == k:
            coef[0] = 7.0
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def closed_over_list_appended(C, k):
    coef = [1.0, 2.0]
    g = C(lambda x: x * sum(coef))

    def step(i):
        if i + 1 == k:
            coef.append(3.0)
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def closed_over_tuple_rebound(C, k):
    shift = (1.0, 2.0)
    g = C(lambda x: x * shift[0] + shift[1])

    def step(i):
        nonlocal shift
        if i + 1 == k:
            shift = (3.0, -1.0)
        return g(data(i, 3))
    return step


@case(4, ks=KS)
def closed_over_dict_mutated(C, k):
    cfg = {"scale": 1.0}
    g = C(lambda x: x * cfg["scale"])

    def step(i):
        if i + 1 == k:
            cfg["scale"] = 0.25
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def closed_over_dict_string_selects_activation(C, k):
    cfg = {"act": "tanh"}

    def f(x):
        return tt.tanh(x) if cfg["act"] == "tanh" else tt.relu(x)
    g = C(f)

    def step(i):
        if i + 1 == k:
            cfg["act"] = "relu"
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def global_float_rebound(C, k):
    global G_SCALE
    G_SCALE = 1.0
    g = C(lambda x: x * G_SCALE)

    def step(i):
        global G_SCALE
        if i + 1 == k:
            G_SCALE = 3.0
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def global_np_scalar_rebound(C, k):
    global G_NP
    G_NP = f64(0.5)
    g = C(lambda x: x * G_NP)

    def step(i):
        global G_NP
        if i + 1 == k:
            G_NP = f64(0.125)
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def global_list_mutated(C, k):
    G_LIST[:] = [1.0, 2.0]
    g = C(lambda x: x * G_LIST[0] + G_LIST[1])

    def step(i):
        if i + 1 == k:
            G_LIST[1] = -5.0
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def global_dict_mutated(C, k):
    G_DICT.clear()
    G_DICT.update(scale=1.0, act="tanh")
    g = C(lambda x: x * G_DICT["scale"])

    def step(i):
        if i + 1 == k:
            G_DICT["scale"] = 9.0
        return g(data(i, 3))
    return step


def _helper_reads_global(x):
    return x * G_SCALE + G_THRESH


@case(4, ks=(3, 10))
def global_read_by_helper_function(C, k):
    global G_SCALE, G_THRESH
    G_SCALE, G_THRESH = 1.0, 0.0
    g = C(lambda x: tt.tanh(_helper_reads_global(x)))

    def step(i):
        global G_THRESH
        if i + 1 == k:
            G_THRESH = 2.0
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def global_function_rebound(C, k):
    global G_ACT
    G_ACT = tt.tanh
    g = C(lambda x: G_ACT(x))

    def step(i):
        global G_ACT
        if i + 1 == k:
            G_ACT = tt.relu
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def global_bool_flag(C, k):
    global G_FLAG
    G_FLAG = True
    g = C(lambda x: x * 2 if G_FLAG else x * 3)

    def step(i):
        global G_FLAG
        if i + 1 == k:
            G_FLAG = False
        return g(data(i, 3))
    return step


@case(4, ks=KS)
def opt_param_groups_lr_read_inside(C, k):
    w = tt.tensor(data(0, 3), requires_grad=True)
    opt = optim.SGD([w], lr=0.1)

    def f(gr):
        return w.detach() - opt.param_groups[0]["lr"] * gr
    g = C(f)

    def step(i):
        if i + 1 == k:
            opt.param_groups[0]["lr"] = 0.01
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def bound_method_attribute_changes(C, k):
    class Scaler:
        def __init__(self):
            self.scale = 2.0

        def apply(self, x):
            return x * self.scale
    obj = Scaler()
    g = C(obj.apply)

    def step(i):
        if i + 1 == k:
            obj.scale = 0.5
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def bound_method_two_levels_deep(C, k):
    class Cfg:
        scale = 2.0

    class Model:
        def __init__(self):
            self.cfg = Cfg()

        def apply(self, x):
            return x * self.cfg.scale
    obj = Model()
    g = C(obj.apply)

    def step(i):
        if i + 1 == k:
            obj.cfg.scale = 0.5
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def class_attribute_changed(C, k):
    class Model:
        scale = 2.0

        def apply(self, x):
            return x * self.scale
    obj = Model()
    g = C(obj.apply)

    def step(i):
        if i + 1 == k:
            Model.scale = 0.25
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def bound_method_self_list_attribute(C, k):
    class Model:
        def __init__(self):
            self.weights = [1.0, 2.0]

        def apply(self, x):
            return x * self.weights[0] + self.weights[1]
    obj = Model()
    g = C(obj.apply)

    def step(i):
        if i + 1 == k:
            obj.weights[0] = -1.0
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def forward_hook_registered_after_first_call(C, k):
    m = lin(3, 2)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.register_forward_hook(lambda mod, inp, out: out * 2)
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(4, ks=(3, 10))
def forward_pre_hook_registered_later(C, k):
    m = lin(3, 2)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(4, ks=(3, 10))
def forward_hook_removed(C, k):
    m = lin(3, 2)
    handle = m.register_forward_hook(lambda mod, inp, out: out * 2)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            handle.remove()
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(4, ks=(3, 10))
def closed_over_module_variable_rebound(C, k):
    m = lin(3, 2)
    g = C(lambda x: m(x))

    def step(i):
        nonlocal m
        if i + 1 == k:
            m = lin(3, 2, seed=9)
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(4, ks=(3, 10))
def global_module_rebound(C, k):
    global G_MODEL
    G_MODEL = lin(3, 2)
    g = C(lambda x: G_MODEL(x))

    def step(i):
        global G_MODEL
        if i + 1 == k:
            G_MODEL = nn.Sequential(lin(3, 2, seed=4), nn.Tanh())
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(4, ks=(3, 10))
def closed_over_generator_rebound(C, k):
    gen = rng(1)
    g = C(lambda x: x + tt.randn(3, rng=gen))

    def step(i):
        nonlocal gen
        if i + 1 == k:
            gen = rng(2)
        return g(data(i, 3)), gen
    return step


@case(4, ks=(3, 10))
def global_generator_rebound(C, k):
    global G_GEN
    G_GEN = rng(1)
    g = C(lambda x: x + tt.randn(3, rng=G_GEN))

    def step(i):
        global G_GEN
        if i + 1 == k:
            G_GEN = rng(7)
        return g(data(i, 3)), G_GEN
    return step


@case(4, ks=(3, 10))
def inner_compiled_closure_changes(C, k):
    scale = 2.0
    inner = C(lambda x: x * scale)
    outer = C(lambda x: tt.tanh(inner(x)) + 1)

    def step(i):
        nonlocal scale
        if i + 1 == k:
            scale = -1.0
        return outer(data(i, 3))
    return step


@case(4, ks=(3, 10))
def function_defaults_changed(C, k):
    def f(x, scale=2.0):
        return x * scale
    g = C(f)

    def step(i):
        if i + 1 == k:
            f.__defaults__ = (5.0,)
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def kwdefaults_changed(C, k):
    def f(x, *, scale=2.0):
        return x * scale
    g = C(f)

    def step(i):
        if i + 1 == k:
            f.__kwdefaults__ = {"scale": 5.0}
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def sequential_layer_replaced(C, k):
    m = nn.Sequential(lin(3, 3), nn.Tanh(), lin(3, 1, 1))
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            setattr(m, "1", nn.ReLU())
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(4, ks=(3, 10))
def modulelist_appended(C, k):
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([lin(3, 3)])

        def forward(self, x):
            for layer in self.layers:
                x = tt.tanh(layer(x))
            return x
    m = Stack()
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.layers.append(lin(3, 3, seed=2))
        with tt.no_grad():
            return g(data(i, 2, 3)), m
    return step


@case(4, ks=(3, 10))
def submodule_attribute_replaced(C, k):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = lin(3, 3)
            self.act = nn.Tanh()

        def forward(self, x):
            return self.act(self.body(x))
    m = Net()
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.act = nn.Sigmoid()
        with tt.no_grad():
            return g(data(i, 2, 3))
    return step


@case(4, ks=(3, 10))
def leaky_relu_slope_changed(C, k):
    m = nn.LeakyReLU(0.1)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.negative_slope = 0.3
        return g(data(i, 5))
    return step


@case(4, ks=(3, 10))
def custom_module_string_attribute(C, k):
    class Act(nn.Module):
        def __init__(self):
            super().__init__()
            self.kind = "tanh"

        def forward(self, x):
            return tt.tanh(x) if self.kind == "tanh" else tt.sigmoid(x)
    m = Act()
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.kind = "sigmoid"
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def custom_module_tuple_attribute(C, k):
    class Aff(nn.Module):
        def __init__(self):
            super().__init__()
            self.ab = (2.0, 1.0)

        def forward(self, x):
            return x * self.ab[0] + self.ab[1]
    m = Aff()
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.ab = (0.5, -1.0)
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def layernorm_eps_changed(C, k):
    m = nn.LayerNorm(3, dtype=f64)
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.eps = 1.0
        with tt.no_grad():
            return g(data(i, 2, 3))
    return step


@case(4, ks=(3, 10))
def partial_keywords_mutated(C, k):
    def scaled(x, scale):
        return x * scale
    p = functools.partial(scaled, scale=2.0)
    g = C(p)

    def step(i):
        if i + 1 == k:
            p.keywords["scale"] = 3.0
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def string_argument_changes(C, k):
    def f(x, how):
        return x.sum() if how == "sum" else x.mean()
    g = C(f)

    def step(i):
        return g(data(i, 4), "sum" if i + 1 < k else "mean")
    return step


@case(4)
def nested_container_arguments(C):
    def f(batch):
        (a, b), extra = batch["pair"], batch["extra"]
        return a @ b + extra["bias"][0] * extra["scale"]
    g = C(f)

    def step(i):
        return g({"pair": (data(i, 2, 3), data(i, 3, 2, seed=1)),
                  "extra": {"bias": [data(i, 2, seed=2)], "scale": 0.5 * (i % 3)}})
    return step


@case(4, ks=(3, 10))
def nested_container_structure_changes(C, k):
    def f(xs):
        out = 0
        for x in xs["list"]:
            out = out + x.sum()
        return out
    g = C(f)

    def step(i):
        n_ = 2 if i + 1 < k else 3
        return g({"list": [data(i, 3, seed=j) for j in range(n_)]})
    return step


@case(4)
def kwargs_and_keyword_only(C):
    def f(x, *, scale, shift=0.0, **extra):
        y = x * scale + shift
        if "bias" in extra:
            y = y + extra["bias"]
        return y
    g = C(f)

    def step(i):
        kw = {"bias": data(i, 3, seed=3)} if i % 2 else {}
        return g(data(i, 3), scale=float(i % 3), **({"shift": 1.5} if i % 3 == 0 else {}), **kw)
    return step


@case(4)
def none_vs_array_argument(C):
    def f(x, bias=None):
        return x * 2 if bias is None else x * 2 + bias
    g = C(f)

    def step(i):
        return g(data(i, 3), None if i % 2 else data(i, 3, seed=1))
    return step


@case(4)
def int_vs_float_argument(C):
    g = C(lambda x, s: x * s)

    def step(i):
        return g(np.arange(3), 2 if i % 2 else 2.0)
    return step


@case(4)
def np_float32_vs_float64_scalar_argument(C):
    g = C(lambda x, s: x * s)

    def step(i):
        s = np.float32(1.5) if i % 2 else f64(1.5)
        # a Tensor argument: inside f, array arguments are Tensors (tinytensor's promotion: a NumPy
        # scalar is weak, float32 stays float32), so eager on a raw ndarray (NEP 50) is not the oracle
        return g(tt.tensor(np.arange(3, dtype=np.float32)), s)
    return step


@case(4)
def bool_argument(C):
    g = C(lambda x, neg: -x if neg else x)

    def step(i):
        return g(data(i, 3), bool(i % 2))
    return step


@case(4, ks=(3, 10))
def closure_of_wrapped_loss_np_scalar(C, k):
    lam = f64(0.1)

    def loss(w, x):
        return ((x @ w) ** 2).mean() + lam * (w ** 2).sum()
    g = C(tt.value_and_grad(loss))

    def step(i):
        nonlocal lam
        if i + 1 == k:
            lam = f64(1.0)
        return g(data(0, 3, 2), data(i, 4, 3))
    return step


@case(4, ks=(3, 10))
def closed_over_array_rebound(C, k):
    a = data(0, 3)
    g = C(lambda x: x * a)

    def step(i):
        nonlocal a
        if i + 1 == k:
            a = data(1, 3)
        return g(data(i, 3))
    return step


@case(4, ks=(3, 10))
def method_decorator_instance_attribute(C, k):
    class Model:
        def __init__(self, s):
            self.s = s

        @C
        def apply(self, x):
            return x * self.s
    a, b = Model(2.0), Model(3.0)

    def step(i):
        if i + 1 == k:
            a.s = 10.0
        return a.apply(data(i, 3)), b.apply(data(i, 3))
    return step


@case(4, ks=(3, 10))
def dropout_p_changed(C, k):
    d = nn.Dropout(0.5, rng=0)
    g = C(lambda x: d(x))

    def step(i):
        if i + 1 == k:
            d.p = 0.1
        return g(np.ones(8)), d
    return step


@case(4, ks=(3, 10))
def state_dict_of_module_in_closure_changes_numeric_attr(C, k):
    class Temp(nn.Module):
        def __init__(self):
            super().__init__()
            self.temperature = np.float32(1.0)

        def forward(self, x):
            return tt.softmax(x / self.temperature)
    m = Temp()
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.temperature = np.float32(0.5)
        return g(data(i, 4))
    return step


@case(4, want="either", ks=(3,))
def f_appends_to_closed_over_list(C, k):
    log = []

    def f(x):
        log.append(len(log))
        return x * len(log)
    g = C(f)

    def step(i):
        return g(data(i, 3)), list(log)
    return step


@case(4, want="either")
def f_rebinds_nonlocal_counter(C):
    count = 0

    def f(x):
        nonlocal count
        count += 1
        return x * count
    g = C(f)

    def step(i):
        return g(data(i, 3)), count
    return step


# ====================================================================== class 5
# values inside tinytensor's own code


def _mha(dropout=0.0):
    return nn.MultiheadAttention(4, 2, dropout=dropout, batch_first=True, rng=0, dtype=f64)


def _pad_mask(i, b=2, s=4):
    m = np.zeros((b, s), dtype=bool)
    for r in range(b):
        m[r, s - 1 - (i + r) % s:] = True
    m[:, 0] = False
    return m


@case(5)
def mha_key_padding_mask_per_batch(C):
    mha = _mha()
    g = C(lambda x, kpm: mha(x, x, x, key_padding_mask=kpm)[0].sum())

    def step(i):
        mha.zero_grad()
        out = g(data(i, 2, 4, 4), _pad_mask(i))
        out.backward()
        return out, mha
    return step


@case(5, ks=(3, 10))
def mha_key_padding_mask_changes_at_k(C, k):
    mha = _mha()
    g = C(lambda x, kpm: mha(x, x, x, key_padding_mask=kpm)[0])

    def step(i):
        with tt.no_grad():
            return g(data(i, 2, 4, 4), _pad_mask(0 if i + 1 < k else 1))
    return step


@case(5)
def mha_bool_attn_mask_per_batch(C):
    mha = _mha()
    g = C(lambda x, am: mha(x, x, x, attn_mask=am))

    def step(i):
        am = np.triu(np.ones((4, 4), dtype=bool), 1 + i % 3)
        with tt.no_grad():
            return g(data(i, 2, 4, 4), am)
    return step


@case(5)
def mha_float_attn_mask_per_batch(C):
    mha = _mha()
    g = C(lambda x, am: mha(x, x, x, attn_mask=am)[0])

    def step(i):
        with tt.no_grad():
            return g(data(i, 2, 4, 4), -data(i, 4, 4, seed=3) ** 2)
    return step


@case(5)
def sdpa_bool_mask_per_batch(C):
    g = C(lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m))

    def step(i):
        m = np.ones((3, 3), dtype=bool)
        m[:, 2 - i % 3] = False
        m[:, 0] = True
        return g(data(i, 1, 3, 2), m)
    return step


@case(5)
def mha_weights_with_padding_backward(C):
    mha = _mha()
    g = C(lambda x, kpm: (mha(x, x, x, key_padding_mask=kpm)[1] ** 2).sum())

    def step(i):
        mha.zero_grad()
        out = g(data(i, 2, 4, 4), _pad_mask(i))
        out.backward()
        return out, mha
    return step


@case(5)
def embedding_padding_idx_changing_inputs(C):
    emb = nn.Embedding(6, 3, padding_idx=0, rng=0, dtype=f64)
    g = C(lambda idx: (emb(idx) ** 2).sum())

    def step(i):
        emb.zero_grad()
        idx = np.array([(i + j) % 6 for j in range(5)])
        out = g(idx)
        out.backward()
        return out, emb
    return step


@case(5, ks=(3, 10))
def embedding_padding_appears_at_k(C, k):
    emb = nn.Embedding(6, 3, padding_idx=2, rng=0, dtype=f64)
    g = C(lambda idx: (emb(idx) * 1.5).sum())

    def step(i):
        emb.zero_grad()
        idx = np.array([1, 3, 4]) if i + 1 < k else np.array([1, 2, 2])
        out = g(idx)
        out.backward()
        return out, emb
    return step


@case(5)
def mask_by_comparison_then_astype(C):
    emb = nn.Embedding(5, 2, rng=0, dtype=f64)

    def f(tokens):
        m = (tokens == 0).astype(float)[..., None]
        return (emb(tokens) * (1 - m)).sum()
    g = C(f)

    def step(i):
        emb.zero_grad()
        out = g(np.array([[i % 5, 0, (i + 2) % 5], [0, 1, (3 * i) % 5]]))
        out.backward()
        return out, emb
    return step


@case(5)
def mask_from_argument_tensor_comparison(C):
    g = C(lambda x, k_: x * (k_ > 0).astype(np.float64))

    def step(i):
        return g(data(i, 4), tt.tensor(data(i, 4, seed=5)))
    return step


@case(5)
def clip_grad_norm_compiled_on_changing_grads(C):
    m = lin(3, 2)

    def f():
        return nn.utils.clip_grad_norm_(m.parameters(), 0.5)
    g = C(f)

    def step(i):
        m.zero_grad()
        (m(data(i, 4, 3)) ** 2).sum().backward() if i % 2 else ((m(data(i, 4, 3)) * 0.01).sum()).backward()
        return g(), m
    return step


@case(5)
def clip_grad_value_compiled(C):
    m = lin(3, 2)
    g = C(lambda: nn.utils.clip_grad_value_(m.parameters(), 0.3))

    def step(i):
        m.zero_grad()
        (m(data(i, 4, 3)) ** 2).sum().backward()
        g()
        return m
    return step


@case(5, want="either")
def python_random_inside(C):
    g = C(lambda x: x * random.random())

    def step(i):
        return g(data(i, 3))
    return step


@case(5, want="either")
def python_random_choice_of_index(C):
    g = C(lambda x: x[random.choice([0, 1, 2])] * 2)

    def step(i):
        return g(data(i, 3))
    return step


@case(5)
def cross_entropy_changing_labels(C):
    m = lin(3, 4)
    g = C(lambda x, y: F.cross_entropy(m(x), y))

    def step(i):
        m.zero_grad()
        out = g(data(i, 5, 3), np.array([(i + j) % 4 for j in range(5)]))
        out.backward()
        return out, m
    return step


@case(5, ks=(3, 10))
def cross_entropy_ignore_index_appears(C, k):
    m = lin(3, 4)
    loss_fn = nn.CrossEntropyLoss()
    g = C(lambda x, y: loss_fn(m(x), y))

    def step(i):
        m.zero_grad()
        y = np.array([1, 2, 3, 0])
        if i + 1 >= k:
            y[1] = -100
        out = g(data(i, 4, 3), y)
        out.backward()
        return out, m
    return step


@case(5)
def cross_entropy_weight_and_smoothing_labels(C):
    loss_fn = nn.CrossEntropyLoss(weight=np.array([1.0, 2.0, 0.5]), label_smoothing=0.1)
    g = C(lambda z, y: loss_fn(z, y))

    def step(i):
        return g(data(i, 4, 3), np.array([(i * j) % 3 for j in range(4)]))
    return step


@case(5)
def nll_loss_changing_labels(C):
    g = C(lambda z, y: nn.NLLLoss()(tt.log_softmax(z), y))

    def step(i):
        return g(data(i, 4, 3), np.array([(i + 2 * j) % 3 for j in range(4)]))
    return step


@case(5)
def changing_integer_indices(C):
    W = tt.tensor(data(0, 6, 2), requires_grad=True)
    g = C(lambda idx: (W[idx] ** 2).sum())

    def step(i):
        W.grad = None
        out = g(np.array([i % 6, (i + 3) % 6, (2 * i) % 6]))
        out.backward()
        return out, W
    return step


@case(5)
def take_along_axis_changing(C):
    g = C(lambda x, idx: tt.take_along_axis(x, idx, axis=1).sum())

    def step(i):
        return g(data(i, 3, 4), np.array([[i % 4], [(i + 1) % 4], [(i + 2) % 4]]))
    return step


@case(5)
def fancy_index_pairs_changing(C):
    g = C(lambda x, r, c: x[r, c])

    def step(i):
        return g(data(i, 2, 3), np.array([0, 1, 1]), np.array([i % 3, 0, (i + 1) % 3]))
    return step


@case(5)
def eye_rows_changing_labels(C):
    g = C(lambda y, z: (tt.tensor(np.eye(4))[y] * z).sum())

    def step(i):
        return g(np.array([i % 4, (i + 1) % 4]), data(i, 2, 4))
    return step


@case(5, ks=(3, 10))
def value_and_grad_number_arg_closed_over_array_updated(C, k):
    X = data(0, 4, 3)

    def loss(w, lam):
        return ((X @ w) ** 2).mean() + lam * (w ** 2).sum()
    g = C(tt.value_and_grad(loss))

    def step(i):
        if i + 1 >= k:
            X[...] = data(i, 4, 3)
        return g(data(0, 3), 0.1)
    return step


@case(5)
def masked_fill_changing_mask(C):
    g = C(lambda x, m: tt.softmax(x.masked_fill(m, -1e9)))

    def step(i):
        m = np.zeros((2, 3), dtype=bool)
        m[0, i % 3] = True
        return g(tt.tensor(data(i, 2, 3)), m)
    return step


@case(5)
def where_with_numpy_mask_argument(C):
    g = C(lambda x, m: tt.where(m, x, 0.0).sum())

    def step(i):
        return g(data(i, 4), data(i, 4, seed=6) > 0)
    return step


@case(5)
def huber_branch_values(C):
    g = C(lambda a, b: nn.HuberLoss(delta=0.5)(a, b))

    def step(i):
        return g(data(i, 5) * (i + 1), data(i, 5, seed=1))
    return step


@case(5)
def argsort_top2_changing(C):
    g = C(lambda x: x[tt.argsort(x)[-2:]].sum())

    def step(i):
        return g(data(i, 5))
    return step


@case(5)
def multinomial_draws(C):
    g = C(lambda p: tt.multinomial(p, 2))

    def step(i):
        return g(np.array([0.1, 0.2, 0.3, 0.4]))
    return step


@case(5)
def sort_and_median(C):
    g = C(lambda x: np.median(x) + np.sort(x)[0])

    def step(i):
        return g(tt.tensor(data(i, 5)))
    return step


@case(5)
def normalize_near_zero(C):
    g = C(lambda x: x / tt.maximum(tt.sqrt((x * x).sum(axis=-1, keepdims=True)), 1e-12))

    def step(i):
        return g(data(i, 2, 3) * (1e-14 if i % 2 else 1.0))
    return step


@case(5)
def relu_bce_with_logits_pos_weight(C):
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=np.array([2.0, 0.5]))
    g = C(lambda z, y: loss_fn(z, y))

    def step(i):
        return g(data(i, 3, 2), (data(i, 3, 2, seed=1) > 0).astype(f64))
    return step


@case(5)
def gru_changing_batches(C):
    r = nn.GRU(2, 3, batch_first=True, dtype=f64)
    g = C(lambda x: r(x)[1])

    def step(i):
        with tt.no_grad():
            return g(data(i, 2, 4, 2) * (1 + i))
    return step


@case(5)
def dropout_functional_training_arg(C):
    g = C(lambda x, tr: F.dropout(x, 0.3, training=tr))

    def step(i):
        return g(np.ones(6), bool(i % 2))
    return step


# ====================================================================== class 6
# whole training steps


def _train_case(opt_fn, model_fn=mlp, clip=None, sched_fn=None, n_zero_first=True):
    def build(C):
        m = model_fn()
        opt = opt_fn(m.parameters())
        sch = sched_fn(opt) if sched_fn else None

        def train_step(x, y):
            if n_zero_first:
                opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(m.parameters(), clip)
            opt.step()
            if not n_zero_first:
                opt.zero_grad()
            if sch is not None:
                sch.step()
            return loss
        g = C(train_step)

        def step(i):
            loss = g(data(i, 4, 3), data(i, 4, 2, seed=1))
            return loss, m, opt, sch
        return step
    return build


def _reg(name, build, n=8, want="equal"):
    build.__name__ = name
    case(6, want=want, n=n)(build)


_reg("train_step_sgd", _train_case(lambda p: optim.SGD(p, lr=0.1)))
_reg("train_step_sgd_momentum", _train_case(lambda p: optim.SGD(p, lr=0.1, momentum=0.9)))
_reg("train_step_sgd_nesterov_wd", _train_case(
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)))
_reg("train_step_adam", _train_case(lambda p: optim.Adam(p, lr=0.01)))
_reg("train_step_adamw", _train_case(lambda p: optim.AdamW(p, lr=0.01)))
_reg("train_step_rmsprop", _train_case(lambda p: optim.RMSprop(p, lr=0.01, momentum=0.5)))
_reg("train_step_adam_40_calls", _train_case(lambda p: optim.Adam(p, lr=0.01)), n=40)
_reg("train_step_sgd_clip_grad_norm", _train_case(lambda p: optim.SGD(p, lr=0.5), clip=0.5))
_reg("train_step_adamw_clip", _train_case(lambda p: optim.AdamW(p, lr=0.05), clip=0.1), n=12)
_reg("train_step_sgd_steplr", _train_case(
    lambda p: optim.SGD(p, lr=0.1), sched_fn=lambda o: sched.StepLR(o, 3, 0.5)), n=10)
_reg("train_step_adam_cosine_sched", _train_case(
    lambda p: optim.Adam(p, lr=0.05), sched_fn=lambda o: sched.CosineAnnealingLR(o, 10)), n=12)
_reg("train_step_sgd_lambdalr", _train_case(
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
    sched_fn=lambda o: sched.LambdaLR(o, lambda e: 1 / (1 + e))), n=10)
_reg("train_step_zero_grad_after_step", _train_case(
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9), n_zero_first=False))
_reg("train_step_batchnorm_adam", _train_case(
    lambda p: optim.Adam(p, lr=0.01),
    model_fn=lambda: nn.Sequential(lin(3, 5), nn.BatchNorm1d(5, dtype=f64), nn.ReLU(), lin(5, 2, 1))))
_reg("train_step_dropout_sgd", _train_case(
    lambda p: optim.SGD(p, lr=0.1),
    model_fn=lambda: nn.Sequential(lin(3, 5), nn.Dropout(0.3, rng=4), nn.Tanh(), lin(5, 2, 1))))
_reg("train_step_layernorm_adamw", _train_case(
    lambda p: optim.AdamW(p, lr=0.01),
    model_fn=lambda: nn.Sequential(lin(3, 5), nn.LayerNorm(5, dtype=f64), nn.GELU(), lin(5, 2, 1))))
_reg("train_step_float32_model_sgd", _train_case(
    lambda p: optim.SGD(p, lr=0.1),
    model_fn=lambda: nn.Sequential(nn.Linear(3, 5, rng=0), nn.Tanh(), nn.Linear(5, 2, rng=1))))
_reg("train_step_param_groups", _train_case(
    lambda p: (lambda ps: optim.SGD([{"params": ps[:2], "lr": 0.1},
                                     {"params": ps[2:], "lr": 0.01, "momentum": 0.9}], lr=0.05))(
        list(p))))


@case(6, ks=(3, 10))
def train_step_lr_changed_outside_at_k(C, k):
    m = mlp()
    opt = optim.SGD(m.parameters(), lr=0.1)

    def train_step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        if i + 1 == k:
            opt.param_groups[0]["lr"] = 0.01
        return g(data(i, 4, 3), data(i, 4, 2, seed=1)), m, opt
    return step


@case(6, n=8)
def train_step_grad_accumulation_two_microbatches(C):
    m = mlp()
    opt = optim.Adam(m.parameters(), lr=0.01)

    def train_step(xs, ys):
        opt.zero_grad()
        total = 0.0
        for x, y in zip(xs, ys):
            loss = ((m(x) - y) ** 2).mean() / len(xs)
            loss.backward()
            total = total + loss.detach()
        opt.step()
        return total
    g = C(train_step)

    def step(i):
        xs = [data(i, 2, 3), data(i, 2, 3, seed=2)]
        return g(xs, [data(i, 2, 2, seed=1), data(i, 2, 2, seed=3)]), m, opt
    return step


@case(6, n=8)
def train_step_returns_loss_item(C):
    m = mlp()
    opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.item()
    g = C(train_step)

    def step(i):
        return g(data(i, 4, 3), data(i, 4, 2, seed=1)), m, opt
    return step


@case(6, n=8)
def train_step_cross_entropy_changing_labels_adam(C):
    m = nn.Sequential(lin(3, 6), nn.ReLU(), lin(6, 4, 1))
    opt = optim.Adam(m.parameters(), lr=0.01)
    ce = nn.CrossEntropyLoss()

    def train_step(x, y):
        opt.zero_grad()
        loss = ce(m(x), y)
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        return g(data(i, 5, 3), np.array([(i + j) % 4 for j in range(5)])), m, opt
    return step


@case(6, n=8)
def train_step_value_and_grad_inside_manual_update(C):
    params = {"W": data(0, 3, 2), "b": np.zeros(2)}

    def loss(p, x, y):
        return ((tt.linear(x, p["W"], p["b"]) - y) ** 2).mean()

    def sgd_step(p, x, y):
        v, gr = tt.value_and_grad(loss)(p, x, y)
        return v, {k_: p[k_] - 0.1 * gr[k_] for k_ in p}
    g = C(sgd_step)

    def step(i):
        nonlocal params
        v, params = g(params, data(i, 4, 3), data(i, 4, 2, seed=1))
        return v, params
    return step


@case(6, n=10)
def train_step_scheduler_reduce_on_plateau(C):
    m = mlp()
    opt = optim.SGD(m.parameters(), lr=0.1)
    plateau = sched.ReduceLROnPlateau(opt, factor=0.5, patience=1)

    def train_step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        plateau.step(loss.item())
        return loss
    g = C(train_step)

    def step(i):
        return g(data(i % 2, 4, 3), data(i % 2, 4, 2, seed=1)), m, opt
    return step


@case(6, ks=(3, 10))
def train_step_model_train_eval_toggle(C, k):
    m = nn.Sequential(lin(3, 5), nn.Dropout(0.5, rng=1), lin(5, 2, 1))
    opt = optim.SGD(m.parameters(), lr=0.1)

    def train_step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        if i + 1 == k:
            m.eval()
        return g(data(i, 4, 3), data(i, 4, 2, seed=1)), m, opt
    return step


@case(6, n=6)
def train_step_embedding_padding_sgd(C):
    emb = nn.Embedding(6, 3, padding_idx=0, rng=0, dtype=f64)
    head = lin(3, 1)
    opt = optim.SGD(list(emb.parameters()) + list(head.parameters()), lr=0.1, momentum=0.9)

    def train_step(idx, y):
        opt.zero_grad()
        loss = ((head(emb(idx)).sum(axis=1) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        idx = np.array([[i % 6, 0, (i + 1) % 6], [(2 * i) % 6, 3, 0]])
        return g(idx, data(i, 2, 1)), emb, head, opt
    return step


@case(6, n=6)
def train_step_mha_padding_adam(C):
    mha = _mha()
    opt = optim.Adam(mha.parameters(), lr=0.01)

    def train_step(x, kpm):
        opt.zero_grad()
        out, _ = mha(x, x, x, key_padding_mask=kpm)
        loss = (out ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        return g(data(i, 2, 4, 4), _pad_mask(i)), mha, opt
    return step


# ====================================================================== class 7
# changing floats, randomness, modes


def _cosine(i, n=40, base=0.1):
    return 0.5 * base * (1 + math.cos(math.pi * i / n))


@case(7, n=40, max_traces=2)
def cosine_lr_float_argument(C):
    w = data(0, 3, 2)

    def step_fn(w, x, lr):
        v, gr = tt.value_and_grad(lambda w_: ((x @ w_) ** 2).mean())(w)
        return v, w - lr * gr
    g = C(step_fn)

    def step(i):
        nonlocal w
        v, w = g(w, data(i, 4, 3), _cosine(i))
        return v, w
    return step


@case(7, n=40, max_traces=2)
def cosine_lr_keyword_only(C):
    def f(w, gr, *, lr):
        return w - lr * gr
    g = C(f)

    def step(i):
        return g(data(0, 3), data(i, 3), lr=_cosine(i))
    return step


@case(7, n=40, max_traces=3)
def cosine_lr_in_nested_dict(C):
    g = C(lambda w, hp: w * (1 - hp["opt"]["lr"]) - hp["opt"]["wd"][0] * w)

    def step(i):
        return g(data(0, 3), {"opt": {"lr": _cosine(i), "wd": [1e-3 * (i % 2)]}})
    return step


@case(7, n=40, max_traces=2)
def cosine_lr_np_float32_argument(C):
    g = C(lambda w, lr: w * lr)

    def step(i):
        return g(data(0, 3).astype(np.float32), np.float32(_cosine(i)))
    return step


@case(7, n=40, max_traces=3)
def cosine_lr_default_overridden_sometimes(C):
    def f(w, lr=0.1):
        return w * lr
    g = C(f)

    def step(i):
        return g(data(0, 3)) if i % 3 == 0 else g(data(0, 3), lr=_cosine(i))
    return step


@case(7, n=40, max_traces=2)
def cosine_lr_object_step_with_optimizer_inside(C):
    m = mlp()
    opt = optim.SGD(m.parameters(), lr=0.1)

    def train_step(x, y, lr):
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        return g(data(i, 4, 3), data(i, 4, 2, seed=1), _cosine(i)), m, opt
    return step


@case(7, n=40, max_traces=2)
def temperature_argument_every_call(C):
    g = C(lambda z, t: tt.softmax(z / t))

    def step(i):
        return g(data(0, 4), 0.5 + i / 40)
    return step


@case(7, n=12)
def dropout_module_over_calls(C):
    d = nn.Dropout(0.5, rng=3)
    g = C(lambda x: d(x))

    def step(i):
        return g(np.ones(8)), d
    return step


@case(7, n=12)
def dropout_global_generator_over_calls(C):
    g = C(lambda x: F.dropout(x, 0.5))

    def step(i):
        return g(np.ones(8))
    return step


@case(7, n=12)
def randn_global_over_calls(C):
    g = C(lambda x: x + tt.randn(3))

    def step(i):
        return g(data(i, 3))
    return step


@case(7, n=12)
def rand_generator_argument(C):
    gen = rng(5)
    g = C(lambda x, r: x * tt.rand(3, rng=r))

    def step(i):
        return g(data(i, 3), gen), gen
    return step


@case(7, n=12)
def randn_seed_argument_changes(C):
    g = C(lambda x, s: x + tt.randn(3, rng=s))

    def step(i):
        return g(data(0, 3), i)
    return step


@case(7, n=12)
def manual_seed_between_calls(C):
    g = C(lambda x: x + tt.randn(3))

    def step(i):
        if i % 3 == 0:
            tt.manual_seed(i)
        return g(data(0, 3))
    return step


@case(7, ks=KS)
def train_to_eval_dropout(C, k):
    m = nn.Sequential(lin(3, 3), nn.Dropout(0.5, rng=2))
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.eval()
        with tt.no_grad():
            return g(data(i, 2, 3)), m
    return step


@case(7, ks=KS)
def eval_to_train_batchnorm(C, k):
    m = nn.Sequential(lin(3, 3), nn.BatchNorm1d(3, dtype=f64))
    m.eval()
    g = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.train()
        with tt.no_grad():
            return g(data(i, 4, 3)), m
    return step


@case(7, n=10)
def modes_alternate_every_call(C):
    m = nn.Sequential(lin(3, 3), nn.BatchNorm1d(3, dtype=f64), nn.Dropout(0.3, rng=2))
    g = C(lambda x: m(x))

    def step(i):
        m.train(i % 2 == 0)
        with tt.no_grad():
            return g(data(i, 4, 3)), m
    return step


@case(7, ks=(3, 10))
def mode_toggled_inside_f(C, k):
    m = nn.Sequential(lin(3, 3), nn.Dropout(0.5, rng=2))

    def f(x, evaluate):
        m.train(not evaluate)
        return m(x)
    g = C(f)

    def step(i):
        with tt.no_grad():
            return g(data(i, 2, 3), i + 1 >= k), m
    return step


@case(7, ks=(3, 10))
def no_grad_toggled_around_compiled(C, k):
    m = lin(3, 2)
    g = C(lambda x: (m(x) ** 2).sum())

    def step(i):
        m.zero_grad()
        if i + 1 >= k:
            with tt.no_grad():
                return g(data(i, 4, 3)), m
        out = g(data(i, 4, 3))
        out.backward()
        return out, m
    return step


@case(7, n=8)
def inference_mode_around_compiled(C):
    m = lin(3, 2)
    g = C(lambda x: m(x))

    def step(i):
        if i % 2:
            with tt.inference_mode():
                return g(data(i, 4, 3))
        with tt.no_grad():
            return g(data(i, 4, 3))
    return step


@case(7, n=12)
def mha_dropout_over_calls(C):
    mha = _mha(dropout=0.3)
    g = C(lambda x: mha(x, x, x)[0])

    def step(i):
        with tt.no_grad():
            return g(data(i, 2, 4, 4)), mha
    return step


@case(7, n=10)
def multinomial_sampling_with_temperature(C):
    g = C(lambda z, t: tt.multinomial(tt.softmax(z / t), 1))

    def step(i):
        return g(data(0, 5), 0.3 + 0.1 * i)
    return step


@case(7, n=40, max_traces=3)
def float_argument_int_sometimes(C):
    g = C(lambda x, s: x * s + s)

    def step(i):
        return g(data(0, 3), i if i % 5 == 0 else i * 0.37)
    return step


@case(7, n=40, max_traces=2)
def linear_warmup_lr_argument_with_adam_inside(C):
    m = lin(3, 2)
    opt = optim.Adam(m.parameters(), lr=0.01)

    def train_step(x, y, lr):
        for gr in opt.param_groups:
            gr["lr"] = lr
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        return g(data(i, 4, 3), data(i, 4, 2, seed=1), 0.01 * min(1.0, (i + 1) / 10)), m, opt
    return step


# ====================================================================== more, across classes


@case(1, n=12)
def branch_alternates_every_call(C):
    def f(x):
        if x.sum() > 0:
            return tt.exp(x)
        return tt.sin(x)
    g = C(f)

    def step(i):
        return g(np.abs(data(i, 3)) * (1 if i % 2 else -1))
    return step


@case(1, ks=(3, 10))
def branch_on_closed_over_param_value(C, k):
    w = tt.tensor(np.array([1.0, 2.0]))
    g = C(lambda x: x * 2 if w.sum() > 0 else x * 5)

    def step(i):
        if i + 1 == k:
            w.data = -w.data
        return g(data(i, 2))
    return step


@case(2)
def jvp_through_compiled_closed_over(C):
    W = tt.tensor(data(0, 3, 2), requires_grad=True)
    g = C(lambda x: tt.tanh(x @ W))

    def step(i):
        return tt.jvp(g, (data(i, 4, 3),), (np.ones((4, 3)),))
    return step


@case(2)
def no_grad_inside_f_for_a_target(C):
    m = lin(3, 2)
    t = lin(3, 2, seed=3)

    def f(x):
        with tt.no_grad():
            target = t(x)
        return ((m(x) - target) ** 2).mean()
    g = C(f)

    def step(i):
        m.zero_grad()
        t.zero_grad()
        loss = g(data(i, 4, 3))
        loss.backward()
        return loss, m, t
    return step


@case(2)
def detach_inside_f(C):
    m = lin(3, 2)
    g = C(lambda x: (m(x) * m(x).detach()).sum())

    def step(i):
        m.zero_grad()
        loss = g(data(i, 4, 3))
        loss.backward()
        return loss, m
    return step


@case(3, ks=(3, 10))
def argument_tensor_same_object_updated_in_place(C, k):
    x = tt.tensor(data(0, 3))
    g = C(lambda t: tt.exp(t).sum())

    def step(i):
        if i + 1 >= k:
            x.data[...] = data(i, 3)
        return g(x)
    return step


@case(6, ks=(3, 10))
def train_step_optimizer_state_loaded_at_k(C, k):
    m = mlp()
    opt = optim.Adam(m.parameters(), lr=0.01)
    saved = None

    def train_step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        nonlocal saved
        if i == 1:
            saved = opt.state_dict()
        if i + 1 == k:
            opt.load_state_dict(saved)
        return g(data(i, 4, 3), data(i, 4, 2, seed=1)), m, opt
    return step


@case(6, n=8)
def train_step_zero_grad_keep_arrays(C):
    m = mlp()
    opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        opt.zero_grad(set_to_none=False)
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        return g(data(i, 4, 3), data(i, 4, 2, seed=1)), m, opt
    return step


@case(6, n=10)
def train_step_scheduler_outside(C):
    m = mlp()
    opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    sch = sched.ExponentialLR(opt, 0.8)

    def train_step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        out = g(data(i, 4, 3), data(i, 4, 2, seed=1))
        sch.step()
        return out, m, opt, sch
    return step


@case(6, n=8)
def train_step_batch_size_changes(C):
    m = mlp()
    opt = optim.AdamW(m.parameters(), lr=0.01)

    def train_step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    g = C(train_step)

    def step(i):
        b = 3 + i % 3
        return g(data(i, b, 3), data(i, b, 2, seed=1)), m, opt
    return step


@case(6, n=8)
def train_step_two_optimizers(C):
    enc, head = lin(3, 4), lin(4, 2, 1)
    o1, o2 = optim.SGD(enc.parameters(), lr=0.1), optim.Adam(head.parameters(), lr=0.01)

    def train_step(x, y):
        o1.zero_grad()
        o2.zero_grad()
        loss = ((head(tt.tanh(enc(x))) - y) ** 2).mean()
        loss.backward()
        o1.step()
        o2.step()
        return loss
    g = C(train_step)

    def step(i):
        return g(data(i, 4, 3), data(i, 4, 2, seed=1)), enc, head, o1, o2
    return step


@case(6, ks=(3, 10))
def train_step_eval_pass_inside_toggles_modes(C, k):
    m = nn.Sequential(lin(3, 5), nn.BatchNorm1d(5, dtype=f64), nn.Dropout(0.2, rng=3), lin(5, 2, 1))
    opt = optim.SGD(m.parameters(), lr=0.1)

    def train_step(x, y, validate):
        m.train()
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        if validate:
            m.eval()
            with tt.no_grad():
                return loss, ((m(x) - y) ** 2).mean()
        return loss, None
    g = C(train_step)

    def step(i):
        return g(data(i, 4, 3), data(i, 4, 2, seed=1), i + 1 >= k), m, opt
    return step


@case(7, n=12)
def dropout_in_eval_under_grad_then_train(C):
    m = nn.Sequential(lin(3, 3), nn.Dropout(0.5, rng=2))
    g = C(lambda x: (m(x) ** 2).sum())

    def step(i):
        m.train(i % 3 != 0)
        m.zero_grad()
        out = g(data(i, 2, 3))
        out.backward()
        return out, m
    return step

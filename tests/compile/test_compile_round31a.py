"""Round 31a: a fresh user's compile-vs-eager cases for ``tt.compile``.

Every case builds the same set-up twice from the same seeds, runs it eagerly and under
``tt.compile``, applies the same outside change before the 3rd, 10th or 40th call (the ``-atN``
suffix; some cases run 42 calls with a number changing every call) and compares after every call,
bit for bit (type, dtype, shape, bytes), the result, parameters and ``.grad``, module buffers,
optimizer state and learning rate, and the tinytensor, NumPy-global and ``random`` generator
states.  A compiled refusal passes only where docs/guides/compile.md lists it for the pattern.

Classes: c1 control flow on tensor values; c2 gradients to closed-over parameters through a
compiled call; c3 parameters captured by identity; c4 guards; c5 values read inside tinytensor
layers; c6 whole training steps; c7 floats changing every call (``.recompiles`` checked where the
docs promise one program).

Counts: 837 cases; 824 equal (or a refusal the docs list: c6 ``.item()`` after the step), 13
strict xfail. Per class (cases/equal/xfail):
c1 102/102/0, c2 51/51/0, c3 60/60/0, c4 354/341/13, c5 78/78/0, c6 160/160/0, c7 32/32/0.

Strict xfails, all class c4 (guards), all silent (a stale value, no warning, no refusal):
  c4-float_subclass_attr (at 3, 10, 40): attribute of a float-subclass number in a closed list not
    guarded: stale value
  c4-dataclass_astuple (at 3, 10): dataclasses.astuple(cfg) of a closed-over dataclass: a field
    changed later is not seen
  c4-simplenamespace_eq (at 3, 10): SimpleNamespace == (C __eq__ reads its __dict__): an attribute
    changed later is not seen
  c4-repr_of_namespace_len (at 3, 10): repr(SimpleNamespace) (C code reads its __dict__): an
    attribute changed later is not seen
  c4-str_of_namespace_in_branch (at 3, 10): str(SimpleNamespace) in a branch: an attribute changed
    later is not seen
  c4-float_subclass_attr_in_dict (at 3, 10): attribute of a float-subclass number held in a dict:
    stale value
"""

import collections
import dataclasses
import math
import random
import types
import warnings

import numpy as np
import pytest

import tinytensor as tt

nn = tt.nn
F = tt.nn.functional

CHANGE_AT = (3, 10, 40)  # the call (1-based) before which the outside change is made


# ----------------------------------------------------------------------------------------------
# harness
# ----------------------------------------------------------------------------------------------


def seed_all():
    tt.manual_seed(0)
    np.random.seed(0)
    random.seed(0)


def snap(x, depth=0):
    """A bit-for-bit description: type, dtype, shape, bytes."""
    if depth > 12:
        return ("deep",)
    if isinstance(x, tt.Tensor):
        g = x.grad
        return ("T", bool(x.requires_grad), snap(x.data, depth + 1), snap(g, depth + 1))
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return ("O", x.shape, tuple(snap(v, depth + 1) for v in x.ravel()))
        return ("A", x.dtype.str, x.shape, np.ascontiguousarray(x).tobytes())
    if isinstance(x, np.generic):
        return ("S", type(x).__name__, x.tobytes())
    if isinstance(x, (bool, int, str, type(None))):
        return (type(x).__name__, repr(x))
    if isinstance(x, float):
        return ("float", np.float64(x).tobytes())
    if isinstance(x, dict):
        return ("dict", type(x).__name__, tuple((repr(k), snap(v, depth + 1)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(snap(v, depth + 1) for v in x))
    if isinstance(x, BaseException):
        return ("exc", type(x).__name__)
    return ("other", type(x).__name__)


def gen_states():
    return (
        snap(tt.get_rng_state()),
        snap(np.random.get_state()[1]),
        np.random.get_state()[2],
        random.getstate(),
    )


class Env(types.SimpleNamespace):
    """f: the function compiled; args(i): call arguments; call(fn, i): custom call;
    change(i): outside change before call i (0-based); state(): objects compared."""


def run(build, n, compiled):
    seed_all()
    env = build()
    fn = tt.compile(env.f) if compiled else env.f
    rows = []
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(n):
            if getattr(env, "change", None) is not None:
                env.change(i)
            try:
                if getattr(env, "call", None) is not None:
                    r = env.call(fn, i)
                else:
                    r = fn(*env.args(i))
            except Exception as e:  # noqa: BLE001
                error = e
                rows.append(("raised", type(e).__name__))
                break
            st = env.state() if getattr(env, "state", None) is not None else None
            rows.append((snap(r), snap(st), gen_states()))
    return rows, fn, error, caught


def check(build, n, refuse=None, max_programs=None):
    eager, _, eerr, _ = run(build, n, False)
    comp, fn, cerr, caught = run(build, n, True)
    if cerr is not None and eerr is None:
        msg = str(cerr)
        if isinstance(cerr, RuntimeError) and "tt.compile" in msg:
            assert refuse is not None and any(s in msg for s in refuse), f"false refusal: {msg[:300]}"
            return
        raise AssertionError(f"compiled raised where eager ran: {type(cerr).__name__}: {msg[:300]}")
    for i, (a, b) in enumerate(zip(eager, comp)):
        assert a == b, f"call {i + 1} differs (warnings: {[str(w.message)[:80] for w in caught]})"
    assert len(eager) == len(comp)
    if max_programs is not None:
        assert len(fn.recompiles) <= max_programs, fn.recompiles


def data(i, *shape, scale=1.0, dtype=np.float32):
    return (np.random.default_rng(1000 + i).standard_normal(shape) * scale).astype(dtype)


def labels(i, n, k):
    return np.random.default_rng(2000 + i).integers(0, k, n)


def params_state(model, opt=None):
    st = [list(model.parameters())]
    st.append({k: v for k, v in model.state_dict().items()})
    if opt is not None:
        st.append(opt.state_dict())
    return st


CASES = []


# Fixed since the round was written: every xfail found was in c4, and all are equal to eager now
# (a float subclass's attributes, and every field of a SimpleNamespace or a dataclass, are guarded).
FIXED_CLASSES = {"c4"}


def case(cls, name, n_of=lambda at: at + 2, refuse=None, max_programs=None, xfail=None, ats=CHANGE_AT):
    """Register build(at) for each change position."""

    def deco(factory):
        for at in ats:
            cid = f"{cls}-{name}-at{at}"
            marks = ()
            xf = xfail(at) if callable(xfail) else xfail
            if xf and cls not in FIXED_CLASSES:
                marks = (pytest.mark.xfail(strict=True, reason=f"{cls}: {xf}"),)
            CASES.append(pytest.param(factory, at - 1, n_of(at), refuse, max_programs, id=cid, marks=marks))
        return factory

    return deco


# ----------------------------------------------------------------------------------------------
# class 1: Python control flow on tensor values
# ----------------------------------------------------------------------------------------------


def _lin(i=3, o=2, seed=0, **kw):
    return nn.Linear(i, o, rng=seed, **kw)


@case("c1", "if_loss_gt_flip_weight")
def _(at):
    def build():
        m = _lin()

        def f(x):
            y = m(x).sum()
            if y > 0:
                return y * 2
            return -y

        def change(i):
            if i == at:
                m.weight.data = -m.weight.data

        return Env(f=f, args=lambda i: (data(0, 4, 3),), change=change, state=lambda: params_state(m))

    return build


@case("c1", "float_branch_input_sign")
def _(at):
    def build():
        def f(x):
            s = float(tt.sum(x))
            return tt.tanh(x) * 3 if s > 0 else x**2

        return Env(f=f, args=lambda i: (data(0, 5) * (1 if i < at else -1) + (1 if i < at else -1),))

    return build


@case("c1", "while_halving")
def _(at):
    def build():
        def f(x):
            n = 0
            while float(tt.max(tt.abs(x))) > 1.0:
                x = x / 2
                n += 1
            return x, n

        return Env(f=f, args=lambda i: (data(0, 6, scale=(3.0 if i < at else 40.0)),))

    return build


@case("c1", "all_any")
def _(at):
    def build():
        def f(x):
            if (x > -10).all() and not (x > 10).any():
                return x * 2
            if (x > 10).any():
                return x - 100
            return x

        return Env(f=f, args=lambda i: (data(0, 7) + (0 if i < at else 50),))

    return build


@case("c1", "raise_on_condition")
def _(at):
    def build():
        def f(x):
            if float(tt.max(x)) > 100:
                raise ValueError("too big")
            return tt.exp(x)

        return Env(f=f, args=lambda i: (data(0, 4) + (0 if i < at else 500),))

    return build


@case("c1", "int_in_arithmetic")
def _(at):
    def build():
        def f(x):
            k = int(tt.sum(x > 0))
            return x * k + k

        return Env(f=f, args=lambda i: (data(i if i >= at else 0, 8),))

    return build


@case("c1", "item_in_arithmetic")
def _(at):
    def build():
        w = tt.tensor(np.array([1.5, -0.5], np.float32))

        def f(x):
            return x * w.sum().item() + tt.mean(x).item()

        def change(i):
            if i == at:
                w.data = np.array([2.5, 1.0], np.float32)

        return Env(f=f, args=lambda i: (data(0, 2),), change=change)

    return build


@case("c1", "tolist_index")
def _(at):
    def build():
        def f(x):
            v = x.tolist()
            return x * v[0] + v[-1]

        return Env(f=f, args=lambda i: (data(0 if i < at else i, 3),))

    return build


@case("c1", "np_asarray_of_tensor_sum")
def _(at):
    def build():
        m = _lin(3, 1)

        def f(x):
            s = np.asarray(m(x).sum().detach())
            return m(x) * float(s)

        def change(i):
            if i == at:
                m.bias.data = m.bias.data + 1

        return Env(f=f, args=lambda i: (data(0, 2, 3),), change=change, state=lambda: params_state(m))

    return build


@case("c1", "numpy_scalar_from_data")
def _(at):
    def build():
        def f(x):
            s = x.data.sum()
            if s > 0:
                return x * s
            return x - s

        return Env(
            f=f, args=lambda i: (tt.tensor(data(0, 4) * (1 if i < at else -1) + (1 if i < at else -1)),)
        )

    return build


@case("c1", "early_exit_loop")
def _(at):
    def build():
        W = tt.tensor(np.eye(3, dtype=np.float64) * 0.5)

        def f(x):
            for k in range(6):
                x = tt.tanh(tt.dot(x, W)) + 0.1
                if float(tt.sum(tt.abs(x))) < 1.0:
                    return x, k
            return x, -1

        def change(i):
            if i == at:
                W.data = np.eye(3) * 3.0

        return Env(f=f, args=lambda i: (data(0, 3, dtype=np.float64),), change=change)

    return build


@case("c1", "argmax_int_index")
def _(at):
    def build():
        def f(x):
            i = int(tt.argmax(x))
            return x[i] * 2 + i

        return Env(f=f, args=lambda i: (data(0 if i < at else 7, 6),))

    return build


@case("c1", "bool_of_scalar_tensor")
def _(at):
    def build():
        def f(x):
            if tt.sum(x) > 0.5:
                return x + 1
            return x - 1

        return Env(f=f, args=lambda i: (np.full(3, 1.0 if i < at else -1.0),))

    return build


@case("c1", "python_max_of_floats")
def _(at):
    def build():
        def f(x, y):
            s = max(float(tt.mean(x)), float(tt.mean(y)))
            return x * s + y

        return Env(f=f, args=lambda i: (data(0, 4) + (0 if i < at else 3), data(1, 4)))

    return build


@case("c1", "numpy_scalar_arith_float64")
def _(at):
    def build():
        m = _lin(3, 2, dtype=np.float64)

        def f(x):
            y = m(x)
            scale = np.float64(y.data.max()) - np.float64(y.data.min())
            return y / scale

        def change(i):
            if i == at:
                m.weight.data = m.weight.data * 3

        return Env(f=f, args=lambda i: (data(0, 4, 3, dtype=np.float64),), change=change)

    return build


@case("c1", "round_of_item")
def _(at):
    def build():
        def f(x):
            r = round(tt.sum(x).item(), 1)
            return x * r

        return Env(f=f, args=lambda i: (data(0 if i < at else 5, 3, dtype=np.float64),))

    return build


@case("c1", "branch_on_loss_in_grad")
def _(at):
    def build():
        m = _lin(3, 1)

        def loss(x):
            y = (m(x) ** 2).mean()
            if y > 1:
                return tt.sqrt(y)
            return y

        def call(fn, i):
            x = data(0, 5, 3, scale=(0.3 if i < at else 5.0))
            out = fn(x)
            out.backward()
            return out

        return Env(f=loss, call=call, state=lambda: params_state(m))

    return build


@case("c1", "assert_on_values")
def _(at):
    def build():
        def f(x):
            assert float(tt.min(x)) > -100, "bad"
            return x * 2

        return Env(f=f, args=lambda i: (data(0, 3) - (0 if i < at else 1000),))

    return build


@case("c1", "ternary_on_item_count")
def _(at):
    def build():
        def f(x):
            n = int((x > 0).sum())
            return tt.sum(x[:n]) if n > 0 else tt.sum(x)

        return Env(f=f, args=lambda i: (np.sort(data(0 if i < at else 3, 6))[::-1].copy(),))

    return build


# ----------------------------------------------------------------------------------------------
# class 2: gradients to closed-over parameters through a compiled call
# ----------------------------------------------------------------------------------------------


@case("c2", "backward_on_compiled_loss")
def _(at):
    def build():
        m = nn.Sequential(_lin(3, 4), nn.Tanh(), _lin(4, 1, seed=1))

        def f(x):
            return (m(x) ** 2).mean()

        def call(fn, i):
            if i == at:
                m[0].weight.data = m[0].weight.data * 2
            m.zero_grad()
            out = fn(data(i, 5, 3))
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "grad_accumulates_no_zero")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            return tt.sum(tt.tanh(m(x)))

        def call(fn, i):
            if i == at:
                m.zero_grad()
            out = fn(data(i, 4, 3))
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "mixed_compiled_and_eager")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            return tt.mean(m(x) ** 2)

        def call(fn, i):
            m.zero_grad()
            reg = tt.sum(m.weight**2) * (0.1 if i < at else 0.5)
            out = fn(data(i, 4, 3)) + reg
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "compiled_twice_one_graph")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            return tt.sum(tt.sigmoid(m(x)))

        def call(fn, i):
            m.zero_grad()
            a = fn(data(i, 4, 3))
            b = fn(data(i + 1, (4 if i < at else 6), 3))
            out = a * b
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "tt_grad_of_compiled")
def _(at):
    def build():
        W = tt.tensor(data(0, 3, 3, dtype=np.float64), requires_grad=True)

        def f(x):
            return tt.sum(tt.tanh(tt.dot(x, W)) ** 2)

        def call(fn, i):
            if i == at:
                W.data = W.data * -1.5
            return tt.grad(fn)(data(i, 2, 3, dtype=np.float64))

        return Env(f=f, call=call, state=lambda: [W])

    return build


@case("c2", "value_and_grad_of_compiled_argnum")
def _(at):
    def build():
        b = tt.tensor(np.ones(3))

        def f(x, y):
            return tt.sum(x * y + b)

        def call(fn, i):
            if i == at:
                b.data = np.full(3, 4.0)
            return tt.value_and_grad(fn, argnums=(0, 1))(
                data(i, 3, dtype=np.float64), data(i + 5, 3, dtype=np.float64)
            )

        return Env(f=f, call=call)

    return build


@case("c2", "backward_branchy_compiled")
def _(at):
    def build():
        m = _lin(3, 1)

        def f(x):
            y = m(x)
            return tt.sum(y**2) if float(tt.sum(y).detach()) > 0 else tt.sum(tt.abs(y))

        def call(fn, i):
            m.zero_grad()
            out = fn(data(i, 4, 3))
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "two_outputs_backward_one")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            y = m(x)
            return tt.sum(y), tt.mean(y * y)

        def call(fn, i):
            m.zero_grad()
            a, b = fn(data(i, 4, 3))
            (a if i < at else b).backward()
            return a, b

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "frozen_layer_toggle")
def _(at):
    def build():
        m = nn.Sequential(_lin(3, 3), nn.ReLU(), _lin(3, 1, seed=1))

        def f(x):
            return tt.mean(m(x))

        def call(fn, i):
            if i == at:
                m[0].requires_grad_(False)
            m.zero_grad()
            out = fn(data(i, 4, 3))
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "compiled_inside_compiled_backward")
def _(at):
    def build():
        m = _lin(3, 3)
        inner = tt.compile(lambda x: tt.tanh(m(x)))

        def f(x):
            return tt.sum(inner(x) * inner(x * 2))

        def call(fn, i):
            if i == at:
                m.bias.data = m.bias.data - 1
            m.zero_grad()
            out = fn(data(i, 2, 3))
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "no_grad_around_compiled")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            return m(x) * 2

        def call(fn, i):
            if i < at:
                with tt.no_grad():
                    return fn(data(i, 2, 3))
            out = fn(data(i, 2, 3))
            tt.sum(out).backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "detach_part_inside")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            y = m(x)
            return tt.sum(y * y.detach())

        def call(fn, i):
            m.zero_grad()
            out = fn(data(i, 4, 3, scale=(1 if i < at else 3)))
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


# ----------------------------------------------------------------------------------------------
# class 3: parameters captured by identity
# ----------------------------------------------------------------------------------------------


def _id_build(at, mutate, dtype64=False, grad=False):
    def build():
        m = nn.Sequential(_lin(3, 4), nn.Tanh(), _lin(4, 2, seed=1))

        def f(x):
            return tt.sum(m(x) ** 2) if grad else m(x)

        def call(fn, i):
            if i == at:
                mutate(m)
            x = data(i, 5, 3, dtype=np.float64 if dtype64 else np.float32)
            if grad:
                m.zero_grad()
                out = fn(x)
                out.backward()
                return out
            with tt.no_grad():
                return fn(x)

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


def _new_param(m):
    m[0].weight = nn.Parameter(np.ones((4, 3), np.float32) * 0.3)


def _assign_data(m):
    m[0].weight.data = np.full((4, 3), 0.25, np.float32)


def _assign_data_f64(m):
    m[0].weight.data = np.full((4, 3), 0.25)


def _inplace_data(m):
    m[2].bias.data[...] = 7.0


def _to64(m):
    m.to(np.float64)


def _load_sd(m):
    other = nn.Sequential(_lin(3, 4, seed=5), nn.Tanh(), _lin(4, 2, seed=6))
    m.load_state_dict(other.state_dict())


def _rg_off(m):
    m[2].weight.requires_grad_(False)


def _swap_bias_none(m):
    m[2].bias.data = m[2].bias.data * 0


def _set_row(m):
    with tt.no_grad():
        m[0].weight[1] = 0.0


for _nm, _mut in [
    ("new_parameter", _new_param),
    ("data_assign", _assign_data),
    ("data_assign_f64", _assign_data_f64),
    ("inplace_data", _inplace_data),
    ("to_float64", _to64),
    ("load_state_dict", _load_sd),
    ("requires_grad_off", _rg_off),
    ("bias_zeroed", _swap_bias_none),
    ("setitem_no_grad", _set_row),
]:
    for _g in (False, True):
        case("c3", f"{_nm}_{'grad' if _g else 'nograd'}", ats=CHANGE_AT if _g else (3, 10))(
            lambda at, _mut=_mut, _g=_g: _id_build(at, _mut, dtype64=False, grad=_g)
        )


@case("c3", "to64_then_f64_input")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            return m(x)

        def call(fn, i):
            if i == at:
                m.to(np.float64)
            with tt.no_grad():
                return fn(data(i, 2, 3, dtype=np.float64 if i >= at else np.float32))

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c3", "batchnorm_buffer_rebound_eval")
def _(at):
    def build():
        bn = nn.BatchNorm1d(3)
        bn.eval()

        def f(x):
            return bn(x)

        def change(i):
            if i == at:
                bn.running_mean.data = np.array([1.0, -2.0, 3.0], np.float32)
                bn.running_var.data[...] = 4.0

        return Env(f=f, args=lambda i: (data(i, 4, 3),), change=change, state=lambda: params_state(bn))

    return build


@case("c3", "batchnorm_train_then_eval")
def _(at):
    def build():
        bn = nn.BatchNorm1d(3)

        def f(x):
            return bn(x)

        def change(i):
            if i == at:
                bn.eval()

        return Env(f=f, args=lambda i: (data(i, 4, 3),), change=change, state=lambda: params_state(bn))

    return build


@case("c3", "closed_tensor_rebound_new_object")
def _(at):
    def build():
        holder = {"w": tt.tensor(np.ones(3))}

        def f(x):
            return x * holder["w"]

        def change(i):
            if i == at:
                holder["w"] = tt.tensor(np.full(3, 2.0))

        return Env(f=f, args=lambda i: (data(i, 3, dtype=np.float64),), change=change)

    return build


@case("c3", "param_list_appended")
def _(at):
    def build():
        pl = nn.ParameterList([nn.Parameter(np.ones(3, np.float32))])

        def f(x):
            out = x
            for p in pl:
                out = out * p
            return out

        def change(i):
            if i == at:
                pl.append(nn.Parameter(np.full(3, 3.0, np.float32)))

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 3))

        return Env(f=f, call=call, change=change)

    return build


# ----------------------------------------------------------------------------------------------
# class 4: guards
# ----------------------------------------------------------------------------------------------

G_SCALE = 1.0
G_NP = np.float32(1.0)
G_LIST = [1.0, 2.0]
G_TUPLE = (1.0, 2.0)
G_DICT = {"a": 1.0}
G_SET = {1}
Cfg = collections.namedtuple("Cfg", "scale shift")
G_NT = Cfg(1.0, 0.0)


@dataclasses.dataclass
class DC:
    scale: float = 1.0
    act: str = "tanh"


G_DC = DC()
G_NS = types.SimpleNamespace(scale=1.0, on=True)
G_MODEL = None
G_RNG = None


def _helper_reads_global(x):
    return x * G_SCALE


def _reset_globals():
    global G_SCALE, G_NP, G_LIST, G_TUPLE, G_DICT, G_SET, G_NT, G_DC, G_NS
    G_SCALE = 1.0
    G_NP = np.float32(1.0)
    G_LIST = [1.0, 2.0]
    G_TUPLE = (1.0, 2.0)
    G_DICT = {"a": 1.0}
    G_SET = {1}
    G_NT = Cfg(1.0, 0.0)
    G_DC = DC()
    G_NS = types.SimpleNamespace(scale=1.0, on=True)


def _guard_case(name, body, change):
    """body(x) reads some global; change() mutates/rebinds it."""

    @case("c4", name)
    def _(at):
        def build():
            _reset_globals()

            def ch(i):
                if i == at:
                    change()

            return Env(f=body, args=lambda i: (data(i, 3),), change=ch)

        return build


def _g_set(name, value):
    def change():
        globals()[name] = value

    return change


_guard_case("global_float_rebound", lambda x: x * G_SCALE, _g_set("G_SCALE", 2.5))
_guard_case("global_float_to_int", lambda x: x * G_SCALE, _g_set("G_SCALE", 3))
_guard_case("global_np_scalar", lambda x: x * G_NP, _g_set("G_NP", np.float32(-2.0)))
_guard_case("global_np_scalar_to_f64", lambda x: x * G_NP, _g_set("G_NP", np.float64(1.0)))
_guard_case("global_list_inplace", lambda x: x * G_LIST[1], lambda: G_LIST.__setitem__(1, 5.0))
_guard_case("global_list_append_len", lambda x: x * len(G_LIST), lambda: G_LIST.append(9.0))
_guard_case("global_list_sum", lambda x: x + sum(G_LIST), lambda: G_LIST.__setitem__(0, -4.0))
_guard_case("global_tuple_rebound", lambda x: x * G_TUPLE[0], _g_set("G_TUPLE", (3.0, 2.0)))
_guard_case("global_dict_inplace", lambda x: x * G_DICT["a"], lambda: G_DICT.__setitem__("a", 0.5))
_guard_case(
    "global_dict_get_default", lambda x: x * G_DICT.get("b", 2.0), lambda: G_DICT.__setitem__("b", 7.0)
)
_guard_case("global_dict_in", lambda x: x * (3 if "b" in G_DICT else 1), lambda: G_DICT.__setitem__("b", 1))
_guard_case("global_set_membership", lambda x: x * (2 if 5 in G_SET else 1), lambda: G_SET.add(5))
_guard_case("global_set_len", lambda x: x * len(G_SET), lambda: G_SET.add(7))
_guard_case("global_namedtuple", lambda x: x * G_NT.scale + G_NT.shift, _g_set("G_NT", Cfg(2.0, 1.0)))
_guard_case("global_dataclass_field", lambda x: x * G_DC.scale, lambda: setattr(G_DC, "scale", 4.0))
_guard_case(
    "global_dataclass_str",
    lambda x: tt.tanh(x) if G_DC.act == "tanh" else tt.sigmoid(x),
    lambda: setattr(G_DC, "act", "sigmoid"),
)
_guard_case("global_namespace_attr", lambda x: x * G_NS.scale, lambda: setattr(G_NS, "scale", -1.0))
_guard_case("global_namespace_bool", lambda x: x * 2 if G_NS.on else x, lambda: setattr(G_NS, "on", False))
_guard_case(
    "global_namespace_new_attr",
    lambda x: x * getattr(G_NS, "extra", 1.0),
    lambda: setattr(G_NS, "extra", 6.0),
)
_guard_case("helper_reads_global", lambda x: _helper_reads_global(x) + 1, _g_set("G_SCALE", -3.0))
_guard_case("global_math_of_float", lambda x: x * math.exp(G_SCALE), _g_set("G_SCALE", 0.5))
_guard_case(
    "global_np_of_list",
    lambda x: x * np.asarray(G_LIST, np.float32).sum(),
    lambda: G_LIST.__setitem__(1, 10.0),
)


def _closure_case(name, make_state, body, change):
    @case("c4", name)
    def _(at):
        def build():
            st = make_state()

            def f(x):
                return body(st, x)

            def ch(i):
                if i == at:
                    change(st)

            return Env(f=f, args=lambda i: (data(i, 3),), change=ch)

        return build


_closure_case("closure_list_inplace", lambda: [1.0], lambda s, x: x * s[0], lambda s: s.__setitem__(0, 3.0))
_closure_case(
    "closure_nested_list",
    lambda: {"cfg": [[1.0, 2.0]]},
    lambda s, x: x * s["cfg"][0][1],
    lambda s: s["cfg"][0].__setitem__(1, -1.0),
)
_closure_case(
    "closure_np_array_small",
    lambda: np.array([1.0, 2.0], np.float32),
    lambda s, x: x * s[1],
    lambda s: s.__setitem__(1, 9.0),
)
_closure_case(
    "closure_np_array_whole", lambda: np.ones(3, np.float32), lambda s, x: x + s, lambda s: s.__imul__(2)
)
_closure_case(
    "closure_np_array_method",
    lambda: np.ones(3, np.float32),
    lambda s, x: x * s.mean(),
    lambda s: s.__setitem__(0, 4.0),
)
_closure_case(
    "closure_namespace",
    lambda: types.SimpleNamespace(t=1.0),
    lambda s, x: tt.softmax(x / s.t),
    lambda s: setattr(s, "t", 0.1),
)
_closure_case("closure_dataclass", lambda: DC(), lambda s, x: x * s.scale, lambda s: setattr(s, "scale", 0.0))
_closure_case(
    "closure_dict_rebind_key",
    lambda: {"mode": "a"},
    lambda s, x: x * (1 if s["mode"] == "a" else -1),
    lambda s: s.update(mode="b"),
)
_closure_case(
    "closure_list_of_callables",
    lambda: [tt.tanh],
    lambda s, x: s[0](x),
    lambda s: s.__setitem__(0, tt.sigmoid),
)
_closure_case(
    "closure_list_extend_loop",
    lambda: [1.0],
    lambda s, x: sum((x * v for v in s), x * 0),
    lambda s: s.extend([2.0, 3.0]),
)
_closure_case(
    "closure_dict_pop", lambda: {"a": 2.0, "b": 3.0}, lambda s, x: x * sum(s.values()), lambda s: s.pop("b")
)
_closure_case("closure_set_sorted", lambda: {3, 1}, lambda s, x: x * sorted(s)[-1], lambda s: s.add(10))
_closure_case(
    "closure_deque",
    lambda: collections.deque([1.0, 2.0], maxlen=2),
    lambda s, x: x * s[0],
    lambda s: s.append(7.0),
)
_closure_case(
    "closure_np_scalar_in_list",
    lambda: [np.float64(1.0)],
    lambda s, x: x * s[0],
    lambda s: s.__setitem__(0, np.float64(2.0)),
)
_closure_case(
    "closure_np_int_shape",
    lambda: [np.int64(2)],
    lambda s, x: tt.reshape(tt.concatenate([x, x]), (int(s[0]), -1)),
    lambda s: s.__setitem__(0, np.int64(3)),
)


@case("c4", "closure_cell_rebound_nonlocal_outside")
def _(at):
    def build():
        scale = 1.0

        def f(x):
            return x * scale

        def change(i):
            nonlocal scale
            if i == at:
                scale = 4.0

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "defaults_changed")
def _(at):
    def build():
        def helper(x, k=2.0):
            return x * k

        def f(x):
            return helper(x)

        def change(i):
            if i == at:
                helper.__defaults__ = (5.0,)

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "kwdefaults_changed")
def _(at):
    def build():
        def helper(x, *, k=2.0):
            return x * k

        def f(x):
            return helper(x)

        def change(i):
            if i == at:
                helper.__kwdefaults__ = {"k": -1.0}

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "compiled_fn_own_defaults")
def _(at):
    def build():
        def f(x, k=2.0):
            return x * k

        def change(i):
            if i == at:
                f.__defaults__ = (3.0,)

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "bound_method_of_obj_rebound_attr")
def _(at):
    def build():
        class Scaler:
            def __init__(self):
                self.k = 2.0

            def __call__(self, x):
                return x * self.k

        s = Scaler()

        def change(i):
            if i == at:
                s.k = 0.5

        return Env(f=s.__call__, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "method_replaced_on_class")
def _(at):
    def build():
        class A:
            def g(self, x):
                return x * 2

        a = A()

        def f(x):
            return a.g(x)

        def change(i):
            if i == at:
                A.g = lambda self, x: x * 3

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "instance_method_shadowed")
def _(at):
    def build():
        class A:
            def g(self, x):
                return x * 2

        a = A()

        def f(x):
            return a.g(x)

        def change(i):
            if i == at:
                a.g = lambda x: x - 1

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "class_attribute")
def _(at):
    def build():
        class A:
            k = 2.0

        a = A()

        def f(x):
            return x * a.k

        def change(i):
            if i == at:
                A.k = -2.0

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "property_reads_attr")
def _(at):
    def build():
        class A:
            def __init__(self):
                self._k = 2.0

            @property
            def k(self):
                return self._k * 2

        a = A()

        def f(x):
            return x * a.k

        def change(i):
            if i == at:
                a._k = 5.0

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "property_replaced_on_class")
def _(at):
    def build():
        class A:
            @property
            def k(self):
                return 2.0

        a = A()

        def f(x):
            return x * a.k

        def change(i):
            if i == at:
                A.k = property(lambda self: 7.0)

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "module_float_attr")
def _(at):
    def build():
        m = _lin(3, 3)
        m.temp = 1.0

        def f(x):
            return tt.softmax(m(x) / m.temp)

        def change(i):
            if i == at:
                m.temp = 0.25

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=f, call=call, change=change)

    return build


@case("c4", "submodule_replaced")
def _(at):
    def build():
        m = nn.ModuleDict({"fc": _lin(3, 3), "act": nn.Tanh()})

        def f(x):
            return m["act"](m["fc"](x))

        def change(i):
            if i == at:
                m["act"] = nn.Sigmoid()

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=f, call=call, change=change)

    return build


@case("c4", "submodule_appended")
def _(at):
    def build():
        m = nn.Sequential(_lin(3, 3), nn.Tanh())

        def f(x):
            return m(x)

        def change(i):
            if i == at:
                m.append(_lin(3, 1, seed=4))

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=f, call=call, change=change)

    return build


@case("c4", "submodule_attr_replaced")
def _(at):
    def build():
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = _lin(3, 2)
                self.act = nn.ReLU()

            def forward(self, x):
                return self.act(self.fc(x))

        m = Net()

        def change(i):
            if i == at:
                m.act = nn.Tanh()

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=lambda x: m(x), call=call, change=change)

    return build


@case("c4", "module_function_attr")
def _(at):
    def build():
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = _lin(3, 2)
                self.fn = tt.tanh

            def forward(self, x):
                return self.fn(self.fc(x))

        m = Net()

        def change(i):
            if i == at:
                m.fn = tt.sigmoid

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=lambda x: m(x), call=call, change=change)

    return build


@case("c4", "forward_hook_after_first_call")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            return m(x)

        def change(i):
            if i == at:
                m.register_forward_hook(lambda mod, inp, out: out * 2)

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=f, call=call, change=change)

    return build


@case("c4", "hook_reads_global_changed")
def _(at):
    def build():
        _reset_globals()
        m = _lin(3, 2)
        m.register_forward_hook(lambda mod, inp, out: out * G_SCALE)

        def change(i):
            if i == at:
                globals()["G_SCALE"] = 0.125

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=lambda x: m(x), call=call, change=change)

    return build


@case("c4", "hook_removed")
def _(at):
    def build():
        m = _lin(3, 2)
        h = m.register_forward_hook(lambda mod, inp, out: out + 1)

        def change(i):
            if i == at:
                h.remove()

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=lambda x: m(x), call=call, change=change)

    return build


@case("c4", "global_model_rebound")
def _(at):
    def build():
        globals()["G_MODEL"] = _lin(3, 2)

        def f(x):
            return G_MODEL(x)

        def change(i):
            if i == at:
                globals()["G_MODEL"] = _lin(3, 2, seed=9)

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=f, call=call, change=change)

    return build


@case("c4", "global_generator_rebound")
def _(at):
    def build():
        globals()["G_RNG"] = np.random.default_rng(5)

        def f(x):
            return x + tt.randn(3, rng=G_RNG)

        def change(i):
            if i == at:
                globals()["G_RNG"] = np.random.default_rng(77)

        return Env(
            f=f,
            args=lambda i: (data(i, 3, dtype=np.float64),),
            change=change,
            state=lambda: snap(G_RNG.bit_generator.state["state"]),
        )

    return build


@case("c4", "global_seed_reset_between_calls")
def _(at):
    def build():
        def f(x):
            return x + tt.rand(3)

        def change(i):
            if i == at:
                tt.manual_seed(123)

        return Env(f=f, args=lambda i: (data(i, 3, dtype=np.float64),), change=change)

    return build


@case("c4", "opt_lr_read_in_step_changed_outside")
def _(at):
    def build():
        w = tt.tensor(np.ones(3), requires_grad=True)
        opt = tt.optim.SGD([w], lr=0.1)

        def f(x):
            return x * opt.param_groups[0]["lr"] + w

        def change(i):
            if i == at:
                opt.param_groups[0]["lr"] = 0.01

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 3, dtype=np.float64))

        return Env(f=f, call=call, change=change)

    return build


@case("c4", "partial_args_changed")
def _(at):
    def build():
        import functools

        def g(x, k):
            return x * k

        holder = [functools.partial(g, k=2.0)]

        def f(x):
            return holder[0](x)

        def change(i):
            if i == at:
                holder[0] = functools.partial(g, k=-3.0)

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "lambda_rebound_in_dict")
def _(at):
    def build():
        acts = {"act": lambda x: x * 2}

        def f(x):
            return acts["act"](x)

        def change(i):
            if i == at:
                acts["act"] = lambda x: x * 3

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "closure_of_closure_counter")
def _(at):
    def build():
        def make(k):
            return lambda x: x * k

        h = [make(2.0)]

        def f(x):
            return h[0](x) + 1

        def change(i):
            if i == at:
                h[0] = make(5.0)

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "grad_mode_toggle")
def _(at):
    def build():
        m = _lin(3, 2)

        def call(fn, i):
            if i >= at:
                with tt.no_grad():
                    return fn(data(i, 2, 3))
            return fn(data(i, 2, 3))

        return Env(f=lambda x: m(x), call=call)

    return build


@case("c4", "train_eval_dropout")
def _(at):
    def build():
        m = nn.Sequential(_lin(3, 4), nn.Dropout(0.5))

        def change(i):
            if i == at:
                m.eval()

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=lambda x: m(x), call=call, change=change)

    return build


# ----------------------------------------------------------------------------------------------
# class 5: values read inside tinytensor layers
# ----------------------------------------------------------------------------------------------


@case("c5", "sdpa_mask_closure_inplace")
def _(at):
    def build():
        mask = np.ones((4, 4), bool)

        def f(q):
            return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)

        def change(i):
            if i == at:
                mask[:] = np.tril(np.ones((4, 4), bool))

        return Env(f=f, args=lambda i: (data(i, 1, 4, 3),), change=change)

    return build


@case("c5", "sdpa_mask_per_batch_arg")
def _(at):
    def build():
        def f(q, mask):
            return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)

        def args(i):
            r = np.random.default_rng(i)
            mask = r.random((4, 4)) > 0.3
            mask[:, 0] = True
            return data(i, 1, 4, 3), mask

        return Env(f=f, args=args)

    return build


@case("c5", "sdpa_causal_flag_toggle")
def _(at):
    def build():
        cfg = {"causal": False}

        def f(q):
            return F.scaled_dot_product_attention(q, q, q, is_causal=cfg["causal"])

        def change(i):
            if i == at:
                cfg["causal"] = True

        return Env(f=f, args=lambda i: (data(i, 1, 4, 3),), change=change)

    return build


@case("c5", "mha_key_padding_mask_arg")
def _(at):
    def build():
        mha = (
            nn.MultiheadAttention(4, 2, batch_first=True)
            if "batch_first" in nn.MultiheadAttention.__init__.__code__.co_varnames
            else nn.MultiheadAttention(4, 2)
        )

        def f(x, pad):
            return mha(x, x, x, key_padding_mask=pad)[0]

        def args(i):
            pad = np.zeros((2, 5), bool)
            pad[:, 5 - (i % 3) - (1 if i >= at else 0) :] = True
            pad[:, 0] = False
            return data(i, 2, 5, 4), pad

        def call(fn, i):
            with tt.no_grad():
                return fn(*args(i))

        return Env(f=f, call=call, state=lambda: params_state(mha))

    return build


@case("c5", "embedding_padding_idx_changed")
def _(at):
    def build():
        emb = nn.Embedding(6, 3, padding_idx=0, rng=0)

        def f(ids):
            return tt.sum(emb(ids) ** 2)

        def call(fn, i):
            if i == at:
                emb.padding_idx = 2
            emb.zero_grad()
            out = fn(np.array([0, 1, 2, 2, 5]))
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(emb))

    return build


@case("c5", "embedding_ids_padding_per_batch")
def _(at):
    def build():
        emb = nn.Embedding(6, 3, padding_idx=1, rng=0)

        def f(ids):
            return tt.sum(emb(ids) * 2)

        def call(fn, i):
            emb.zero_grad()
            ids = np.random.default_rng(i).integers(0, 6, 7)
            out = fn(ids)
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(emb))

    return build


@case("c5", "ce_ignore_index_attr_changed")
def _(at):
    def build():
        m = _lin(3, 4)
        lf = nn.CrossEntropyLoss(ignore_index=-100)

        def f(x, y):
            return lf(m(x), y)

        def call(fn, i):
            if i == at:
                lf.ignore_index = 2
            m.zero_grad()
            out = fn(data(i, 8, 3), labels(i, 8, 4))
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c5", "ce_ignored_labels_per_batch")
def _(at):
    def build():
        m = _lin(3, 4)
        lf = nn.CrossEntropyLoss(ignore_index=-1)

        def f(x, y):
            return lf(m(x), y)

        def call(fn, i):
            m.zero_grad()
            y = labels(i, 8, 4)
            y[: (i % 4)] = -1
            if i >= at:
                y[:] = -1
                y[0] = 1
            out = fn(data(i, 8, 3), y)
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c5", "ce_label_smoothing_changed")
def _(at):
    def build():
        m = _lin(3, 4)
        lf = nn.CrossEntropyLoss(label_smoothing=0.0)

        def f(x, y):
            return lf(m(x), y)

        def call(fn, i):
            if i == at:
                lf.label_smoothing = 0.2
            m.zero_grad()
            out = fn(data(i, 8, 3), labels(i, 8, 4))
            out.backward()
            return out

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c5", "ce_weight_array_inplace")
def _(at):
    def build():
        m = _lin(3, 4)
        w = np.ones(4, np.float32)
        lf = nn.CrossEntropyLoss(weight=w)

        def f(x, y):
            return lf(m(x), y)

        def call(fn, i):
            if i == at:
                w[1] = 5.0
            with tt.no_grad():
                return fn(data(i, 8, 3), labels(i, 8, 4))

        return Env(f=f, call=call)

    return build


@case("c5", "clip_grad_norm_global_max")
def _(at):
    def build():
        _reset_globals()
        m = _lin(3, 2)
        opt = tt.optim.SGD(m.parameters(), lr=0.1)

        def f(x, y):
            opt.zero_grad()
            loss = tt.mean((m(x) - y) ** 2)
            loss.backward()
            nn.utils.clip_grad_norm_(m.parameters(), G_SCALE)
            opt.step()
            return loss

        def change(i):
            if i == at:
                globals()["G_SCALE"] = 0.01

        return Env(
            f=f,
            args=lambda i: (data(i, 4, 3, scale=3), data(i + 9, 4, 2)),
            change=change,
            state=lambda: params_state(m, opt),
        )

    return build


@case("c5", "clip_grad_norm_result_returned")
def _(at):
    def build():
        m = _lin(3, 2)
        opt = tt.optim.SGD(m.parameters(), lr=0.1)

        def f(x, y):
            opt.zero_grad()
            loss = tt.mean((m(x) - y) ** 2)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
            return loss, norm

        return Env(
            f=f,
            args=lambda i: (data(i, 4, 3, scale=(1 if i < at else 0.01)), data(i + 9, 4, 2)),
            state=lambda: params_state(m, opt),
        )

    return build


@case("c5", "leaky_slope_changed")
def _(at):
    def build():
        act = nn.LeakyReLU(0.01)

        def change(i):
            if i == at:
                act.negative_slope = 0.3

        return Env(f=lambda x: act(x), args=lambda i: (data(i, 6),), change=change)

    return build


@case("c5", "dropout_p_changed")
def _(at):
    def build():
        d = nn.Dropout(0.5)

        def change(i):
            if i == at:
                d.p = 0.1

        return Env(f=lambda x: d(x), args=lambda i: (data(i, 6),), change=change)

    return build


@case("c5", "layernorm_eps_changed")
def _(at):
    def build():
        ln = nn.LayerNorm(4)

        def change(i):
            if i == at:
                ln.eps = 0.5

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 4))

        return Env(f=lambda x: ln(x), call=call, change=change)

    return build


@case("c5", "batchnorm_momentum_changed")
def _(at):
    def build():
        bn = nn.BatchNorm1d(3)

        def change(i):
            if i == at:
                bn.momentum = 0.9

        return Env(
            f=lambda x: bn(x), args=lambda i: (data(i, 5, 3),), change=change, state=lambda: params_state(bn)
        )

    return build


@case("c5", "softplus_threshold_values")
def _(at):
    def build():
        sp = nn.Softplus()
        return Env(f=lambda x: sp(x), args=lambda i: (data(i, 6, scale=(1 if i < at else 40)),))

    return build


@case("c5", "huber_delta_changed")
def _(at):
    def build():
        lf = nn.HuberLoss(delta=1.0)

        def change(i):
            if i == at:
                lf.delta = 0.1

        return Env(f=lambda a, b: lf(a, b), args=lambda i: (data(i, 6), data(i + 3, 6)), change=change)

    return build


@case("c5", "one_hot_num_classes_global")
def _(at):
    def build():
        cfg = {"k": 4}

        def f(y):
            return F.one_hot(y, cfg["k"]) * 2

        def change(i):
            if i == at:
                cfg["k"] = 6

        return Env(f=f, args=lambda i: (labels(i, 5, 4),), change=change)

    return build


# ----------------------------------------------------------------------------------------------
# class 6: whole training steps
# ----------------------------------------------------------------------------------------------


def _train_build(at, opt_name="sgd", sched=None, clip=None, change=None, dropout=False, bn=False, ret="loss"):
    def build():
        layers = [_lin(4, 8)]
        if bn:
            layers.append(nn.BatchNorm1d(8))
        layers.append(nn.Tanh())
        if dropout:
            layers.append(nn.Dropout(0.2))
        layers.append(_lin(8, 3, seed=1))
        m = nn.Sequential(*layers)
        if opt_name == "sgd":
            opt = tt.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        elif opt_name == "adam":
            opt = tt.optim.Adam(m.parameters(), lr=0.01)
        elif opt_name == "adamw":
            opt = tt.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.1)
        else:
            opt = tt.optim.RMSprop(m.parameters(), lr=0.01)
        sch = None
        if sched == "step":
            sch = tt.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        elif sched == "cos":
            sch = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=12)
        elif sched == "exp":
            sch = tt.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        lf = nn.CrossEntropyLoss()

        def f(x, y):
            opt.zero_grad()
            loss = lf(m(x), y)
            loss.backward()
            if clip == "norm":
                nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            elif clip == "value":
                nn.utils.clip_grad_value_(m.parameters(), 0.01)
            opt.step()
            if sch is not None:
                sch.step()
            if ret == "tuple":
                return loss, m(x)
            return loss

        def ch(i):
            if change is not None and i == at:
                change(m, opt)

        return Env(
            f=f,
            args=lambda i: (data(i, 6, 4), labels(i, 6, 3)),
            change=ch,
            state=lambda: params_state(m, opt) + [opt.param_groups[0]["lr"]],
        )

    return build


def _lr_out(m, opt):
    opt.param_groups[0]["lr"] = 0.2


def _mom_out(m, opt):
    if "momentum" in opt.param_groups[0]:
        opt.param_groups[0]["momentum"] = 0.0
    else:
        opt.param_groups[0]["lr"] = 0.5


def _wd_out(m, opt):
    opt.param_groups[0]["weight_decay"] = 0.3


def _eval_out(m, opt):
    m.eval()


def _scale_w(m, opt):
    m[0].weight.data *= 0.5


def _freeze(m, opt):
    m[0].weight.requires_grad_(False)


def _grad_outside(m, opt):
    for p in m.parameters():
        p.grad = None


for _opt in ("sgd", "adam", "adamw", "rmsprop"):
    for _sch in (None, "step", "cos"):
        case("c6", f"train_{_opt}_{_sch}", ats=(10,))(
            lambda at, _opt=_opt, _sch=_sch: _train_build(at, _opt, _sch)
        )
for _nm, _chg in [
    ("lr_outside", _lr_out),
    ("momentum_outside", _mom_out),
    ("wd_outside", _wd_out),
    ("eval_outside", _eval_out),
    ("weight_scaled", _scale_w),
    ("freeze_outside", _freeze),
    ("grad_none_outside", _grad_outside),
]:
    case("c6", f"sgd_{_nm}")(lambda at, _chg=_chg: _train_build(at, "sgd", "step", change=_chg))
    case("c6", f"adam_{_nm}", ats=(10,))(lambda at, _chg=_chg: _train_build(at, "adam", None, change=_chg))
for _cl in ("norm", "value"):
    case("c6", f"clip_{_cl}")(lambda at, _cl=_cl: _train_build(at, "adam", "exp", clip=_cl))
case("c6", "dropout_bn_step", max_programs=2)(
    lambda at: _train_build(at, "sgd", "cos", dropout=True, bn=True)
)
case("c6", "dropout_bn_eval_outside")(
    lambda at: _train_build(at, "sgd", None, dropout=True, bn=True, change=_eval_out)
)
case("c6", "return_loss_and_post_step_out")(lambda at: _train_build(at, "sgd", None, ret="tuple"))


@case("c6", "manual_sgd_nograd")
def _(at):
    def build():
        m = _lin(3, 1)

        def f(x, y):
            m.zero_grad()
            loss = tt.mean((m(x) - y) ** 2)
            loss.backward()
            with tt.no_grad():
                for p in m.parameters():
                    p -= 0.1 * p.grad
            return loss

        def change(i):
            if i == at:
                m.weight.data[...] = 0.0

        return Env(
            f=f,
            args=lambda i: (data(i, 5, 3), data(i + 1, 5, 1)),
            change=change,
            state=lambda: params_state(m),
        )

    return build


@case("c6", "item_after_step_refused", refuse=("after backward", "after", "item"))
def _(at):
    def build():
        m = _lin(3, 1)
        opt = tt.optim.SGD(m.parameters(), lr=0.1)

        def f(x, y):
            opt.zero_grad()
            loss = tt.mean((m(x) - y) ** 2)
            loss.backward()
            opt.step()
            return loss.item()

        return Env(f=f, args=lambda i: (data(i, 5, 3), data(i + 1, 5, 1)), state=lambda: params_state(m, opt))

    return build


@case("c6", "float_loss_outside_logging")
def _(at):
    def build():
        m = _lin(3, 1)
        opt = tt.optim.Adam(m.parameters(), lr=0.1)
        log = []

        def f(x, y):
            opt.zero_grad()
            loss = tt.mean((m(x) - y) ** 2)
            loss.backward()
            opt.step()
            return loss

        def call(fn, i):
            out = fn(data(i, 5, 3), data(i + 1, 5, 1))
            log.append(float(out))
            if i == at:
                opt.param_groups[0]["lr"] = 0.001
            return out, list(log)

        return Env(f=f, call=call, state=lambda: params_state(m, opt))

    return build


@case("c6", "ema_target_update")
def _(at):
    def build():
        m = _lin(3, 2)
        tgt = _lin(3, 2)
        opt = tt.optim.SGD(m.parameters(), lr=0.1)

        def f(x):
            opt.zero_grad()
            loss = tt.mean((m(x) - tgt(x).detach()) ** 2)
            loss.backward()
            opt.step()
            with tt.no_grad():
                for p, q in zip(tgt.parameters(), m.parameters()):
                    p.mul_(0.9).add_(q * 0.1)
            return loss

        def change(i):
            if i == at:
                tgt.load_state_dict(m.state_dict())

        return Env(
            f=f,
            args=lambda i: (data(i, 4, 3),),
            change=change,
            state=lambda: params_state(m, opt) + params_state(tgt),
        )

    return build


@case("c6", "grad_accumulation_two_microbatches")
def _(at):
    def build():
        m = _lin(3, 2)
        opt = tt.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)

        def f(x1, x2):
            opt.zero_grad()
            (tt.mean(m(x1) ** 2) / 2).backward()
            (tt.mean(m(x2) ** 2) / 2).backward()
            opt.step()
            return m.weight.grad

        return Env(
            f=f,
            args=lambda i: (data(i, 4, 3), data(i + 50, (4 if i < at else 2), 3)),
            state=lambda: params_state(m, opt),
        )

    return build


# ----------------------------------------------------------------------------------------------
# class 7: floats changing every call
# ----------------------------------------------------------------------------------------------


def _cos(i, n=40):
    return 0.5 * 0.1 * (1 + math.cos(math.pi * i / n))


@case("c7", "lr_argument_cosine_manual", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        w = tt.tensor(np.ones(3, np.float32), requires_grad=True)

        def f(x, lr):
            loss = tt.sum((w * x) ** 2)
            g = tt.grad(lambda ww: tt.sum((ww * x) ** 2))(w)
            with tt.no_grad():
                w.sub_(lr * g)
            return loss

        return Env(f=f, args=lambda i: (data(i, 3), _cos(i)), state=lambda: [w])

    return build


@case("c7", "temperature_argument", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        return Env(f=lambda x, t: tt.softmax(x / t), args=lambda i: (data(i, 5), 0.5 + i * 0.137))

    return build


@case("c7", "temperature_np_float32", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        return Env(
            f=lambda x, t: tt.softmax(x / t) * t, args=lambda i: (data(i, 5), np.float32(0.5 + i * 0.1))
        )

    return build


@case("c7", "temperature_type_switch_at", n_of=lambda at: at + 2)
def _(at):
    def build():
        def args(i):
            t = 0.5 + i * 0.1
            return data(i, 5), (np.float64(t) if i >= at else t)

        return Env(f=lambda x, t: x * t + t**2, args=args)

    return build


@case("c7", "lr_written_into_param_groups", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        m = _lin(3, 1)
        opt = tt.optim.SGD(m.parameters(), lr=0.1)

        def f(x, y, lr):
            opt.param_groups[0]["lr"] = lr
            opt.zero_grad()
            loss = tt.mean((m(x) - y) ** 2)
            loss.backward()
            opt.step()
            return loss

        return Env(
            f=f,
            args=lambda i: (data(i, 5, 3), data(i + 1, 5, 1), _cos(i)),
            state=lambda: params_state(m, opt) + [opt.param_groups[0]["lr"]],
        )

    return build


@case("c7", "float_in_branch_every_call", n_of=lambda at: 42, ats=(40,))
def _(at):
    def build():
        def f(x, t):
            if t > 0.5:
                return x * t
            return x - t

        return Env(f=f, args=lambda i: (data(i, 3), (i * 0.0371) % 1.0))

    return build


@case("c7", "float_math_cos_every_call", n_of=lambda at: 42, ats=(40,))
def _(at):
    def build():
        return Env(f=lambda x, t: x * math.cos(t), args=lambda i: (data(i, 3), i * 0.1))

    return build


@case("c7", "python_arith_on_number", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        return Env(f=lambda x, lr: x * (1 - lr) ** 2 + np.exp(-lr), args=lambda i: (data(i, 3), i * 0.01))

    return build


@case("c7", "int_step_count_arith", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        return Env(f=lambda x, step: x * (0.9**step), args=lambda i: (data(i, 3, dtype=np.float64), i))

    return build


@case("c7", "int_step_as_index", n_of=lambda at: 12, ats=(10,))
def _(at):
    def build():
        return Env(f=lambda x, k: x[k % 3] * k, args=lambda i: (data(i, 3), i))

    return build


@case("c7", "negative_zero_and_nan_args", n_of=lambda at: at + 2)
def _(at):
    def build():
        def args(i):
            v = [0.5, -0.0, 0.0, float("nan"), float("inf")][i % 5]
            if i == at:
                v = -0.0
            return data(i, 3), v

        return Env(f=lambda x, a: x * a + a, args=args)

    return build


@case("c7", "adam_lr_arg_with_scheduler_inside", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        m = _lin(3, 2)
        opt = tt.optim.Adam(m.parameters(), lr=0.01)
        sch = tt.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.7)

        def f(x, y, t):
            opt.zero_grad()
            loss = tt.mean((m(x) / t - y) ** 2)
            loss.backward()
            opt.step()
            sch.step()
            return loss

        return Env(
            f=f,
            args=lambda i: (data(i, 4, 3), data(i + 1, 4, 2), 1.0 + 0.05 * i),
            state=lambda: params_state(m, opt) + [opt.param_groups[0]["lr"]],
        )

    return build


@case("c7", "dropout_p_argument", n_of=lambda at: 12, ats=(10,))
def _(at):
    def build():
        return Env(f=lambda x, p: F.dropout(x, p), args=lambda i: (data(i, 8), 0.1 + 0.05 * i))

    return build


@case("c7", "schedule_float_in_tt_where", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        return Env(
            f=lambda x, t: tt.where(x > t, x, t),
            args=lambda i: (data(i, 6, dtype=np.float64), i * 0.03 - 0.6),
        )

    return build


@case("c7", "number_in_list_argument", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        return Env(
            f=lambda x, hp: x * hp["scale"] + hp["shift"][0],
            args=lambda i: (data(i, 3), {"scale": 1.0 + i / 7, "shift": [i * 0.5]}),
        )

    return build


# ----------------------------------------------------------------------------------------------
# more: values handed over in rarer ways
# ----------------------------------------------------------------------------------------------


def _simple(name, cls, f, args, n_of=lambda at: at + 2, **kw):
    @case(cls, name, n_of=n_of, **kw)
    def _(at):
        def build():
            return Env(f=f, args=lambda i: args(i, at))

        return build


TABLE = {0: 1.5, 1: -2.0, 2: 0.25, 3: 4.0}
_simple(
    "dict_keyed_by_int_of_tensor",
    "c1",
    lambda x: x * TABLE[int(tt.argmax(x)) % 4],
    lambda i, at: (data(i if i >= at else 0, 5),),
)
_simple(
    "list_index_by_np_argmax",
    "c1",
    lambda x: x * [1.0, 2.0, 3.0, 4.0, 5.0][int(x.data.argmax())],
    lambda i, at: (tt.tensor(data(i if i >= at else 0, 5)),),
)
_simple(
    "math_floor_of_float",
    "c1",
    lambda x: x * math.floor(float(tt.sum(x))),
    lambda i, at: (data(0, 4, dtype=np.float64) * (1 if i < at else 3),),
)
_simple(
    "fstring_key_of_item",
    "c1",
    lambda x: x * {"pos": 2.0, "neg": -1.0}["pos" if f"{tt.sum(x).item():+.3f}"[0] == "+" else "neg"],
    lambda i, at: (data(0, 4, dtype=np.float64) + (1 if i < at else -3),),
)
_simple(
    "tensor_from_tolist",
    "c1",
    lambda x: tt.tensor(sorted(x.tolist())) * 2,
    lambda i, at: (data(0 if i < at else i, 4, dtype=np.float64),),
)
_simple(
    "range_of_int_tensor",
    "c1",
    lambda x, k: sum((x * j for j in range(int(k.sum()))), x * 0),
    lambda i, at: (data(0, 3), np.array([1, 1 if i < at else 3])),
)
_simple(
    "slice_by_int_item",
    "c1",
    lambda x, k: tt.sum(x[: int(k.item())]),
    lambda i, at: (data(0, 6), np.array(2 if i < at else 5)),
)
_simple(
    "np_float32_of_item",
    "c1",
    lambda x: x * np.float32(tt.mean(x).item()),
    lambda i, at: (data(0 if i < at else 4, 4),),
)
_simple(
    "value_recursion_depth",
    "c1",
    lambda x: _halve_rec(x, 0),
    lambda i, at: (data(0, 3, dtype=np.float64, scale=2 if i < at else 200),),
)
_simple(
    "flip_flop_threshold",
    "c1",
    lambda x: x * 2 if float(tt.sum(x)) > 0 else x * 3,
    lambda i, at: (np.full(2, 1.0 if (i < at or i % 2) else -1.0),),
)
_simple(
    "isfinite_all_guard",
    "c1",
    lambda x: x * 2 if bool(tt.all(tt.isfinite(x))) else tt.zeros(3),
    lambda i, at: (np.array([1.0, 2.0, np.inf if i == at else 3.0]),),
)
_simple(
    "int_tensor_item_range",
    "c1",
    lambda x, n: tt.stack([x * j for j in range(n.item())]),
    lambda i, at: (data(0, 2), np.int64(2 if i < at else 4)),
)
_simple(
    "np_asarray_compare_python",
    "c1",
    lambda x: x + (1.0 if np.asarray(tt.max(x)) > 0.5 else -1.0),
    lambda i, at: (data(0, 3) - (0 if i < at else 5),),
)
_simple(
    "builtin_sum_of_tolist",
    "c1",
    lambda x: x * sum(x.tolist()),
    lambda i, at: (data(0 if i < at else 2, 3, dtype=np.float64),),
)
_simple(
    "any_builtin_over_tensor_rows",
    "c1",
    lambda x: x * (2 if any(float(r) > 1 for r in tt.sum(x, axis=1)) else 1),
    lambda i, at: (data(0, 3, 2) * (0.1 if i < at else 10),),
)


def _halve_rec(x, d):
    if float(tt.max(tt.abs(x))) > 1 and d < 20:
        return _halve_rec(x / 2, d + 1)
    return x + d


@case("c4", "generator_drawn_outside_between_calls")
def _(at):
    def build():
        g = np.random.default_rng(3)

        def f(x):
            return x + tt.randn(3, rng=g)

        def change(i):
            if i == at:
                g.standard_normal(5)

        return Env(
            f=f,
            args=lambda i: (data(i, 3, dtype=np.float64),),
            change=change,
            state=lambda: snap(g.bit_generator.state["state"]),
        )

    return build


@case("c4", "generator_as_argument")
def _(at):
    def build():
        gens = [np.random.default_rng(11), np.random.default_rng(12)]

        def f(x, g):
            return x * tt.rand(3, rng=g)

        return Env(
            f=f,
            args=lambda i: (data(i, 3, dtype=np.float64), gens[0 if i < at else 1]),
            state=lambda: [snap(g.bit_generator.state["state"]) for g in gens],
        )

    return build


@case("c4", "global_array_rebound_other_shape")
def _(at):
    def build():
        holder = types.SimpleNamespace(a=np.ones(3, np.float32))

        def f(x):
            return tt.sum(x) * holder.a

        def change(i):
            if i == at:
                holder.a = np.arange(5, dtype=np.float32)

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "staticmethod_replaced")
def _(at):
    def build():
        class A:
            @staticmethod
            def act(x):
                return x * 2

        def f(x):
            return A.act(x)

        def change(i):
            if i == at:
                A.act = staticmethod(lambda x: x * -2)

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "slots_attr")
def _(at):
    def build():
        class S:
            __slots__ = ("k",)

            def __init__(self):
                self.k = 1.0

        s = S()

        def f(x):
            return x * s.k

        def change(i):
            if i == at:
                s.k = 9.0

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "type_self_class_attr")
def _(at):
    def build():
        class Base:
            k = 1.0

            def run(self, x):
                return x * type(self).k

        class Sub(Base):
            pass

        o = Sub()

        def change(i):
            if i == at:
                Base.k = 3.0

        return Env(f=lambda x: o.run(x), args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "module_attr_list_config")
def _(at):
    def build():
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = _lin(3, 3)
                self.scales = [1.0, 2.0, 3.0]

            def forward(self, x):
                return self.fc(x) * np.array(self.scales, np.float32)

        m = Net()

        def change(i):
            if i == at:
                m.scales[2] = -3.0

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=lambda x: m(x), call=call, change=change)

    return build


@case("c4", "sequential_layer_weight_replaced_from_outside_list")
def _(at):
    def build():
        layers = [_lin(3, 3), _lin(3, 3, seed=1)]

        def f(x):
            for layer in layers:
                x = tt.tanh(layer(x))
            return x

        def change(i):
            if i == at:
                layers.reverse()

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3))

        return Env(f=f, call=call, change=change)

    return build


@case("c4", "global_float_changed_every_call", n_of=lambda at: 42, ats=(40,))
def _(at):
    def build():
        _reset_globals()

        def change(i):
            globals()["G_SCALE"] = 1.0 + i * 0.01

        return Env(f=lambda x: x * G_SCALE, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "closure_list_changed_every_call", n_of=lambda at: 42, ats=(40,))
def _(at):
    def build():
        sch = [0.0]

        def change(i):
            sch[0] = i * 0.5

        return Env(f=lambda x: x + sch[0], args=lambda i: (data(i, 3),), change=change)

    return build


@case("c7", "range_of_int_arg_every_call", n_of=lambda at: 14, ats=(12,))
def _(at):
    def build():
        return Env(f=lambda x, n: sum((x * j for j in range(n)), x), args=lambda i: (data(i, 3), i))

    return build


@case("c7", "round_of_float_arg", n_of=lambda at: 42, ats=(40,))
def _(at):
    def build():
        return Env(f=lambda x, t: x * round(t, 1), args=lambda i: (data(i, 3), 0.31 * i))

    return build


@case("c7", "float_arg_returned", n_of=lambda at: 42, ats=(40,))
def _(at):
    def build():
        return Env(f=lambda x, t: (x * t, t, t * 2), args=lambda i: (data(i, 3), 0.11 * i))

    return build


@case("c7", "tuple_of_floats_argument", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        return Env(f=lambda x, ab: x * ab[0] + ab[1], args=lambda i: (data(i, 3), (0.1 * i, -0.3 * i)))

    return build


@case("c7", "float_into_np_full", n_of=lambda at: 12, ats=(10,))
def _(at):
    def build():
        return Env(f=lambda x, t: x + np.ones(3, np.float32) * t, args=lambda i: (data(i, 3), 0.7 * i))

    return build


@case("c7", "float_to_tt_tensor", n_of=lambda at: 12, ats=(10,))
def _(at):
    def build():
        return Env(f=lambda x, t: x * tt.tensor(t), args=lambda i: (data(i, 3), 0.7 * i))

    return build


@case("c7", "float32_model_times_float_arg", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        m = _lin(3, 2)

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 3), 1.0 / (i + 1))

        return Env(f=lambda x, t: m(x) * t, call=call)

    return build


@case("c7", "bool_flag_argument", n_of=lambda at: at + 2)
def _(at):
    def build():
        return Env(f=lambda x, flag: tt.relu(x) if flag else tt.tanh(x), args=lambda i: (data(i, 3), i >= at))

    return build


# ----------------------------------------------------------------------------------------------
# second batch: harder hand-overs
# ----------------------------------------------------------------------------------------------


def _step_env(at, body, change=None, opt_cls="sgd", n_in=3, n_out=2, args=None, extra_state=None):
    def build():
        m = nn.Sequential(_lin(n_in, 4), nn.Tanh(), _lin(4, n_out, seed=1))
        opt = (
            tt.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
            if opt_cls == "sgd"
            else tt.optim.Adam(m.parameters(), lr=0.01)
        )
        box = types.SimpleNamespace(m=m, opt=opt)

        def f(x, y):
            return body(box, x, y)

        def ch(i):
            if change is not None and i == at:
                change(box)

        def st():
            out = params_state(box.m, box.opt) + [[g["lr"] for g in box.opt.param_groups]]
            if extra_state is not None:
                out.append(extra_state(box))
            return out

        a = args or (lambda i: (data(i, 6, n_in), data(i + 7, 6, n_out)))
        return Env(f=f, args=a, change=ch, state=st)

    return build


def _plain_step(b, x, y):
    b.opt.zero_grad()
    loss = tt.mean((b.m(x) - y) ** 2)
    loss.backward()
    b.opt.step()
    return loss


def _branch_before_backward(b, x, y):
    b.opt.zero_grad()
    loss = tt.mean((b.m(x) - y) ** 2)
    if loss > 0.9:
        loss = loss * 0.5
    loss.backward()
    b.opt.step()
    return loss


def _normalised_by_float(b, x, y):
    b.opt.zero_grad()
    loss = tt.mean((b.m(x) - y) ** 2)
    loss = loss / float(loss.detach())
    loss.backward()
    b.opt.step()
    return loss


def _zero_after_step(b, x, y):
    loss = tt.mean((b.m(x) - y) ** 2)
    loss.backward()
    b.opt.step()
    b.opt.zero_grad()
    return loss


def _zero_keep(b, x, y):
    b.opt.zero_grad(set_to_none=False)
    loss = tt.mean((b.m(x) - y) ** 2)
    loss.backward()
    b.opt.step()
    return loss


def _while_loss(b, x, y):
    b.opt.zero_grad()
    pred = b.m(x)
    k = 0
    while float(tt.max(tt.abs(pred)).detach()) > 0.5 and k < 5:
        pred = pred * 0.5
        k += 1
    loss = tt.mean((pred - y) ** 2)
    loss.backward()
    b.opt.step()
    return loss, k


def _replace_param(b):
    b.m[2].weight = nn.Parameter(np.full((2, 4), 0.1, np.float32))


def _opt_reload(b):
    sd = b.opt.state_dict()
    b.opt = type(b.opt)(b.m.parameters(), lr=0.02)
    b.opt.load_state_dict(sd)


def _opt_fresh(b):
    b.opt = tt.optim.SGD(b.m.parameters(), lr=0.3)


def _add_group(b):
    extra = nn.Parameter(np.ones(2, np.float32))
    b.opt.add_param_group({"params": [extra], "lr": 0.5})


def _model_reload(b):
    other = nn.Sequential(_lin(3, 4, seed=7), nn.Tanh(), _lin(4, 2, seed=8))
    b.m.load_state_dict(other.state_dict())


def _lr_all_groups(b):
    for g in b.opt.param_groups:
        g["lr"] *= 0.1


def _betas(b):
    if "betas" in b.opt.param_groups[0]:
        b.opt.param_groups[0]["betas"] = (0.5, 0.9)
    else:
        b.opt.param_groups[0]["nesterov"] = True


def _swap_model(b):
    b.m = nn.Sequential(_lin(3, 4, seed=3), nn.Tanh(), _lin(4, 2, seed=4))
    b.opt = tt.optim.SGD(b.m.parameters(), lr=0.05)


def _data_rebind(b):
    b.m[0].weight.data = b.m[0].weight.data.copy() * 0.5


def _to64_step(b):
    b.m.to(np.float64)


for _bn, _body in [
    ("plain", _plain_step),
    ("branch_before_backward", _branch_before_backward),
    ("normalised_by_float", _normalised_by_float),
    ("zero_after_step", _zero_after_step),
    ("zero_keep_grads", _zero_keep),
    ("while_on_pred", _while_loss),
]:
    for _cn, _chg in [
        ("replace_param", _replace_param),
        ("opt_reload", _opt_reload),
        ("opt_fresh", _opt_fresh),
        ("add_group", _add_group),
        ("model_reload", _model_reload),
        ("lr_all_groups", _lr_all_groups),
        ("betas_or_nesterov", _betas),
        ("swap_model", _swap_model),
        ("data_rebind", _data_rebind),
        ("to64", _to64_step),
    ]:
        for _oc in ("sgd", "adam") if _bn == "plain" else (("sgd", "adam")[len(_cn + _bn) % 2],):
            case("c6", f"{_bn}_{_oc}_{_cn}", ats=(3,) if _bn != "plain" else (3, 10))(
                lambda at, _body=_body, _chg=_chg, _oc=_oc: _step_env(at, _body, _chg, _oc)
            )


@case("c2", "input_tensor_requires_grad")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            return tt.sum(tt.tanh(m(x)) ** 2)

        def call(fn, i):
            m.zero_grad()
            x = tt.tensor(data(i, 4, 3), requires_grad=True)
            out = fn(x)
            out.backward()
            return out, x.grad

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "returns_parameter_itself")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            return m(x), m.weight

        def call(fn, i):
            m.zero_grad()
            y, w = fn(data(i, 4, 3))
            out = tt.sum(y) + tt.sum(w * w) * (1 if i < at else 3)
            out.backward()
            return out, w is m.weight

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "compiled_result_reused_in_two_losses")
def _(at):
    def build():
        m = _lin(3, 3)

        def f(x):
            return tt.softmax(m(x))

        def call(fn, i):
            m.zero_grad()
            p = fn(data(i, 4, 3))
            a = tt.sum(p * p)
            b = tt.sum(tt.log(p)) * (0.1 if i < at else 2.0)
            (a + b).backward()
            return a, b

        return Env(f=f, call=call, state=lambda: params_state(m))

    return build


@case("c2", "compiled_output_then_eager_param_op")
def _(at):
    def build():
        m = _lin(3, 3)
        head = _lin(3, 1, seed=2)

        def f(x):
            return tt.relu(m(x))

        def call(fn, i):
            m.zero_grad()
            head.zero_grad()
            out = tt.mean(head(fn(data(i, 4, 3))))
            out.backward()
            if i == at:
                head.weight.data = head.weight.data * -1
            return out

        return Env(f=f, call=call, state=lambda: params_state(m) + params_state(head))

    return build


@case("c2", "grad_mode_off_param_on_later")
def _(at):
    def build():
        w = tt.tensor(np.ones(3, np.float32))

        def f(x):
            return tt.sum(x * w)

        def call(fn, i):
            if i == at:
                w.requires_grad_(True)
            out = fn(data(i, 3))
            if out.requires_grad if isinstance(out, tt.Tensor) else False:
                out.backward()
            return out

        return Env(f=f, call=call, state=lambda: [w])

    return build


@case("c4", "partial_keywords_mutated")
def _(at):
    def build():
        import functools

        def g(x, k):
            return x * k

        pf = functools.partial(g, k=2.0)

        def f(x):
            return pf(x)

        def change(i):
            if i == at:
                pf.keywords["k"] = -7.0

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "os_environ_read")
def _(at):
    def build():
        import os

        os.environ.pop("TT_R31A_SCALE", None)

        def f(x):
            return x * float(os.environ.get("TT_R31A_SCALE", "1.0"))

        def change(i):
            if i == at:
                os.environ["TT_R31A_SCALE"] = "3.0"

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "requires_grad_read_in_python")
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x):
            return m(x).detach() * (2.0 if m.weight.requires_grad else -1.0)

        def change(i):
            if i == at:
                m.weight.requires_grad_(False)

        return Env(f=f, args=lambda i: (data(i, 2, 3),), change=change)

    return build


@case("c4", "closed_tensor_replaced_by_array")
def _(at):
    def build():
        box = {"w": tt.tensor(np.ones(3, np.float32))}

        def f(x):
            return x * box["w"]

        def change(i):
            if i == at:
                box["w"] = np.full(3, 2.0, np.float32)

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "list_of_tensors_item_replaced")
def _(at):
    def build():
        ws = [tt.tensor(np.ones(3)), tt.tensor(np.full(3, 2.0))]

        def f(x):
            return sum((x * w for w in ws), x * 0)

        def change(i):
            if i == at:
                ws[1] = tt.tensor(np.full(3, -5.0))

        return Env(f=f, args=lambda i: (data(i, 3, dtype=np.float64),), change=change)

    return build


@case(
    "c4",
    "float_subclass_attr",
    xfail="attribute of a float-subclass number in a closed list not guarded: stale value",
)
def _(at):
    def build():
        class Tagged(float):
            pass

        v = Tagged(2.0)
        v.bonus = 1.0
        holder = [v]

        def f(x):
            return x * holder[0] + holder[0].bonus

        def change(i):
            if i == at:
                holder[0].bonus = 5.0

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c4", "dict_argument_new_key")
def _(at):
    def build():
        def f(x, cfg):
            return x * cfg.get("k", 1.0)

        return Env(f=f, args=lambda i: (data(i, 3), {"k": 3.0} if i >= at else {}))

    return build


@case("c4", "itertools_cycle_outside_advanced")
def _(at):
    def build():
        import itertools

        acts = itertools.cycle([tt.tanh, tt.sigmoid])
        cur = [next(acts)]

        def f(x):
            return cur[0](x)

        def change(i):
            if i >= at:
                cur[0] = next(acts)

        return Env(f=f, args=lambda i: (data(i, 3),), change=change)

    return build


@case("c5", "pad_value_closure")
def _(at):
    def build():
        cfg = {"v": 0.0}

        def f(x):
            return F.pad(x, (1, 1), value=cfg["v"])

        def change(i):
            if i == at:
                cfg["v"] = -9.0

        return Env(f=f, args=lambda i: (data(i, 2, 3),), change=change)

    return build


@case("c5", "normalize_eps_attr")
def _(at):
    def build():
        cfg = types.SimpleNamespace(eps=1e-12)

        def f(x):
            return F.normalize(x, eps=cfg.eps)

        def change(i):
            if i == at:
                cfg.eps = 10.0

        return Env(f=f, args=lambda i: (data(i, 2, 3),), change=change)

    return build


@case("c5", "ce_reduction_attr")
def _(at):
    def build():
        lf = nn.CrossEntropyLoss()

        def change(i):
            if i == at:
                lf.reduction = "sum"

        return Env(f=lambda z, y: lf(z, y), args=lambda i: (data(i, 5, 4), labels(i, 5, 4)), change=change)

    return build


@case("c5", "kl_log_target_attr")
def _(at):
    def build():
        lf = nn.KLDivLoss(reduction="sum")

        def change(i):
            if i == at:
                lf.log_target = True

        return Env(
            f=lambda a, b: lf(a, b),
            args=lambda i: (np.log(np.full(4, 0.25)), np.abs(data(i, 4, dtype=np.float64)) / 4),
            change=change,
        )

    return build


@case("c5", "clip_value_from_dict")
def _(at):
    def build():
        m = _lin(3, 2)
        opt = tt.optim.SGD(m.parameters(), lr=0.1)
        cfg = {"clip": 1.0}

        def f(x):
            opt.zero_grad()
            loss = tt.sum(m(x) ** 2)
            loss.backward()
            nn.utils.clip_grad_value_(m.parameters(), cfg["clip"])
            opt.step()
            return loss

        def change(i):
            if i == at:
                cfg["clip"] = 0.001

        return Env(f=f, args=lambda i: (data(i, 4, 3),), change=change, state=lambda: params_state(m, opt))

    return build


@case("c5", "groupnorm_groups_attr")
def _(at):
    def build():
        gn = nn.GroupNorm(2, 4)

        def change(i):
            if i == at:
                gn.num_groups = 4

        def call(fn, i):
            with tt.no_grad():
                return fn(data(i, 2, 4, 3))

        return Env(f=lambda x: gn(x), call=call, change=change)

    return build


@case("c5", "interpolate_scale_closure")
def _(at):
    def build():
        cfg = [2]

        def f(x):
            return F.interpolate(x, scale_factor=cfg[0])

        def change(i):
            if i == at:
                cfg[0] = 3

        return Env(f=f, args=lambda i: (data(i, 1, 1, 2, 2),), change=change)

    return build


@case("c7", "zero_d_tensor_temperature", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        return Env(
            f=lambda x, t: tt.softmax(x / t),
            args=lambda i: (data(i, 5), tt.tensor(np.float32(0.5 + 0.1 * i))),
        )

    return build


@case("c7", "np_float64_lr_into_group", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        m = _lin(3, 1)
        opt = tt.optim.Adam(m.parameters(), lr=0.1)

        def f(x, y, lr):
            opt.param_groups[0]["lr"] = lr * 0.5
            opt.zero_grad()
            loss = tt.mean((m(x) - y) ** 2)
            loss.backward()
            opt.step()
            return loss

        return Env(
            f=f,
            args=lambda i: (data(i, 5, 3), data(i + 1, 5, 1), np.float64(_cos(i))),
            state=lambda: params_state(m, opt) + [snap(opt.param_groups[0]["lr"])],
        )

    return build


@case("c7", "warmup_then_cosine_arg", n_of=lambda at: 42, ats=(40,), max_programs=1)
def _(at):
    def build():
        m = _lin(3, 2)

        def f(x, lr, step):
            g = tt.grad(lambda w: tt.sum(tt.dot(x, w) ** 2))(m.weight.data.T.copy())
            return m.weight.data.T - lr * g * (1 + 0 * step)

        return Env(f=f, args=lambda i: (data(i, 4, 3), min(1.0, (i + 1) / 10) * _cos(i), i))

    return build


# ----------------------------------------------------------------------------------------------
# third batch: values read by C code or in unusual spellings
# ----------------------------------------------------------------------------------------------


def _fn_with_attr(x):
    return x * _fn_with_attr.k


_fn_with_attr.k = 2.0


class _IntTag(int):
    pass


class _StrTag(str):
    pass


def _c4(name, make, body, change, xfail=None):
    @case("c4", name, ats=(3, 10), xfail=xfail)
    def _(at):
        def build():
            _fn_with_attr.k = 2.0
            st = make()

            def f(x):
                return body(st, x)

            def ch(i):
                if i == at:
                    change(st)

            return Env(f=f, args=lambda i: (data(i, 3),), change=ch)

        return build


def _ns(**kw):
    return lambda: types.SimpleNamespace(**kw)


def _mk_tag_int():
    v = _IntTag(2)
    v.bonus = 1
    return [v]


def _mk_tag_str():
    v = _StrTag("tanh")
    v.scale = 1.0
    return [v]


def _mk_attrgetter():
    import operator

    return types.SimpleNamespace(o=types.SimpleNamespace(k=2.0), get=operator.attrgetter("k"))


def _mk_itemgetter():
    import operator

    return types.SimpleNamespace(lst=[2.0, 3.0], get=operator.itemgetter(1))


def _mk_getattr_name():
    return types.SimpleNamespace(o=types.SimpleNamespace(k=2.0, j=5.0), name="k")


def _mk_proxy():
    d = {"k": 2.0}
    return types.SimpleNamespace(d=d, view=types.MappingProxyType(d))


def _mk_chain():
    a, b = {"k": 2.0}, {"k": 9.0, "j": 1.0}
    return types.SimpleNamespace(a=a, b=b, cm=collections.ChainMap(a, b))


def _mk_ordered():
    return collections.OrderedDict([("a", 1.0), ("b", 3.0)])


_c4(
    "function_attribute",
    lambda: None,
    lambda s, x: _fn_with_attr(x),
    lambda s: setattr(_fn_with_attr, "k", 5.0),
)
_c4(
    "int_subclass_attr",
    _mk_tag_int,
    lambda s, x: x * s[0] + s[0].bonus,
    lambda s: setattr(s[0], "bonus", 4),
)
_c4(
    "str_subclass_attr",
    _mk_tag_str,
    lambda s, x: tt.tanh(x) * s[0].scale,
    lambda s: setattr(s[0], "scale", 3.0),
)
_c4("attrgetter_held", _mk_attrgetter, lambda s, x: x * s.get(s.o), lambda s: setattr(s.o, "k", -1.0))
_c4("itemgetter_held", _mk_itemgetter, lambda s, x: x * s.get(s.lst), lambda s: s.lst.__setitem__(1, 8.0))
_c4(
    "getattr_computed_name",
    _mk_getattr_name,
    lambda s, x: x * getattr(s.o, s.name),
    lambda s: setattr(s, "name", "j"),
)
_c4("vars_dict_read", _ns(k=2.0), lambda s, x: x * vars(s)["k"], lambda s: setattr(s, "k", 6.0))
_c4(
    "dunder_dict_read",
    _ns(k=2.0),
    lambda s, x: x * s.__dict__["k"],
    lambda s: s.__dict__.__setitem__("k", 6.0),
)
_c4(
    "format_reads_attr",
    _ns(k=2.0),
    lambda s, x: x * float("{0.k}".format(s)),  # noqa: UP030, UP032
    lambda s: setattr(s, "k", 0.5),
)
_c4(
    "percent_format_dict",
    lambda: {"k": 2.0},
    lambda s, x: x * float("%(k)s" % s),  # noqa: UP031
    lambda s: s.update(k=0.25),
)
_c4("mappingproxy_underlying", _mk_proxy, lambda s, x: x * s.view["k"], lambda s: s.d.__setitem__("k", 4.0))
_c4("chainmap_child_changed", _mk_chain, lambda s, x: x * s.cm["k"] + s.cm["j"], lambda s: s.a.pop("k"))
_c4(
    "ordereddict_move_to_end",
    _mk_ordered,
    lambda s, x: x * list(s.values())[0],
    lambda s: s.move_to_end("a"),
)
_c4(
    "min_key_lambda_attrs",
    lambda: [types.SimpleNamespace(k=2.0), types.SimpleNamespace(k=3.0)],
    lambda s, x: x * min(s, key=lambda o: o.k).k,
    lambda s: setattr(s[1], "k", 0.5),
)
_c4(
    "dataclass_astuple",
    lambda: DC(),
    lambda s, x: x * dataclasses.astuple(s)[0],
    lambda s: setattr(s, "scale", 7.0),
    xfail="dataclasses.astuple(cfg) of a closed-over dataclass: a field changed later is not seen",
)
_c4("math_fsum_list", lambda: [0.5, 0.25], lambda s, x: x * math.fsum(s), lambda s: s.append(1.0))
_c4(
    "np_array_from_attrs",
    lambda: [DC(), DC()],
    lambda s, x: x * np.array([o.scale for o in s]).sum(),
    lambda s: setattr(s[0], "scale", 3.0),
)
_c4("zero_d_array_closed", lambda: np.array(2.0), lambda s, x: x * s, lambda s: s.__setitem__((), 5.0))
_c4("tuple_holding_list", lambda: ([2.0],), lambda s, x: x * s[0][0], lambda s: s[0].__setitem__(0, -2.0))
_c4("complex_global_like", lambda: [1 + 2j], lambda s, x: x * s[0].imag, lambda s: s.__setitem__(0, 1 + 5j))
_c4(
    "fraction_value",
    lambda: [__import__("fractions").Fraction(1, 2)],
    lambda s, x: x * float(s[0]),
    lambda s: s.__setitem__(0, __import__("fractions").Fraction(3, 4)),
)
_c4(
    "counter_most_common",
    lambda: collections.Counter(a=3, b=1),
    lambda s, x: x * (2.0 if s.most_common(1)[0][0] == "a" else 5.0),
    lambda s: s.update(b=5),
)
_c4(
    "callable_obj_call_replaced_on_class",
    lambda: type("Act", (), {"__call__": lambda self, x: x * 2})(),
    lambda s, x: s(x),
    lambda s: setattr(type(s), "__call__", lambda self, x: x * 3),
)
_c4("bytearray_config", lambda: bytearray(b"\x02"), lambda s, x: x * s[0], lambda s: s.__setitem__(0, 7))
_c4(
    "array_module_array",
    lambda: __import__("array").array("d", [2.0]),
    lambda s, x: x * s[0],
    lambda s: s.__setitem__(0, 9.0),
)


# ----------------------------------------------------------------------------------------------
# fourth batch: library Python code reading the user's objects
# ----------------------------------------------------------------------------------------------


def _argparse_ns():
    import argparse

    return argparse.Namespace(lr=2.0, act="tanh")


def _copy_attr(s, x):
    import copy

    return x * copy.copy(s).scale


def _deepcopy_attr(s, x):
    import copy

    return x * copy.deepcopy(s).scale


def _fields_loop(s, x):
    total = 0.0
    for fd in dataclasses.fields(s):
        v = getattr(s, fd.name)
        if isinstance(v, float):
            total += v
    return x * total


def _replace_dc(s, x):
    return x * dataclasses.replace(s, act="relu").scale


def _statistics_mean(s, x):
    import statistics

    return x * statistics.mean(s)


def _json_dumps_dict(s, x):
    import json

    return x * len(json.dumps(s))


def _namedtuple_asdict(s, x):
    return x * s[0]._asdict()["scale"]


def _methodcaller(s, x):
    import operator

    return x * operator.methodcaller("get", "k", 1.0)(s)


def _inspect_static(s, x):
    import inspect

    return x * inspect.getattr_static(s, "k")


def _sn_eq(s, x):
    return x * (2.0 if s == types.SimpleNamespace(k=2.0) else 3.0)


_c4(
    "dataclass_asdict",
    lambda: DC(),
    lambda s, x: x * dataclasses.asdict(s)["scale"],
    lambda s: setattr(s, "scale", 7.0),
)
_c4("dataclass_fields_getattr", lambda: DC(), _fields_loop, lambda s: setattr(s, "scale", 7.0))
_c4("dataclass_replace", lambda: DC(), _replace_dc, lambda s: setattr(s, "scale", 7.0))
_c4(
    "dataclass_eq",
    lambda: DC(),
    lambda s, x: x * (2.0 if s == DC() else 5.0),
    lambda s: setattr(s, "scale", 7.0),
)
_c4("argparse_attr", _argparse_ns, lambda s, x: x * s.lr, lambda s: setattr(s, "lr", 0.5))
_c4(
    "argparse_getattr_literal",
    _argparse_ns,
    lambda s, x: x * getattr(s, "lr"),  # noqa: B009
    lambda s: setattr(s, "lr", 0.5),
)  # noqa: B009
_c4("argparse_vars", _argparse_ns, lambda s, x: x * vars(s)["lr"], lambda s: setattr(s, "lr", 0.5))
_c4("copy_copy_attr", lambda: DC(), _copy_attr, lambda s: setattr(s, "scale", 7.0))
_c4("copy_deepcopy_attr", lambda: DC(), _deepcopy_attr, lambda s: setattr(s, "scale", 7.0))
_c4("statistics_mean_list", lambda: [1.0, 2.0], _statistics_mean, lambda s: s.append(9.0))
_c4("json_dumps_dict_len", lambda: {"a": 1}, _json_dumps_dict, lambda s: s.update(bbbb=22))
_c4(
    "namedtuple_asdict",
    lambda: [Cfg(2.0, 0.0)],
    _namedtuple_asdict,
    lambda s: s.__setitem__(0, Cfg(4.0, 0.0)),
)
_c4("methodcaller_get", lambda: {"k": 2.0}, _methodcaller, lambda s: s.update(k=-2.0))
_c4("inspect_getattr_static", _ns(k=2.0), _inspect_static, lambda s: setattr(s, "k", 9.0))
_c4(
    "simplenamespace_eq",
    _ns(k=2.0),
    _sn_eq,
    lambda s: setattr(s, "k", 1.0),
    xfail="SimpleNamespace == (C __eq__ reads its __dict__): an attribute changed later is not seen",
)
_c4(
    "repr_of_namespace_len",
    _ns(k=2.0),
    lambda s, x: x * len(repr(s)),
    lambda s: setattr(s, "k", 2.0005),
    xfail="repr(SimpleNamespace) (C code reads its __dict__): an attribute changed later is not seen",
)
_c4(
    "sorted_attrgetter_key",
    lambda: [DC(scale=1.0), DC(scale=2.0)],
    lambda s, x: x * sorted(s, key=__import__("operator").attrgetter("scale"))[0].scale,
    lambda s: setattr(s[0], "scale", 9.0),
)


# ----------------------------------------------------------------------------------------------
# fifth batch: attributes read by C code (follow-ups of the SimpleNamespace findings)
# ----------------------------------------------------------------------------------------------


class _ListTag(list):
    pass


class _DictTag(dict):
    pass


def _mk_list_tag():
    v = _ListTag([1.0])
    v.k = 2.0
    return [v]


def _mk_dict_tag():
    v = _DictTag(a=1.0)
    v.k = 2.0
    return [v]


_c4("list_subclass_attr", _mk_list_tag, lambda s, x: x * s[0].k, lambda s: setattr(s[0], "k", 5.0))
_c4("dict_subclass_attr", _mk_dict_tag, lambda s, x: x * s[0].k, lambda s: setattr(s[0], "k", 5.0))
_c4("len_vars_new_attr", _ns(k=2.0), lambda s, x: x * len(vars(s)), lambda s: setattr(s, "j", 1.0))
_c4("list_of_vars_keys", _ns(k=2.0), lambda s, x: x * len(list(vars(s))), lambda s: setattr(s, "j", 1.0))
_c4(
    "dunder_dict_items_loop",
    _ns(k=2.0),
    lambda s, x: x * sum(v for _, v in s.__dict__.items()),
    lambda s: setattr(s, "k", 3.0),
)
_c4("dunder_dict_get", _ns(k=2.0), lambda s, x: x * s.__dict__.get("k", 1.0), lambda s: setattr(s, "k", 3.0))
_c4(
    "object_getattribute",
    _ns(k=2.0),
    lambda s, x: x * object.__getattribute__(s, "k"),
    lambda s: setattr(s, "k", 3.0),
)
_c4(
    "dunder_getattribute_method",
    _ns(k=2.0),
    lambda s, x: x * s.__getattribute__("k"),
    lambda s: setattr(s, "k", 3.0),
)
_c4(
    "namespace_rebuilt_from_vars",
    _ns(k=2.0),
    lambda s, x: x * types.SimpleNamespace(**vars(s)).k,
    lambda s: setattr(s, "k", 3.0),
)
_c4(
    "min_of_vars_values",
    _ns(k=2.0, j=4.0),
    lambda s, x: x * min(vars(s).values()),
    lambda s: setattr(s, "k", 9.0),
)
_c4(
    "str_of_namespace_in_branch",
    _ns(mode="a"),
    lambda s, x: x * (2.0 if "'a'" in str(s) else 3.0),
    lambda s: setattr(s, "mode", "b"),
    xfail="str(SimpleNamespace) in a branch: an attribute changed later is not seen",
)
_c4(
    "dataclass_repr_branch",
    lambda: DC(),
    lambda s, x: x * (2.0 if "tanh" in repr(s) else 3.0),
    lambda s: setattr(s, "act", "relu"),
)
_c4(
    "namespace_eq_two_held",
    lambda: [types.SimpleNamespace(k=1), types.SimpleNamespace(k=1)],
    lambda s, x: x * (2.0 if s[0] == s[1] else 3.0),
    lambda s: setattr(s[1], "k", 2),
)
_c4(
    "float_subclass_attr_in_dict",
    lambda: {"v": _mk_float_tag()},
    lambda s, x: x * s["v"].bonus,
    lambda s: setattr(s["v"], "bonus", 5.0),
    xfail="attribute of a float-subclass number held in a dict: stale value",
)


def _mk_float_tag():
    class FTag(float):
        pass

    v = FTag(2.0)
    v.bonus = 1.0
    return v


@pytest.mark.parametrize("build_of,at,n,refuse,max_programs", CASES)
def test_compile_vs_eager(build_of, at, n, refuse, max_programs):
    check(build_of(at), n, refuse=refuse, max_programs=max_programs)


def test_case_count():
    assert len(CASES) >= 200

"""Round 25a (fresh user, docs only): attack the newest promises of docs/guides/compile.md.

Every case builds the same set-up twice from the same seeds, runs one copy eagerly and one through
``tt.compile`` for 12 calls (``_long`` cases: 42), changes state outside the function before the
3rd, 10th and 40th call (weights scaled in place or rebound, the learning rate in
``param_groups``, attributes added/deleted, parameters frozen/unfrozen, ``.grad`` set to None)
and varies the arguments so value-dependent paths change on those calls (sign of the data,
batch size, token range, number arguments). After every call it compares bit for bit (type,
dtype, shape, bytes): all outputs so far, the arguments, every parameter and its ``.grad`` and
``requires_grad``, buffers, optimizer groups and state, arrays held from before (the ``.grad``
and ``.data`` arrays of calls 1 and 5), tinytensor's and NumPy's generator state, and which
calls raised. A refusal passes only where the docs list it (REFUSED_OK: boolean indexing
``g[g < 0] *= s`` and ``grad[np.isin(...)] *= 2``, ``np.unique``, ``float()`` after
``backward()``, ``np.clip(w.data, ..., out=w.data)``).

297 cases (plus a count check): 236 equal (5 of them documented refusals), 61 strict xfails.

Families found (xfail):

* silent differences (5): the compiled step does not apply a write that eager applies.
  ``p.grad.clip(-c, c, out=p.grad)`` (grad-g_clip_method_out,
  grad_long-keep-adam-g_clip_method_out), ``p.grad.flat[3] = 0`` (grad-g_flat_set),
  ``np.negative(g, out=g, where=g > 0)`` (grad-g_ufunc_at_mask) and
  ``p.data.clip(-c, c, out=p.data)`` after ``opt.step()`` (data-d_clip_method_out): parameters
  differ from call 1 on, no error, no warning.
* false refusals, "writing in place into a value computed from traced data" for spellings of a
  write into a gradient's/parameter's own memory the docs promise in kind (26):
  ``p.grad.T[0] = 0`` (grad-*g_T_row, every dtype/optimizer variant), ``gt = p.grad.T; gt *= .5``
  (grad-g_grad_T_inplace), ``p.grad.reshape(-1)[k] = v`` (grad-*g_reshape_k),
  ``p.grad.ravel()[2] = 7`` (grad-g_ravel_k), ``p.grad.fill(0)`` (grad-g_fill),
  ``p.grad[[-1, -3]] *= 0.5`` (grad-g_neg_list_idx; ``p.grad[[0, 2]] = 0`` passes),
  ``p.grad[[0, 0]] += 1`` (grad-g_dup_fancy), ``p.grad.sort(axis=1)`` (grad-g_sort_rows),
  ``np.copyto(p.data, ...)``, ``p.data.fill(.5)``, ``p.data.T[0] *= .5`` after the step
  (data-d_copyto, data-d_fill_bias, data-d_T_write).
* false refusals of call forms writing into ``p.grad`` (28): ``np.clip(p.grad, -c, c,
  out=p.grad)`` (grad-*g_clip_out, attr-clip_attr), ``np.copyto(p.grad, ...)``
  (grad-*g_copyto), ``np.put(p.grad, ...)`` (grad-*g_put), ``np.add.at`` (grad-g_add_at),
  ``np.fill_diagonal`` (grad-g_fill_diagonal), ``np.round(g, 3, out=g)`` (grad-g_rint). The
  Limits bullet names np.put/np.add.at/out= as refused only for plain NumPy containers written
  with traced values; the theme asks for them on ``.grad`` explicitly.
* false refusal of ``p.data[...] = np.clip(p.data, -c, c)`` with ``c`` a number argument (2):
  refused as "reads a value into Python after backward()" although it depends on the arguments
  alone (data-d_clip_c, data_long-noopt-d_clip_c); with constants it passes (data-d_clip_ellipsis).

Equal: ``p.grad /= s`` and ``*= s`` with s float/int/np.float32/np.float64/bool; ``p.grad[0]``,
``[-1]``, ``[[0, 2]]``, ``[np.array([0, 2])]``, ``[::2]``, ``[1::2] *=``, ``[::-2] *=``, ``[1] *=``,
``[..., 0]``, ``[...] =``, ``[None, 0]``, ``[np.newaxis] *=``, ``[(0, 1)]``, ``[([0,1],[2,3])]``,
diagonal fancy, boolean list, masks from the gradient or the data (``g[g > 0] = 0``),
``g[:] = np.where(...)``, ``g[:] = g[::-1]``, rows taken as views and written, several writes and
reads in one step, ``np.multiply(..., out=g)``, ``np.nan_to_num(copy=False)``,
``clip_grad_value_``/``clip_grad_norm_`` then writes, an array-valued norm clip; in float16,
float64, Adam, AdamW, ``zero_grad(set_to_none=False)``, ``Module.zero_grad``, accumulation over
calls, writes before/after/both sides of ``opt.step()``, changing batch sizes, frozen
parameters (grad None, toggled outside); ``p.data -= lr * p.grad``, ``p -= ...`` under
``no_grad``, ``p.data *= 1 - lr * wd``, ``p.data[...] = np.clip(p.data, -.3, .3)``, masks,
``clamp_``, max-norm rows, sign SGD; ``emb.weight.grad[pad] = 0`` with pad an int argument,
tied embedding/head weights; ``param_groups`` lr (and momentum) from float/int/np.float32/np.float64
arguments, two groups, ``lr ** 2``, ``np.exp(-lr)``, ``min(1.0, lr)``, set after backward; ``.grad``
returned whole, as a row, ``.T``, ``reshape(-1)``, a dict of grads, after a write (held across
calls, set_to_none both ways); ``odeint`` inside whole steps (``args=`` and closures, data and
y0 changing, rtol from a dict changed outside, writes into theta's grad/data, value_and_grad
inside, solves that fail on the first or on later calls raise as eagerly); arrays from number
arguments into ``tt.polyval``, ``tt.interp`` (fp, left/right), ``tt.cov(aweights=)``,
``tt.average(weights=)``, ``tt.where``, ``tt.clip``, SDPA float and bool masks; ``np.array``
literals beside traced arrays (indices, weights, matmul, interp/cov/average, into ``.grad``);
``getattr(cfg, "scale", 1.0)``/``hasattr`` with the attribute added, deleted, put on the class,
on a ``Module`` (``getattr(m, "temp", 1.0)``) and on a ``__slots__`` object.
"""
import numpy as np
import pytest

import tinytensor as tt

CHANGE_AT = (2, 9, 39)


def _ser(x, depth=0):
    if depth > 8:
        return ("deep",)
    if isinstance(x, tt.Tensor):
        return ("Tensor", bool(x.requires_grad), _ser(x.data, depth + 1))
    if isinstance(x, np.ndarray):
        return ("nd", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, np.generic):
        return ("np", type(x).__name__, x.tobytes())
    if isinstance(x, (bool, int, float, complex, str, type(None))):
        return (type(x).__name__, float.hex(x) if type(x) is float else repr(x))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(_ser(v, depth + 1) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((repr(k) if not isinstance(k, tt.Tensor) else "T", _ser(v, depth + 1))
                              for k, v in x.items()))
    if isinstance(x, tt.nn.Module):
        ps = tuple((n, _ser(p.data, depth + 1), _ser(p.grad, depth + 1), p.requires_grad)
                   for n, p in x.named_parameters())
        bs = tuple((n, _ser(b, depth + 1)) for n, b in x.named_buffers())
        return ("Module", x.training, ps, bs)
    if isinstance(x, tt.optim.Optimizer):
        groups = tuple(tuple((k, _ser(v, depth + 1)) for k, v in g.items() if k != "params")
                       for g in x.param_groups)
        state = tuple(_ser(v, depth + 1) for v in x.state.values())
        return ("Opt", groups, state)
    if isinstance(x, np.random.Generator):
        return ("Gen", repr(x.bit_generator.state))
    return ("obj", type(x).__name__)


def _one(make, n, compiled):
    tt.manual_seed(1234)
    np.random.seed(99)
    env = make()
    f = tt.compile(env["step"]) if compiled else env["step"]
    outs, held, recs = [], [], []
    params = env.get("params", [])
    for i in range(n):
        if i in CHANGE_AT and "change" in env:
            env["change"](i)
        args = env["args"](i)
        msg = ""
        try:
            out = f(*args)
            err = None
        except Exception as e:  # noqa: BLE001
            out, err, msg = None, type(e).__name__, str(e)[:300]
            if compiled and msg.startswith("tt.compile"):
                recs.append((err, msg, None))
                break
        outs.append(out)
        if i in (0, 4):
            for p in params:
                if p.grad is not None:
                    held.append(p.grad)
                held.append(p.data)
        recs.append((err, msg, _ser((outs, args, env.get("objs", []), held, tt.get_rng_state(),
                                np.random.get_state()[1][:4]))))
    return recs


def run_case(make, n=12, refused_ok=False):
    e = _one(make, n, False)
    c = _one(make, n, True)
    if refused_ok and c[0][0] == "RuntimeError" and e[0][0] is None:
        return
    for i, (a, b) in enumerate(zip(e, c)):
        assert a[0] == b[0], f"call {i + 1}: eager error {a[0]} {a[1]!r} vs compiled {b[0]} {b[1]!r}"
        if a[2] != b[2]:
            _diff(a[2], b[2], f"call {i + 1}")


def _diff(a, b, path):
    if type(a) is tuple and type(b) is tuple and len(a) == len(b):
        for k, (x, y) in enumerate(zip(a, b)):
            if x != y:
                _diff(x, y, f"{path}[{k}]")
    raise AssertionError(f"{path}: {str(a)[:300]} != {str(b)[:300]}")
# ---------------------------------------------------------------- family A: writes into .grad
def _model(dtype=np.float32, tied=False):
    m = tt.nn.Sequential(tt.nn.Linear(4, 5, rng=0, dtype=dtype), tt.nn.Tanh(),
                         tt.nn.Linear(5, 3, rng=1, dtype=dtype))
    return m


def _xy(i, dtype=np.float32, batch=None):
    rng = np.random.default_rng(100 + i)
    if batch is None:
        batch = 6
    scale = 1.0 if i < 2 else (3.0 if i < 9 else -2.0)
    x = (rng.standard_normal((batch, 4)) * scale).astype(dtype)
    y = rng.standard_normal((batch, 3)).astype(dtype)
    return x, y


def _num(kind, i):
    if kind == "float":
        return 2.0 + 0.5 * i
    if kind == "int":
        return 2 + i % 3
    if kind == "f32":
        return np.float32(1.5 + 0.25 * i)
    if kind == "f64":
        return np.float64(0.5 + 0.125 * i)
    if kind == "bool":
        return i % 3 == 0
    if kind == "small":
        return 0.05 + 0.01 * (i % 4)
    raise ValueError(kind)


def grad_case(write, *, dtype=np.float32, opt="sgd", num="float", zero="none", when="before",
              shapes=False, freeze=False, n=12):
    def make():
        m = _model(dtype)
        if freeze:
            m[0].bias.requires_grad_(False)
        params = [p for p in m.parameters() if p.requires_grad]
        if opt == "sgd":
            o = tt.optim.SGD(params, lr=0.1, momentum=0.9)
        elif opt == "adam":
            o = tt.optim.Adam(params, lr=0.01)
        else:
            o = tt.optim.AdamW(params, lr=0.01, weight_decay=0.1)

        def step(x, y, s):
            if zero == "none":
                o.zero_grad()
            elif zero == "keep":
                o.zero_grad(set_to_none=False)
            elif zero == "module":
                m.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            if when == "before":
                write(m, s)
                o.step()
            elif when == "after":
                o.step()
                write(m, s)
            else:
                write(m, s)
                o.step()
                write(m, s)
            return loss

        def args(i):
            batch = None
            if shapes:
                batch = 6 if i < 2 else (9 if i < 9 else 4)
            x, y = _xy(i, dtype, batch)
            return x, y, _num(num, i)

        def change(i):
            if i == 2:
                m[0].weight.data *= 0.5
            elif i == 9:
                m[2].weight.data = -m[2].weight.data
            else:
                o.param_groups[0]["lr"] = o.param_groups[0]["lr"] * 0.5
                if zero == "accum":
                    for p in params:
                        p.grad = None
        return dict(step=step, args=args, change=change, objs=[m, o], params=list(m.parameters()))
    return make


W = []


def spelling(fn):
    W.append(fn)
    return fn


@spelling
def g_div_scale(m, s):
    m[0].weight.grad /= s


@spelling
def g_mul_scale(m, s):
    m[0].weight.grad *= s


@spelling
def g_row0_zero(m, s):
    m[0].weight.grad[0] = 0


@spelling
def g_rowneg_zero(m, s):
    m[0].weight.grad[-1] = 0


@spelling
def g_list_idx(m, s):
    m[0].weight.grad[[0, 2]] = 0


@spelling
def g_array_idx(m, s):
    m[0].weight.grad[np.array([0, 2])] = 0


@spelling
def g_neg_list_idx(m, s):
    m[0].weight.grad[[-1, -3]] *= 0.5


@spelling
def g_step_slice(m, s):
    m[0].weight.grad[::2] = 0


@spelling
def g_step_slice_mul(m, s):
    m[0].weight.grad[1::2] *= 0.5


@spelling
def g_row1_mul(m, s):
    m[0].weight.grad[1] *= 0.5


@spelling
def g_ellipsis_col(m, s):
    m[0].weight.grad[..., 0] = 0


@spelling
def g_ellipsis_all(m, s):
    m[0].weight.grad[...] = m[0].weight.grad * s


@spelling
def g_newaxis(m, s):
    m[0].weight.grad[None, 0] = 1.0


@spelling
def g_newaxis_mul(m, s):
    m[0].weight.grad[np.newaxis] *= 2


@spelling
def g_tuple_elem(m, s):
    m[0].weight.grad[(0, 1)] = 1.0


@spelling
def g_elem_scale(m, s):
    m[0].weight.grad[2, 3] = s


@spelling
def g_mask_from_grad(m, s):
    g = m[0].weight.grad
    g[g > 0] = 0


@spelling
def g_mask_from_data(m, s):
    m[0].weight.grad[m[0].weight.data > 0] = 0


@spelling
def g_mask_abs(m, s):
    m[0].weight.grad[np.abs(m[0].weight.grad) < 1e-2] = 0


@spelling
def g_mask_mul(m, s):
    g = m[2].weight.grad
    g[g < 0] *= s


@spelling
def g_where_slice(m, s):
    g = m[0].weight.grad
    g[:] = np.where(g > 0, g, 0)


@spelling
def g_clip_out(m, s):
    np.clip(m[0].weight.grad, -0.05, 0.05, out=m[0].weight.grad)


@spelling
def g_clip_method_out(m, s):
    m[0].weight.grad.clip(-0.05, 0.05, out=m[0].weight.grad)


@spelling
def g_fill(m, s):
    m[0].bias.grad.fill(0)


@spelling
def g_copyto(m, s):
    np.copyto(m[0].weight.grad, m[0].weight.grad * 0.5)


@spelling
def g_put(m, s):
    np.put(m[0].weight.grad, [0, 3], 0.0)


@spelling
def g_T_row(m, s):
    m[0].weight.grad.T[0] = 0


@spelling
def g_reshape_k(m, s):
    m[0].weight.grad.reshape(-1)[3] = 7


@spelling
def g_ravel_k(m, s):
    m[0].weight.grad.ravel()[2] = 7


@spelling
def g_row_view_mul(m, s):
    row = m[0].weight.grad[0]
    row *= s


@spelling
def g_row_view_set(m, s):
    row = m[0].weight.grad[0]
    row[:] = 0


@spelling
def g_several(m, s):
    g = m[0].weight.grad
    g[0] = 0
    g *= 2
    g[1] += 1


@spelling
def g_bias_slice(m, s):
    m[0].bias.grad[:] = 0


@spelling
def g_center(m, s):
    g = m[0].weight.grad
    g -= g.mean()


@spelling
def g_wd_into_grad(m, s):
    m[0].weight.grad += 1e-3 * m[0].weight.data


@spelling
def g_multiply_out(m, s):
    np.multiply(m[0].weight.grad, s, out=m[0].weight.grad)


@spelling
def g_nan_to_num(m, s):
    np.nan_to_num(m[0].weight.grad, copy=False)


@spelling
def g_isnan_mask(m, s):
    g = m[0].weight.grad
    g[np.isnan(g)] = 0


@spelling
def g_swap_rows(m, s):
    g = m[0].weight.grad
    g[0], g[1] = g[1].copy(), g[0].copy()


@spelling
def g_dup_fancy(m, s):
    m[0].weight.grad[[0, 0]] += 1


@spelling
def g_diag(m, s):
    m[0].weight.grad[np.arange(3), np.arange(3)] = 0


@spelling
def g_fill_diagonal(m, s):
    np.fill_diagonal(m[0].weight.grad, 0)


@spelling
def g_reverse_overlap(m, s):
    g = m[0].weight.grad
    g[:] = g[::-1]


@spelling
def g_all_params_div(m, s):
    for p in m.parameters():
        p.grad /= s


@spelling
def g_all_params_mask(m, s):
    for p in m.parameters():
        p.grad[p.grad > 0.1] = 0.1


@spelling
def g_manual_norm_clip(m, s):
    ps = list(m.parameters())
    norm = np.sqrt(sum(float((p.grad ** 2).sum()) for p in ps))
    for p in ps:
        p.grad *= 1.0 / max(norm, 1.0)


@spelling
def g_norm_array_clip(m, s):
    ps = list(m.parameters())
    norm = np.sqrt(sum((p.grad ** 2).sum() for p in ps))
    for p in ps:
        p.grad *= np.minimum(1.0, 0.1 / (norm + 1e-6))


@spelling
def g_flat_set(m, s):
    m[0].weight.grad.flat[3] = 0


@spelling
def g_sort_rows(m, s):
    m[0].weight.grad.sort(axis=1)


@spelling
def g_tuple_fancy(m, s):
    m[0].weight.grad[([0, 1], [2, 3])] = 0


@spelling
def g_setitem_call(m, s):
    m[0].weight.grad.__setitem__(0, 0.0)


@spelling
def g_bool_list_mask(m, s):
    m[0].bias.grad[[True, False, True, False, True]] = 0


@spelling
def g_if_bool(m, s):
    if s:
        m[0].weight.grad[0] = 0


@spelling
def g_add_at(m, s):
    np.add.at(m[0].weight.grad, [0, 0, 1], 1.0)


@spelling
def g_neg_step_slice(m, s):
    m[0].weight.grad[::-2] *= 0.5


@spelling
def g_col_k(m, s):
    m[0].weight.grad[:, 1] *= s


@spelling
def g_read_after_write(m, s):
    g = m[0].weight.grad
    g[0] = 0
    m[0].bias.grad[:] = g.sum(axis=1)


@spelling
def g_grad_T_inplace(m, s):
    gt = m[0].weight.grad.T
    gt *= 0.5


@spelling
def g_clip_grad_value(m, s):
    tt.nn.utils.clip_grad_value_(m.parameters(), 0.05)
    m[0].weight.grad[0] = 0


@spelling
def g_clip_grad_norm_then_write(m, s):
    tt.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
    m[0].weight.grad /= s


@spelling
def g_data_read_into_grad(m, s):
    m[0].weight.grad[:] = m[0].weight.data * 0.01


@spelling
def g_ufunc_at_mask(m, s):
    g = m[0].weight.grad
    np.negative(g, out=g, where=g > 0)


@spelling
def g_rint(m, s):
    g = m[2].weight.grad
    np.round(g, 3, out=g)


# ---------------------------------------------------------------- writes into .data
D = []


def dspelling(fn):
    D.append(fn)
    return fn


@dspelling
def d_sgd_manual(m, s):
    for p in m.parameters():
        p.data -= s * p.grad


@dspelling
def d_wd(m, s):
    for p in m.parameters():
        p.data *= 1 - s * 0.1


@dspelling
def d_clip_ellipsis(m, s):
    p = m[0].weight
    p.data[...] = np.clip(p.data, -0.3, 0.3)


@dspelling
def d_clip_c(m, s):
    p = m[0].weight
    p.data[...] = np.clip(p.data, -s, s)


@dspelling
def d_row0(m, s):
    m[0].weight.data[0] = 0


@dspelling
def d_mask(m, s):
    p = m[0].weight
    p.data[p.data < 0] = 0


@dspelling
def d_copyto(m, s):
    np.copyto(m[0].weight.data, m[0].weight.data * 0.9)


@dspelling
def d_slice_assign(m, s):
    m[0].weight.data[:] = m[0].weight.data * 0.9


@dspelling
def d_fill_bias(m, s):
    m[0].bias.data.fill(0.5)


@dspelling
def d_two_writes(m, s):
    p = m[0].weight
    p.data -= s * p.grad
    p.data[0] = 0


@dspelling
def d_nograd_sub(m, s):
    with tt.no_grad():
        for p in m.parameters():
            p -= s * p.grad


@dspelling
def d_clip_method_out(m, s):
    p = m[0].weight
    p.data.clip(-0.3, 0.3, out=p.data)


@dspelling
def d_clamp_(m, s):
    with tt.no_grad():
        m[0].weight.clamp_(-0.3, 0.3)


@dspelling
def d_maxnorm_rows(m, s):
    p = m[0].weight
    n = np.linalg.norm(p.data, axis=1, keepdims=True)
    p.data *= np.minimum(1.0, 0.5 / n)


@dspelling
def d_grad_and_data(m, s):
    p = m[0].weight
    p.grad[0] = 0
    p.data -= 0.01 * p.grad


@dspelling
def d_sign_sgd(m, s):
    for p in m.parameters():
        p.data -= s * np.sign(p.grad)


@dspelling
def d_T_write(m, s):
    m[0].weight.data.T[0] *= 0.5


@dspelling
def d_noise_free_ema(m, s):
    p = m[0].weight
    p.data[:] = 0.9 * p.data + 0.1 * np.tanh(p.data)


@dspelling
def d_clip_out_data(m, s):
    np.clip(m[0].weight.data, -0.3, 0.3, out=m[0].weight.data)


def data_case(write, *, dtype=np.float32, num="small", when="after", opt=True, n=12):
    def make():
        m = _model(dtype)
        o = tt.optim.SGD(m.parameters(), lr=0.05) if opt else None

        def step(x, y, s):
            if o is not None:
                o.zero_grad()
            else:
                m.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            if when == "before":
                write(m, s)
            if o is not None:
                o.step()
            if when == "after":
                write(m, s)
            return loss

        def args(i):
            x, y = _xy(i, dtype)
            return x, y, _num(num, i)

        def change(i):
            if i == 2:
                m[0].weight.data *= 0.5
            elif i == 9:
                m[0].weight.data = m[0].weight.data[::-1].copy()
            else:
                m[2].bias.data += 1.0
        return dict(step=step, args=args, change=change, objs=[m] + ([o] if o else []),
                    params=list(m.parameters()))
    return make


# ---------------------------------------------------------------- embeddings, tied, frozen
def emb_case(kind, n=12):
    def make():
        emb = tt.nn.Embedding(7, 4, padding_idx=0, rng=0)
        head = tt.nn.Linear(4, 7, rng=1)
        if kind.startswith("tied"):
            head.weight = emb.weight
        mods = tt.nn.ModuleList([emb, head])
        o = tt.optim.SGD(mods.parameters(), lr=0.1)

        def step(tok, tgt, pad):
            o.zero_grad()
            logits = head(emb(tok).mean(axis=1))
            loss = tt.nn.functional.cross_entropy(logits, tgt)
            loss.backward()
            if kind in ("pad_int", "tied_pad"):
                emb.weight.grad[pad] = 0
            elif kind == "pad_list":
                emb.weight.grad[[pad, 6]] = 0
            elif kind == "unused_rows":
                used = np.zeros(7, dtype=bool)
                used[np.unique(tok)] = True
                emb.weight.grad[~used] = 0
            elif kind == "row_scale":
                emb.weight.grad[pad] *= 0.5
            elif kind == "tied_div":
                emb.weight.grad /= 2.0
            elif kind == "tok_mask_data":
                emb.weight.grad[np.isin(np.arange(7), tok)] *= 2.0
            o.step()
            return loss

        def args(i):
            rng = np.random.default_rng(i)
            hi = 4 if i < 2 else (7 if i < 9 else 5)
            return rng.integers(0, hi, (5, 3)), rng.integers(0, 7, 5), (i // 3) % 3

        def change(i):
            emb.weight.data[1] = 0.25 * i
        return dict(step=step, args=args, change=change, objs=[mods, o],
                    params=list(mods.parameters()))
    return make


def frozen_case(kind, n=12):
    def make():
        m = _model()
        m[0].bias.requires_grad_(False)
        o = tt.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)

        def step(x, y, s):
            if kind == "keep":
                o.zero_grad(set_to_none=False)
            else:
                o.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            for p in m.parameters():
                if p.grad is not None:
                    p.grad /= s
                    p.grad[0] = 0
            if kind == "count":
                return loss, sum(p.grad is None for p in m.parameters())
            o.step()
            return loss

        def args(i):
            x, y = _xy(i)
            return x, y, _num("float", i)

        def change(i):
            if i == 2:
                m[0].bias.requires_grad_(True)
            elif i == 9:
                m[2].weight.requires_grad_(False)
                m[2].weight.grad = None
            else:
                m[2].weight.requires_grad_(True)
        return dict(step=step, args=args, change=change, objs=[m, o], params=list(m.parameters()))
    return make


def accum_case(kind, n=12):
    """Gradient accumulation over calls: zero only every k-th call, from an int argument."""
    def make():
        m = _model()
        o = tt.optim.SGD(m.parameters(), lr=0.05)

        def step(x, y, k, s):
            loss = ((m(x) - y) ** 2).mean() / s
            loss.backward()
            if kind == "scale_each":
                m[0].weight.grad *= 0.5
            elif kind == "row_each":
                m[0].weight.grad[1] = 0
            if k:
                if kind == "scale_at_step":
                    for p in m.parameters():
                        p.grad /= s
                o.step()
                o.zero_grad(set_to_none=(kind != "keep"))
            return loss

        def args(i):
            x, y = _xy(i)
            return x, y, i % 3 == 2, _num("int", i)

        def change(i):
            m[0].weight.data += 0.1
        return dict(step=step, args=args, change=change, objs=[m, o], params=list(m.parameters()))
    return make


# ---------------------------------------------------------------- param_groups lr from arguments
def lr_case(kind, num="float", n=12):
    def make():
        m = _model()
        if kind == "two_groups":
            o = tt.optim.SGD([{"params": m[0].parameters()}, {"params": m[2].parameters(), "lr": 0.01}],
                             lr=0.1, momentum=0.9)
        elif kind.startswith("adam"):
            o = tt.optim.Adam(m.parameters(), lr=0.01)
        else:
            o = tt.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y, lr):
            if kind == "set":
                o.param_groups[0]["lr"] = lr
            elif kind == "half":
                o.param_groups[0]["lr"] = lr * 0.5
            elif kind == "loop":
                for g in o.param_groups:
                    g["lr"] = lr
            elif kind == "two_groups":
                o.param_groups[0]["lr"] = lr
                o.param_groups[1]["lr"] = lr * 0.1
            elif kind == "adam_set":
                o.param_groups[0]["lr"] = lr
            elif kind == "warmup_expr":
                o.param_groups[0]["lr"] = 0.1 * min(1.0, lr)
            elif kind == "pow":
                o.param_groups[0]["lr"] = lr ** 2
            elif kind == "np_exp":
                o.param_groups[0]["lr"] = np.exp(-lr)
            elif kind == "after_zero":
                pass
            elif kind == "momentum":
                o.param_groups[0]["momentum"] = lr
            o.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            if kind == "after_zero":
                o.param_groups[0]["lr"] = lr
            if kind == "grad_scaled":
                o.param_groups[0]["lr"] = lr
                for p in m.parameters():
                    p.grad /= lr * 10
            o.step()
            return loss

        def args(i):
            x, y = _xy(i)
            return x, y, _num(num, i) * (0.01 if num in ("float", "f32", "f64") else 1)

        def change(i):
            m[2].weight.data *= 0.5
            o.param_groups[-1]["lr"] = 0.123
        return dict(step=step, args=args, change=change, objs=[m, o], params=list(m.parameters()))
    return make


# ---------------------------------------------------------------- reading .grad / returning views
def ret_case(kind, n=12):
    def make():
        m = _model()
        o = tt.optim.SGD(m.parameters(), lr=0.1)

        def step(x, y):
            if kind.startswith("keep"):
                o.zero_grad(set_to_none=False)
            else:
                o.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            g = m[0].weight.grad
            if kind in ("grad", "keep_grad"):
                out = (loss, g)
            elif kind in ("row", "keep_row"):
                out = (loss, g[0])
            elif kind == "T":
                out = (loss, g.T)
            elif kind == "reshape":
                out = (loss, g.reshape(-1))
            elif kind == "norm":
                out = (loss, np.linalg.norm(g))
            elif kind == "sum_np":
                out = (loss, g.sum())
            elif kind == "copy":
                out = (loss, g.copy())
            elif kind == "dict":
                out = {n_: p.grad for n_, p in m.named_parameters()}
            elif kind == "data_view":
                out = (loss, m[0].weight.data[1])
            elif kind == "grad_after_write":
                g[0] = 0
                out = (loss, g)
            elif kind == "keep_T":
                out = (loss, g.T)
            o.step()
            return out

        def args(i):
            return _xy(i)

        def change(i):
            m[0].weight.data[0] = 1.0
        return dict(step=step, args=args, change=change, objs=[m, o], params=list(m.parameters()))
    return make


# ---------------------------------------------------------------- odeint inside whole steps
ode = tt.scipy.integrate.odeint
TIMES = np.linspace(0.0, 1.0, 4)


def ode_case(kind, n=12):
    def make():
        theta = tt.tensor(np.array([0.7, 0.3]), requires_grad=True)
        o = tt.optim.SGD([theta], lr=0.01)
        cfg = {"rtol": 1e-6}

        def rhs_args(y, t, th):
            return tt.stack([-th[0] * y[0] + th[1] * y[1], -th[1] * y[1]])

        def rhs_closure(y, t):
            return tt.stack([-theta[0] * y[0] + theta[1] * y[1], -theta[1] * y[1]])

        def solve(y0, times):
            if kind in ("closure", "closure_rtol"):
                rt = cfg["rtol"] if kind == "closure_rtol" else None
                return ode(rhs_closure, y0, times, rtol=rt, atol=None if rt is None else 1e-9)
            if kind == "rtol_global":
                return ode(rhs_args, y0, times, args=(theta,), rtol=cfg["rtol"], atol=1e-9)
            return ode(rhs_args, y0, times, args=(theta,))

        def step(obs, y0, s):
            o.zero_grad()
            if kind == "value_and_grad":
                def f(th):
                    ys = ode(rhs_args, y0, TIMES, args=(th,))
                    return tt.sum((ys - obs) ** 2)
                loss, g = tt.value_and_grad(f)(theta)
                theta.grad = None
                with tt.no_grad():
                    theta.sub_(0.01 * g)
                return loss
            ys = solve(y0, TIMES)
            loss = tt.sum((ys - obs) ** 2) * s
            loss.backward()
            if kind == "grad_write":
                theta.grad /= s
                theta.grad[0] *= 0.5
            if kind == "data_write":
                theta.data[...] = np.clip(theta.data, 0.05, 5.0)
            o.step()
            if kind == "return_grad":
                return loss, theta.grad
            return loss

        def args(i):
            rng = np.random.default_rng(i)
            obs = np.exp(-np.outer(TIMES, [0.5, 0.2])) + 0.01 * rng.standard_normal((4, 2))
            if i >= 9:
                obs = obs * 1.5
            y0 = np.array([1.0, 1.0 + 0.1 * (i % 3)])
            return obs, y0, _num("float", i) * 0.5

        def change(i):
            if i == 2:
                theta.data[0] = 1.2
            elif i == 9:
                cfg["rtol"] = 1e-8
            else:
                theta.data = np.array([0.4, 0.6])
        return dict(step=step, args=args, change=change, objs=[theta, o], params=[theta])
    return make


def ode_fail_case(kind, n=12):
    """A solve that is too stiff for mxstep on some calls (rate from the argument)."""
    def make():
        k = tt.tensor(np.array([1.0]), requires_grad=True)
        o = tt.optim.SGD([k], lr=1e-4)

        def step(rate):
            o.zero_grad()
            ys = ode(lambda y, t, kk, r: -kk * r * (y - tt.cos(t)), np.array([0.0]),
                     np.linspace(0.0, 20.0, 4), args=(k, rate), mxstep=200)
            loss = tt.sum(ys ** 2)
            loss.backward()
            o.step()
            return loss

        def args(i):
            j = i + 1 if kind == "late" else i
            return (np.array([1.0 + 0.1 * i if j % 4 else -60.0]),)

        def change(i):
            k.data[...] = 1.0
        return dict(step=step, args=args, change=change, objs=[k, o], params=[k])
    return make


# ---------------------------------------------------------------- arrays from number arguments
def numarr_case(kind, num="float", n=12):
    def make():
        w = tt.tensor(np.linspace(-1.0, 1.0, 5), requires_grad=True)
        o = tt.optim.SGD([w], lr=0.01)

        def step(x, a):
            o.zero_grad()
            if kind == "polyval_ones":
                v = tt.polyval(np.ones(3) * a, w)
            elif kind == "polyval_list":
                v = tt.polyval(np.array([a, 0.0, 1.0]), w)
            elif kind == "polyval_tensor_coef":
                v = tt.polyval(w[:3] * a, x)
            elif kind == "interp_fp":
                v = tt.interp(w, np.linspace(-2, 2, 5), np.linspace(0, 1, 5) * a)
            elif kind == "interp_left":
                v = tt.interp(w * 3, np.linspace(-1, 1, 5), x[:5], left=a, right=-a)
            elif kind == "cov_aw":
                v = tt.cov(tt.stack([w, w * x[:5]]), aweights=np.arange(1.0, 6.0) * a)
            elif kind == "average_w":
                v = tt.average(w * x[:5], weights=np.linspace(0.0, 1.0, 5) * a + 1)
            elif kind == "where_num":
                v = tt.where(w > 0, w, a)
            elif kind == "mask_radius":
                d = np.abs(np.linspace(-1, 1, 5))
                v = w * (d < a / 4)
            elif kind == "attn_mask":
                q = tt.reshape(w * x[:5], (1, 5, 1))
                pos = np.arange(5)
                mask = np.where(np.abs(pos[:, None] - pos[None, :]) > a, -np.inf, 0.0)
                v = tt.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
            elif kind == "attn_bool_mask":
                q = tt.reshape(w * x[:5], (1, 5, 1))
                pos = np.arange(5.0)
                v = tt.nn.functional.scaled_dot_product_attention(
                    q, q, q, attn_mask=np.abs(pos[:, None] - pos[None, :]) <= a)
            elif kind == "full_like":
                v = w * np.full(5, a)
            elif kind == "linspace_mul":
                v = w * (np.linspace(0, 1, 5) ** a)
            elif kind == "exp_decay":
                v = w * np.exp(-a * np.arange(5))
            elif kind == "clip_num":
                v = tt.clip(w * x[:5], -a, a)
            loss = tt.sum(v * v)
            loss.backward()
            o.step()
            return loss, v

        def args(i):
            rng = np.random.default_rng(i)
            x = rng.standard_normal(6) * (1 if i < 9 else 3)
            return x, _num(num, i)

        def change(i):
            w.data[i % 5] = -0.5 * (i % 2) + 0.2
        return dict(step=step, args=args, change=change, objs=[w, o], params=[w])
    return make


# ---------------------------------------------------------------- np.array literals beside traced arrays
def lit_case(kind, n=12):
    def make():
        m = tt.nn.Linear(3, 3, rng=0, dtype=np.float64)
        o = tt.optim.SGD(m.parameters(), lr=0.05)

        def step(x):
            o.zero_grad()
            h = m(x)
            if kind == "index":
                v = h[:, np.array([0, 2])]
            elif kind == "mul":
                v = h * np.array([1.0, 2.0, 3.0])
            elif kind == "matmul":
                v = h @ np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
            elif kind == "polyval":
                v = tt.polyval(np.array([1.0, -2.0, 0.5]), h)
            elif kind == "int_weights":
                v = h * np.array([1, 2, 3])
            elif kind == "bool_mask_literal":
                v = tt.where(np.array([True, False, True]), h, 0.0)
            elif kind == "f32_literal":
                v = h * np.array([1.0, 2.0, 3.0], dtype=np.float32)
            elif kind == "average":
                v = tt.average(h, axis=1, weights=np.array([1.0, 2.0, 3.0]))
            elif kind == "interp":
                v = tt.interp(h, np.array([-1.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0]))
            elif kind == "cov":
                v = tt.cov(h, aweights=np.array([1.0, 2.0, 1.0, 2.0]), rowvar=False)
            elif kind == "into_grad":
                v = h
            loss = tt.sum(v * v)
            loss.backward()
            if kind == "into_grad":
                m.weight.grad *= np.array([1.0, 0.5, 0.0])
                m.bias.grad[np.array([0, 2])] = 0
            o.step()
            return loss

        def args(i):
            rng = np.random.default_rng(i)
            return (rng.standard_normal((4, 3)) * (1 if i < 2 else 2),)

        def change(i):
            m.weight.data[0, 0] += 0.5
        return dict(step=step, args=args, change=change, objs=[m, o], params=list(m.parameters()))
    return make


# ---------------------------------------------------------------- getattr / hasattr guarded
class Cfg:
    pass


class CfgSlotted:
    __slots__ = ("scale", "__weakref__")


def attr_case(kind, n=12):
    def make():
        m = _model()
        o = tt.optim.SGD(m.parameters(), lr=0.1)
        klass = type("Cfg_" + kind, (Cfg,), {})
        cfg = klass() if kind != "slots" else CfgSlotted()

        def step(x, y):
            o.zero_grad()
            scale = getattr(cfg, "scale", 1.0) if kind != "module" else getattr(m, "temp", 1.0)
            out = m(x) * scale
            if kind == "hasattr" and hasattr(cfg, "shift"):
                out = out + cfg.shift
            loss = ((out - y) ** 2).mean()
            loss.backward()
            if kind == "grad_scale":
                m[0].weight.grad /= getattr(cfg, "gs", 1.0)
            if kind == "clip_attr" and hasattr(cfg, "clip"):
                np.clip(m[0].weight.grad, -cfg.clip, cfg.clip, out=m[0].weight.grad)
            o.step()
            return loss

        def args(i):
            return _xy(i)

        def change(i):
            if kind == "module":
                if i == 2:
                    m.temp = 2.0
                elif i == 9:
                    del m.temp
                else:
                    m.temp = 0.5
                return
            if kind == "class":
                if i == 2:
                    klass.scale = 3.0
                elif i == 9:
                    cfg.scale = 0.5
                else:
                    del klass.scale
                return
            if kind == "slots":
                cfg.scale = 2.0 + i
                return
            if i == 2:
                cfg.scale = 2.0
                cfg.shift = 0.5
                cfg.gs = 4.0
                cfg.clip = 0.01
            elif i == 9:
                del cfg.scale
                if kind != "slots":
                    del cfg.shift
                    cfg.gs = 2
            else:
                if kind == "slots":
                    cfg.scale = 5.0
                else:
                    klass.scale = 1.5
                    cfg.__dict__.pop("gs", None)
        return dict(step=step, args=args, change=change, objs=[m, o], params=list(m.parameters()))

    return make




# ---------------------------------------------------------------- the case table
def _p(make, n, cid):
    return (make, n, cid)


GV = [g_div_scale, g_row0_zero, g_mask_from_grad, g_clip_out, g_row_view_mul, g_reshape_k, g_T_row,
      g_where_slice, g_put, g_copyto, g_several, g_mask_from_data]

RAW = []
for fn in W:
    RAW.append(_p(grad_case(fn), 12, "grad-" + fn.__name__))
for fn in GV:
    nm = fn.__name__
    RAW.append(_p(grad_case(fn, dtype=np.float64), 12, f"grad-f64-{nm}"))
    RAW.append(_p(grad_case(fn, dtype=np.float16), 12, f"grad-f16-{nm}"))
    RAW.append(_p(grad_case(fn, opt="adam"), 12, f"grad-adam-{nm}"))
    RAW.append(_p(grad_case(fn, opt="adamw", when="after"), 12, f"grad-adamw-after-{nm}"))
    RAW.append(_p(grad_case(fn, zero="keep"), 12, f"grad-keep-{nm}"))
    RAW.append(_p(grad_case(fn, zero="accum", when="both"), 12, f"grad-accum-both-{nm}"))
    RAW.append(_p(grad_case(fn, shapes=True, freeze=True), 12, f"grad-shapes-frozen-{nm}"))
for num in ("int", "f32", "f64", "bool"):
    RAW.append(_p(grad_case(g_div_scale if num != "bool" else g_if_bool, num=num), 12, f"grad-num-{num}"))
    RAW.append(_p(grad_case(g_elem_scale, num=num, zero="module"), 12, f"grad-num-elem-{num}"))
for fn in (g_div_scale, g_mask_from_grad, g_row_view_set, g_clip_method_out, g_ravel_k):
    RAW.append(_p(grad_case(fn, zero="keep", opt="adam"), 42, "grad_long-keep-adam-" + fn.__name__))
for fn in D:
    RAW.append(_p(data_case(fn), 12, "data-" + fn.__name__))
for fn in (d_sgd_manual, d_wd, d_clip_ellipsis, d_mask, d_grad_and_data, d_nograd_sub):
    RAW.append(_p(data_case(fn, when="before", dtype=np.float64), 12, "data-before-f64-" + fn.__name__))
    RAW.append(_p(data_case(fn, opt=False, num="f32"), 12, "data-noopt-f32-" + fn.__name__))
for fn in (d_sgd_manual, d_clip_c, d_wd):
    RAW.append(_p(data_case(fn, opt=False), 42, "data_long-noopt-" + fn.__name__))
for k in ("pad_int", "pad_list", "unused_rows", "row_scale", "tied_div", "tied_pad", "tok_mask_data"):
    RAW.append(_p(emb_case(k), 12, "emb-" + k))
RAW.append(_p(emb_case("pad_int"), 42, "emb_long-pad_int"))
for k in ("none", "keep", "count"):
    RAW.append(_p(frozen_case(k), 12, "frozen-" + k))
RAW.append(_p(frozen_case("keep"), 42, "frozen_long-keep"))
for k in ("plain", "scale_each", "row_each", "scale_at_step", "keep"):
    RAW.append(_p(accum_case(k), 12, "accum-" + k))
RAW.append(_p(accum_case("scale_at_step"), 42, "accum_long-scale_at_step"))
for k in ("set", "half", "loop", "two_groups", "adam_set", "warmup_expr", "pow", "np_exp",
          "after_zero", "momentum", "grad_scaled"):
    RAW.append(_p(lr_case(k), 12, "lr-" + k))
for num in ("f32", "f64", "int"):
    RAW.append(_p(lr_case("set", num=num), 12, "lr-set-" + num))
RAW.append(_p(lr_case("two_groups"), 42, "lr_long-two_groups"))
for k in ("grad", "keep_grad", "row", "keep_row", "T", "reshape", "norm", "sum_np", "copy", "dict",
          "data_view", "grad_after_write", "keep_T"):
    RAW.append(_p(ret_case(k), 12, "ret-" + k))
RAW.append(_p(ret_case("keep_row"), 42, "ret_long-keep_row"))
for k in ("args", "closure", "closure_rtol", "rtol_global", "grad_write", "data_write",
          "return_grad", "value_and_grad"):
    RAW.append(_p(ode_case(k), 12, "ode-" + k))
RAW.append(_p(ode_case("grad_write"), 42, "ode_long-grad_write"))
RAW.append(_p(ode_fail_case("first"), 12, "ode-fails-first-and-some-calls"))
RAW.append(_p(ode_fail_case("late"), 12, "ode-fails-later-calls"))
for k in ("polyval_ones", "polyval_list", "polyval_tensor_coef", "interp_fp", "interp_left", "cov_aw",
          "average_w", "where_num", "mask_radius", "attn_mask", "attn_bool_mask", "full_like",
          "linspace_mul", "exp_decay", "clip_num"):
    RAW.append(_p(numarr_case(k), 12, "numarr-" + k))
for k in ("polyval_ones", "average_w", "attn_mask", "cov_aw", "interp_fp"):
    RAW.append(_p(numarr_case(k, num="f32"), 12, "numarr-f32-" + k))
    RAW.append(_p(numarr_case(k, num="int"), 12, "numarr-int-" + k))
RAW.append(_p(numarr_case("polyval_list"), 42, "numarr_long-polyval_list"))
for k in ("index", "mul", "matmul", "polyval", "int_weights", "bool_mask_literal", "f32_literal",
          "average", "interp", "cov", "into_grad"):
    RAW.append(_p(lit_case(k), 12, "lit-" + k))
for k in ("plain", "hasattr", "grad_scale", "clip_attr", "module", "class", "slots"):
    RAW.append(_p(attr_case(k), 12, "attr-" + k))
RAW.append(_p(attr_case("hasattr"), 42, "attr_long-hasattr"))

_SILENT = 'silent: compiled step does not apply '
_FR = "false refusal: 'writing in place into a value computed from traced data' for "
_CF = ("false refusal: a call-form write into a gradient's own memory is refused (the Limits "
       "bullet names np.put/np.add.at/out= only for plain NumPy containers written with traced "
       "values): ")
XFAIL = {
    'attr-clip_attr':
        _CF + 'np.clip(p.grad, -cfg.clip, cfg.clip, out=p.grad) once'
        " hasattr(cfg, 'clip') turns true",
    'data-d_T_write': _FR + 'p.data.T[0] *= 0.5 after opt.step()',
    'data-d_clip_c': (
        'false refusal: p.data[...] = np.clip(p.data, -c, c)'
        " with c a number ARGUMENT is refused as 'reads a value into Python after backward()'"
        " (a value of the arguments alone)"),
    'data-d_clip_method_out':
        _SILENT + 'p.data.clip(-c, c, out=p.data) after opt.step():'
        ' weights left unclipped',
    'data-d_copyto': _FR + 'np.copyto(p.data, p.data * 0.9) after opt.step()',
    'data-d_fill_bias': _FR + 'p.data.fill(0.5) after opt.step()',
    'data_long-noopt-d_clip_c':
        'false refusal: p.data[...] = np.clip(p.data, -c, c)'
        ' with c a number argument refused as a Python read after backward()',
    'grad-accum-both-g_T_row': _FR + 'p.grad.T[0] = 0 (a write through the transpose)',
    'grad-accum-both-g_clip_out': _CF + 'np.clip(p.grad, -c, c, out=p.grad)',
    'grad-accum-both-g_copyto': _CF + 'np.copyto(p.grad, p.grad * 0.5)',
    'grad-accum-both-g_put': _CF + 'np.put(p.grad, [0, 3], 0.0)',
    'grad-accum-both-g_reshape_k': _FR + 'p.grad.reshape(-1)[k] = v',
    'grad-adam-g_T_row': _FR + 'p.grad.T[0] = 0 (a write through the transpose)',
    'grad-adam-g_clip_out': _CF + 'np.clip(p.grad, -c, c, out=p.grad)',
    'grad-adam-g_copyto': _CF + 'np.copyto(p.grad, p.grad * 0.5)',
    'grad-adam-g_put': _CF + 'np.put(p.grad, [0, 3], 0.0)',
    'grad-adam-g_reshape_k': _FR + 'p.grad.reshape(-1)[k] = v',
    'grad-adamw-after-g_T_row': _FR + 'p.grad.T[0] = 0 (a write through the transpose)',
    'grad-adamw-after-g_clip_out': _CF + 'np.clip(p.grad, -c, c, out=p.grad)',
    'grad-adamw-after-g_copyto': _CF + 'np.copyto(p.grad, p.grad * 0.5)',
    'grad-adamw-after-g_put': _CF + 'np.put(p.grad, [0, 3], 0.0)',
    'grad-adamw-after-g_reshape_k': _FR + 'p.grad.reshape(-1)[k] = v',
    'grad-f16-g_T_row': _FR + 'p.grad.T[0] = 0 (a write through the transpose)',
    'grad-f16-g_clip_out': _CF + 'np.clip(p.grad, -c, c, out=p.grad)',
    'grad-f16-g_copyto': _CF + 'np.copyto(p.grad, p.grad * 0.5)',
    'grad-f16-g_put': _CF + 'np.put(p.grad, [0, 3], 0.0)',
    'grad-f16-g_reshape_k': _FR + 'p.grad.reshape(-1)[k] = v',
    'grad-f64-g_T_row': _FR + 'p.grad.T[0] = 0 (a write through the transpose)',
    'grad-f64-g_clip_out': _CF + 'np.clip(p.grad, -c, c, out=p.grad)',
    'grad-f64-g_copyto': _CF + 'np.copyto(p.grad, p.grad * 0.5)',
    'grad-f64-g_put': _CF + 'np.put(p.grad, [0, 3], 0.0)',
    'grad-f64-g_reshape_k': _FR + 'p.grad.reshape(-1)[k] = v',
    'grad-g_T_row': _FR + 'p.grad.T[0] = 0 (a write through the transpose)',
    'grad-g_add_at': _CF + 'np.add.at(p.grad, [0, 0, 1], 1.0)',
    'grad-g_clip_method_out': _SILENT + 'p.grad.clip(-c, c, out=p.grad): parameters differ after call 1',
    'grad-g_clip_out': _CF + 'np.clip(p.grad, -c, c, out=p.grad)',
    'grad-g_copyto': _CF + 'np.copyto(p.grad, p.grad * 0.5)',
    'grad-g_dup_fancy': _FR + 'p.grad[[0, 0]] += 1',
    'grad-g_fill': _FR + 'p.grad.fill(0)',
    'grad-g_fill_diagonal': _CF + 'np.fill_diagonal(p.grad, 0)',
    'grad-g_flat_set': _SILENT + 'p.grad.flat[3] = 0: parameters differ after call 1',
    'grad-g_grad_T_inplace': _FR + 'gt = p.grad.T; gt *= 0.5',
    'grad-g_neg_list_idx': _FR + 'p.grad[[-1, -3]] *= 0.5 (negative fancy list, in-place op)',
    'grad-g_put': _CF + 'np.put(p.grad, [0, 3], 0.0)',
    'grad-g_ravel_k': _FR + 'p.grad.ravel()[2] = 7',
    'grad-g_reshape_k': _FR + 'p.grad.reshape(-1)[k] = v',
    'grad-g_rint': _CF + 'np.round(p.grad, 3, out=p.grad)',
    'grad-g_sort_rows': _FR + 'p.grad.sort(axis=1)',
    'grad-g_ufunc_at_mask': _SILENT + 'np.negative(g, out=g, where=g > 0): parameters differ after call 1',
    'grad-keep-g_T_row': _FR + 'p.grad.T[0] = 0 (a write through the transpose)',
    'grad-keep-g_clip_out': _CF + 'np.clip(p.grad, -c, c, out=p.grad)',
    'grad-keep-g_copyto': _CF + 'np.copyto(p.grad, p.grad * 0.5)',
    'grad-keep-g_put': _CF + 'np.put(p.grad, [0, 3], 0.0)',
    'grad-keep-g_reshape_k': _FR + 'p.grad.reshape(-1)[k] = v',
    'grad-shapes-frozen-g_T_row': _FR + 'p.grad.T[0] = 0 (a write through the transpose)',
    'grad-shapes-frozen-g_clip_out': _CF + 'np.clip(p.grad, -c, c, out=p.grad)',
    'grad-shapes-frozen-g_copyto': _CF + 'np.copyto(p.grad, p.grad * 0.5)',
    'grad-shapes-frozen-g_put': _CF + 'np.put(p.grad, [0, 3], 0.0)',
    'grad-shapes-frozen-g_reshape_k': _FR + 'p.grad.reshape(-1)[k] = v',
    'grad_long-keep-adam-g_clip_method_out':
        _SILENT + 'p.grad.clip(-c, c, out=p.grad) (Adam,'
        ' set_to_none=False)',
    'grad_long-keep-adam-g_ravel_k': _FR + 'p.grad.ravel()[2] = 7',
}
# documented refusals (boolean indexing, np.unique, float() after backward(), np.clip(w.data, out=w.data))
REFUSED_OK = {'grad-g_mask_mul', 'emb-unused_rows', 'emb-tok_mask_data', 'grad-g_manual_norm_clip',
              'data-d_clip_out_data'}

# All 61 were fixed after the round was written (writes through views, methods and NumPy
# functions into p.grad / p.data are lines of the program): the xfail markers are dropped, the
# reasons kept as the record of what differed.
FIXED = set(XFAIL)
CASES = [pytest.param(mk, n, id=cid, marks=pytest.mark.xfail(strict=True, reason=XFAIL[cid]))
         if cid in XFAIL and cid not in FIXED else pytest.param(mk, n, id=cid) for mk, n, cid in RAW]


@pytest.mark.parametrize(("make", "n"), CASES)
def test_compile_equals_eager(make, n, request):
    run_case(make, n, refused_ok=request.node.callspec.id in REFUSED_OK)


def test_case_count():
    assert len(RAW) >= 200
    assert len({cid for _, _, cid in RAW}) == len(RAW)

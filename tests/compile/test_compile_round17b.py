"""Round 17b: ported PyTorch models and scientific code under ``tt.compile``, eager vs compiled.

Written by a fresh user from README.md, docs/guides/compile.md and the other guides only. Each case
builds the same set-up twice (same seeds), runs it eagerly and compiled, and compares after every
call, bit for bit: the result (type, dtype, requires_grad, value), every parameter, its ``.grad``,
buffers, the state dict (layers' own generators), optimizer and scheduler state, the global
generator and any Python state the case exposes. Changes made outside the compiled function happen
on the 3rd, 10th and 40th call (``i in CHANGE``, 0-based). Outcomes: equal, refused (a RuntimeError
from tt.compile at the recording call), warn (a warning, then a difference), silent (a difference),
crash (an exception eager mode does not raise).
"""

import math
import os
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

F = nn.functional
integrate = tt.scipy.integrate
CHANGE = (2, 9, 39)  # the 3rd, 10th and 40th call
# The long cases run to call 42 (the change at call 40) with TT_COMPILE_LONG=1; by default to
# call 12 (the changes at calls 3 and 10), to keep the suite's time (as round 15b).
SHORT, LONG = 12, (42 if os.environ.get("TT_COMPILE_LONG") == "1" else 12)


# --------------------------------------------------------------------------- the harness


def snap(x):
    """A bit-exact, comparable picture of a value (type, dtype, requires_grad, bytes)."""
    if isinstance(x, tt.Tensor):
        return (
            "Tensor",
            type(x).__name__,
            x.dtype.str,
            bool(x.requires_grad),
            x.shape,
            np.ascontiguousarray(x.data).tobytes(),
        )
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, np.ascontiguousarray(x).tobytes())
    if isinstance(x, np.generic):
        return ("scalar", type(x).__name__, x.tobytes())
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return (type(x).__name__, x)
    if isinstance(x, float):
        return ("float", np.float64(x).tobytes())
    if isinstance(x, int):
        return ("int", x)
    if isinstance(x, dict):
        return ("dict", tuple((repr(k), snap(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(snap(v) for v in x))
    if isinstance(x, np.random.Generator):
        return ("Generator", repr(x.bit_generator.state))
    return (type(x).__name__, repr(x))


def mstate(model=None, opt=None, sched=None, **extra):
    d = {}
    if model is not None:
        for k, p in model.named_parameters():
            d["param " + k] = p
            d["grad " + k] = p.grad
        for k, b in model.named_buffers():
            d["buffer " + k] = b
        d["state_dict"] = model.state_dict()
        d["modes"] = [m.training for m in model.modules()]
    if opt is not None:
        d["opt"] = opt.state_dict()
        d["lr"] = [g["lr"] for g in opt.param_groups]
    if sched is not None:
        d["sched"] = {k: v for k, v in sched.state_dict().items() if not callable(v)}
    d.update(extra)
    return d


def _first_diff(a, b, path="result"):
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for k in a:
            r = _first_diff(a[k], b[k], f"{path}[{k!r}]")
            if r:
                return r
        return None
    if snap(a) != snap(b):

        def short(v):
            if isinstance(v, tt.Tensor):
                return f"Tensor({v.dtype}, rg={v.requires_grad}, {np.asarray(v.data).ravel()[:3]})"
            if isinstance(v, np.ndarray):
                return f"ndarray({v.dtype}, {v.ravel()[:3]})"
            return repr(v)[:80]

        return f"{path}: eager {short(a)} vs compiled {short(b)}"
    return None


def run_case(build, n):
    """Returns (outcome, detail)."""
    tt.manual_seed(1234)
    g0 = tt.get_rng_state()
    sides = []
    for wrap in (lambda f: f, tt.compile):
        tt.set_rng_state(g0)
        step, state = build(wrap)
        sides.append([step, state, tt.get_rng_state()])
    extra_warning = None
    for i in range(n):
        outs = []
        for side in sides:
            tt.set_rng_state(side[2])
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                try:
                    r = ("ok", side[0](i))
                except Exception as e:  # noqa: BLE001
                    r = ("exc", e)
            side[2] = tt.get_rng_state()
            outs.append((r, sorted({str(x.message) for x in w})))
        (re_, we), (rc, wc) = outs
        if rc[0] == "exc" and re_[0] != "exc":
            e = rc[1]
            if isinstance(e, RuntimeError) and "tt.compile" in str(e):
                return "refused", f"call {i + 1}: {str(e)[:300]}"
            return "crash", f"call {i + 1}: {type(e).__name__}: {str(e)[:300]}"
        new = [m for m in wc if m not in we]
        if new and extra_warning is None:
            extra_warning = f"call {i + 1}: {new[0][:200]}"
        if re_[0] == "exc":
            if rc[0] != "exc" or type(rc[1]) is not type(re_[1]):
                return (
                    "silent",
                    f"call {i + 1}: eager raised {type(re_[1]).__name__}, compiled gave {rc[1]!r:.100}",
                )
            diff = None
        else:
            diff = _first_diff(re_[1], rc[1])
        if diff is None:
            diff = _first_diff(sides[0][1](), sides[1][1](), "state")
        if diff is None and snap(sides[0][2]) != snap(sides[1][2]):
            diff = "global generator state"
        if diff is not None:
            kind = "warn" if extra_warning else "silent"
            return kind, f"call {i + 1}: {diff}" + (
                f" (after warning {extra_warning})" if extra_warning else ""
            )
    return "equal", extra_warning or ""


CASES = {}


def case(name, n=SHORT):
    def deco(build):
        if isinstance(build, tuple):  # a variant factory's (build, n)
            build = build[0]
        CASES[name] = (build, n)
        return build

    return deco


def whole_step(model, opt, loss_of, sched=None, clip=None, clip_value=None):
    def train_step(*batch):
        opt.zero_grad()
        loss = loss_of(*batch)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        if clip_value is not None:
            nn.utils.clip_grad_value_(model.parameters(), clip_value)
        opt.step()
        if sched is not None:
            sched.step()
        return loss

    return train_step


def data(i, seed=0):
    return np.random.default_rng(1000 * seed + i)


# --------------------------------------------------------------------------- 1. GPT decoder


class Block(nn.Module):
    def __init__(self, D, H, p, rng, norm_first=True):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, H, dropout=p, batch_first=True, rng=rng)
        self.ln2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, 4 * D, rng=rng + 1)
        self.proj = nn.Linear(4 * D, D, rng=rng + 2)
        self.drop = nn.Dropout(p)

    def forward(self, x, causal, pad):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=causal, key_padding_mask=pad, need_weights=False)
        x = x + self.drop(a)
        return x + self.drop(self.proj(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    def __init__(self, V=13, D=16, H=2, L=2, T=10, p=0.0, tie=True, dtype=np.float32):
        super().__init__()
        self.tok = nn.Embedding(V, D, rng=1)
        self.pos = nn.Embedding(T, D, rng=2)
        self.blocks = nn.ModuleList([Block(D, H, p, 10 + 3 * i) for i in range(L)])
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False, rng=3)
        if tie:
            self.head.weight = self.tok.weight
        if dtype != np.float32:
            self.to(dtype)

    def forward(self, idx, pad=None, float_mask=False):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(np.arange(T))
        causal = np.triu(np.ones((T, T), dtype=bool), 1)
        if float_mask:
            causal = np.where(causal, -np.inf, 0.0).astype(np.float32)
        for b in self.blocks:
            x = b(x, causal, pad)
        return self.head(self.ln(x))


def gpt_batch(i, B=3, T=8, V=13, vary=True):
    r = data(i, 1)
    if vary and i >= CHANGE[0]:
        B = 4
    if vary and i >= CHANGE[1]:
        T = 6
    if vary and i >= CHANGE[2]:
        B = 2
    lengths = r.integers(2, T + 1, B)
    lengths[0] = T
    idx = r.integers(1, V, (B, T))
    pad = np.arange(T)[None, :] >= lengths[:, None]
    idx[pad] = 0
    tgt = np.roll(idx, -1, axis=1)
    tgt[:, -1] = -100
    tgt[np.roll(pad, -1, axis=1)] = -100
    return idx, pad, tgt


def gpt_variant(
    opt_name="adam",
    p=0.0,
    tie=True,
    sched=False,
    clip=None,
    mode_switch=False,
    lr_outside=False,
    float_mask=False,
    untie=False,
    smoothing=0.0,
    n=SHORT,
    dtype=np.float32,
    vary=True,
    accum=1,
):
    def build(C):
        model = GPT(p=p, tie=tie, dtype=dtype)
        params = list(model.parameters())
        opt = {
            "adam": lambda: tt.optim.Adam(params, lr=1e-2),
            "adamw": lambda: tt.optim.AdamW(params, lr=1e-2, weight_decay=0.1),
            "sgd": lambda: tt.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True),
            "rms": lambda: tt.optim.RMSprop(params, lr=1e-3, centered=True, momentum=0.5),
        }[opt_name]()
        sch = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=7) if sched else None
        ce = nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=smoothing)

        def loss_of(idx, pad, tgt):
            logits = model(idx, pad, float_mask)
            return ce(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))

        if accum == 1:
            f = C(whole_step(model, opt, loss_of, sch, clip))
        else:

            def micro(idx, pad, tgt):
                opt.zero_grad()
                total = 0.0
                for k in range(accum):
                    sl = slice(k, None, accum)
                    loss = loss_of(idx[sl], pad[sl], tgt[sl]) / accum
                    loss.backward()
                    total = total + loss.detach()
                opt.step()
                return total

            f = C(micro)

        def step(i):
            if mode_switch and i == CHANGE[1]:
                model.eval()
            if mode_switch and i == CHANGE[2]:
                model.train()
            if lr_outside and i in CHANGE:
                for g in opt.param_groups:
                    g["lr"] = g["lr"] * 0.5
            if untie and i == CHANGE[1]:
                model.head.weight = nn.Parameter(model.tok.weight.data.copy())
            return f(*gpt_batch(i, vary=vary))

        return step, lambda: mstate(model, opt, sch)

    return build, n


for _name, _kw in {
    "gpt_adam_long": dict(n=LONG),
    "gpt_adamw_cosine_clip": dict(opt_name="adamw", sched=True, clip=1.0),
    "gpt_sgd_nesterov": dict(opt_name="sgd"),
    "gpt_rmsprop_centered": dict(opt_name="rms"),
    "gpt_dropout_global_rng_long": dict(p=0.2, n=LONG),
    "gpt_dropout_train_eval_switch_long": dict(p=0.2, mode_switch=True, n=LONG),
    "gpt_lr_set_outside_long": dict(lr_outside=True, n=LONG),
    "gpt_float_causal_mask": dict(float_mask=True),
    "gpt_untie_on_call_10": dict(untie=True),
    "gpt_untied": dict(tie=False),
    "gpt_label_smoothing": dict(smoothing=0.1),
    "gpt_float64_model": dict(dtype=np.float64),
    "gpt_fixed_shapes_long": dict(vary=False, n=LONG),
    "gpt_grad_accumulation": dict(accum=2),
}.items():
    case(_name, _kw.get("n", SHORT))(gpt_variant(**_kw)[0])


@case("gpt_functional_call_value_and_grad", LONG)
def _(C):
    model = GPT(tie=True)
    named = dict(model.named_parameters())
    params = {k: p.data for k, p in named.items()}
    opt = tt.optim.Adam(model.parameters(), lr=1e-2)
    ce = nn.CrossEntropyLoss()

    def model_loss(params, idx, pad, tgt):
        logits = nn.functional_call(model, params, (idx, pad))
        return ce(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))

    f = C(tt.value_and_grad(model_loss))

    def step(i):
        loss, grads = f(params, *gpt_batch(i))
        for k, g in grads.items():
            named[k].grad = g
        opt.step()
        return loss, grads

    return step, lambda: mstate(model, opt)


@case("gpt_greedy_generate_eval")
def _(C):
    model = GPT()
    model.eval()

    def generate(prompt, steps):
        idx = prompt
        with tt.no_grad():
            for _ in range(steps):
                logits = model(idx)
                nxt = tt.argmax(logits[:, -1, :], axis=-1)
                idx = np.concatenate([idx, np.asarray(nxt)[:, None]], axis=1)
        return idx

    f = C(generate)

    def step(i):
        r = data(i, 2)
        steps = 3 if i < CHANGE[1] else 4
        return f(r.integers(1, 13, (2, 4)), steps)

    return step, lambda: mstate(model)


@case("gpt_temperature_sampling_generator_arg", LONG)
def _(C):
    model = GPT()
    model.eval()
    gen = np.random.default_rng(5)

    def sample(idx, temperature, rng):
        with tt.no_grad():
            logits = model(idx)[:, -1, :] / temperature
            probs = tt.softmax(logits, axis=-1)
            return tt.multinomial(probs, 1, generator=rng)

    f = C(sample)

    def step(i):
        r = data(i, 3)
        t = 1.0 if i < CHANGE[0] else 0.7 + 0.01 * i
        return f(r.integers(1, 13, (3, 5)), t, gen)

    return step, lambda: {"gen": gen, **mstate(model)}


@case("gpt_topk_logits_inference")
def _(C):
    model = GPT()

    def topk(idx, k):
        with tt.no_grad():
            logits = model(idx)[:, -1, :]
            v, ix = logits.topk(k)
            return v, ix

    f = C(topk)
    return (lambda i: f(data(i, 4).integers(1, 13, (2, 6)), 3 if i < CHANGE[1] else 5)), lambda: mstate(model)


# --------------------------------------------------------------------------- 2. seq2seq nn.Transformer


def s2s_batch(i, vary=True):
    r = data(i, 5)
    B, S, T = 3, 6, 5
    if vary and i >= CHANGE[0]:
        S = 7
    if vary and i >= CHANGE[1]:
        B = 2
    if vary and i >= CHANGE[2]:
        T = 4
    src = r.integers(1, 11, (B, S))
    tgt = r.integers(1, 11, (B, T + 1))
    sl = r.integers(2, S + 1, B)
    tl = r.integers(2, T + 2, B)
    sl[0], tl[0] = S, T + 1
    spad = np.arange(S)[None] >= sl[:, None]
    tpad_full = np.arange(T + 1)[None] >= tl[:, None]
    src[spad] = 0
    tgt[tpad_full] = 0
    labels = tgt[:, 1:].copy()
    labels[tpad_full[:, 1:]] = -100
    return src, tgt[:, :-1], spad, tpad_full[:, :-1], labels


class Seq2Seq(nn.Module):
    def __init__(self, p=0.0, norm_first=False, D=16):
        super().__init__()
        self.src_emb = nn.Embedding(11, D, padding_idx=0, rng=1)
        self.tgt_emb = nn.Embedding(11, D, padding_idx=0, rng=2)
        self.tf = nn.Transformer(
            D, 2, 1, 1, dim_feedforward=32, dropout=p, batch_first=True, norm_first=norm_first, rng=3
        )
        self.out = nn.Linear(D, 11, rng=4)

    def forward(self, src, tgt, spad, tpad, use_memory_mask=True):
        T = tgt.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        h = self.tf(
            self.src_emb(src),
            self.tgt_emb(tgt),
            tgt_mask=mask,
            src_key_padding_mask=spad,
            tgt_key_padding_mask=tpad,
            memory_key_padding_mask=spad if use_memory_mask else None,
        )
        return self.out(h)


def s2s_variant(
    p=0.0, norm_first=False, opt_name="adam", mode_switch=False, n=SHORT, sched=None, memmask=True
):
    def build(C):
        model = Seq2Seq(p, norm_first)
        opt = (tt.optim.Adam if opt_name == "adam" else tt.optim.SGD)(model.parameters(), lr=1e-2)
        sch = None
        if sched == "step":
            sch = tt.optim.lr_scheduler.StepLR(opt, 4, 0.5)
        elif sched == "onecycle":
            sch = tt.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=n + 2)
        ce = nn.CrossEntropyLoss(ignore_index=-100)

        def loss_of(src, tgt, spad, tpad, labels):
            logits = model(src, tgt, spad, tpad, memmask)
            return ce(logits.reshape(-1, 11), labels.reshape(-1))

        f = C(whole_step(model, opt, loss_of, sch, clip=0.5))

        def step(i):
            if mode_switch and i == CHANGE[1]:
                model.eval()
            if mode_switch and i == CHANGE[2]:
                model.train()
            return f(*s2s_batch(i))

        return step, lambda: mstate(model, opt, sch)

    return build


for _name, _kw in {
    "seq2seq_adam_long": dict(n=LONG),
    "seq2seq_dropout_long": dict(p=0.1, n=LONG),
    "seq2seq_norm_first": dict(norm_first=True),
    "seq2seq_sgd_steplr": dict(opt_name="sgd", sched="step"),
    "seq2seq_onecycle": dict(sched="onecycle"),
    "seq2seq_dropout_mode_switch_long": dict(p=0.1, mode_switch=True, n=LONG),
    "seq2seq_no_memory_mask": dict(memmask=False),
}.items():
    case(_name, _kw.get("n", SHORT))(s2s_variant(**_kw))


@case("seq2seq_greedy_decode_while_eos")
def _(C):
    model = Seq2Seq()
    model.eval()

    def decode(src, spad, max_len):
        ys = np.ones((src.shape[0], 1), dtype=np.int64)
        with tt.no_grad():
            while ys.shape[1] < max_len:
                logits = model(src, ys, spad, np.zeros(ys.shape, bool))
                nxt = np.asarray(tt.argmax(logits[:, -1], axis=-1))
                ys = np.concatenate([ys, nxt[:, None]], axis=1)
                if (nxt == 2).all():
                    break
        return ys

    f = C(decode)

    def step(i):
        src, _, spad, _, _ = s2s_batch(i)
        return f(src, spad, 4 if i < CHANGE[1] else 5)

    return step, lambda: mstate(model)


# --------------------------------------------------------------------------- 3. LSTM / GRU language models


class RNNLM(nn.Module):
    def __init__(self, kind="lstm", layers=1, p=0.0, V=17, D=8, H=12):
        super().__init__()
        self.emb = nn.Embedding(V, D, rng=1)
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = cls(D, H, num_layers=layers, dropout=p, rng=2)
        self.drop = nn.Dropout(p)
        self.out = nn.Linear(H, V, rng=3)
        self.kind = kind

    def forward(self, x, h=None):
        out, h = self.rnn(self.drop(self.emb(x)), h)
        return self.out(self.drop(out)), h


def detach_h(h):
    if isinstance(h, tuple):
        return tuple(t.detach() for t in h)
    return h.detach()


def tbptt_variant(kind="lstm", layers=1, p=0.0, reset_at=(), n=LONG, carry="arg", clip=0.25, vary_T=True):
    def build(C):
        model = RNNLM(kind, layers, p)
        opt = tt.optim.SGD(model.parameters(), lr=0.5)
        ce = nn.CrossEntropyLoss()
        hold = {"h": None}

        if carry == "arg":

            def train_step(x, y, h):
                opt.zero_grad()
                logits, h = model(x, h)
                loss = ce(logits.reshape(-1, 17), y.reshape(-1))
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), clip)
                opt.step()
                return loss, detach_h(h)
        else:  # the hidden state kept in a dict the step writes (Python state changed inside)

            def train_step(x, y, h):
                opt.zero_grad()
                logits, h = model(x, hold["h"])
                loss = ce(logits.reshape(-1, 17), y.reshape(-1))
                loss.backward()
                opt.step()
                hold["h"] = detach_h(h)
                return loss

        f = C(train_step)

        def step(i):
            r = data(i, 6)
            T = 5 if (not vary_T or i < CHANGE[1]) else 4
            B = 3 if i < CHANGE[0] else 3
            seq = r.integers(0, 17, (T + 1, B))
            if i in reset_at:
                hold["h"] = None
            out = f(seq[:-1], seq[1:], hold["h"])
            if carry == "arg":
                hold["h"] = out[1]
            return out

        return step, lambda: mstate(model, opt, h=hold["h"])

    return build, n


for _name, _kw in {
    "tbptt_lstm_hidden_as_arg_long": dict(),
    "tbptt_gru_hidden_as_arg_long": dict(kind="gru"),
    "tbptt_lstm_2layer_dropout_long": dict(layers=2, p=0.2),
    "tbptt_gru_reset_on_3_10_40_long": dict(kind="gru", reset_at=CHANGE),
    "tbptt_lstm_reset_on_10": dict(reset_at=(CHANGE[1],), n=SHORT),
    "tbptt_lstm_hidden_in_dict_inside": dict(carry="dict", n=SHORT),
    "tbptt_lstm_fixed_T_long": dict(vary_T=False),
}.items():
    _b, _n = tbptt_variant(**_kw)
    case(_name, _n)(_b)


def packed_variant(kind="lstm", bidir=False, batch_first=False, lengths_fixed=False, n=SHORT, sorted_=False):
    def build(C):
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        rnn = cls(4, 6, bidirectional=bidir, batch_first=batch_first, rng=7)
        head = nn.Linear(12 if bidir else 6, 1, rng=8)
        model = nn.ModuleList([rnn, head])
        opt = tt.optim.Adam(model.parameters(), lr=1e-2)

        def train_step(x, lengths, y):
            opt.zero_grad()
            packed = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=sorted_)
            out, h = rnn(packed)
            padded, lens = pad_packed_sequence(out, batch_first=batch_first)
            hn = h[0] if kind == "lstm" else h
            feat = hn[-1] if not bidir else tt.concatenate([hn[-2], hn[-1]], axis=-1)
            loss = tt.mean((head(feat)[:, 0] - y) ** 2) + 0.01 * tt.mean(padded**2)
            loss.backward()
            opt.step()
            return loss, lens

        f = C(train_step)

        def step(i):
            r = data(i, 7)
            B, T = 4, 6
            if lengths_fixed:
                lengths = [6, 5, 3, 2]
            else:
                lengths = (
                    sorted(r.integers(1, T + 1, B).tolist(), reverse=True)
                    if sorted_
                    else r.integers(1, T + 1, B).tolist()
                )
                lengths[0 if not sorted_ else 0] = T
            x = r.standard_normal((B, T, 4) if batch_first else (T, B, 4))
            return f(x, lengths, r.standard_normal(B))

        return step, lambda: mstate(model, opt)

    return build, n


for _name, _kw in {
    "packed_lstm_lengths_change_every_call": dict(),
    "packed_gru_bidirectional": dict(kind="gru", bidir=True),
    "packed_lstm_batch_first_bidir": dict(bidir=True, batch_first=True),
    "packed_lstm_fixed_lengths": dict(lengths_fixed=True),
    "packed_lstm_sorted": dict(sorted_=True),
}.items():
    case(_name, _kw.get("n", SHORT))(packed_variant(**_kw))


@case("lstmcell_manual_loop_carry_long", LONG)
def _(C):
    cell = nn.LSTMCell(3, 5, rng=1)
    head = nn.Linear(5, 2, rng=2)
    model = nn.ModuleList([cell, head])
    opt = tt.optim.RMSprop(model.parameters(), lr=1e-2)
    hold = {"hc": (np.zeros((2, 5), np.float32), np.zeros((2, 5), np.float32))}

    def step_fn(xs, ys, h, c):
        opt.zero_grad()
        loss = 0.0
        for t in range(xs.shape[0]):
            h, c = cell(xs[t], (h, c))
            loss = loss + tt.mean((head(h) - ys[t]) ** 2)
        loss.backward()
        opt.step()
        return loss, h.detach(), c.detach()

    f = C(step_fn)

    def step(i):
        r = data(i, 8)
        T = 4 if i < CHANGE[1] else 3
        if i == CHANGE[2]:
            hold["hc"] = (np.zeros((2, 5), np.float32), np.zeros((2, 5), np.float32))
        loss, h, c = f(r.standard_normal((T, 2, 3)), r.standard_normal((T, 2, 2)), *hold["hc"])
        hold["hc"] = (h, c)
        return loss, h, c

    return step, lambda: mstate(model, opt, hc=hold["hc"])


@case("gru_eval_inference_state_arg")
def _(C):
    model = RNNLM("gru")
    model.eval()

    def infer(x, h):
        with tt.no_grad():
            logits, h = model(x, h)
            return tt.log_softmax(logits, axis=-1), h

    f = C(infer)
    hold = {"h": None}

    def step(i):
        out = f(data(i, 9).integers(0, 17, (3, 2)), hold["h"])
        hold["h"] = out[1] if i != CHANGE[1] else None
        return out

    return step, lambda: mstate(model, h=hold["h"])


# --------------------------------------------------------------------------- 4. VAE


class VAE(nn.Module):
    def __init__(self, D=12, Z=3, dtype=np.float32):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(D, 16, rng=1, dtype=dtype), nn.ReLU())
        self.mu = nn.Linear(16, Z, rng=2, dtype=dtype)
        self.logvar = nn.Linear(16, Z, rng=3, dtype=dtype)
        self.dec = nn.Sequential(
            nn.Linear(Z, 16, rng=4, dtype=dtype), nn.Tanh(), nn.Linear(16, D, rng=5, dtype=dtype)
        )


def vae_variant(
    rng_mode="global", beta_arg=False, recon="bce", mode_switch=False, n=SHORT, dtype=np.float32, sched=False
):
    def build(C):
        vae = VAE(dtype=dtype)
        opt = tt.optim.Adam(vae.parameters(), lr=1e-2)
        sch = tt.optim.lr_scheduler.ExponentialLR(opt, 0.9) if sched else None
        gen = np.random.default_rng(11)
        bce = nn.BCEWithLogitsLoss(reduction="sum")

        def elbo(x, beta, g):
            h = vae.enc(x)
            mu, logvar = vae.mu(h), vae.logvar(h)
            if vae.training:
                if rng_mode == "global":
                    eps = tt.randn(*mu.shape, dtype=mu.dtype)
                elif rng_mode == "closed":
                    eps = tt.randn(*mu.shape, rng=gen, dtype=mu.dtype)
                elif rng_mode == "numpy_inside":
                    eps = gen.standard_normal(mu.shape).astype(mu.dtype)
                else:
                    eps = tt.randn(*mu.shape, rng=g, dtype=mu.dtype)
                z = mu + tt.exp(0.5 * logvar) * eps
            else:
                z = mu
            xr = vae.dec(z)
            rec = bce(xr, x) if recon == "bce" else tt.sum((xr - x) ** 2)
            kl = -0.5 * tt.sum(1 + logvar - mu**2 - tt.exp(logvar))
            return (rec + beta * kl) / x.shape[0]

        f = C(whole_step(vae, opt, elbo, sch))

        def step(i):
            if mode_switch and i == CHANGE[1]:
                vae.eval()
            if mode_switch and i == CHANGE[2]:
                vae.train()
            r = data(i, 10)
            B = 5 if i < CHANGE[0] else 6
            x = (r.uniform(size=(B, 12)) > 0.5).astype(np.float64)
            beta = min(1.0, 0.1 * i) if beta_arg else 1.0
            return f(x, beta, gen)

        return step, lambda: mstate(vae, opt, sch, gen=gen)

    return build, n


for _name, _kw in {
    "vae_global_rng_long": dict(n=LONG),
    "vae_closed_generator_long": dict(rng_mode="closed", n=LONG),
    "vae_generator_argument_kl_anneal_long": dict(rng_mode="arg", beta_arg=True, n=LONG),
    "vae_mse_recon": dict(recon="mse"),
    "vae_eval_switch_uses_mu": dict(mode_switch=True, n=LONG),
    "vae_numpy_generator_method_inside": dict(rng_mode="numpy_inside"),
    "vae_float64": dict(dtype=np.float64, rng_mode="arg"),
    "vae_exponential_lr": dict(sched=True, beta_arg=True),
}.items():
    case(_name, _kw.get("n", SHORT))(vae_variant(**_kw))


@case("vae_functional_reparam_with_vmap_free_grad")
def _(C):
    vae = VAE(dtype=np.float64)
    params = {k: p.data for k, p in vae.named_parameters()}

    def loss(params, x, eps):
        h = nn.functional_call(vae.enc, {k[4:]: v for k, v in params.items() if k.startswith("enc.")}, (x,))
        mu = h @ params["mu.weight"].T + params["mu.bias"]
        lv = h @ params["logvar.weight"].T + params["logvar.bias"]
        z = mu + tt.exp(0.5 * lv) * eps
        xr = nn.functional_call(vae.dec, {k[4:]: v for k, v in params.items() if k.startswith("dec.")}, (z,))
        return tt.mean((xr - x) ** 2) - 0.5 * tt.mean(1 + lv - mu**2 - tt.exp(lv))

    f = C(tt.value_and_grad(loss))

    def step(i):
        r = data(i, 11)
        v, g = f(params, r.standard_normal((4, 12)), r.standard_normal((4, 3)))
        for k in params:
            params[k] -= 0.05 * g[k]
        return v, g

    return step, lambda: mstate(vae)


# --------------------------------------------------------------------------- 5. small ResNet


class ResBlock(nn.Module):
    def __init__(self, c, rng, bn_momentum=0.1):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False, rng=rng)
        self.b1 = nn.BatchNorm2d(c, momentum=bn_momentum)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False, rng=rng + 1)
        self.b2 = nn.BatchNorm2d(c, momentum=bn_momentum)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class ResNet(nn.Module):
    def __init__(self, p=0.25, bn_momentum=0.1, dropout_rng=None):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1, rng=1)
        self.bn = nn.BatchNorm2d(4, momentum=bn_momentum)
        self.blocks = nn.Sequential(ResBlock(4, 10, bn_momentum), ResBlock(4, 20, bn_momentum))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(p, rng=dropout_rng)
        self.fc = nn.Linear(4, 3, rng=2)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn(self.stem(x))))
        return self.fc(self.drop(self.pool(x).reshape(x.shape[0], -1)))


def resnet_variant(
    opt_name="sgd",
    mode_switch=False,
    freeze_bn=False,
    bn_momentum=0.1,
    dropout_rng=None,
    batch_change=True,
    n=SHORT,
    reset_stats=False,
    clip_value=None,
    wd_outside=False,
):
    def build(C):
        model = ResNet(bn_momentum=bn_momentum, dropout_rng=dropout_rng)
        opt = (
            tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
            if opt_name == "sgd"
            else tt.optim.AdamW(model.parameters(), lr=1e-2)
        )
        ce = nn.CrossEntropyLoss()
        f = C(whole_step(model, opt, lambda x, y: ce(model(x), y), clip_value=clip_value))

        def step(i):
            if mode_switch and i == CHANGE[1]:
                model.eval()
            if mode_switch and i == CHANGE[2]:
                model.train()
            if freeze_bn and i == CHANGE[1]:
                for m in model.modules():
                    if isinstance(m, nn.BatchNorm2d):
                        m.eval()
                        m.requires_grad_(False)
            if reset_stats and i in CHANGE:
                for m in model.modules():
                    if isinstance(m, nn.BatchNorm2d):
                        m.running_mean.data[...] = 0
                        m.running_var.data[...] = 1
            if wd_outside and i in CHANGE:
                opt.param_groups[0]["weight_decay"] = 1e-2 * (i + 1)
            r = data(i, 12)
            B = 4 if (not batch_change or i < CHANGE[0]) else 5
            return f(r.standard_normal((B, 1, 6, 6)), r.integers(0, 3, B))

        return step, lambda: mstate(model, opt)

    return build, n


for _name, _kw in {
    "resnet_sgd_long": dict(n=LONG),
    "resnet_adamw": dict(opt_name="adamw"),
    "resnet_train_eval_switch_long": dict(mode_switch=True, n=LONG),
    "resnet_freeze_bn_on_10": dict(freeze_bn=True),
    "resnet_bn_cumulative_average": dict(bn_momentum=None),
    "resnet_dropout_own_generator": dict(dropout_rng=7),
    "resnet_fixed_batch": dict(batch_change=False),
    "resnet_running_stats_reset_outside_long": dict(reset_stats=True, n=LONG),
    "resnet_clip_grad_value": dict(clip_value=0.05),
    "resnet_weight_decay_set_outside": dict(wd_outside=True),
}.items():
    case(_name, _kw.get("n", SHORT))(resnet_variant(**_kw))


@case("resnet_eval_predict_argmax")
def _(C):
    model = ResNet()
    model.eval()

    def predict(x):
        with tt.no_grad():
            logits = model(x)
            return tt.softmax(logits, axis=-1), logits.argmax(axis=-1)

    f = C(predict)
    return (lambda i: f(data(i, 13).standard_normal((3 if i < CHANGE[1] else 2, 1, 6, 6)))), lambda: mstate(
        model
    )


# --------------------------------------------------------------------------- 6. GNN over an edge list


class GCN(nn.Module):
    def __init__(self, Fin=3, H=8, out=2):
        super().__init__()
        self.l1 = nn.Linear(Fin, H, rng=1, dtype=np.float64)
        self.l2 = nn.Linear(H, out, rng=2, dtype=np.float64)

    def propagate(self, h, src, dst, n, w=None, how="scatter"):
        deg = np.bincount(dst, minlength=n).astype(np.float64) + 1.0
        norm = 1.0 / np.sqrt(deg)
        msg = h[src] * (norm[src] * norm[dst])[:, None]
        if w is not None:
            msg = msg * w[:, None]
        if how == "scatter":
            idx = np.broadcast_to(dst[:, None], msg.shape)
            agg = tt.zeros((n, h.shape[1]), dtype=np.float64).scatter_add(0, idx, msg)
        elif how == "onehot":
            A = (np.arange(n)[:, None] == dst[None, :]).astype(np.float64)
            agg = tt.matmul(A, msg)
        else:  # a Python loop over nodes with masks
            agg = tt.stack([tt.sum(msg * (dst == j)[:, None], axis=0) for j in range(n)])
        return agg + h * (norm**2)[:, None]

    def forward(self, x, src, dst, w=None, how="scatter"):
        n = x.shape[0]
        h = F.relu(self.propagate(self.l1(x), src, dst, n, w, how))
        return self.propagate(self.l2(h), src, dst, n, w, how)


def gnn_variant(how="scatter", fixed_E=False, weighted=False, fixed_graph=False, n=SHORT, node_change=True):
    def build(C):
        model = GCN()
        opt = tt.optim.Adam(model.parameters(), lr=1e-2)
        ce = nn.CrossEntropyLoss()

        def loss_of(x, src, dst, w, y, train_mask):
            logits = model(x, src, dst, w, how)
            return ce(logits[train_mask], y[train_mask])

        f = C(whole_step(model, opt, loss_of))

        def step(i):
            r = data(0 if fixed_graph else i, 14)
            N = 6 if (not node_change or i < CHANGE[1]) else 7
            E = 10 if (fixed_E or i < CHANGE[0]) else (12 if i < CHANGE[2] else 9)
            src, dst = r.integers(0, N, E), r.integers(0, N, E)
            w = r.uniform(0.5, 1.5, E) if weighted else None
            x = data(i, 15).standard_normal((N, 3))
            y = r.integers(0, 2, N)
            train_mask = np.arange(N)[::2]
            return f(x, src, dst, w, y, train_mask)

        return step, lambda: mstate(model, opt)

    return build, n


for _name, _kw in {
    "gnn_scatter_add_edges_change_long": dict(n=LONG),
    "gnn_scatter_add_fixed_edge_count": dict(fixed_E=True, node_change=False),
    "gnn_onehot_matmul_weighted": dict(how="onehot", weighted=True),
    "gnn_python_loop_masks": dict(how="loop"),
    "gnn_same_graph_every_call": dict(fixed_graph=True),
    "gnn_scatter_weighted_long": dict(weighted=True, n=LONG),
}.items():
    case(_name, _kw.get("n", SHORT))(gnn_variant(**_kw))


@case("gnn_index_gather_message_functional")
def _(C):
    rng0 = np.random.default_rng(3)
    params = {"W": rng0.standard_normal((3, 4)), "a": rng0.standard_normal(8)}

    def gat_loss(p, x, src, dst, y):
        h = x @ p["W"]
        e = tt.leaky_relu(tt.concatenate([h[src], h[dst]], axis=1) @ p["a"], 0.2)
        ex = tt.exp(e - tt.max(e))
        den = tt.zeros(x.shape[0]).scatter_add(0, dst, ex)
        alpha = ex / den[dst]
        out = tt.zeros(h.shape).scatter_add(
            0, np.broadcast_to(dst[:, None], (len(dst), 4)), alpha[:, None] * h[src]
        )
        return tt.mean((out.sum(axis=1) - y) ** 2)

    f = C(tt.value_and_grad(gat_loss))

    def step(i):
        r = data(i, 16)
        N, E = 5, (8 if i < CHANGE[1] else 11)
        src = r.integers(0, N, E)
        dst = np.concatenate([np.arange(N), r.integers(0, N, E - N)])
        v, g = f(params, r.standard_normal((N, 3)), src, dst, r.standard_normal(N))
        for k in params:
            params[k] = params[k] - 0.1 * g[k]
        return v, g

    return step, lambda: dict(params)


# --------------------------------------------------------------------------- 7. physics-informed losses


class PINN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(1, 12, rng=1, dtype=np.float64),
            nn.Tanh(),
            nn.Linear(12, 12, rng=2, dtype=np.float64),
            nn.Tanh(),
            nn.Linear(12, 1, rng=3, dtype=np.float64),
        )


def pinn_variant(form="grad_sum", weight_arg=False, resample=True, n=SHORT, opt_name="adam", sched=False):
    def build(C):
        m = PINN()
        opt = (
            tt.optim.Adam(m.parameters(), lr=1e-2)
            if opt_name == "adam"
            else tt.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
        )
        sch = tt.optim.lr_scheduler.MultiStepLR(opt, [3, 8], 0.3) if sched else None

        def u(x):
            return m.net(x.reshape(-1, 1)).reshape(-1)

        def residual(x):
            if form == "grad_sum":
                du = tt.grad(lambda x: tt.sum(u(x)))(x)
                d2u = tt.grad(lambda x: tt.sum(tt.grad(lambda z: tt.sum(u(z)))(x)))(x)
            elif form == "vmap":
                d1 = tt.grad(lambda s: u(s.reshape(1))[0])
                du = tt.vmap(d1)(x)
                d2u = tt.vmap(tt.grad(lambda s: d1(s)))(x)
            else:  # hessian diagonal per point via a Python loop
                du = tt.stack([tt.grad(lambda s: u(s.reshape(1))[0])(x[k]) for k in range(x.shape[0])])
                d2u = tt.stack([tt.hessian(lambda s: u(s.reshape(1))[0])(x[k]) for k in range(x.shape[0])])
            return d2u + du - tt.sin(np.pi * x)

        def loss_of(x, lam):
            bc = u(np.array([0.0, 1.0])) - np.array([0.0, 0.5])
            return tt.mean(residual(x) ** 2) + lam * tt.mean(bc**2)

        f = C(whole_step(m, opt, loss_of, sch))

        def step(i):
            r = data(i if resample else 0, 17)
            Np = 6 if i < CHANGE[1] else 5
            x = r.uniform(0, 1, Np)
            lam = 1.0 + 0.5 * i if weight_arg else 10.0
            return f(x, lam)

        return step, lambda: mstate(m, opt, sch)

    return build, n


for _name, _kw in {
    "pinn_grad_of_grad_long": dict(n=LONG),
    "pinn_vmap_grad": dict(form="vmap"),
    "pinn_loop_hessian": dict(form="loop"),
    "pinn_boundary_weight_float_arg_long": dict(weight_arg=True, n=LONG),
    "pinn_fixed_collocation_sgd": dict(resample=False, opt_name="sgd"),
    "pinn_multistep_lr": dict(sched=True),
}.items():
    case(_name, _kw.get("n", SHORT))(pinn_variant(**_kw))


@case("pinn_functional_heat_jacobian")
def _(C):
    r0 = np.random.default_rng(4)
    params = [r0.standard_normal((2, 8)) * 0.5, np.zeros(8), r0.standard_normal((8, 1)) * 0.5]

    def u(p, xt):
        return (tt.tanh(xt @ p[0] + p[1]) @ p[2])[:, 0]

    def loss(p, xt, kappa):
        J = tt.jacobian(lambda z: tt.sum(u(p, z)))(xt)
        u_t = J[:, 1]
        u_xx = tt.grad(lambda z: tt.sum(tt.grad(lambda w: tt.sum(u(p, w)))(z)[:, 0]))(xt)[:, 0]
        return tt.mean((u_t - kappa * u_xx) ** 2)

    f = C(tt.value_and_grad(loss))

    def step(i):
        r = data(i, 18)
        v, g = f(params, r.uniform(size=(5, 2)), 0.1 if i < CHANGE[0] else 0.05 + 0.001 * i)
        for k in range(3):
            params[k] = params[k] - 0.01 * g[k]
        return v, g

    return step, lambda: {"params": list(params)}


# --------------------------------------------------------------------------- 8. neural ODEs with odeint


def lotka(y, t, theta):
    return tt.stack([theta[0] * y[0] - theta[1] * y[0] * y[1], -theta[2] * y[1] + theta[3] * y[0] * y[1]])


def ode_variant(style="args", rtol_change=False, grid_change=False, n=SHORT, y0_change=False):
    def build(C):
        theta_t = tt.tensor(np.array([1.0, 0.1, 1.5, 0.075]), requires_grad=True)
        opt = tt.optim.Adam([theta_t], lr=1e-2)
        obs_t = np.linspace(0.0, 2.0, 5)

        def fit(y0, ts, obs, rtol):
            opt.zero_grad()
            if style == "args":
                ys = integrate.odeint(lotka, y0, ts, args=(theta_t,), rtol=rtol, atol=1e-8)
            else:
                ys = integrate.odeint(lambda y, t: lotka(y, t, theta_t), y0, ts, rtol=rtol, atol=1e-8)
            loss = tt.sum((ys - obs) ** 2)
            loss.backward()
            opt.step()
            return loss

        f = C(fit)

        def step(i):
            r = data(i, 19)
            ts = obs_t if (not grid_change or i < CHANGE[1]) else np.linspace(0.0, 1.5, 5)
            y0 = np.array([10.0, 5.0]) if (not y0_change or i < CHANGE[0]) else np.array([9.0, 5.5])
            obs = 5.0 + r.standard_normal((5, 2))
            rtol = 1e-6 if (not rtol_change or i < CHANGE[0]) else 1e-8
            return f(y0, ts, obs, rtol)

        return step, lambda: {"theta": theta_t, "grad": theta_t.grad, "opt": opt.state_dict()}

    return build, n


for _name, _kw in {
    "ode_lotka_args_fit": dict(),
    "ode_lotka_closure_fit": dict(style="closure"),
    "ode_rtol_changes_on_3": dict(rtol_change=True),
    "ode_time_grid_changes_on_10": dict(grid_change=True),
    "ode_y0_changes_on_3": dict(y0_change=True),
}.items():
    case(_name, _kw.get("n", SHORT))(ode_variant(**_kw))


@case("neural_ode_mlp_closure_value_and_grad", 12)
def _(C):
    net = nn.Sequential(
        nn.Linear(2, 6, rng=1, dtype=np.float64), nn.Tanh(), nn.Linear(6, 2, rng=2, dtype=np.float64)
    )
    params = {k: p.data for k, p in net.named_parameters()}

    def loss(params, y0, target):
        rhs = lambda y, t: nn.functional_call(net, params, (y.reshape(1, 2),)).reshape(2)  # noqa: E731
        ys = integrate.odeint(rhs, y0, np.array([0.0, 0.5, 1.0]), rtol=1e-7, atol=1e-9)
        return tt.sum((ys[-1] - target) ** 2)

    f = C(tt.value_and_grad(loss))

    def step(i):
        r = data(i, 20)
        v, g = f(params, r.standard_normal(2), r.standard_normal(2))
        for k in params:
            params[k] -= 0.05 * g[k]
        return v, g

    return step, lambda: mstate(net)


@case("ode_robertson_stiff_rates")
def _(C):
    def rob(y, t, k):
        return tt.stack(
            [
                -k[0] * y[0] + k[2] * y[1] * y[2],
                k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2],
                k[1] * y[1] ** 2,
            ]
        )

    def obj(logk, tend):
        k = tt.exp(logk)
        ys = integrate.odeint(
            rob, np.array([1.0, 0.0, 0.0]), np.array([0.0, tend]), args=(k,), rtol=1e-6, atol=1e-10
        )
        return tt.sum(ys[-1] * np.array([1.0, 1e4, 1.0]))

    f = C(tt.value_and_grad(obj))
    base = np.log(np.array([0.04, 3e7, 1e4]))
    return (lambda i: f(base + 0.01 * i, 1.0 if i < CHANGE[1] else 2.0)), lambda: {}


@case("ode_solve_ivp_rk45_decay")
def _(C):
    k = tt.tensor(np.array([0.7]), requires_grad=True)

    def obj(y0, tmax):
        sol = integrate.solve_ivp(
            lambda t, y: -k * y,
            (0.0, tmax),
            y0,
            method="RK45",
            t_eval=np.linspace(0, tmax, 4),
            rtol=1e-8,
            atol=1e-10,
        )
        loss = tt.sum(sol.y**2)
        loss.backward()
        return loss

    f = C(obj)

    def step(i):
        k.grad = None
        return f(np.array([1.0 + 0.1 * i]), 1.0 if i < CHANGE[0] else 2.0)

    return step, lambda: {"k": k, "g": k.grad}


# --------------------------------------------------------------------------- 9. MCMC / HMC


def logp_banana(q):
    return -0.5 * (q[0] ** 2 / 4.0 + (q[1] - 0.5 * q[0] ** 2) ** 2)


def hmc_variant(rng_mode="arg", L_arg=False, eps_arg=False, accept="float", n=LONG):
    def build(C):
        gen = np.random.default_rng(21)
        gradU = tt.grad(lambda q: -logp_banana(q))

        def hmc_step(q, eps, L, g):
            rng = g if rng_mode == "arg" else (gen if rng_mode == "closed" else None)
            p0 = tt.randn(2, rng=rng, dtype=np.float64)
            qn, p = q, p0 - 0.5 * eps * gradU(q)
            for k in range(L):
                qn = qn + eps * p
                if k < L - 1:
                    p = p - eps * gradU(qn)
            p = p - 0.5 * eps * gradU(qn)
            H0 = -logp_banana(q) + 0.5 * tt.sum(p0**2)
            H1 = -logp_banana(qn) + 0.5 * tt.sum(p**2)
            u = tt.rand(rng=rng, dtype=np.float64) if rng is not None else tt.rand(dtype=np.float64)
            if accept == "float":
                if float(tt.log(u)) < float(H0 - H1):
                    return qn, True
                return q, False
            acc = tt.log(u) < H0 - H1
            return tt.where(acc, qn, q), acc

        f = C(hmc_step)
        hold = {"q": np.array([0.5, 0.1])}

        def step(i):
            eps = (0.3 if i < CHANGE[0] else 0.25 + 0.001 * i) if eps_arg else 0.3
            L = (3 if i < CHANGE[1] else 4) if L_arg else 3
            q, acc = f(hold["q"], eps, L, gen)
            hold["q"] = q
            return q, acc

        return step, lambda: {"gen": gen, "q": hold["q"]}

    return build, n


for _name, _kw in {
    "hmc_generator_arg_python_accept_long": dict(),
    "hmc_closed_generator_long": dict(rng_mode="closed"),
    "hmc_global_rng_long": dict(rng_mode="global"),
    "hmc_where_accept_long": dict(accept="where"),
    "hmc_step_size_float_changes": dict(eps_arg=True),
    "hmc_leapfrog_steps_int_changes_on_10": dict(L_arg=True),
}.items():
    case(_name, _kw.get("n", LONG))(hmc_variant(**_kw))


@case("mala_step_with_rejection_counter_outside", LONG)
def _(C):
    gen = np.random.default_rng(2)
    stats = {"accepted": 0}

    def logp(x):
        return -tt.sum(x**4) / 4 - tt.sum(x**2)

    def mala(x, h, g):
        lp, gr = tt.value_and_grad(logp)(x)
        prop = x + h * gr + math.sqrt(2 * h) * tt.randn(*x.shape, rng=g, dtype=np.float64)
        lp2, gr2 = tt.value_and_grad(logp)(prop)
        fwd = -tt.sum((prop - x - h * gr) ** 2) / (4 * h)
        bwd = -tt.sum((x - prop - h * gr2) ** 2) / (4 * h)
        la = lp2 - lp + bwd - fwd
        if np.log(tt.rand(rng=g).item()) < la.item():
            return prop, 1
        return tt.tensor(x), 0

    f = C(mala)
    hold = {"x": np.zeros(3)}

    def step(i):
        h = 0.1 if i < CHANGE[1] else 0.05
        x, a = f(hold["x"], h, gen)
        hold["x"] = x.data if isinstance(x, tt.Tensor) else x
        stats["accepted"] += a
        return x, a

    return step, lambda: {"gen": gen, "stats": dict(stats)}


@case("metropolis_random_walk_where", LONG)
def _(C):
    gen = np.random.default_rng(3)

    def mh(x, scale, g):
        prop = x + scale * tt.randn(*x.shape, rng=g, dtype=np.float64)
        la = logp_banana(prop) - logp_banana(x)
        u = tt.rand(rng=g, dtype=np.float64)
        return tt.where(tt.log(u) < la, prop, x)

    f = C(mh)
    hold = {"x": np.array([0.0, 0.0])}

    def step(i):
        hold["x"] = f(hold["x"], 0.5 if i < CHANGE[2] else 0.8, gen)
        return hold["x"]

    return step, lambda: {"gen": gen}


# --------------------------------------------------------------------------- 10. Newton / Gauss-Newton


@case("newton_root_while_loop_tol", LONG)
def _(C):
    def solve(c, tol, maxit):
        x = tt.tensor(1.0 + 0 * c)
        fx = lambda x: x**3 - c  # noqa: E731
        it = 0
        while float(tt.abs(fx(x))) > tol and it < maxit:
            x = x - fx(x) / tt.grad(fx)(x)
            it += 1
        return x, it

    f = C(solve)
    return (
        lambda i: f(2.0 + 0.37 * i, 1e-10 if i < CHANGE[1] else 1e-4, 50 if i < CHANGE[2] else 3)
    ), lambda: {}


@case("newton_array_arg_while_norm", LONG)
def _(C):
    def solve(b):
        x = tt.zeros(2, dtype=np.float64) + 0.5
        g = lambda x: tt.stack([x[0] ** 2 + x[1] - b[0], x[0] + x[1] ** 3 - b[1]])  # noqa: E731
        n = 0
        while tt.linalg.norm(g(x)) > 1e-10:
            J = tt.jacobian(g)(x)
            x = x - tt.linalg.solve(J, g(x))
            n += 1
            if n > 30:
                break
        return x, n

    f = C(solve)
    return (lambda i: f(np.array([1.0 + 0.05 * i, 2.0 - 0.03 * i]) * (1 if i < CHANGE[1] else 3))), lambda: {}


@case("gauss_newton_curve_fit_while", LONG)
def _(C):
    t = np.linspace(0, 2, 8)

    def fit(theta0, y, tol):
        th = theta0
        res = lambda th: th[0] * tt.exp(-th[1] * t) - y  # noqa: E731
        it = 0
        while True:
            r = res(th)
            J = tt.jacobian(res)(th)
            delta = tt.linalg.solve(J.T @ J + 1e-9 * np.eye(2), J.T @ r)
            th = th - delta
            it += 1
            if float(tt.linalg.norm(delta)) < tol or it >= 20:
                break
        return th, tt.sum(res(th) ** 2)

    f = C(fit)

    def step(i):
        r = data(i, 22)
        y = 2.0 * np.exp(-0.7 * t) + 0.01 * r.standard_normal(8)
        return f(np.array([1.5, 0.5]), y, 1e-8 if i < CHANGE[0] else 1e-3)

    return step, lambda: {}


@case("levenberg_marquardt_damping_branch", LONG)
def _(C):
    t = np.linspace(-1, 1, 7)

    def lm(th, y, lam):
        def res(th):
            return tt.sin(th[0] * t) * th[1] - y

        r = res(th)
        J = tt.jacobian(res)(th)
        step = tt.linalg.solve(J.T @ J + lam * np.eye(2), J.T @ r)
        new = th - step
        if tt.sum(res(new) ** 2) < tt.sum(r**2):
            return new, lam * 0.5
        return th, lam * 2.0

    f = C(lm)
    hold = {"th": np.array([1.0, 1.0]), "lam": 1e-2}

    def step(i):
        y = np.sin(1.3 * t) * 0.8 + 0.001 * data(i, 23).standard_normal(7)
        if i == CHANGE[1]:
            hold["lam"] = 10.0
        th, lam = f(hold["th"], y, hold["lam"])
        hold["th"], hold["lam"] = th, lam
        return th, lam

    return step, lambda: dict(hold)


@case("newton_optimizer_hessian_model_params")
def _(C):
    w = tt.tensor(np.array([0.3, -0.2, 0.1]), requires_grad=True)

    def newton(X, y):
        def nll(w):
            z = X @ w
            return tt.sum(tt.softplus(z) - y * z) + 0.5 * tt.sum(w**2)

        g = tt.grad(nll)(w)
        H = tt.hessian(nll)(w)
        with tt.no_grad():
            w.sub_(tt.linalg.solve(H, g))
        return nll(w)

    f = C(newton)

    def step(i):
        r = data(i, 24)
        N = 10 if i < CHANGE[1] else 12
        X = r.standard_normal((N, 3))
        return f(X, (r.uniform(size=N) < 0.5).astype(np.float64))

    return step, lambda: {"w": w}


# --------------------------------------------------------------------------- 11. learning-rate finder


def lrfinder_variant(how="param_groups", n=LONG, opt_name="sgd"):
    def build(C):
        model = nn.Sequential(nn.Linear(4, 8, rng=1), nn.ReLU(), nn.Linear(8, 1, rng=2))
        opt = (
            tt.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
            if opt_name == "sgd"
            else tt.optim.Adam(model.parameters(), lr=1e-4)
        )
        mse = nn.MSELoss()
        hist = {"lrs": [], "losses": [], "best": np.inf, "stopped": False}
        if how == "lambda":
            sch = tt.optim.lr_scheduler.ExponentialLR(opt, gamma=1.5)
        else:
            sch = None

        if how == "manual_float":

            def train_step(x, y, lr):
                loss = mse(model(x), y)
                model.zero_grad()
                loss.backward()
                with tt.no_grad():
                    for p in model.parameters():
                        p -= lr * p.grad
                return loss
        else:

            def train_step(x, y, lr):
                return whole_step(model, opt, lambda x, y: mse(model(x), y), sch)(x, y)

        f = C(train_step)

        def step(i):
            lr = 1e-4 * 1.5**i
            if how == "param_groups":
                for g in opt.param_groups:
                    g["lr"] = lr
            r = data(i % 5, 25)
            x = r.standard_normal((16, 4))
            if hist["stopped"]:
                return None
            loss = f(x, np.sin(x[:, :1]), lr)
            lv = float(loss)
            hist["lrs"].append(lr)
            hist["losses"].append(lv)
            hist["best"] = min(hist["best"], lv)
            if lv > 4 * hist["best"] or not np.isfinite(lv):
                hist["stopped"] = True
            return loss

        return step, lambda: mstate(model, opt, sch, hist=dict(hist))

    return build, n


for _name, _kw in {
    "lrfinder_param_groups_set_outside_each_call": dict(),
    "lrfinder_exponential_scheduler_inside": dict(how="lambda"),
    "lrfinder_manual_sgd_lr_float_arg": dict(how="manual_float"),
    "lrfinder_adam_param_groups": dict(opt_name="adam"),
}.items():
    case(_name, _kw.get("n", LONG))(lrfinder_variant(**_kw))


# --------------------------------------------------------------------------- 12. mixed float32 / float64


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 8, rng=1), nn.GELU())  # float32
        self.head = nn.Linear(8, 2, rng=2, dtype=np.float64)  # float64
        self.register_buffer("scale", np.ones(2, dtype=np.float64))


def mixed_variant(to64_on=None, input_dtype=np.float64, scalar="float", n=SHORT, opt_name="adam"):
    def build(C):
        m = Mixed()
        opt = (
            tt.optim.Adam(m.parameters(), lr=1e-2)
            if opt_name == "adam"
            else tt.optim.SGD(m.parameters(), lr=0.1)
        )

        def loss_of(x, y, s):
            h = m.body(x)
            out = m.head(h) * m.scale * s
            return tt.mean((out - y) ** 2)

        f = C(whole_step(m, opt, loss_of))

        def step(i):
            if to64_on is not None and i == to64_on:
                m.to(np.float64)
            r = data(i, 26)
            x = r.standard_normal((6, 5)).astype(input_dtype)
            s = {
                "float": 1.0 + 0.01 * i,
                "f32": np.float32(1.0 + 0.01 * i),
                "f64": np.float64(1.0 + 0.01 * i),
                "int": 1 + i % 3,
            }[scalar]
            if i == CHANGE[2]:
                m.scale.data[...] = 2.0
            return f(x, r.standard_normal((6, 2)).astype(np.float32), s)

        return step, lambda: mstate(m, opt)

    return build, n


for _name, _kw in {
    "mixed_f32_body_f64_head": dict(),
    "mixed_float32_inputs": dict(input_dtype=np.float32),
    "mixed_to_float64_on_10": dict(to64_on=CHANGE[1]),
    "mixed_np_float32_scalar_arg": dict(scalar="f32"),
    "mixed_np_float64_scalar_arg": dict(scalar="f64"),
    "mixed_int_scalar_arg": dict(scalar="int"),
    "mixed_to_float64_on_3_sgd_long": dict(to64_on=CHANGE[0], opt_name="sgd", n=LONG),
}.items():
    case(_name, _kw.get("n", SHORT))(mixed_variant(**_kw))


@case("mixed_half_inputs_float32_model")
def _(C):
    m = nn.Linear(3, 2, rng=1)

    def f_(x):
        with tt.no_grad():
            return m(x), (x * 2).mean()

    f = C(f_)
    return (
        lambda i: f(data(i, 27).standard_normal((4, 3)).astype(np.float16 if i < CHANGE[1] else np.float64))
    ), lambda: mstate(m)


# --------------------------------------------------------------------------- 13. more ported training code


@case("ema_teacher_student_inplace", LONG)
def _(C):
    student = nn.Sequential(nn.Linear(4, 8, rng=1), nn.Tanh(), nn.Linear(8, 3, rng=2))
    teacher = nn.Sequential(nn.Linear(4, 8, rng=1), nn.Tanh(), nn.Linear(8, 3, rng=2))
    teacher.requires_grad_(False)
    opt = tt.optim.SGD(student.parameters(), lr=0.1)
    cfg = {"decay": 0.99}

    def step_fn(x):
        opt.zero_grad()
        with tt.no_grad():
            target = tt.softmax(teacher(x) / 0.5, axis=-1)
        loss = -tt.mean(tt.sum(target * tt.log_softmax(student(x), axis=-1), axis=-1))
        loss.backward()
        opt.step()
        with tt.no_grad():
            for pt, ps in zip(teacher.parameters(), student.parameters()):
                pt.mul_(cfg["decay"]).add_((1 - cfg["decay"]) * ps)
        return loss

    f = C(step_fn)

    def step(i):
        if i in CHANGE:
            cfg["decay"] = 0.9 if i != CHANGE[2] else 0.5
        return f(data(i, 28).standard_normal((5, 4)))

    return step, lambda: {**mstate(student, opt), **{"t" + k: v for k, v in mstate(teacher).items()}}


@case("dqn_target_network_copy_on_10", LONG)
def _(C):
    q = nn.Sequential(nn.Linear(4, 16, rng=1), nn.ReLU(), nn.Linear(16, 2, rng=2))
    tgt = nn.Sequential(nn.Linear(4, 16, rng=3), nn.ReLU(), nn.Linear(16, 2, rng=4))
    opt = tt.optim.Adam(q.parameters(), lr=1e-3)
    huber = nn.SmoothL1Loss()

    def td_step(s, a, r, s2, done, gamma):
        opt.zero_grad()
        with tt.no_grad():
            target = r + gamma * (1 - done) * tt.max(tgt(s2), axis=1)
        qa = tt.take_along_axis(q(s), a[:, None], axis=1)[:, 0]
        loss = huber(qa, target)
        loss.backward()
        opt.step()
        return loss

    f = C(td_step)

    def step(i):
        if i in CHANGE:
            for pt, pq in zip(tgt.parameters(), q.parameters()):
                pt.data[...] = pq.data
        rr = data(i, 29)
        B = 8
        return f(
            rr.standard_normal((B, 4)),
            rr.integers(0, 2, B),
            rr.standard_normal(B),
            rr.standard_normal((B, 4)),
            (rr.uniform(size=B) < 0.1).astype(np.float64),
            0.99,
        )

    return step, lambda: {**mstate(q, opt), **{"t" + k: v for k, v in mstate(tgt).items()}}


@case("gan_two_optimizers_detach", LONG)
def _(C):
    G = nn.Sequential(nn.Linear(2, 8, rng=1), nn.LeakyReLU(0.2), nn.Linear(8, 2, rng=2))
    D = nn.Sequential(nn.Linear(2, 8, rng=3), nn.LeakyReLU(0.2), nn.Linear(8, 1, rng=4))
    og = tt.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    od = tt.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()

    def gan_step(real):
        z = tt.randn(real.shape[0], 2)
        fake = G(z)
        od.zero_grad()
        ld = bce(D(real), np.ones((real.shape[0], 1))) + bce(D(fake.detach()), np.zeros((real.shape[0], 1)))
        ld.backward()
        od.step()
        og.zero_grad()
        lg = bce(D(fake), np.ones((real.shape[0], 1)))
        lg.backward()
        og.step()
        return ld, lg

    f = C(gan_step)
    model = nn.ModuleList([G, D])
    return (lambda i: f(data(i, 30).standard_normal((6 if i < CHANGE[1] else 4, 2)) + 2)), lambda: {
        **mstate(model),
        "og": og.state_dict(),
        "od": od.state_dict(),
    }


@case("distillation_kldiv_temperature_arg", LONG)
def _(C):
    teacher = nn.Sequential(nn.Linear(6, 10, rng=1), nn.ReLU(), nn.Linear(10, 4, rng=2))
    student = nn.Sequential(nn.Linear(6, 4, rng=3))
    teacher.eval()
    opt = tt.optim.SGD(student.parameters(), lr=0.1, momentum=0.9)
    kl = nn.KLDivLoss(reduction="batchmean")
    ce = nn.CrossEntropyLoss()

    def distill(x, y, T, alpha):
        with tt.no_grad():
            soft = tt.softmax(teacher(x) / T, axis=-1)
        logits = student(x)
        loss = alpha * kl(tt.log_softmax(logits / T, axis=-1), soft) * T * T + (1 - alpha) * ce(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    f = C(distill)

    def step(i):
        r = data(i, 31)
        T = 4.0 if i < CHANGE[0] else (2.0 if i < CHANGE[1] else 1.0 + 0.1 * i)
        return f(r.standard_normal((5, 6)), r.integers(0, 4, 5), T, 0.7 if i < CHANGE[2] else 0.3)

    return step, lambda: {**mstate(student, opt), **{"t" + k: v for k, v in mstate(teacher).items()}}


@case("simclr_ntxent_temperature", SHORT)
def _(C):
    enc = nn.Sequential(nn.Linear(5, 8, rng=1), nn.ReLU(), nn.Linear(8, 4, rng=2))
    opt = tt.optim.Adam(enc.parameters(), lr=1e-2)

    def ntxent(x1, x2, tau):
        z = F.normalize(enc(tt.concatenate([x1, x2], axis=0)), dim=1)
        sim = z @ z.T / tau
        n = x1.shape[0]
        sim = sim - 1e9 * np.eye(2 * n)
        labels = np.concatenate([np.arange(n, 2 * n), np.arange(n)])
        return F.cross_entropy(sim, labels)

    f = C(whole_step(enc, opt, ntxent))

    def step(i):
        r = data(i, 32)
        n = 4 if i < CHANGE[1] else 3
        x = r.standard_normal((n, 5))
        return f(x + 0.1 * r.standard_normal((n, 5)), x + 0.1 * r.standard_normal((n, 5)), 0.5)

    return step, lambda: mstate(enc, opt)


@case("policy_gradient_multinomial_generator", LONG)
def _(C):
    pi = nn.Sequential(nn.Linear(3, 8, rng=1), nn.Tanh(), nn.Linear(8, 4, rng=2))
    opt = tt.optim.Adam(pi.parameters(), lr=1e-2)
    gen = np.random.default_rng(9)

    def reinforce(s, rewards_table, g, baseline):
        opt.zero_grad()
        logp = tt.log_softmax(pi(s), axis=-1)
        a = tt.multinomial(tt.exp(logp).detach(), 1, replacement=True, generator=g)[:, 0]
        r = rewards_table[np.arange(s.shape[0]), np.asarray(a)]
        loss = -tt.mean((r - baseline) * tt.take_along_axis(logp, np.asarray(a)[:, None], axis=1)[:, 0])
        loss.backward()
        opt.step()
        return loss, a

    f = C(reinforce)

    def step(i):
        rr = data(i, 33)
        return f(
            rr.standard_normal((6, 3)), rr.standard_normal((6, 4)), gen, 0.0 if i < CHANGE[1] else 0.1 * i
        )

    return step, lambda: {**mstate(pi, opt), "gen": gen}


@case("kmeans_step_argmin_assign", LONG)
def _(C):
    def kmeans(X, centers):
        d = tt.sum((X[:, None, :] - centers[None, :, :]) ** 2, axis=-1)
        assign = tt.argmin(d, axis=1)
        onehot = (np.asarray(assign)[:, None] == np.arange(centers.shape[0])[None, :]).astype(np.float64)
        counts = tt.sum(onehot, axis=0)
        new = (onehot.T @ X) / tt.maximum(counts, 1.0)[:, None]
        return new, tt.sum(tt.min(d, axis=1))

    f = C(kmeans)
    hold = {"c": np.array([[0.0, 0.0], [1.0, 1.0], [-1.0, 2.0]])}

    def step(i):
        X = data(i, 34).standard_normal((20, 2))
        if i == CHANGE[1]:
            hold["c"] = hold["c"][:2]
        c, inertia = f(X, hold["c"])
        hold["c"] = c
        return c, inertia

    return step, lambda: dict(hold)


@case("gp_marginal_likelihood_cholesky", SHORT)
def _(C):
    def nll(logp, X, y):
        ls, sf, sn = tt.exp(logp[0]), tt.exp(logp[1]), tt.exp(logp[2])
        d2 = tt.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
        K = sf**2 * tt.exp(-0.5 * d2 / ls**2) + (sn**2 + 1e-8) * np.eye(X.shape[0])
        L = tt.linalg.cholesky(K)
        alpha = tt.linalg.solve(K, y)
        return 0.5 * tt.sum(y * alpha) + tt.sum(tt.log(tt.diagonal(L))) + 0.5 * X.shape[0] * np.log(2 * np.pi)

    f = C(tt.value_and_grad(nll))
    hold = {"p": np.zeros(3)}

    def step(i):
        r = data(i, 35)
        N = 7 if i < CHANGE[1] else 9
        X = r.uniform(-2, 2, (N, 1))
        v, g = f(hold["p"], X, np.sin(X[:, 0]) + 0.1 * r.standard_normal(N))
        hold["p"] = hold["p"] - 0.05 * g
        return v, g

    return step, lambda: dict(hold)


@case("conv1d_temporal_groupnorm_silu", SHORT)
def _(C):
    model = nn.Sequential(
        nn.Conv1d(2, 6, 3, padding=1, rng=1),
        nn.GroupNorm(2, 6),
        nn.SiLU(),
        nn.Conv1d(6, 1, 3, padding="same", rng=2),
    )
    opt = tt.optim.AdamW(model.parameters(), lr=1e-2)
    f = C(whole_step(model, opt, lambda x, y: nn.HuberLoss()(model(x), y), clip=1.0))

    def step(i):
        r = data(i, 36)
        L = 10 if i < CHANGE[1] else 12
        return f(r.standard_normal((3, 2, L)), r.standard_normal((3, 1, L)))

    return step, lambda: mstate(model, opt)


@case("unet_interpolate_skip", SHORT)
def _(C):
    class TinyUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Conv2d(1, 4, 3, stride=2, padding=1, rng=1)
            self.mid = nn.Conv2d(4, 4, 3, padding=1, rng=2)
            self.up = nn.ConvTranspose2d(4, 4, 2, stride=2, rng=3)
            self.out = nn.Conv2d(5, 1, 1, rng=4)

        def forward(self, x):
            h = F.silu(self.down(x))
            h = F.silu(self.mid(h)) + F.interpolate(h, scale_factor=1, mode="nearest")
            return self.out(tt.concatenate([self.up(h), x], axis=1))

    model = TinyUNet()
    opt = tt.optim.Adam(model.parameters(), lr=1e-2)
    f = C(whole_step(model, opt, lambda noisy, clean: tt.mean((model(noisy) - clean) ** 2)))

    def step(i):
        r = data(i, 37)
        clean = r.uniform(size=(2, 1, 8, 8))
        sigma = 0.3 if i < CHANGE[0] else 0.5
        return f(clean + sigma * r.standard_normal(clean.shape), clean)

    return step, lambda: mstate(model, opt)


@case("mixup_beta_from_tt_rand", SHORT)
def _(C):
    model = nn.Sequential(nn.Linear(4, 6, rng=1), nn.ReLU(), nn.Linear(6, 3, rng=2))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    def mix_step(x, y):
        lam = tt.rand(1, dtype=np.float64)
        perm = np.asarray(tt.argsort(tt.rand(x.shape[0])))
        xm = lam * x + (1 - lam) * x[perm]
        ym = lam * y + (1 - lam) * y[perm]
        opt.zero_grad()
        loss = F.cross_entropy(model(xm), ym)
        loss.backward()
        opt.step()
        return loss

    f = C(mix_step)

    def step(i):
        r = data(i, 38)
        return f(r.standard_normal((5, 4)), np.eye(3)[r.integers(0, 3, 5)])

    return step, lambda: mstate(model, opt)


@case("attention_sdpa_dropout_is_causal", SHORT)
def _(C):
    proj = nn.Linear(8, 24, rng=1)
    opt = tt.optim.Adam(proj.parameters(), lr=1e-2)

    def attn_loss(x, p, causal):
        q, k, v = proj(x).chunk(3, -1)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
        return tt.mean(out**2)

    f = C(whole_step(proj, opt, attn_loss))

    def step(i):
        r = data(i, 39)
        return f(r.standard_normal((2, 5, 8)), 0.1 if i < CHANGE[1] else 0.0, i < CHANGE[0] or i >= CHANGE[1])

    return step, lambda: mstate(proj, opt)


@case("transformer_encoder_classifier_cls_padding", SHORT)
def _(C):
    enc = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1, batch_first=True, rng=0),
        num_layers=2,
    )
    head = nn.Linear(8, 2, rng=5)
    model = nn.ModuleList([enc, head])
    opt = tt.optim.Adam(model.parameters(), lr=1e-3)

    def cls_step(x, pad, y):
        opt.zero_grad()
        h = enc(x, src_key_padding_mask=pad)
        keep = (~pad).astype(np.float32)[:, :, None]
        pooled = tt.sum(h * keep, axis=1) / keep.sum(axis=1)
        loss = F.cross_entropy(head(pooled), y)
        loss.backward()
        opt.step()
        return loss

    f = C(cls_step)

    def step(i):
        r = data(i, 40)
        T = 6 if i < CHANGE[1] else 5
        lengths = r.integers(1, T + 1, 3)
        pad = np.arange(T)[None] >= lengths[:, None]
        return f(r.standard_normal((3, T, 8)), pad, r.integers(0, 2, 3))

    return step, lambda: mstate(model, opt)


@case("embedding_padding_idx_bag_mean", SHORT)
def _(C):
    emb = nn.Embedding(20, 6, padding_idx=0, rng=1)
    lin = nn.Linear(6, 1, rng=2)
    model = nn.ModuleList([emb, lin])
    opt = tt.optim.SGD(model.parameters(), lr=0.5)

    def bag(idx, y):
        e = emb(idx)
        m = (idx != 0).astype(np.float32)
        pooled = tt.sum(e, axis=1) / np.maximum(m.sum(axis=1, keepdims=True), 1)
        return F.binary_cross_entropy_with_logits(lin(pooled)[:, 0], y)

    f = C(whole_step(model, opt, bag))

    def step(i):
        r = data(i, 41)
        idx = r.integers(0, 20, (4, 5 if i < CHANGE[0] else 7))
        idx[:, -2:] = 0
        return f(idx, (r.uniform(size=4) < 0.5).astype(np.float32))

    return step, lambda: mstate(model, opt)


@case("prelu_elu_weight_tying_custom_module_hook", SHORT)
def _(C):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4, rng=1)
            self.b = nn.Linear(4, 4, rng=2)
            self.b.weight = self.a.weight
            self.act = nn.PReLU(4)

        def forward(self, x):
            return self.b(F.elu(self.act(self.a(x))))

    model = Net()
    seen = {"scale": 1.0}
    model.register_forward_hook(lambda m, args, out: out * seen["scale"])
    opt = tt.optim.Adam(model.parameters(), lr=1e-2)
    f = C(whole_step(model, opt, lambda x: tt.mean(model(x) ** 2)))

    def step(i):
        if i in CHANGE:
            seen["scale"] = 0.5 * (i + 1)
        return f(data(i, 42).standard_normal((3, 4)))

    return step, lambda: mstate(model, opt)


@case("bce_multilabel_pos_weight_changes", SHORT)
def _(C):
    model = nn.Linear(5, 3, rng=1)
    opt = tt.optim.Adam(model.parameters(), lr=1e-2)
    crit = {"c": nn.BCEWithLogitsLoss(pos_weight=np.array([1.0, 2.0, 3.0]))}
    f = C(whole_step(model, opt, lambda x, y: crit["c"](model(x), y)))

    def step(i):
        if i == CHANGE[1]:
            crit["c"] = nn.BCEWithLogitsLoss(pos_weight=np.array([3.0, 1.0, 1.0]))
        if i == CHANGE[0]:
            crit["c"].pos_weight[...] = (
                np.array([5.0, 5.0, 5.0]) if isinstance(crit["c"].pos_weight, np.ndarray) else None
            )
        r = data(i, 43)
        return f(r.standard_normal((4, 5)), (r.uniform(size=(4, 3)) < 0.3).astype(np.float64))

    return step, lambda: mstate(model, opt)


@case("early_exit_loss_threshold_guard", LONG)
def _(C):
    model = nn.Sequential(nn.Linear(3, 6, rng=1), nn.Tanh(), nn.Linear(6, 1, rng=2))
    opt = tt.optim.SGD(model.parameters(), lr=0.2)

    def maybe_step(x, y):
        loss = tt.mean((model(x) - y) ** 2)
        if loss > 0.5:
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss, True
        return loss, False

    f = C(maybe_step)

    def step(i):
        r = data(i, 44)
        return f(r.standard_normal((8, 3)), (r.standard_normal((8, 1)) * (2 if i % 3 == 0 else 0.3)))

    return step, lambda: mstate(model, opt)


@case("reduce_lr_on_plateau_outside", LONG)
def _(C):
    model = nn.Linear(3, 1, rng=1)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    plateau = tt.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    f = C(whole_step(model, opt, lambda x, y: tt.mean((model(x) - y) ** 2)))

    def step(i):
        r = data(i % 4, 45)
        loss = f(r.standard_normal((8, 3)), r.standard_normal((8, 1)))
        plateau.step(float(loss))
        return loss

    return step, lambda: mstate(model, opt, plateau)


@case("swa_average_params_python_counter_outside", LONG)
def _(C):
    model = nn.Linear(3, 2, rng=1)
    avg = nn.Linear(3, 2, rng=1)
    avg.requires_grad_(False)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    n_avg = {"n": 0}

    def swa_step(x, y, n):
        opt.zero_grad()
        loss = tt.mean((model(x) - y) ** 2)
        loss.backward()
        opt.step()
        with tt.no_grad():
            for pa, pm in zip(avg.parameters(), model.parameters()):
                pa.copy_(pa + (pm - pa) / (n + 1))
        return loss

    f = C(swa_step)

    def step(i):
        r = data(i, 46)
        out = f(r.standard_normal((4, 3)), r.standard_normal((4, 2)), n_avg["n"])
        n_avg["n"] += 1
        return out

    return step, lambda: {**mstate(model, opt), **{"a" + k: v for k, v in mstate(avg).items()}}


@case("weight_clipping_wgan_clamp_inplace", SHORT)
def _(C):
    critic = nn.Sequential(nn.Linear(2, 8, rng=1), nn.ReLU(), nn.Linear(8, 1, rng=2))
    opt = tt.optim.RMSprop(critic.parameters(), lr=5e-3)

    def critic_step(real, fake, c):
        opt.zero_grad()
        loss = tt.mean(critic(fake)) - tt.mean(critic(real))
        loss.backward()
        opt.step()
        for p in critic.parameters():
            p.clamp_(-c, c)
        return loss

    f = C(critic_step)

    def step(i):
        r = data(i, 47)
        return f(r.standard_normal((5, 2)) + 1, r.standard_normal((5, 2)), 0.01 if i < CHANGE[1] else 0.05)

    return step, lambda: mstate(critic, opt)


@case("gradient_penalty_wgan_gp_double_backward", SHORT)
def _(C):
    critic = nn.Sequential(nn.Linear(2, 8, rng=1), nn.Tanh(), nn.Linear(8, 1, rng=2, dtype=np.float32))
    opt = tt.optim.Adam(critic.parameters(), lr=1e-3)

    def gp_step(real, fake, alpha):
        opt.zero_grad()
        xh = alpha * real + (1 - alpha) * fake
        gx = tt.grad(lambda z: tt.sum(critic(z)))(xh)
        gp = tt.mean((tt.sqrt(tt.sum(gx**2, axis=1)) - 1) ** 2)
        loss = tt.mean(critic(fake)) - tt.mean(critic(real)) + 10 * gp
        loss.backward()
        opt.step()
        return loss

    f = C(gp_step)

    def step(i):
        r = data(i, 48)
        return f(r.standard_normal((4, 2)), r.standard_normal((4, 2)), r.uniform(size=(4, 1)))

    return step, lambda: mstate(critic, opt)


@case("nan_guard_skip_step_outside", LONG)
def _(C):
    model = nn.Linear(3, 1, rng=1, dtype=np.float64)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    f = C(whole_step(model, opt, lambda x, y: tt.mean(tt.log(model(x) ** 2 + 1e-300) - y)))

    def step(i):
        r = data(i, 49)
        x = r.standard_normal((4, 3))
        if i in CHANGE:
            x[0, 0] = np.nan
        return f(x, r.standard_normal((4, 1)))

    return step, lambda: mstate(model, opt)


# --------------------------------------------------------------------------- 14. changes outside a whole step

GLOBAL_SCALE = 1.0


class Clf(nn.Module):
    def __init__(self, drop_rng=None):
        super().__init__()
        self.fc1 = nn.Linear(6, 12, rng=1)
        self.drop = nn.Dropout(0.3, rng=drop_rng)
        self.ln = nn.LayerNorm(12)
        self.fc2 = nn.Linear(12, 4, rng=2)
        self.temp = nn.Parameter(np.ones(1, np.float32), requires_grad=False)

    def forward(self, x):
        return self.fc2(self.ln(F.relu(self.drop(self.fc1(x))))) * self.temp


class Holder:
    """Objects the step reads through attributes (a dict holding an optimizer records on every call)."""


def _set_global(v):
    global GLOBAL_SCALE
    GLOBAL_SCALE = v


def _hook_scale(m, args, out):
    return out * GLOBAL_SCALE


def _pre_hook(m, args):
    return (args[0] * 2.0,)


def _swap_opt(c):
    c.opt = tt.optim.SGD(c.model.parameters(), lr=0.01, momentum=0.5)
    c.sched = tt.optim.lr_scheduler.StepLR(c.opt, 3, 0.5)


def _unfreeze_temp(c):
    c.model.temp.requires_grad_(True)
    c.opt.add_param_group({"params": [c.model.temp], "lr": 0.05})


def _add_hook(c):
    c.h = c.model.register_forward_hook(_hook_scale)
    _set_global(0.5)


def _new_weight_param(c):
    c.model.fc1.weight = nn.Parameter(c.model.fc1.weight.data * 0.5)


def _data_rebind(c):
    c.model.fc1.weight.data = c.model.fc1.weight.data.copy() * 0.5


def _reinit(c):
    nn.init.kaiming_uniform_(c.model.fc1.weight, rng=3)


def _labels_bad(c):
    c.bad_labels = True


MUTATIONS = {
    "dropout_p_changes": lambda c, i: setattr(c.model.drop, "p", {2: 0.0, 9: 0.6, 39: 0.1}[i]),
    "label_smoothing_changes": lambda c, i: setattr(c.ce, "label_smoothing", 0.1 * (CHANGE.index(i) + 1)),
    "ignore_index_changes": lambda c, i: setattr(c.ce, "ignore_index", CHANGE.index(i)),
    "loss_reduction_changes": lambda c, i: setattr(
        c.ce, "reduction", ["sum", "mean", "sum"][CHANGE.index(i)]
    ),
    "loss_object_replaced": lambda c, i: setattr(
        c, "ce", nn.CrossEntropyLoss(label_smoothing=0.05 * CHANGE.index(i))
    ),
    "adam_betas_changed": lambda c, i: c.opt.param_groups[0].__setitem__(
        "betas", (0.8, 0.9 + 0.01 * CHANGE.index(i))
    ),
    "adam_eps_changed": lambda c, i: c.opt.param_groups[0].__setitem__("eps", 10.0 ** -(3 + CHANGE.index(i))),
    "lr_zero_then_back": lambda c, i: c.opt.param_groups[0].__setitem__(
        "lr", [0.0, 0.01, 0.003][CHANGE.index(i)]
    ),
    "weight_decay_changed": lambda c, i: c.opt.param_groups[0].__setitem__(
        "weight_decay", 0.1 * CHANGE.index(i)
    ),
    "amsgrad_switched_on": lambda c, i: c.opt.param_groups[0].__setitem__("amsgrad", i == CHANGE[1]),
    "unfreeze_param_add_group_on_10": lambda c, i: _unfreeze_temp(c) if i == CHANGE[1] else None,
    "load_state_dict_model": lambda c, i: c.model.load_state_dict(c.sd0),
    "load_state_dict_optimizer": lambda c, i: c.opt.load_state_dict(c.osd0) if i != CHANGE[0] else None,
    "param_data_rebound": lambda c, i: _data_rebind(c),
    "param_replaced_by_new_parameter": lambda c, i: _new_weight_param(c) if i == CHANGE[1] else None,
    "kaiming_reinit_inplace": lambda c, i: _reinit(c),
    "manual_seed_outside": lambda c, i: tt.manual_seed(i),
    "set_rng_state_back": lambda c, i: tt.set_rng_state(c.rs0),
    "optimizer_state_cleared": lambda c, i: c.opt.state.clear(),
    "optimizer_swapped": lambda c, i: _swap_opt(c) if i == CHANGE[1] else None,
    "module_global_scale_changes": lambda c, i: _set_global([2.0, 0.5, 1.0][CHANGE.index(i)]),
    "forward_hook_added_then_removed": lambda c, i: (
        _add_hook(c) if i == CHANGE[1] else (c.h.remove() if i == CHANGE[2] else None)
    ),
    "forward_pre_hook_on_3": lambda c, i: (
        c.model.fc2.register_forward_pre_hook(_pre_hook) if i == CHANGE[0] else None
    ),
    "clip_config_changes": lambda c, i: c.cfg.__setitem__("clip", [0.01, 10.0, 0.5][CHANGE.index(i)]),
    "layernorm_eps_changes": lambda c, i: setattr(c.model.ln, "eps", 0.1 * (CHANGE.index(i) + 1)),
    "dropout_eval_only": lambda c, i: c.model.drop.eval() if i != CHANGE[2] else c.model.drop.train(),
    "first_layer_frozen_on_10": lambda c, i: c.model.fc1.requires_grad_(i != CHANGE[1]),
    "model_to_float64_on_10": lambda c, i: c.model.to(np.float64) if i == CHANGE[1] else None,
    "scheduler_stepped_outside": lambda c, i: c.sched.step(),
    "temp_parameter_data_inplace": lambda c, i: c.model.temp.data.__setitem__(..., 1.5 + i),
    "labels_out_of_range_on_calls": lambda c, i: _labels_bad(c),
    "grad_left_from_outside_backward": lambda c, i: c.model.fc2.bias.__setattr__(
        "grad", np.ones(4, np.float32)
    ),
}


def _mut_batch(i, c, layout):
    r = data(i, 50)
    x = r.standard_normal((5, 6))
    y = r.integers(0, 4, 5)
    if getattr(c, "bad_labels", False) and i in CHANGE:
        y[0] = 7
    if layout == "fortran" and i in CHANGE:
        x = np.asfortranarray(x)
    elif layout == "negstride" and i in CHANGE:
        x = x[::-1, ::-1].copy()[::-1, ::-1]
    elif layout == "broadcast" and i in CHANGE:
        x = np.broadcast_to(x[:1], (5, 6))
    elif layout == "float32" and i >= CHANGE[0]:
        x = x.astype(np.float32)
    elif layout == "int32labels" and i >= CHANGE[1]:
        y = y.astype(np.int32)
    elif layout == "tensor" and i in CHANGE:
        x = tt.tensor(x, requires_grad=(i == CHANGE[2]))
    elif layout == "aliased" and i in CHANGE:
        return x, y, x
    elif layout == "nan" and i == CHANGE[1]:
        x[1, 2] = np.nan
    return x, y, r.standard_normal((5, 6))


def mutation_case(mut=None, layout=None, drop_rng=None, n=LONG):
    def build(C):
        model = Clf(drop_rng)
        c = Holder()
        c.model, c.ce, c.cfg = model, nn.CrossEntropyLoss(), {"clip": 1.0}
        c.opt = tt.optim.Adam(model.parameters(), lr=1e-2)
        c.sched = tt.optim.lr_scheduler.StepLR(c.opt, 4, 0.7)
        c.sd0 = model.state_dict()
        c.osd0 = c.opt.state_dict()
        c.rs0 = tt.get_rng_state()
        _set_global(1.0)

        def train_step(x, y, noise):
            c.opt.zero_grad()
            loss = c.ce(model(x + 0.01 * noise), y) * GLOBAL_SCALE
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), c.cfg["clip"])
            c.opt.step()
            c.sched.step()
            return loss

        f = C(train_step)

        def step(i):
            if mut is not None and i in CHANGE:
                MUTATIONS[mut](c, i)
            return f(*_mut_batch(i, c, layout))

        return step, lambda: mstate(model, c.opt, c.sched, glob=GLOBAL_SCALE)

    return build, n


for _m in MUTATIONS:
    case("outside_" + _m)(mutation_case(_m))
for _l in ("fortran", "negstride", "broadcast", "float32", "int32labels", "tensor", "aliased", "nan"):
    case("input_layout_" + _l)(mutation_case(layout=_l))
case("outside_dropout_own_rng_state_dict_reload")(mutation_case("load_state_dict_model", drop_rng=5))


# --------------------------------------------------------------------------- 15. more ported code


@case("gpt_decode_tensor_indices_no_asarray")
def _(C):
    model = GPT()
    model.eval()

    def generate(prompt, steps):
        idx = tt.tensor(prompt)
        with tt.no_grad():
            for _ in range(steps):
                nxt = tt.argmax(model(idx)[:, -1, :], axis=-1)
                idx = tt.concatenate([idx, tt.unsqueeze(nxt, 1)], axis=1)
        return idx

    f = C(generate)
    return (lambda i: f(data(i, 60).integers(1, 13, (2, 3)), 3 if i < CHANGE[1] else 2)), lambda: mstate(
        model
    )


@case("gpt_left_padding_cumsum_positions")
def _(C):
    model = GPT()
    model.eval()

    def forward(idx, attn):
        pos = np.cumsum(attn, axis=-1) - 1
        pos = np.where(attn == 0, 1, pos)
        with tt.no_grad():
            x = model.tok(idx) + model.pos(pos)
            T = idx.shape[1]
            causal = np.triu(np.ones((T, T), dtype=bool), 1)
            for b in model.blocks:
                x = b(x, causal, attn == 0)
            return model.head(model.ln(x))[:, -1]

    f = C(forward)

    def step(i):
        r = data(i, 61)
        attn = np.ones((3, 6), dtype=np.int64)
        for b, k in enumerate(r.integers(0, 4, 3)):
            attn[b, :k] = 0
        return f(r.integers(1, 13, (3, 6)) * attn, attn)

    return step, lambda: mstate(model)


@case("gpt_left_padding_hf_inplace_position_fill")
def _(C):
    model = GPT()
    model.eval()

    def forward(idx, attn):
        pos = np.cumsum(attn, axis=-1) - 1
        pos[attn == 0] = 1
        with tt.no_grad():
            return model.tok(idx) + model.pos(pos)

    f = C(forward)

    def step(i):
        r = data(i, 62)
        attn = np.ones((2, 5), dtype=np.int64)
        attn[0, : 1 + i % 3] = 0
        return f(r.integers(1, 13, (2, 5)), attn)

    return step, lambda: mstate(model)


@case("kv_cache_incremental_decoding", SHORT)
def _(C):
    D = 8
    qkv = nn.Linear(D, 3 * D, rng=1)
    emb = nn.Embedding(10, D, rng=2)
    out = nn.Linear(D, 10, rng=3)
    model = nn.ModuleList([qkv, emb, out])

    def decode_one(tok, k_cache, v_cache):
        with tt.no_grad():
            q, k, v = qkv(emb(tok)).chunk(3, -1)
            K = tt.concatenate([k_cache, k[:, None]], axis=1)
            V = tt.concatenate([v_cache, v[:, None]], axis=1)
            att = tt.softmax(tt.sum(q[:, None] * K, axis=-1) / np.sqrt(D), axis=-1)
            h = tt.sum(att[:, :, None] * V, axis=1)
            return tt.argmax(out(h), axis=-1), K, V

    f = C(decode_one)
    hold = {}

    def step(i):
        if i % 4 == 0 or i in CHANGE:
            hold["k"] = np.zeros((2, 1, D), np.float32)
            hold["v"] = np.zeros((2, 1, D), np.float32)
            hold["tok"] = data(i, 63).integers(0, 10, 2)
        tok, K, V = f(hold["tok"], hold["k"], hold["v"])
        hold.update(tok=tok, k=K, v=V)
        return tok, K, V

    return step, lambda: mstate(model)


@case("attention_fully_masked_row_nan_bits")
def _(C):
    mha = nn.MultiheadAttention(8, 2, batch_first=True, rng=1)

    def attend(x, pad):
        with tt.no_grad():
            o, w = mha(x, x, x, key_padding_mask=pad)
            return o, w

    f = C(attend)

    def step(i):
        r = data(i, 64)
        pad = r.uniform(size=(2, 4)) < 0.4
        if i in CHANGE:
            pad[1] = True
        return f(r.standard_normal((2, 4, 8)), pad)

    return step, lambda: mstate(mha)


@case("masked_mean_loss_padding_tokens", LONG)
def _(C):
    model = RNNLM("gru")
    opt = tt.optim.Adam(model.parameters(), lr=1e-2)

    def loss_of(x, y, pad_id):
        logits, _ = model(x)
        ce = F.cross_entropy(logits.reshape(-1, 17), y.reshape(-1), reduction="none")
        mask = (y.reshape(-1) != pad_id).astype(np.float32)
        return tt.sum(ce * mask) / mask.sum()

    f = C(whole_step(model, opt, loss_of))

    def step(i):
        r = data(i, 65)
        seq = r.integers(0, 17, (6, 3))
        pad_id = 0 if i < CHANGE[1] else 1
        return f(seq[:-1], seq[1:], pad_id)

    return step, lambda: mstate(model, opt)


@case("pad_sequence_varlen_rnn_classifier", SHORT)
def _(C):
    from tinytensor.nn.utils.rnn import pad_sequence

    rnn = nn.RNN(3, 5, nonlinearity="relu", batch_first=True, rng=1)
    head = nn.Linear(5, 2, rng=2)
    model = nn.ModuleList([rnn, head])
    opt = tt.optim.SGD(model.parameters(), lr=0.05)

    def train_step(seqs, lengths, y):
        opt.zero_grad()
        x = pad_sequence(seqs, batch_first=True)
        out, h = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        loss = F.cross_entropy(head(h[-1]), y)
        loss.backward()
        opt.step()
        return loss

    f = C(train_step)

    def step(i):
        r = data(i, 66)
        lengths = [4, 2, 3] if i < CHANGE[1] else [2, 4, 1]
        seqs = [r.standard_normal((n, 3)) for n in lengths]
        return f(seqs, np.array(lengths), r.integers(0, 2, 3))

    return step, lambda: mstate(model, opt)


@case("packed_lengths_numpy_array_changes_each_call", LONG)
def _(C):
    lstm = nn.LSTM(2, 4, rng=3)
    opt = tt.optim.SGD(lstm.parameters(), lr=0.1)

    def train_step(x, lengths):
        opt.zero_grad()
        out, (h, c) = lstm(pack_padded_sequence(x, lengths, enforce_sorted=False))
        padded, _ = pad_packed_sequence(out)
        loss = tt.sum(h**2) + tt.sum(padded)
        loss.backward()
        opt.step()
        return loss, padded

    f = C(train_step)

    def step(i):
        r = data(i, 67)
        lengths = np.array([5, 1 + i % 5, 1 + (i * 7) % 5])
        return f(r.standard_normal((5, 3, 2)), lengths)

    return step, lambda: mstate(lstm, opt)


@case("lstm_proj_size_bidirectional_two_layers", SHORT)
def _(C):
    lstm = nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=2, rng=4)
    opt = tt.optim.Adam(lstm.parameters(), lr=1e-2)

    def loss_of(x, h0, c0):
        out, (h, c) = lstm(x, (h0, c0))
        return tt.mean(out**2) + tt.mean(c**2)

    f = C(whole_step(lstm, opt, loss_of))

    def step(i):
        r = data(i, 68)
        T = 4 if i < CHANGE[0] else 3
        return f(
            r.standard_normal((T, 2, 3)),
            0.1 * r.standard_normal((4, 2, 2)),
            0.1 * r.standard_normal((4, 2, 6)),
        )

    return step, lambda: mstate(lstm, opt)


@case("batchnorm1d_sequence_momentum_changed_outside", LONG)
def _(C):
    model = nn.Sequential(
        nn.Conv1d(2, 4, 3, padding=1, rng=1), nn.BatchNorm1d(4), nn.ReLU(), nn.Conv1d(4, 1, 1, rng=2)
    )
    opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    f = C(whole_step(model, opt, lambda x, y: tt.mean((model(x) - y) ** 2)))

    def step(i):
        if i in CHANGE:
            model[1].momentum = [0.5, 0.01, 0.2][CHANGE.index(i)]
        r = data(i, 69)
        return f(r.standard_normal((4, 2, 7)), r.standard_normal((4, 1, 7)))

    return step, lambda: mstate(model, opt)


@case("mode_switched_inside_and_restored", SHORT)
def _(C):
    model = nn.Sequential(nn.Linear(3, 6, rng=1), nn.Dropout(0.5), nn.Linear(6, 1, rng=2))

    def evaluate(x):
        was = model.training
        model.eval()
        with tt.no_grad():
            y = model(x)
        model.train(was)
        return y

    f = C(evaluate)

    def step(i):
        if i == CHANGE[1]:
            model.eval()
        return f(data(i, 70).standard_normal((4, 3)))

    return step, lambda: mstate(model)


@case("set_grad_enabled_bool_arg", SHORT)
def _(C):
    model = nn.Linear(3, 2, rng=1)

    def run(x, train):
        with tt.set_grad_enabled(train):
            return tt.sum(model(x) ** 2)

    f = C(run)
    return (lambda i: f(data(i, 71).standard_normal((2, 3)), i % 2 == 0)), lambda: mstate(model)


@case("parameters_to_vector_flat_update_inside", LONG)
def _(C):
    model = nn.Sequential(nn.Linear(3, 4, rng=1), nn.Tanh(), nn.Linear(4, 1, rng=2))
    params = list(model.parameters())

    def flat_step(x, y, lr):
        loss = tt.mean((model(x) - y) ** 2)
        vec = nn.utils.parameters_to_vector(params)
        with tt.no_grad():
            nn.utils.vector_to_parameters(vec * (1 - lr), params)
        return loss

    f = C(flat_step)

    def step(i):
        r = data(i, 72)
        return f(r.standard_normal((5, 3)), r.standard_normal((5, 1)), 0.01 if i < CHANGE[1] else 0.02)

    return step, lambda: mstate(model)


@case("dp_sgd_vmap_per_example_clip_noise", LONG)
def _(C):
    rng0 = np.random.default_rng(7)
    params = {"W": rng0.standard_normal((4, 2)) * 0.3, "b": np.zeros(2)}
    gen = np.random.default_rng(8)

    def loss1(p, x, y):
        return F.cross_entropy((x @ p["W"] + p["b"])[None], y[None])

    def dp_step(p, X, Y, C_, sigma, g):
        per = tt.vmap(tt.grad(loss1), in_axes=(None, 0, 0))(p, X, Y)
        norms = tt.sqrt(sum(tt.sum(v.reshape(v.shape[0], -1) ** 2, axis=1) for v in per.values()))
        scale = 1.0 / tt.maximum(norms / C_, 1.0)
        out = {}
        for k, v in per.items():
            s = tt.sum(v * scale.reshape((-1,) + (1,) * (v.ndim - 1)), axis=0)
            out[k] = p[k] - 0.1 * (s + sigma * C_ * tt.randn(*s.shape, rng=g, dtype=np.float64)) / X.shape[0]
        return out

    f = C(dp_step)
    hold = {"p": params}

    def step(i):
        r = data(i, 73)
        hold["p"] = f(
            hold["p"], r.standard_normal((6, 4)), r.integers(0, 2, 6), 1.0 if i < CHANGE[0] else 0.5, 1.1, gen
        )
        return hold["p"]

    return step, lambda: {"gen": gen}


@case("hessian_free_conjugate_gradient_while", LONG)
def _(C):
    t = np.linspace(-1, 1, 9)

    def loss(w, y):
        return tt.sum((tt.tanh(w[0] * t + w[1]) * w[2] - y) ** 2) + 0.01 * tt.sum(w**2)

    def hf_step(w, y, tol):
        g = tt.grad(loss)(w, y)
        x = tt.zeros(3, dtype=np.float64)
        r = -g
        p = r
        rs = tt.sum(r * r)
        k = 0
        while float(rs) > tol and k < 10:
            Ap = tt.hvp(lambda w: loss(w, y), (w,), (p,))
            alpha = rs / tt.sum(p * Ap)
            x = x + alpha * p
            r = r - alpha * Ap
            rs_new = tt.sum(r * r)
            p = r + (rs_new / rs) * p
            rs = rs_new
            k += 1
        return w + x, k

    f = C(hf_step)
    hold = {"w": np.array([1.0, 0.1, 0.5])}

    def step(i):
        y = np.tanh(1.5 * t - 0.2) * 0.9 + 0.01 * data(i, 74).standard_normal(9)
        w, k = f(hold["w"], y, 1e-12 if i < CHANGE[1] else 1e-4)
        hold["w"] = w
        return w, k

    return step, lambda: dict(hold)


@case("gumbel_softmax_straight_through", LONG)
def _(C):
    model = nn.Sequential(nn.Linear(4, 5, rng=1))
    dec = nn.Linear(5, 4, rng=2)
    both = nn.ModuleList([model, dec])
    opt = tt.optim.Adam(both.parameters(), lr=1e-2)

    def loss_of(x, tau, hard):
        logits = model(x)
        u = tt.rand(*logits.shape, dtype=np.float32)
        y = tt.softmax((logits - tt.log(-tt.log(u + 1e-10) + 1e-10)) / tau, axis=-1)
        if hard:
            idx = tt.argmax(y, axis=-1)
            y_hard = F.one_hot(idx, 5).astype(np.float32)
            y = y_hard - y.detach() + y
        return tt.mean((dec(y) - x) ** 2)

    f = C(whole_step(both, opt, loss_of))

    def step(i):
        tau = 1.0 if i < CHANGE[0] else max(0.3, 1.0 - 0.02 * i)
        return f(data(i, 75).standard_normal((6, 4)), tau, i >= CHANGE[1])

    return step, lambda: mstate(both, opt)


@case("hmm_forward_algorithm_logsumexp_lengths", SHORT)
def _(C):
    def nll(logA, logB, logpi, obs, lengths):
        A = tt.log_softmax(logA, axis=1)
        B = tt.log_softmax(logB, axis=1)
        pi = tt.log_softmax(logpi, axis=0)
        total = 0.0
        for s in range(obs.shape[0]):
            a = pi + B[:, obs[s, 0]]
            for t_ in range(1, int(lengths[s])):
                a = tt.logsumexp(a[:, None] + A, axis=0) + B[:, obs[s, t_]]
            total = total - tt.logsumexp(a, axis=0)
        return total

    f = C(tt.value_and_grad(nll, argnums=(0, 1, 2)))
    r0 = np.random.default_rng(1)
    hold = {"A": r0.standard_normal((3, 3)), "B": r0.standard_normal((3, 4)), "pi": np.zeros(3)}

    def step(i):
        r = data(i, 76)
        lengths = np.array([5, 3]) if i < CHANGE[1] else np.array([4, 5])
        v, (gA, gB, gp) = f(hold["A"], hold["B"], hold["pi"], r.integers(0, 4, (2, 5)), lengths)
        hold["A"], hold["B"], hold["pi"] = hold["A"] - 0.1 * gA, hold["B"] - 0.1 * gB, hold["pi"] - 0.1 * gp
        return v, gA, gB, gp

    return step, lambda: dict(hold)


@case("viterbi_backtrack_int_reads", LONG)
def _(C):
    r0 = np.random.default_rng(2)
    logA, logB = np.log(r0.dirichlet(np.ones(3), 3)), np.log(r0.dirichlet(np.ones(4), 3))

    def viterbi(obs, A):
        delta = tt.tensor(logB[:, obs[0]] + np.log(1 / 3))
        back = []
        for t_ in range(1, obs.shape[0]):
            scores = delta[:, None] + A
            back.append(tt.argmax(scores, axis=0))
            delta = tt.max(scores, axis=0) + logB[:, obs[t_]]
        state = int(tt.argmax(delta))
        path = [state]
        for bp in reversed(back):
            state = int(bp[state])
            path.append(state)
        return path[::-1], delta

    f = C(viterbi)
    return (lambda i: f(data(i, 77).integers(0, 4, 5), logA * (1 if i < CHANGE[1] else 1.5))), lambda: {}


@case("ode_forward_only_closure_param_changes_outside", SHORT)
def _(C):
    k = tt.tensor(np.array([0.5, 1.2]))

    def simulate(y0, ts, rtol):
        with tt.no_grad():
            return integrate.odeint(lambda y, t: -k * y + tt.sin(t), y0, ts, rtol=rtol, atol=1e-10)

    f = C(simulate)

    def step(i):
        if i in CHANGE:
            k.data = k.data * 1.5
        return f(np.array([1.0, 2.0]), np.linspace(0, 1 + 0.1 * (i % 3), 4), 1e-6 if i < CHANGE[1] else 1e-9)

    return step, lambda: {"k": k}


@case("ode_forward_only_args_values", SHORT)
def _(C):
    def simulate(theta, y0):
        return integrate.odeint(lotka, y0, np.linspace(0, 3, 7), args=(theta,), rtol=1e-8, atol=1e-8)

    f = C(simulate)
    return (
        lambda i: f(
            np.array([1.0, 0.1, 1.5, 0.075]) * (1 + 0.01 * i), np.array([10.0, 5.0 + (i >= CHANGE[1])])
        )
    ), lambda: {}


@case("ode_stiff_forward_only_bdf_solve_ivp", SHORT)
def _(C):
    def rob(t, y, k):
        return tt.stack(
            [
                -k[0] * y[0] + k[2] * y[1] * y[2],
                k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2],
                k[1] * y[1] ** 2,
            ]
        )

    def simulate(k, tend):
        sol = integrate.solve_ivp(
            rob, (0.0, tend), np.array([1.0, 0.0, 0.0]), method="BDF", args=(k,), rtol=1e-6, atol=1e-10
        )
        return sol.y[:, -1]

    f = C(simulate)
    return (
        lambda i: f(np.array([0.04, 3e7, 1e4]) * (1 + 0.02 * i), 10.0 if i < CHANGE[1] else 40.0)
    ), lambda: {}


@case("lbfgs_two_loop_history_outside", LONG)
def _(C):
    def rosen(x):
        return tt.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    vg = tt.value_and_grad(rosen)

    def direction(x, S, Y):
        v, g = vg(x)
        q = g
        alphas = []
        for s, y in zip(reversed(S), reversed(Y)):
            a = tt.sum(s * q) / tt.sum(y * s)
            q = q - a * y
            alphas.append(a)
        if S:
            q = q * (tt.sum(S[-1] * Y[-1]) / tt.sum(Y[-1] * Y[-1]))
        for (s, y), a in zip(zip(S, Y), reversed(alphas)):
            b = tt.sum(y * q) / tt.sum(y * s)
            q = q + s * (a - b)
        return v, g, -q

    f = C(direction)
    hold = {"x": np.array([-1.2, 1.0, 0.5]), "S": [], "Y": [], "g": None}

    def step(i):
        v, g, d = f(hold["x"], list(hold["S"]), list(hold["Y"]))
        xn = hold["x"] + 1e-3 * np.asarray(d.data if isinstance(d, tt.Tensor) else d)
        _, gn, _ = f(xn, [], [])
        gn = np.asarray(gn.data if isinstance(gn, tt.Tensor) else gn)
        g_ = np.asarray(g.data if isinstance(g, tt.Tensor) else g)
        hold["S"] = (hold["S"] + [xn - hold["x"]])[-3:]
        hold["Y"] = (hold["Y"] + [gn - g_])[-3:]
        hold["x"] = xn
        if i == CHANGE[1]:
            hold["S"], hold["Y"] = [], []
        return v, g, d

    return step, lambda: {"x": hold["x"], "S": list(hold["S"])}


@case("jax_style_sgd_grad_times_lr_arg", LONG)
def _(C):
    def loss(w, X, y):
        return tt.mean((tt.tanh(X @ w) - y) ** 2)

    def update(w, X, y, lr):
        return w - tt.grad(loss)(w, X, y) * lr

    f = C(update)
    hold = {"w": np.array([0.1, -0.2, 0.3])}

    def step(i):
        r = data(i, 80)
        hold["w"] = f(
            hold["w"], r.standard_normal((8, 3)), r.standard_normal(8), 0.1 if i < CHANGE[0] else 0.05
        )
        return hold["w"]

    return step, lambda: dict(hold)


@case("ode_odeint_plain_arrays_result_type", SHORT)
def _(C):
    def simulate(k, y0):
        return integrate.odeint(lambda y, t, k: -k * y, y0, np.array([0.0, 0.5, 1.0]), args=(k,))

    f = C(simulate)
    return (lambda i: f(np.array([0.5 + 0.01 * i]), np.array([1.0 if i < CHANGE[1] else 2.0]))), lambda: {}


@case("word_vectors_row_lookup_by_scalar_index_argument", LONG)
def _(C):
    rng0 = np.random.default_rng(5)
    E = rng0.standard_normal((10, 4))

    def context_vector(E, window):
        v = E[window[0]]
        for j in range(1, window.shape[0]):
            v = v + E[window[j]]
        return v / window.shape[0]

    f = C(context_vector)
    return (lambda i: f(E, data(i, 81).integers(0, 10, 3 if i < CHANGE[1] else 4))), lambda: {"E": E}


@case("langevin_dynamics_grad_times_step_arg", LONG)
def _(C):
    gen = np.random.default_rng(12)

    def ula(x, h, g):
        grad = tt.grad(lambda z: -logp_banana(z))(x)
        return x - grad * h + math.sqrt(2 * h) * tt.randn(2, rng=g, dtype=np.float64)

    f = C(ula)
    hold = {"x": np.array([0.2, 0.1])}

    def step(i):
        hold["x"] = f(hold["x"], 0.05 if i < CHANGE[1] else 0.02, gen)
        return hold["x"]

    return step, lambda: {"gen": gen, **hold}


@case("single_transition_q_learning_action_index", LONG)
def _(C):
    q = nn.Sequential(nn.Linear(3, 8, rng=1), nn.ReLU(), nn.Linear(8, 2, rng=2))
    opt = tt.optim.SGD(q.parameters(), lr=0.05)

    def td(s, a, r, s2, gamma):
        opt.zero_grad()
        qs = q(s)
        with tt.no_grad():
            target = r + gamma * tt.max(q(s2))
        loss = (qs[a[0]] - target) ** 2
        loss.backward()
        opt.step()
        return loss

    f = C(td)

    def step(i):
        rr = data(i, 82)
        return f(
            rr.standard_normal(3),
            rr.integers(0, 2, 1),
            float(rr.standard_normal()),
            rr.standard_normal(3),
            0.9,
        )

    return step, lambda: mstate(q, opt)


@case("pointer_network_gather_by_pointer_argument", SHORT)
def _(C):
    enc = nn.Linear(2, 6, rng=1)
    score = nn.Linear(6, 1, rng=2)
    model = nn.ModuleList([enc, score])
    opt = tt.optim.Adam(model.parameters(), lr=1e-2)

    def loss_of(pts, ptr):
        h = tt.tanh(enc(pts))
        chosen = h[:, ptr[0]]
        for k in range(1, ptr.shape[0]):
            chosen = chosen + h[:, ptr[k]]
        return tt.mean(score(chosen) ** 2)

    f = C(whole_step(model, opt, loss_of))

    def step(i):
        r = data(i, 83)
        return f(r.standard_normal((2, 5, 2)), r.integers(0, 5, 3))

    return step, lambda: mstate(model, opt)


@case("segment_sums_by_offsets_argument", LONG)
def _(C):
    lin = nn.Linear(3, 2, rng=1, dtype=np.float64)
    opt = tt.optim.SGD(lin.parameters(), lr=0.1)

    def loss_of(x, offsets, y):
        h = tt.tanh(lin(x))
        pooled = [tt.sum(h[offsets[k] : offsets[k + 1]], axis=0) for k in range(offsets.shape[0] - 1)]
        out = tt.stack(pooled) * 1.0
        out = out + pooled[0]
        return tt.mean((out - y) ** 2)

    f = C(whole_step(lin, opt, loss_of))

    def step(i):
        r = data(i, 84)
        cuts = np.sort(r.integers(1, 8, 2))
        offsets = np.array([0, cuts[0], max(cuts[1], cuts[0] + 1), 9])
        return f(r.standard_normal((9, 3)), offsets, r.standard_normal((3, 2)))

    return step, lambda: mstate(lin, opt)


@case("per_sequence_loop_truncate_by_length", LONG)
def _(C):
    cell = nn.GRUCell(2, 4, rng=1)
    head = nn.Linear(4, 1, rng=2)
    model = nn.ModuleList([cell, head])
    opt = tt.optim.Adam(model.parameters(), lr=1e-2)

    def loss_of(x, lengths, y):
        total = 0.0
        for b in range(x.shape[0]):
            h = tt.zeros((1, 4), dtype=np.float32)
            for t_ in range(int(lengths[b])):
                h = cell(x[b, t_][None], h)
            total = total + (head(h)[0, 0] - y[b]) ** 2
        return total / x.shape[0]

    f = C(whole_step(model, opt, loss_of))

    def step(i):
        r = data(i, 85)
        return f(r.standard_normal((2, 4, 2)), np.array([4, 1 + i % 4]), r.standard_normal(2))

    return step, lambda: mstate(model, opt)


@case("row_update_of_own_copy_scalar_index", SHORT)
def _(C):
    def f_(x, idx):
        h = x * 2.0
        r = h[idx[0]]
        r = r * 3.0
        return h, r

    f = C(f_)
    return (lambda i: f(data(i, 86).standard_normal((4, 3)), np.array([i % 4]))), lambda: {}


@case("trim_batch_to_longest_sequence_max_length", LONG)
def _(C):
    model = RNNLM("lstm")
    opt = tt.optim.Adam(model.parameters(), lr=1e-2)

    def loss_of(x, y, lengths):
        T = lengths.max()
        logits, _ = model(x[:T])
        return F.cross_entropy(logits.reshape(-1, 17), y[:T].reshape(-1))

    f = C(whole_step(model, opt, loss_of))

    def step(i):
        r = data(i, 87)
        seq = r.integers(0, 17, (9, 2))
        lengths = np.array([3 + i % 5, 2])
        return f(seq[:-1], seq[1:], lengths)

    return step, lambda: mstate(model, opt)


@case("audio_frame_subsampling_stride_argument", SHORT)
def _(C):
    conv = nn.Conv1d(1, 2, 3, padding=1, rng=1)
    opt = tt.optim.SGD(conv.parameters(), lr=0.05)

    def loss_of(wave, stride):
        frames = conv(wave)[:, :, :: stride[0]]
        return tt.mean(frames**2)

    f = C(whole_step(conv, opt, loss_of))

    def step(i):
        return f(data(i, 88).standard_normal((2, 1, 12)), np.array([2 if i < CHANGE[0] else 3]))

    return step, lambda: mstate(conv, opt)


@case("repeat_upsampling_factor_argument", SHORT)
def _(C):
    def upsample(x, factor):
        return tt.repeat(x, factor[0], axis=-1) * 1.0

    f = C(upsample)
    return (
        lambda i: f(data(i, 89).standard_normal((2, 3)), np.array([2 if i < CHANGE[1] else 3]))
    ), lambda: {}


@case("label_smoothing_targets_full_from_hparam_array", SHORT)
def _(C):
    model = nn.Linear(4, 3, rng=1, dtype=np.float64)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    def loss_of(x, y, hp):
        soft = tt.full((x.shape[0], 3), hp[0] / 2)
        target = soft + F.one_hot(y, 3) * (1 - 1.5 * hp[0])
        return -tt.mean(tt.sum(target * tt.log_softmax(model(x), axis=-1), axis=-1))

    f = C(whole_step(model, opt, loss_of))

    def step(i):
        r = data(i, 90)
        hp = np.array([0.1 if i < CHANGE[0] else 0.2])
        return f(r.standard_normal((5, 4)), r.integers(0, 3, 5), hp)

    return step, lambda: mstate(model, opt)


@case("robust_regression_quantile_threshold_array", SHORT)
def _(C):
    w = tt.tensor(np.array([0.5, -0.3]), requires_grad=True)
    opt = tt.optim.SGD([w], lr=0.05)

    def step_fn(X, y, q):
        opt.zero_grad()
        resid = X @ w - y
        thr = tt.quantile(tt.abs(resid).detach(), q[0])
        loss = tt.mean(tt.minimum(resid**2, thr**2))
        loss.backward()
        opt.step()
        return loss

    f = C(step_fn)

    def step(i):
        r = data(i, 91)
        return f(r.standard_normal((10, 2)), r.standard_normal(10), np.array([0.9 if i < CHANGE[0] else 0.5]))

    return step, lambda: {"w": w, "g": w.grad, "opt": opt.state_dict()}


@case("interpolate_to_length_from_array_argument", SHORT)
def _(C):
    def resample(x, target_len):
        return F.interpolate(x, size=target_len[0], mode="linear") * 1.0

    f = C(resample)
    return (
        lambda i: f(data(i, 92).standard_normal((1, 2, 5)), np.array([7 if i < CHANGE[1] else 9]))
    ), lambda: {}


@case("sentence_vector_embedding_rows_no_grad", LONG)
def _(C):
    emb = nn.Embedding(20, 4, rng=1)

    def sentence_vector(tokens):
        with tt.no_grad():
            v = emb.weight[tokens[0]]
            for j in range(1, tokens.shape[0]):
                v = v + emb.weight[tokens[j]]
            return v / tokens.shape[0]

    f = C(sentence_vector)
    return (lambda i: f(data(i, 93).integers(0, 20, 3 if i < CHANGE[1] else 4))), lambda: mstate(emb)


@case("implicit_euler_newton_jacobian_times_dt", SHORT)
def _(C):
    def rhs(y):
        return tt.stack([-50.0 * (y[0] - tt.cos(y[1])), 1.0 + 0 * y[1]])

    def implicit_euler(y, dt):
        z = y
        for _ in range(3):
            G = z - y - rhs(z) * dt
            J = np.eye(2) - tt.jacobian(rhs)(z) * dt
            z = z - tt.linalg.solve(J, G)
        return z

    f = C(implicit_euler)
    hold = {"y": np.array([0.0, 0.0])}

    def step(i):
        hold["y"] = f(hold["y"], 0.1 if i < CHANGE[1] else 0.05)
        return hold["y"]

    return step, lambda: dict(hold)


@case("best_candidate_row_by_argmax_refined", SHORT)
def _(C):
    def refine(cands, scores):
        h = tt.tanh(cands)
        best = h[tt.argmax(scores)]
        best = best + 0.5
        return best + h[tt.argmax(scores)], h

    f = C(refine)

    def step(i):
        r = data(i, 94)
        return f(r.standard_normal((4, 3)), r.standard_normal(4))

    return step, lambda: {}


# --------------------------------------------------------------------------- the tests

OUTCOMES = {  # name -> (outcome, reason) for the cases that are not equal
    "gpt_greedy_generate_eval": ("refused", ""),
    "kmeans_step_argmin_assign": ("refused", ""),
    "mixup_beta_from_tt_rand": ("refused", ""),
    "ode_solve_ivp_rk45_decay": ("refused", ""),
    # (the ode_* fits with odeint, refused when the round was written, are equal since its
    # gradient became a line of the program; so is parameters_to_vector_flat_update_inside,
    # since vector_to_parameters inside a step writes each parameter as a program line)
    "seq2seq_greedy_decode_while_eos": ("refused", ""),
    "tbptt_lstm_hidden_in_dict_inside": ("refused", ""),
    "vae_numpy_generator_method_inside": ("refused", ""),
    "ode_stiff_forward_only_bdf_solve_ivp": ("refused", ""),   # solve_ivp: the solver's steps
    # failing cases: strict xfails; the reason is a repro and what differed
}

IDS = sorted(CASES)


def _params():
    out = []
    for name in IDS:
        if name in OUTCOMES and OUTCOMES[name][0] not in ("equal", "refused"):
            mark = pytest.mark.xfail(strict=True, reason=OUTCOMES[name][1])
            out.append(pytest.param(name, marks=mark, id=name))
        else:
            out.append(pytest.param(name, id=name))
    return out


@pytest.mark.parametrize("name", _params())
def test_round17b(name):
    build, n = CASES[name]
    outcome, detail = run_case(build, n)
    want = OUTCOMES.get(name, ("equal", ""))[0]
    if want == "refused":
        assert outcome == "refused", (outcome, detail)
    else:
        assert outcome == "equal", (outcome, detail)


def test_enough_cases():
    assert len(CASES) >= 100


if __name__ == "__main__":
    import sys
    import time

    names = sys.argv[1:] or IDS
    for name in names:
        t0 = time.perf_counter()
        try:
            outcome, detail = run_case(*CASES[name])
        except Exception as e:  # noqa: BLE001
            outcome, detail = "harness", f"{type(e).__name__}: {e}"
        print(f"{outcome:8s} {time.perf_counter() - t0:6.2f}s {name}: {detail[:400]}", flush=True)

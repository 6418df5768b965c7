"""A small character-level transformer step: tinytensor eager, tinytensor compiled, PyTorch eager.

The model is nanoGPT's block (pre-LayerNorm, causal self-attention with 4 heads, a GELU MLP of
width 4d, residuals, dropout 0.1), 2 layers, d = 64, vocabulary 65, batch 16 x 32 tokens, float32,
trained with AdamW (lr 3e-4, weight decay 0.1): one step is forward, backward and update. It is
written once as a function of a parameter dict over a small table of array functions, so every
framework runs the same program from the same initial weights:

* tt-eager: the parameters are Tensors; `loss.backward()`, then `tt.optim.AdamW.step()`;
* tt-compiled: `tt.compile(tt.value_and_grad(loss))(arrays, idx, targets)`, the gradients handed
  to the same `tt.optim.AdamW` (eager's numbers bit for bit); and with `fuse=True` (layer norm's
  and GELU's backward fused: gradients eager's to a few ulp);
* torch: the same function over `torch` (one thread), `torch.optim.AdamW` (its default,
  single-tensor-per-parameter "foreach" path on the CPU).

Before timing, the first loss and gradients of tinytensor (both styles, dropout off) are checked
against PyTorch's. Rounds are interleaved and the median over rounds is reported.

    python benchmarks/bench_transformer.py [--rounds 3] [--cpu-time] [--steps 5]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"   # one BLAS thread, set before NumPy loads

import argparse
import math
from types import SimpleNamespace

import numpy as np
from common import (
    CLOCK,
    format_ratio,
    format_time,
    gc_paused,
    machine_description,
    markdown_table,
    median,
    package_version,
    time_calls,
    use_cpu_clock,
)

import tinytensor as tt

CONFIG = SimpleNamespace(vocab=65, d=64, heads=4, layers=2, batch=16, context=32, dropout=0.1,
                         lr=3e-4, weight_decay=0.1)


def init_params(cfg=CONFIG, seed=0):
    """nanoGPT's initialisation, float32; matrices are stored (in, out): y = x @ W + b."""
    rng = np.random.default_rng(seed)
    d = cfg.d

    def normal(*shape, std=0.02):
        return (std * rng.standard_normal(shape)).astype(np.float32)

    p = {"wte": normal(cfg.vocab, d), "wpe": normal(cfg.context, d)}
    for i in range(cfg.layers):
        p.update({
            f"h{i}.ln1.w": np.ones(d, np.float32), f"h{i}.ln1.b": np.zeros(d, np.float32),
            f"h{i}.qkv.W": normal(d, 3 * d), f"h{i}.qkv.b": np.zeros(3 * d, np.float32),
            f"h{i}.proj.W": normal(d, d, std=0.02 / math.sqrt(2 * cfg.layers)),
            f"h{i}.proj.b": np.zeros(d, np.float32),
            f"h{i}.ln2.w": np.ones(d, np.float32), f"h{i}.ln2.b": np.zeros(d, np.float32),
            f"h{i}.fc.W": normal(d, 4 * d), f"h{i}.fc.b": np.zeros(4 * d, np.float32),
            f"h{i}.out.W": normal(4 * d, d, std=0.02 / math.sqrt(2 * cfg.layers)),
            f"h{i}.out.b": np.zeros(d, np.float32),
        })
    p.update({"lnf.w": np.ones(d, np.float32), "lnf.b": np.zeros(d, np.float32),
              "head.W": normal(d, cfg.vocab)})
    return p


def make_batch(cfg=CONFIG, seed=1):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, cfg.vocab, size=(cfg.batch, cfg.context + 1))
    return data[:, :-1], data[:, 1:]


def gpt_loss(F, cfg=CONFIG, training=True):
    """loss(params, idx, targets) over the array functions F."""
    d, nh = cfg.d, cfg.heads
    hs = d // nh
    scale = 1.0 / math.sqrt(hs)

    def layer_norm(x, w, b, eps=1e-5):
        mu = x.mean(-1, keepdims=True) if F.numpy_style else x.mean(-1, keepdim=True)
        xc = x - mu
        var = (xc * xc).mean(-1, keepdims=True) if F.numpy_style else (xc * xc).mean(-1, keepdim=True)
        return xc / F.sqrt(var + eps) * w + b

    def dropout(x):
        return F.dropout(x, cfg.dropout) if training and cfg.dropout else x

    def loss(p, idx, targets):
        B, T = idx.shape
        x = F.take(p["wte"], idx) + p["wpe"][:T]
        mask = F.causal_mask(T)
        for i in range(cfg.layers):
            h = layer_norm(x, p[f"h{i}.ln1.w"], p[f"h{i}.ln1.b"])
            qkv = h @ p[f"h{i}.qkv.W"] + p[f"h{i}.qkv.b"]
            q, k, v = (F.heads(qkv[..., j * d:(j + 1) * d], B, T, nh, hs) for j in range(3))
            att = (q @ F.swap_last(k)) * scale
            att = F.where(mask, att, -math.inf)
            att = dropout(F.softmax(att))
            y = F.merge_heads(att @ v, B, T, d)
            x = x + dropout(y @ p[f"h{i}.proj.W"] + p[f"h{i}.proj.b"])
            h = layer_norm(x, p[f"h{i}.ln2.w"], p[f"h{i}.ln2.b"])
            h = F.gelu(h @ p[f"h{i}.fc.W"] + p[f"h{i}.fc.b"])
            x = x + dropout(h @ p[f"h{i}.out.W"] + p[f"h{i}.out.b"])
        logits = layer_norm(x, p["lnf.w"], p["lnf.b"]) @ p["head.W"]
        return F.cross_entropy(logits.reshape(B * T, cfg.vocab), targets.reshape(B * T))

    return loss


def tinytensor_functions(seed=2):
    rng = np.random.default_rng(seed)
    causal = {}
    return SimpleNamespace(
        numpy_style=True, sqrt=tt.sqrt, softmax=lambda a: tt.softmax(a, axis=-1), where=tt.where,
        gelu=tt.nn.functional.gelu, cross_entropy=tt.nn.functional.cross_entropy,
        take=lambda W, idx: W[idx], swap_last=lambda a: tt.swapaxes(a, -1, -2),
        heads=lambda a, B, T, nh, hs: tt.transpose(tt.reshape(a, (B, T, nh, hs)), (0, 2, 1, 3)),
        merge_heads=lambda a, B, T, d: tt.reshape(tt.transpose(a, (0, 2, 1, 3)), (B, T, d)),
        causal_mask=lambda T: causal.setdefault(T, np.tril(np.ones((T, T), dtype=bool))),
        dropout=lambda a, p: tt.nn.functional.dropout(a, p, rng=rng))


def torch_functions():
    import torch
    import torch.nn.functional as tf
    causal = {}
    return SimpleNamespace(
        numpy_style=False, sqrt=torch.sqrt, softmax=lambda a: torch.softmax(a, dim=-1),
        where=torch.where, gelu=tf.gelu, cross_entropy=tf.cross_entropy,
        take=lambda W, idx: W[idx], swap_last=lambda a: a.transpose(-1, -2),
        heads=lambda a, B, T, nh, hs: a.reshape(B, T, nh, hs).transpose(1, 2),
        merge_heads=lambda a, B, T, d: a.transpose(1, 2).reshape(B, T, d),
        causal_mask=lambda T: causal.setdefault(T, torch.tril(torch.ones(T, T, dtype=torch.bool))),
        dropout=lambda a, p: tf.dropout(a, p, training=True))


# ----- the three steps ------------------------------------------------------------------------------------
def _decayed(names):
    """nanoGPT's two parameter groups: matrices decay, vectors and embeddings' biases don't."""
    return [n for n in names if n.endswith(".W") or n in ("wte", "wpe")]


def _groups(tensors, cfg):
    decay = set(_decayed(tensors))
    return [{"params": [t for n, t in tensors.items() if n in decay], "weight_decay": cfg.weight_decay},
            {"params": [t for n, t in tensors.items() if n not in decay], "weight_decay": 0.0}]


def _eager_steps(params, loss_fn, idx, targets, opt, to_numpy):
    """step() and first() of the object style (`loss.backward()`, `opt.step()`), which
    tinytensor and PyTorch share; `to_numpy` turns a gradient into a NumPy array."""
    def step():
        opt.zero_grad()
        loss = loss_fn(params, idx, targets)
        loss.backward()
        opt.step()
        return loss

    def first():
        loss = loss_fn(params, idx, targets)
        loss.backward()
        out = float(loss.item()), {k: to_numpy(p.grad).copy() for k, p in params.items()}
        opt.zero_grad()
        return out

    return step, first


def build_tt_eager(cfg=CONFIG, training=True):
    params = {k: tt.tensor(v, requires_grad=True) for k, v in init_params(cfg).items()}
    opt = tt.optim.AdamW(_groups(params, cfg), lr=cfg.lr)
    return _eager_steps(params, gpt_loss(tinytensor_functions(), cfg, training), *make_batch(cfg), opt,
                        np.asarray)


def build_tt_compiled(cfg=CONFIG, training=True, fuse=False):
    tensors = {k: tt.tensor(v, requires_grad=True) for k, v in init_params(cfg).items()}
    arrays = {k: t.data for k, t in tensors.items()}     # the optimizer updates these in place
    value_and_grad = tt.compile(tt.value_and_grad(gpt_loss(tinytensor_functions(), cfg, training)),
                                fuse=fuse)
    idx, targets = make_batch(cfg)
    opt = tt.optim.AdamW(_groups(tensors, cfg), lr=cfg.lr)

    def step():
        loss, grads = value_and_grad(arrays, idx, targets)
        for k, t in tensors.items():
            t.grad = grads[k]
        opt.step()
        return loss

    def first():
        loss, grads = value_and_grad(arrays, idx, targets)
        return float(loss), grads

    return step, first


def build_torch(cfg=CONFIG, training=True):
    import torch
    torch.set_num_threads(1)
    params = {k: torch.tensor(v, requires_grad=True) for k, v in init_params(cfg).items()}
    opt = torch.optim.AdamW(_groups(params, cfg), lr=cfg.lr)
    idx, targets = (torch.from_numpy(a) for a in make_batch(cfg))
    return _eager_steps(params, gpt_loss(torch_functions(), cfg, training), idx, targets, opt,
                        lambda g: g.numpy())


def build_tt_compiled_fused(cfg=CONFIG, training=True):
    return build_tt_compiled(cfg, training, fuse=True)


BUILDERS = {"tt-eager": build_tt_eager, "tt-compiled": build_tt_compiled,
            "tt-compiled, fuse=True": build_tt_compiled_fused, "torch": build_torch}


def check_against(reference, name, result):
    loss, grads = result
    ref_loss, ref_grads = reference
    assert abs(loss - ref_loss) < 1e-4 * abs(ref_loss), f"{name}: loss {loss} against {ref_loss}"
    for k, g in grads.items():
        np.testing.assert_allclose(g, ref_grads[k], rtol=2e-3, atol=1e-5,
                                   err_msg=f"{name}: gradient of {k} differs from the reference")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median reported)")
    parser.add_argument("--steps", type=int, default=5, help="steps per sample")
    parser.add_argument("--cpu-time", action="store_true", help="time with this process's CPU time")
    args = parser.parse_args()
    if args.cpu_time:
        use_cpu_clock()
    names = [n for n in BUILDERS if n != "torch" or package_version("torch")]
    versions = [("tinytensor", package_version("tinytensor"))]
    versions += [("torch", package_version("torch"))] if "torch" in names else []
    for line in machine_description(versions):
        print(line)
    print(f"clock: {CLOCK['name']}; {args.rounds} interleaved rounds of 5 samples of {args.steps} steps")
    print(f"model: {CONFIG.layers} layers, d={CONFIG.d}, {CONFIG.heads} heads, batch {CONFIG.batch} x "
          f"{CONFIG.context} tokens, vocabulary {CONFIG.vocab}, dropout {CONFIG.dropout}, AdamW, float32\n")

    # dropout off for the check: the frameworks' masks differ
    results = {n: BUILDERS[n](training=False)[1]() for n in names}
    reference = results.get("torch", results["tt-eager"])
    for n in names:
        check_against(reference, n, results[n])
    print("  first loss and gradients (dropout off) agree: " + ", ".join(
        f"{n} {results[n][0]:.6f}" for n in names))

    steps = {n: BUILDERS[n]()[0] for n in names}
    for step in steps.values():
        step()                             # warm-up: tt.compile traces here
    samples = {n: [] for n in names}
    with gc_paused():
        for _ in range(args.rounds):
            for n, step in steps.items():
                samples[n].append(median(time_calls(step, args.steps, 5)))
    result = {n: median(s) for n, s in samples.items()}
    rows = [[n, format_time(result[n]), format_ratio(result[n] / result["tt-eager"]),
             format_ratio(result[n] / result["torch"]) if "torch" in result else "—"] for n in names]
    print(markdown_table(["step", "median time", "/ tt-eager", "/ torch"], rows))
    spread = max(max(s) / min(s) for s in samples.values())
    print(f"\nnoise: the round medians of one framework differ by a factor of at most {spread:.2f}")


if __name__ == "__main__":
    main()

"""A character-level GPT
=====================

Train a small character-level GPT on public-domain text shipped with the repository.

    python examples/train_gpt.py                      # about a minute on one core; prints a sample
    python examples/train_gpt.py --steps 100          # stop early, checkpointing as it goes ...
    python examples/train_gpt.py --resume --steps 300 # ... and carry on, bit-identically
    python examples/train_gpt.py --sample-only --temperature 0.8   # sample from the checkpoint

A nanoGPT-style decoder written as a PyTorch user would write it: token and position Embeddings,
blocks of LayerNorm -> causal self-attention (F.scaled_dot_product_attention) -> LayerNorm -> MLP
with GELU, Dropout, a final LayerNorm and a Linear head tied to the token embedding; AdamW with two
parameter groups (weight decay on matrices only), warmup then cosine learning rate, gradient
clipping. The text (examples/data/public_domain.txt: Genesis 1, Psalm 23, Ecclesiastes 3, Lincoln,
the Declaration of Independence, Shakespeare; about 19 kB) is split 90/10 into train/validation.
Every --eval-every steps the model, optimizer, the global generator's state (tt.get_rng_state) and
the curves go to --checkpoint, so --resume continues exactly; --plot saves the loss curves.
--compile runs each step's forward and backward as one tt.compile program (its dropout masks drawn
anew on every call from the global generator, as eagerly: the same run). The last line printed is
a sample.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")          # small matrices: one BLAS thread is fastest
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tinytensor as tt  # noqa: E402
from tinytensor import nn  # noqa: E402
from tinytensor.nn import functional as F  # noqa: E402

QUICK = os.environ.get("TINYTENSOR_DOCS_QUICK") == "1"   # the docs build: fewer steps

# sphinx-gallery runs the examples from examples/, without __file__
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else os.getcwd()
TEXT = os.path.join(HERE, "data", "public_domain.txt")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--steps", type=int, default=None, help="stop after this step (default: --total-steps)")
    p.add_argument("--total-steps", type=int, default=20 if QUICK else 600,
                   help="length of the learning-rate schedule")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block-size", type=int, default=32, help="context length in characters")
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (AdamW)")
    p.add_argument("--warmup", type=int, default=5 if QUICK else 50,
                   help="linear warmup steps")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=10 if QUICK else 100,
                   help="validation loss and checkpoint period")
    p.add_argument("--seed", type=int, default=0, help="tt.manual_seed: init, batches and dropout")
    p.add_argument("--checkpoint", default="runs/train_gpt.npz")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    p.add_argument("--plot", nargs="?", const="runs/train_gpt.png", default=None,
                   help="save the loss curves (PNG) to this path")
    p.add_argument("--sample-chars", type=int, default=200, help="length of the sample printed at the end")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature (> 0)")
    p.add_argument("--sample-only", action="store_true", help="load --checkpoint and sample")
    p.add_argument("--compile", action="store_true", help="each step as one tt.compile program")
    p.add_argument("--device", default="cpu", help='"cpu" (NumPy) or "cuda" (CuPy)')
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


# ----- the model, as in PyTorch ----------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout):
        super().__init__()
        self.block_size = block_size
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([Block(n_embd, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight            # weight tying, as GPT-2
        for name, p in self.named_parameters():          # GPT-2's init
            if name.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.drop(self.wte(idx) + self.wpe(np.arange(T)))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    def generate(self, idx, n, temperature=1.0):
        """Extend idx (1, T) by n characters, each drawn from softmax(logits / temperature)."""
        self.eval()
        with tt.no_grad():
            for _ in range(n):
                logits = self(idx[:, -self.block_size:])[:, -1, :] / temperature
                probs = tt.softmax(logits, dim=-1)
                nxt = tt.multinomial(tt.backend.to_host(probs.data), num_samples=1).data
                idx = np.concatenate([idx, nxt], axis=1)
        self.train()
        return idx


# ----- data and the schedule -------------------------------------------------------------------------
def load_text():
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    n = int(0.9 * len(data))
    return chars, data[:n], data[n:]


def get_batch(data, batch_size, block_size):
    """Random windows (drawn from the global generator, tt.manual_seed) and their next characters."""
    ix = tt.rng.generator().integers(0, len(data) - block_size - 1, batch_size)
    x = np.stack([data[i:i + block_size] for i in ix])
    y = np.stack([data[i + 1:i + 1 + block_size] for i in ix])
    return x, y


def lr_at(step, args):
    """Linear warmup to --lr, then cosine decay to a tenth of it at --total-steps."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, args.total_steps - args.warmup))
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def estimate_val(model, data, args, batches=4):
    model.eval()
    rng_state = tt.get_rng_state()                    # evaluating must not shift the training draws
    tt.manual_seed(1234)
    with tt.no_grad():
        losses = [model(*get_batch(data, args.batch_size, args.block_size))[1].item() for _ in range(batches)]
    tt.set_rng_state(rng_state)
    model.train()
    return float(np.mean(losses))


def compiled_step(model):
    """(loss, gradients by name) as one compiled program of the parameters and a batch."""
    def loss_of(params, x, y):
        return nn.functional_call(model, params, x, y)[1]
    return tt.compile(tt.value_and_grad(loss_of))


def save_plot(history, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(history["step"], history["train"], label="train (running mean)")
    ax.plot(history["eval_step"], history["val"], "o-", label="validation")
    ax.set(xlabel="step", ylabel="cross-entropy (nats/char)", title="char GPT (tinytensor)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def progress(total, initial, quiet):
    try:
        from tqdm import tqdm
    except ImportError:                                # no tqdm: a plain counter
        return None
    return tqdm(total=total, initial=initial, unit="step", disable=quiet, dynamic_ncols=True)


def main(argv=None):
    args = parse_args(argv)
    tt.manual_seed(args.seed)
    chars, train, val = load_text()
    model = GPT(len(chars), args.block_size, args.n_layer, args.n_head, args.n_embd, args.dropout)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = tt.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                          {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.99))
    model.to(args.device)
    history = {"step": [], "train": [], "eval_step": [], "val": []}
    start = 0
    if args.resume or args.sample_only:
        ckpt = tt.load(args.checkpoint)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        tt.set_rng_state(ckpt["rng"])
        history, start = ckpt["history"], ckpt["step"]
        print(f"resumed from {args.checkpoint} after step {start}")
    stop = args.total_steps if args.steps is None else min(args.steps, args.total_steps)
    step_fn = compiled_step(model) if args.compile else None
    names = [name for name, _ in model.named_parameters()]
    bar = progress(stop, start, args.quiet) if not args.sample_only else None
    running, times = (history["train"][-1] if history["train"] else None), []
    for step in range(start, stop if not args.sample_only else start):
        t0 = time.process_time()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        x, y = (tt.backend.to_device(a, args.device)
                for a in get_batch(train, args.batch_size, args.block_size))
        if step_fn is None:
            _, loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            loss = loss.item()
        else:
            loss, grads = step_fn({n: p.data for n, p in model.named_parameters()}, x, y)
            for n, p in zip(names, model.parameters()):
                p.grad = grads[n]
            loss = float(loss)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.process_time() - t0)
        running = loss if running is None else 0.95 * running + 0.05 * loss
        history["step"].append(step + 1)
        history["train"].append(running)
        if bar is not None:
            bar.set_postfix(loss=f"{running:.3f}", lr=f"{lr_at(step, args):.2e}", refresh=False)
            bar.update()
        evaluate = (step + 1) % args.eval_every == 0 or step + 1 == args.total_steps
        if evaluate:
            history["eval_step"].append(step + 1)
            history["val"].append(estimate_val(model, val, args))
        if evaluate or step + 1 == stop:
            os.makedirs(os.path.dirname(args.checkpoint) or ".", exist_ok=True)
            tt.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": tt.get_rng_state(),
                     "history": history, "step": step + 1}, args.checkpoint)
    if bar is not None:
        bar.close()
    if times:
        ms = 1000 * float(np.median(times))
        val_text = f"{history['val'][-1]:.3f}" if history["val"] else "not yet measured"
        print(f"steps {start + 1}..{stop}: train loss {history['train'][-1]:.3f}, validation loss "
              f"{val_text} (nats/char), {ms:.1f} ms CPU time per step (median)")
    if args.plot:
        save_plot(history, args.plot)
        print(f"loss curves saved to {args.plot}")
    rng_state = tt.get_rng_state()
    tt.manual_seed(args.seed + 1)                     # the sample does not move the training stream
    stoi = {c: i for i, c in enumerate(chars)}
    prompt = np.array([[stoi[c] for c in "And "]], dtype=np.int64)
    out = model.generate(prompt, args.sample_chars, temperature=args.temperature)
    tt.set_rng_state(rng_state)
    sample = "".join(chars[i] for i in out[0])
    print(sample.replace("\n", " / "))
    return history, sample


if __name__ == "__main__":
    main()

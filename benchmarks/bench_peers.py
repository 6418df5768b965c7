"""tinytensor against a hand-written NumPy forward/backward and, where installed, its peers.

tinytensor runs in three styles: object style (`loss.backward()` on Tensors, then SGD on
`p.data`), functional (`loss, grads = tt.value_and_grad(f)(params, x, y)` on plain arrays,
updated in place: tt-functional) and define-then-run (that function through `tt.compile`:
tt-compiled). The peers: eager PyTorch, HIPS autograd, JAX (jit and eager) and micrograd. All run the same
SGD step (forward, backward, update) from the same data and initial weights in float32
(micrograd: Python floats), one thread each:

* the lecture's logistic regression crossEntropy(softmax(x·W), y) + frobeniusNorm(W), 784
  features, 10 classes, at batch 1, 32 and 256;
* an MLP 784-256-128-10 with relu and softmax cross-entropy, at batch 64 and 256;
* an MLP 2-16-16-1 with tanh and MSE, at batch 64;
* a chain of 200 elementwise ops (x*c, x+c, tanh, ...) on a (1,) tensor, forward and backward
  only: the per-op cost of each framework.

The hand-written NumPy step is the floor for any NumPy-backed framework: written as an expert
would (every temporary reused in place, scalar factors folded before they touch an array, the
update in place; `tight_numpy_step`), so a ratio near 1 means what it says. Every framework's
first gradient is checked against it before anything is timed. Rounds are interleaved (each
round times every framework once, with many repeats) and the medians over the rounds are
reported, with the ratio to the NumPy floor.

    python benchmarks/bench_peers.py [--rounds 3] [--quick] [--only tinytensor,torch,chain-200] [--cpu-time]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"   # one BLAS thread, set before NumPy loads
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import math
import sys
import time
from types import SimpleNamespace

import numpy as np
from common import (
    CLOCK,
    calibrate,
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

LR = 0.01
CHAIN = [("mul", 0.9), ("add", 0.1), ("tanh", None)]   # repeated: op i is CHAIN[i % 3]
CHAIN_OPS = 200


# ----- the problems: the same data and initial weights for everyone ---------------------------------
def _uniform(rng, fan_in, shape):
    bound = 1 / math.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def _mlp_params(rng, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        params += [_uniform(rng, fan_in, (fan_in, fan_out)), _uniform(rng, fan_in, fan_out)]
    return params


def make_problem(kind, batch, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "logreg":
        params = [(0.01 * rng.standard_normal((784, 10))).astype(np.float32)]
    elif kind in ("mlp", "mlp-small"):
        params = _mlp_params(rng, [784, 256, 128, 10] if kind == "mlp" else [784, 16, 16, 10])
        kind = "mlp"
    elif kind == "tanh-mlp":
        params = _mlp_params(rng, [2, 16, 16, 1])
    else:
        params = [np.array([0.5], dtype=np.float32)]
    if kind in ("logreg", "mlp"):
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        labels = rng.integers(0, 10, size=batch)
        onehot = np.eye(10, dtype=np.float32)[labels]
        return SimpleNamespace(kind=kind, params=params, x=x, labels=labels, onehot=onehot, y=None)
    if kind == "tanh-mlp":
        x = rng.standard_normal((batch, 2)).astype(np.float32)
        y = (np.sin(x[:, :1]) * np.cos(x[:, 1:])).astype(np.float32)
        return SimpleNamespace(kind=kind, params=params, x=x, y=y, labels=None, onehot=None)
    return SimpleNamespace(kind=kind, params=params, x=None, y=None, labels=None, onehot=None)


WORKLOADS = {   # name: (kind, batch, description)
    "logreg-b1": ("logreg", 1, "logistic regression 784→10, batch 1"),
    "logreg-b32": ("logreg", 32, "logistic regression 784→10, batch 32"),
    "logreg-b256": ("logreg", 256, "logistic regression 784→10, batch 256"),
    "mlp-b64": ("mlp", 64, "MLP 784-256-128-10 relu, batch 64"),
    "mlp-b256": ("mlp", 256, "MLP 784-256-128-10 relu, batch 256"),
    "mlp-small-b64": ("mlp-small", 64, "MLP 784-16-16-10 relu, batch 64"),
    "tanh-mlp-b64": ("tanh-mlp", 64, "MLP 2-16-16-1 tanh MSE, batch 64"),
    "chain-200": ("chain", 1, "200 elementwise ops on a (1,) tensor, fwd+bwd"),
}


# ----- the floor: NumPy, forward and backward by hand ------------------------------------------------
def _softmax_xent_grad(z, labels):
    """Mean softmax cross-entropy of logits z (B, C) and its gradient with respect to z."""
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    rows = np.arange(len(z))
    loss = -np.mean(np.log(p[rows, labels]))
    p[rows, labels] -= 1
    return loss, p / len(z)


def numpy_loss_and_grads(prob, params):
    if prob.kind == "logreg":
        (W,) = params
        loss, dz = _softmax_xent_grad(prob.x @ W, prob.labels)
        norm = np.sqrt(np.sum(W * W))
        return loss + norm, [prob.x.T @ dz + W / norm]
    if prob.kind == "mlp":
        W1, b1, W2, b2, W3, b3 = params
        a1 = prob.x @ W1 + b1
        h1 = np.maximum(a1, 0)
        a2 = h1 @ W2 + b2
        h2 = np.maximum(a2, 0)
        loss, dz = _softmax_xent_grad(h2 @ W3 + b3, prob.labels)
        da2 = (dz @ W3.T) * (a2 > 0)
        da1 = (da2 @ W2.T) * (a1 > 0)
        return loss, [prob.x.T @ da1, da1.sum(0), h1.T @ da2, da2.sum(0), h2.T @ dz, dz.sum(0)]
    if prob.kind == "tanh-mlp":
        W1, b1, W2, b2, W3, b3 = params
        h1 = np.tanh(prob.x @ W1 + b1)
        h2 = np.tanh(h1 @ W2 + b2)
        r = h2 @ W3 + b3 - prob.y
        dpred = (2 / r.size) * r
        da2 = (dpred @ W3.T) * (1 - h2 * h2)
        da1 = (da2 @ W2.T) * (1 - h1 * h1)
        return np.mean(r * r), [prob.x.T @ da1, da1.sum(0), h1.T @ da2, da2.sum(0), h2.T @ dpred,
                                dpred.sum(0)]
    (v,) = params
    saved = []
    for i in range(CHAIN_OPS):
        op, c = CHAIN[i % 3]
        v = v * c if op == "mul" else v + c if op == "add" else np.tanh(v)
        saved.append(v)
    g = np.ones_like(v)
    for i in reversed(range(CHAIN_OPS)):
        op, c = CHAIN[i % 3]
        if op == "mul":
            g = g * c
        elif op == "tanh":
            g = g * (1 - saved[i] * saved[i])
    return np.sum(v), [g]


def _xent_grad_in_place(z, labels):
    """The mean softmax cross-entropy of logits z (B, C), and its gradient written over z."""
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    rows = np.arange(len(z))
    loss = -np.log(z[rows, labels]).mean()
    z[rows, labels] -= 1
    z *= 1 / len(z)
    return loss


def tight_numpy_step(prob, params):
    """The step as an expert writes it by hand: every temporary reused in place, scalar factors
    folded before they touch an array, the update in place (the floor the ratios are taken to)."""
    x, labels = prob.x, prob.labels
    if prob.kind == "logreg":
        (W,) = params

        def step():
            dz = x @ W
            loss = _xent_grad_in_place(dz, labels)
            flat = W.reshape(-1)
            norm = np.sqrt(flat @ flat)
            g = x.T @ dz
            g *= LR
            np.multiply(W, 1 - LR / norm, out=W)     # W -= LR * W / norm, one pass
            np.subtract(W, g, out=W)
            return loss + norm
        return step
    if prob.kind == "mlp":
        W1, b1, W2, b2, W3, b3 = params

        def step():
            h1 = x @ W1
            h1 += b1
            np.maximum(h1, 0, out=h1)
            h2 = h1 @ W2
            h2 += b2
            np.maximum(h2, 0, out=h2)
            dz = h2 @ W3
            dz += b3
            loss = _xent_grad_in_place(dz, labels)
            dh2 = dz @ W3.T
            dh2 *= h2 > 0
            dh1 = dh2 @ W2.T
            dh1 *= h1 > 0
            for p, g in ((W3, h2.T @ dz), (b3, dz.sum(0)), (W2, h1.T @ dh2), (b2, dh2.sum(0)),
                         (W1, x.T @ dh1), (b1, dh1.sum(0))):
                g *= LR
                p -= g
            return loss
        return step
    if prob.kind == "tanh-mlp":
        W1, b1, W2, b2, W3, b3 = params
        y = prob.y

        def step():
            h1 = x @ W1
            h1 += b1
            np.tanh(h1, out=h1)
            h2 = h1 @ W2
            h2 += b2
            np.tanh(h2, out=h2)
            r = h2 @ W3
            r += b3
            r -= y
            loss = np.mean(r * r)
            r *= 2 / r.size
            da2 = r @ W3.T
            da2 *= 1 - h2 * h2
            da1 = da2 @ W2.T
            da1 *= 1 - h1 * h1
            for p, g in ((W3, h2.T @ r), (b3, r.sum(0)), (W2, h1.T @ da2), (b2, da2.sum(0)),
                         (W1, x.T @ da1), (b1, da1.sum(0))):
                g *= LR
                p -= g
            return loss
        return step
    return lambda: numpy_loss_and_grads(prob, params)


def build_numpy(prob):
    if prob.kind != "chain":      # the tight step's update is the plain one's, to rounding
        tight = [p.copy() for p in prob.params]
        tight_numpy_step(prob, tight)()
        _, grads = numpy_loss_and_grads(prob, [p.copy() for p in prob.params])
        for p, q, g in zip(tight, prob.params, grads):
            np.testing.assert_allclose(p, q - LR * g, rtol=1e-5, atol=1e-6)
    step = tight_numpy_step(prob, [p.copy() for p in prob.params])
    return lambda: numpy_loss_and_grads(prob, [p.copy() for p in prob.params])[1], step


# ----- the four models, once, over any array framework's functions (F) --------------------------------
def loss_fn(F, kind):
    if kind == "logreg":   # the lecture's: crossEntropy(softmax(x · W), y) + frobeniusNorm(W)
        return lambda params, x, y: F.xent(F.dot(x, params[0]), y) + F.norm(params[0])
    if kind == "mlp":
        def mlp(params, x, y):
            W1, b1, W2, b2, W3, b3 = params
            h = F.relu(x @ W1 + b1)
            h = F.relu(h @ W2 + b2)
            return F.xent(h @ W3 + b3, y)
        return mlp
    if kind == "tanh-mlp":
        def tanh_mlp(params, x, y):
            W1, b1, W2, b2, W3, b3 = params
            h = F.tanh(x @ W1 + b1)
            h = F.tanh(h @ W2 + b2)
            r = h @ W3 + b3 - y
            return F.mean(r * r)
        return tanh_mlp

    def chain(params, x, y):
        (v,) = params
        for i in range(CHAIN_OPS):
            op, c = CHAIN[i % 3]
            v = v * c if op == "mul" else v + c if op == "add" else F.tanh(v)
        return F.sum(v)
    return chain


def _targets(prob, onehot):
    if prob.kind in ("logreg", "mlp"):
        return prob.onehot if onehot else prob.labels
    return prob.y


def build_tinytensor(prob):
    F = SimpleNamespace(dot=tt.dot, relu=tt.relu, tanh=tt.tanh, mean=tt.mean, sum=tt.sum,
                        norm=tt.frobeniusNorm, xent=lambda z, y: tt.crossEntropy(tt.softmax(z), y))
    f = loss_fn(F, prob.kind)
    x = None if prob.x is None else tt.tensor(prob.x)
    y = _targets(prob, onehot=False)
    y = tt.tensor(y) if y is not None and y.dtype.kind == "f" else y
    params = [tt.tensor(p, requires_grad=True) for p in prob.params]

    def step():
        f(params, x, y).backward()
        for p in params:
            if prob.kind != "chain":
                p.data -= LR * p.grad    # SGD in place, off the tape
            p.grad = None

    def grads():
        fresh = [tt.tensor(p, requires_grad=True) for p in prob.params]
        f(fresh, x, y).backward()
        return [p.grad for p in fresh]

    return grads, step


COMPILED = []   # the compiled steps, for their first-call (trace + codegen) times


def _tinytensor_functional(prob, compiled):
    """The same step written functionally: loss, grads = tt.value_and_grad(f)(params, x, y) on
    plain arrays, updated in place; with `compiled`, that function through tt.compile."""
    F = SimpleNamespace(dot=tt.dot, relu=tt.relu, tanh=tt.tanh, mean=tt.mean, sum=tt.sum,
                        norm=tt.frobeniusNorm, xent=lambda z, y: tt.crossEntropy(tt.softmax(z), y))
    value_and_grad = tt.value_and_grad(loss_fn(F, prob.kind))
    if compiled:
        value_and_grad = tt.compile(value_and_grad)
        COMPILED.append(value_and_grad)
    y = _targets(prob, onehot=False)
    params = [p.copy() for p in prob.params]

    def step():
        _, grads = value_and_grad(params, prob.x, y)
        if prob.kind != "chain":
            for p, g in zip(params, grads):
                p -= LR * g      # in place: a compiled step sees the new values

    return lambda: value_and_grad([p.copy() for p in prob.params], prob.x, y)[1], step


def build_tinytensor_functional(prob):
    return _tinytensor_functional(prob, compiled=False)


def build_tinytensor_compiled(prob):
    return _tinytensor_functional(prob, compiled=True)


def build_tinytensor_whole_step(prob):
    """The whole training step compiled, as a PyTorch user writes it: zero_grad, the loss of
    parameters held as Tensors (closed over), backward() and optimizer.step() (SGD) inside
    tt.compile; the step's own update, in place, is a line of the program."""
    F = SimpleNamespace(dot=tt.dot, relu=tt.relu, tanh=tt.tanh, mean=tt.mean, sum=tt.sum,
                        norm=tt.frobeniusNorm, xent=lambda z, y: tt.crossEntropy(tt.softmax(z), y))
    f = loss_fn(F, prob.kind)
    y = _targets(prob, onehot=False)

    def make(arrays):
        params = [tt.tensor(p.copy(), requires_grad=True) for p in arrays]
        opt = tt.optim.SGD(params, lr=LR if prob.kind != "chain" else 0.0)

        def train_step(x, y):
            opt.zero_grad()
            loss = f(params, x, y)
            loss.backward()
            opt.step()
            return loss
        return params, tt.compile(train_step)

    params, step = make(prob.params)
    COMPILED.append(step)

    def grads():
        fresh, once = make(prob.params)
        once(prob.x, y)
        return [p.grad for p in fresh]

    return grads, lambda: step(prob.x, y)


def build_torch(prob):
    import torch
    import torch.nn.functional as tf
    torch.set_num_threads(1)
    F = SimpleNamespace(dot=torch.matmul, relu=torch.relu, tanh=torch.tanh, mean=torch.mean, sum=torch.sum,
                        norm=torch.linalg.norm, xent=tf.cross_entropy)
    f = loss_fn(F, prob.kind)
    x = None if prob.x is None else torch.from_numpy(prob.x)
    y = _targets(prob, onehot=False)
    y = None if y is None else torch.from_numpy(y.astype(np.int64) if y.dtype.kind == "i" else y)
    params = [torch.tensor(p, requires_grad=True) for p in prob.params]

    def step():
        f(params, x, y).backward()
        with torch.no_grad():
            for p in params:
                if prob.kind != "chain":
                    p -= LR * p.grad
                p.grad = None

    def grads():
        fresh = [torch.tensor(p, requires_grad=True) for p in prob.params]
        f(fresh, x, y).backward()
        return [p.grad.numpy() for p in fresh]

    return grads, step


def build_autograd(prob):
    import autograd
    import autograd.numpy as anp
    from autograd.scipy.special import logsumexp

    def xent(z, onehot):
        return -anp.mean(anp.sum(onehot * (z - logsumexp(z, axis=1, keepdims=True)), axis=1))

    F = SimpleNamespace(dot=anp.dot, relu=lambda a: anp.maximum(a, 0), tanh=anp.tanh, mean=anp.mean,
                        sum=anp.sum, norm=lambda W: anp.sqrt(anp.sum(W * W)), xent=xent)
    f = loss_fn(F, prob.kind)
    gradient = autograd.grad(f)
    y = _targets(prob, onehot=True)
    params = [p.copy() for p in prob.params]

    def step():
        for p, g in zip(params, gradient(params, prob.x, y)):
            if prob.kind != "chain":
                p -= LR * g

    return lambda: gradient([p.copy() for p in prob.params], prob.x, y), step


def _jax_functions():
    import jax
    import jax.numpy as jnp

    def xent(z, onehot):
        return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(z, axis=1), axis=1))

    return SimpleNamespace(dot=jnp.dot, relu=jax.nn.relu, tanh=jnp.tanh, mean=jnp.mean, sum=jnp.sum,
                           norm=lambda W: jnp.sqrt(jnp.sum(W * W)), xent=xent)


def _build_jax(prob, jit):
    import jax
    import jax.numpy as jnp
    f = loss_fn(_jax_functions(), prob.kind)
    rate = 0.0 if prob.kind == "chain" else LR   # the chain times forward+backward only

    def update(params, x, y):
        return [p - rate * g for p, g in zip(params, jax.grad(f)(params, x, y))]

    update = jax.jit(update) if jit else update
    gradient = jax.jit(jax.grad(f)) if jit else jax.grad(f)
    x = None if prob.x is None else jnp.asarray(prob.x)
    y = _targets(prob, onehot=True)
    y = None if y is None else jnp.asarray(y)
    state = [[jnp.asarray(p) for p in prob.params]]

    def step():
        state[0] = jax.block_until_ready(update(state[0], x, y))

    def grads():
        return [np.asarray(g) for g in gradient([jnp.asarray(p) for p in prob.params], x, y)]

    return grads, step


def build_jax_jit(prob):
    return _build_jax(prob, jit=True)


def build_jax_eager(prob):
    return _build_jax(prob, jit=False)


def build_micrograd(prob):
    """micrograd's Value: one Python object per number. Version 0.1.0 has no tanh, exp or log, so
    they are added here the way its own ops are written (a new Value and its _backward)."""
    from micrograd.engine import Value
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))   # its topological sort recurses

    def unary(v, value, derivative):
        out = Value(value, (v,), "f")

        def _backward():
            v.grad += derivative * out.grad
        out._backward = _backward
        return out

    def tanh(v):
        t = math.tanh(v.data)
        return unary(v, t, 1 - t * t)

    def exp(v):
        e = math.exp(v.data)
        return unary(v, e, e)

    def log(v):
        return unary(v, math.log(v.data), 1 / v.data)

    def linear(inputs, W, b):
        return [sum((x * w_row[j] for x, w_row in zip(inputs, W)), b[j] if b else Value(0.0))
                for j in range(len(W[0]))]

    def loss(params, x, y):
        if prob.kind == "logreg":
            (W,) = params
            total = Value(0.0)
            for row, label in zip(x, prob.labels):
                z = linear([Value(v) for v in row], W, None)
                shift = max(v.data for v in z)          # a constant: softmax is unchanged by it
                e = [exp(v - shift) for v in z]
                total = total - log(e[label] / sum(e[1:], e[0]))
            return total / len(x) + sum((w * w for row in W for w in row), Value(0.0)) ** 0.5
        if prob.kind == "tanh-mlp":
            W1, b1, W2, b2, W3, b3 = params
            total = Value(0.0)
            for row, target in zip(x, y):
                h = [tanh(v) for v in linear([Value(v) for v in row], W1, b1)]
                h = [tanh(v) for v in linear(h, W2, b2)]
                (pred,) = linear(h, W3, b3)
                r = pred - float(target[0])
                total = total + r * r
            return total / len(x)
        (v,) = params
        v = v[0]
        for i in range(CHAIN_OPS):
            op, c = CHAIN[i % 3]
            v = v * c if op == "mul" else v + c if op == "add" else tanh(v)
        return v

    def values(array):
        return [values(a) for a in array] if np.ndim(array) > 1 else [Value(float(a)) for a in array]

    def leaves(params):
        return [v for p in params for v in (p if not isinstance(p[0], list) else
                                            [w for row in p for w in row])]

    x = None if prob.x is None else prob.x.astype(float).tolist()
    y = None if prob.y is None else prob.y.astype(float).tolist()
    params = [values(p) for p in prob.params]

    def step():
        for p in leaves(params):
            p.grad = 0.0
        loss(params, x, y).backward()
        if prob.kind != "chain":
            for p in leaves(params):
                p.data -= LR * p.grad

    def grads():
        fresh = [values(p) for p in prob.params]
        loss(fresh, x, y).backward()
        return [np.array([[w.grad for w in row] for row in p]) if isinstance(p[0], list)
                else np.array([w.grad for w in p]) for p in fresh]

    return grads, step


FRAMEWORKS = {   # name: (builder, the distribution that must be installed, workloads it runs)
    "numpy": (build_numpy, None, None),
    "tinytensor": (build_tinytensor, None, None),
    "tt-functional": (build_tinytensor_functional, None, None),
    "tt-compiled": (build_tinytensor_compiled, None, None),
    "tt-whole-step": (build_tinytensor_whole_step, None, None),
    "torch": (build_torch, "torch", None),
    "autograd": (build_autograd, "autograd", None),
    "jax-jit": (build_jax_jit, "jax", None),
    "jax-eager": (build_jax_eager, "jax", None),
    # one Python object per number: only where a step builds at most ~10^5 of them
    "micrograd": (build_micrograd, "micrograd", {"logreg-b1", "tanh-mlp-b64", "chain-200"}),
}


def check_gradients(name, workload, grads, reference, scalar):
    for i, (g, r) in enumerate(zip(grads, reference)):
        g = np.asarray(g)
        assert g.shape == r.shape, f"{name} {workload}: gradient {i} has shape {g.shape}, not {r.shape}"
        if not scalar:
            assert g.dtype == np.float32, f"{name} {workload}: gradient {i} is {g.dtype}, not float32"
        scale = float(np.max(np.abs(r))) or 1.0
        np.testing.assert_allclose(g, r, rtol=2e-3, atol=2e-5 * scale,
                                   err_msg=f"{name} {workload}: gradient {i} differs from NumPy's")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median reported)")
    parser.add_argument("--quick", action="store_true", help="1 round, short repeats")
    parser.add_argument("--only", default="", help="comma-separated frameworks and/or workloads "
                        f"(frameworks: {', '.join(FRAMEWORKS)}; workloads: {', '.join(WORKLOADS)})")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this process's CPU time (for a machine shared with other jobs)")
    args = parser.parse_args()
    if args.cpu_time:
        use_cpu_clock()
    rounds, repeats, min_time = (1, 3, 0.02) if args.quick else (args.rounds, 7, 0.05)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = only - set(FRAMEWORKS) - set(WORKLOADS)
    if unknown:
        parser.error(f"--only: unknown names {sorted(unknown)}")
    frameworks = [f for f in FRAMEWORKS if f == "numpy" or not (only & set(FRAMEWORKS)) or f in only]
    workloads = [w for w in WORKLOADS if not (only & set(WORKLOADS)) or w in only]

    missing = [f for f in frameworks if FRAMEWORKS[f][1] and package_version(FRAMEWORKS[f][1]) is None]
    frameworks = [f for f in frameworks if f not in missing]
    versions = [("tinytensor", package_version("tinytensor"))]
    versions += [(d, package_version(d)) for d in ("torch", "autograd", "jax", "jaxlib", "micrograd")
                 if package_version(d)]
    for line in machine_description(versions):
        print(line)
    print(f"threads: torch.set_num_threads(1); XLA_FLAGS={os.environ['XLA_FLAGS']}")
    if missing:
        print(f"not installed, skipped: {', '.join(missing)}")
    print(f"clock: {CLOCK['name']}")
    print(f"protocol: {rounds} interleaved round(s), each {repeats} samples of >= {min_time * 1e3:.0f} ms "
          f"per framework and workload; median over rounds of the per-round medians; "
          f"garbage collector paused while timing\n")

    # Build every step and check its first gradient against NumPy's before timing anything.
    steps = {}
    for w in workloads:
        kind, batch, _ = WORKLOADS[w]
        prob = make_problem(kind, batch)
        reference = numpy_loss_and_grads(prob, [p.copy() for p in prob.params])[1]
        for f in frameworks:
            builder, _, runs = FRAMEWORKS[f]
            if runs is not None and w not in runs:
                continue
            grads, step = builder(prob)
            check_gradients(f, w, grads(), reference, scalar=(f == "micrograd"))
            with gc_paused():
                step()                                  # warm-up (and JAX's compilation)
                number = calibrate(step, min_time)
            steps[w, f] = (step, number)
        print(f"  {w}: gradients of {', '.join(f for f in frameworks if (w, f) in steps)} match NumPy's",
              flush=True)

    start = time.perf_counter()
    per_round = {key: [] for key in steps}
    for r in range(rounds):
        for w in workloads:
            for f in frameworks:
                if (w, f) in steps:
                    step, number = steps[w, f]
                    with gc_paused():
                        per_round[w, f].append(median(time_calls(step, number, repeats)))
        print(f"  round {r + 1}/{rounds} done ({time.perf_counter() - start:.0f} s)", flush=True)
    result = {key: median(times) for key, times in per_round.items()}

    rows = []
    for w in workloads:
        floor = result[w, "numpy"]
        row = [w]
        for f in frameworks:
            t = result.get((w, f))
            row.append("—" if t is None else
                       format_time(t) if f == "numpy" else f"{format_time(t)} ({format_ratio(t / floor)})")
        rows.append(row)
    print("\nMedian time per SGD step (forward + backward + update; the chain: forward + backward), "
          "and in brackets the ratio to the hand-written NumPy step:\n")
    print(markdown_table(["workload"] + frameworks, rows))
    if "chain-200" in workloads:
        print("\nPer elementwise op on the chain (time / 200): " + ", ".join(
            f"{f} {format_time(result['chain-200', f] / CHAIN_OPS)}"
            for f in frameworks if ("chain-200", f) in result))
    if "tt-compiled" in frameworks:
        traced = [w for w in workloads if (w, "tt-compiled") in steps]
        print("\ntt-compiled, first call (trace + code generation), once per shape: " + ", ".join(
            f"{w} {format_time(c.trace_seconds)}" for w, c in zip(traced, COMPILED)))
    spread = {key: max(times) / min(times) for key, times in per_round.items()}
    worst = max(spread, key=spread.get)
    print(f"\nnoise: the round medians of one cell differ by a factor of {median(spread.values()):.2f} "
          f"(median over cells), at most {spread[worst]:.2f} ({worst[1]} on {worst[0]})")
    print("\nworkloads: " + "; ".join(f"{w}: {WORKLOADS[w][2]}" for w in workloads))


if __name__ == "__main__":
    main()

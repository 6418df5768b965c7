"""tt.vmap on what a NumPy/JAX user writes for one example: each function against a loop over the
examples (values to 1e-12), and its per-example gradient against a loop of tt.grad."""

import numpy as np
import pytest

import tinytensor as tt

R = np.random.default_rng(0)
X = R.standard_normal((4, 3, 5))

CASES = {
    "T": lambda x: x.T,
    "sum0": lambda x: x.sum(axis=0),
    "mean": lambda x: x.mean(),
    "reshape": lambda x: x.reshape(-1),
    "none": lambda x: x[..., None],
    "col": lambda x: x[:, 0],
    "neg_idx": lambda x: x[-1, 1:4:2],
    "fancy": lambda x: x[np.array([0, 2, 2])],
    "fancy2": lambda x: x[[0, 1], [1, 2]],
    "concat": lambda x: np.concatenate([x, 2 * x], axis=1),
    "stack": lambda x: tt.stack([x, x], axis=-1),
    "astype": lambda x: x.astype(np.float32),
    "where": lambda x: tt.where(x > 0, x, 0.0),
    "maximum": lambda x: tt.maximum(x, 0),
    "npexp": lambda x: np.exp(x),
    "matmul": lambda x: x @ x.T,
    "einsum": lambda x: tt.einsum("ij,kj->ik", x, x),
    "norm": lambda x: tt.linalg.norm(x),
    "lse": lambda x: tt.logsumexp(x, axis=1),
    "max": lambda x: x.max(),
    "argmax": lambda x: np.argmax(x, axis=1),
    "softmax": lambda x: tt.softmax(x),
    "cumsum": lambda x: tt.cumsum(x, axis=1),
    "var": lambda x: tt.var(x, axis=0),
    "clip": lambda x: tt.clip(x, -0.5, 0.5),
    "pad": lambda x: tt.pad(x, 1),
    "flip": lambda x: tt.flip(x),
    "swap": lambda x: tt.swapaxes(x, 0, 1),
    "moveaxis": lambda x: tt.moveaxis(x, 0, -1),
    "expand": lambda x: tt.expand_dims(x, 0),
    "squeeze": lambda x: tt.squeeze(x[None]),
    "ravel": lambda x: tt.ravel(x),
    "split": lambda x: tt.split(x, 5, axis=1)[2],
    "tile": lambda x: tt.tile(x, (2, 1)),
    "repeat": lambda x: tt.repeat(x, 2, axis=0),
    "roll": lambda x: tt.roll(x, 1),
    "trace": lambda x: tt.trace(x[:, :3]),
    "diagonal": lambda x: tt.diagonal(x[:, :3]),
    "outer": lambda x: tt.outer(x[0], x[1]),
    "tril": lambda x: tt.tril(x),
    "prod": lambda x: tt.prod(x, axis=1),
    "std": lambda x: tt.std(x),
    "sort": lambda x: np.sort(x, axis=1),
    "take": lambda x: tt.take(x, np.array([0, 2]), axis=1),
    "tal": lambda x: tt.take_along_axis(x, np.argsort(x, axis=1), axis=1),
    "kron": lambda x: tt.kron(x[:2, :2], x[:2, :2]),
    "tensordot": lambda x: tt.tensordot(x, x, axes=([1], [1])),
    "inner": lambda x: tt.inner(x[0], x[1]),
    "dot": lambda x: tt.dot(x, x.T),
    "diff": lambda x: tt.diff(x, axis=1),
    "min": lambda x: tt.min(x, axis=1),
    "abs": lambda x: abs(x),
    "pow": lambda x: x ** 2,
    "rpow": lambda x: 2.0 ** x,
    "mod": lambda x: x % 1.0,
    "len": lambda x: x * len(x),
    "iter": lambda x: sum(r for r in x),
    "inv": lambda x: tt.linalg.inv(x[:, :3] + 3 * np.eye(3)),
    "solve": lambda x: tt.linalg.solve(x[:, :3] + 3 * np.eye(3), x[:, 3]),
    "median": lambda x: np.median(x, axis=1),
    "gelu": lambda x: tt.gelu(x),
    "sigmoid": lambda x: tt.sigmoid(x),
}


def _array(x):
    return x.data if isinstance(x, tt.Tensor) else np.asarray(x)


@pytest.mark.parametrize("name", list(CASES))
def test_a_function_of_one_example_batched(name):
    f = CASES[name]
    got = _array(tt.vmap(f)(X))
    ref = np.stack([_array(f(X[i])) for i in range(len(X))])
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    if ref.dtype.kind == "f":
        loss = lambda x: tt.sum(f(x) ** 2)        # noqa: E731
        per_example = tt.vmap(tt.grad(loss))(X)
        looped = np.stack([tt.grad(loss)(x) for x in X])
        np.testing.assert_allclose(per_example, looped, rtol=1e-10, atol=1e-12)

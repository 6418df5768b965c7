"""Outside code as the test (issue 30): the scenario of HIPS autograd's examples/ode_net.py, a
neural ODE whose right-hand side is a ReLU network with its weights passed to odeint as
args=(params,), params a list of (W, b) pairs, fitted with an L1 loss at rtol=0.01. Checked
against central differences always and, when autograd is installed, against autograd's numbers."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.scipy.integrate import odeint

RS = np.random.RandomState(0)
PARAMS = [(RS.randn(2, 50) * 0.1, RS.randn(50) * 0.1), (RS.randn(50, 2) * 0.1, RS.randn(2) * 0.1)]
TIMES = np.linspace(0.0, 1.5, 30)
Y0 = np.array([2.0, 0.0])
A = np.array([[-0.1, 2.0], [-2.0, -0.1]])


def _truth():
    return odeint(lambda y, t: np.dot(y ** 3, A), Y0, TIMES)


def network(inputs, t, params, m=np):
    for W, b in params:
        outputs = m.dot(inputs, W) + b
        inputs = m.maximum(0, outputs)
    return outputs


def loss(params, rtol=0.01):
    return tt.mean(tt.abs(odeint(network, Y0, TIMES, args=(params,), rtol=rtol) - _truth()))


def test_the_neural_ode_gradient_against_differences():
    tight = lambda W0: loss([(W0, PARAMS[0][1]), PARAMS[1]], rtol=1e-10)     # noqa: E731
    ours = tt.grad(loss)(PARAMS, rtol=1e-10)
    rows = [(0, 3), (1, 7)]
    numeric = tt.numerical_grad(lambda W0: tight(W0), PARAMS[0][0], eps=1e-6)[0]
    for i, j in rows:
        np.testing.assert_allclose(ours[0][0][i, j], numeric[i, j], rtol=1e-4, atol=1e-8)
    shapes = [g.shape for pair in ours for g in pair]
    assert shapes == [p.shape for pair in PARAMS for p in pair]


def test_the_neural_ode_matches_autograds_numbers():
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    from autograd.builtins import tuple as atuple
    from autograd.scipy.integrate import odeint as autograd_odeint

    def theirs(params):
        pred = autograd_odeint(lambda y, t, p: network(y, t, p, anp), Y0, TIMES, atuple((params,)), rtol=0.01)
        return anp.mean(anp.abs(pred - _truth()))

    np.testing.assert_allclose(float(loss(PARAMS)), theirs(PARAMS), rtol=1e-12)   # the same LSODA solve
    ours, reference = tt.grad(loss)(PARAMS), autograd.grad(theirs)(PARAMS)
    for pair, other in zip(ours, reference):
        for g, h in zip(pair, other):       # both adjoints at rtol=0.01: equal to that accuracy
            assert np.abs(g - h).max() <= 5e-3 * np.abs(h).max()


def test_a_user_primitive_named_like_a_builtin():
    """autograd's examples/define_gradient.py declares its own primitive named logsumexp."""
    def logsumexp(x):
        m = np.max(x)
        return m + np.log(np.sum(np.exp(x - m)))

    prim = tt.primitive(logsumexp)
    prim.defvjp(lambda g, ans, x: g * np.exp(x - ans))
    prim.defjvp(lambda t, ans, x: np.sum(t * np.exp(x - ans)))
    assert prim.name.endswith(".logsumexp") and tt.REGISTRY["logsumexp"] is not prim
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(tt.grad(lambda x: prim(x))(x), np.exp(x) / np.exp(x).sum(), rtol=1e-12)
    tt.gradcheck(prim, x)
    with pytest.raises(ValueError, match="taken"):
        tt.primitive(logsumexp, name="logsumexp")        # asked for by name: still refused
    tt.REGISTRY.pop(prim.name)

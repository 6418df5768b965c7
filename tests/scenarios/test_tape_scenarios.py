"""Scenarios PyTorch/micrograd users and students run on the tape, the pictures and the scalar
engine (QA): each test is a wrong number, a crash or an unclear error that was found and fixed;
it fails on the code before its fix."""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import scalar


# ----- evaluation_trace ---------------------------------------------------------------------------
def test_evaluation_trace_wrt_an_input_the_output_does_not_use_says_so(capsys):
    x1 = tt.tensor(2.0, requires_grad=True, name="x1")
    other = tt.tensor(5.0, requires_grad=True, name="other")
    y = x1 * x1
    with pytest.raises(ValueError, match=r"evaluation_trace: wrt=other .* not an input of"):
        tt.evaluation_trace(y, wrt=other)     # was a bare KeyError with an id number


# ----- the scalar engine, micrograd-style -----------------------------------------------------------
def test_scalar_power_at_zero_is_a_value_with_an_infinite_slope():
    x = scalar.Node(0.0)
    y = x ** 0.5                              # a ZeroDivisionError when the node was made
    assert y.value == 0.0
    y.backward()
    assert x.grad == math.inf                 # as PyTorch: d sqrt(x)/dx at 0 is inf
    assert (scalar.Node(0.0) ** 2).grad_wrt_parents == [0.0]
    assert (scalar.Node(0.0) ** 0).grad_wrt_parents == [0.0]      # PyTorch's 0 too
    assert (scalar.Node(0.0) ** scalar.Node(0.5)).grad_wrt_parents == [math.inf, 0.0]


def test_scalar_node_has_micrograds_data_for_its_value():
    w = scalar.Node(1.5)
    loss = w * w
    loss.backward()
    w.data -= 0.1 * w.grad                    # micrograd's update; an AttributeError before
    assert w.value == w.data == pytest.approx(1.2)


def test_scalar_node_formats_as_its_number_like_a_tensor():
    loss = scalar.Node(0.123456) * 2
    assert f"{loss:.3f}" == "0.247"           # TypeError before; f"{tensor:.3f}" works
    assert f"{loss}" == str(loss)


# ----- zeroing gradients, PyTorch's spellings ------------------------------------------------------
def test_module_zero_grad_takes_set_to_none_as_pytorch():
    model = tt.nn.Linear(2, 1, rng=0)
    model(tt.tensor([[1.0, 2.0]])).sum().backward()
    model.zero_grad(set_to_none=False)        # a TypeError before; the optimizer had it
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


# ----- user primitives --------------------------------------------------------------------------------
def test_user_primitive_returning_a_tuple_is_refused_not_stacked(registry):
    @tt.primitive
    def sincos(x):
        return np.sin(x), np.cos(x)

    x = tt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"sincos: a primitive returns one array; .* a tuple"):
        sincos(x)                             # was silently one (2, 2) Tensor


# ----- t[idx] = v, PyTorch's row-by-row building ----------------------------------------------------
@pytest.mark.parametrize("out_requires_grad", [False, True])
def test_chained_index_assignment_of_a_recorded_value_is_refused_not_lost(out_requires_grad):
    w = tt.tensor(2.0, requires_grad=True)
    out = tt.zeros((2, 2))
    if out_requires_grad:
        out[0] = w * 3                        # out is now recorded
    with pytest.raises(RuntimeError, match=r"out\[i\]\[j\] = v|y\[i, j\] = v"):
        out[1][1] = w                         # wrote into a temporary: out was unchanged, silently
    with pytest.raises(RuntimeError, match=r"view"):
        out.T[0] = w


def test_index_assignment_of_the_wrong_shape_names_both_shapes():
    out = tt.zeros(3)
    with pytest.raises(ValueError, match=r"t\[index\] = v: t is float64 \(3,\), v is float64 \(2,\)"):
        out[0] = tt.ones(2)                   # NumPy's bare "setting an array element with a sequence"


def test_index_assignment_written_once_or_into_a_clone_works():
    w = tt.tensor(2.0, requires_grad=True)
    out = tt.zeros((2, 2))
    out[0, 1] = w * 3
    out[1] = w
    row = out[0].clone()
    row[0] = w                                # a copy: its own Tensor, as PyTorch's clone
    (out.sum() + row.sum()).backward()
    np.testing.assert_allclose(out.data, [[0, 6], [2, 2]])
    np.testing.assert_allclose(row.data, [2, 6])
    assert w.grad == pytest.approx((3 + 1 + 1) + (1 + 3))
    plain = tt.zeros((2, 2))
    plain[0][1] = 5.0                         # nothing recorded: a write through NumPy's view
    assert plain.data[0, 1] == 5.0


def test_check_rules_checks_a_user_primitive_on_inputs_in_its_domain(registry):
    @tt.primitive
    def user_arcsin(x):                       # defined on (-1, 1) only
        return np.arcsin(x)
    user_arcsin.defvjp(lambda g, ans, x: g / np.sqrt(1 - x ** 2))
    user_arcsin.defjvp(lambda t, ans, x: t / np.sqrt(1 - x ** 2))

    @tt.primitive
    def user_matmul(a, b):                    # for matrices
        return a @ b
    user_matmul.defvjp(lambda g, ans, a, b: g @ b.T, lambda g, ans, a, b: a.T @ g)
    user_matmul.defjvp(lambda t, ans, a, b: t @ b, lambda t, ans, a, b: a @ t)

    # On the default inputs (positive, shape (3,)) both correct rules failed, with no way out.
    with np.errstate(invalid="ignore"):
        rows = {r["op"]: r for r in tt.check_rules(raise_on_failure=False, verbose=False,
                                                   only=[user_arcsin, user_matmul])}
    assert not rows["user_arcsin"]["ok"] and not rows["user_matmul"]["ok"]
    with pytest.raises(tt.GradcheckError, match=r"user_arcsin.*examples="):
        with np.errstate(invalid="ignore"):
            tt.check_rules(verbose=False, only=[user_arcsin, user_matmul])
    rng = np.random.default_rng(0)
    examples = {"user_arcsin": [(np.array([-0.5, 0.1, 0.7]),)],
                user_matmul: [(rng.standard_normal((2, 3)), rng.standard_normal((3, 4)))]}
    rows = {r["op"]: r for r in tt.check_rules(raise_on_failure=False, verbose=False, examples=examples,
                                               only=list(examples))}
    assert rows["user_arcsin"]["ok"] and rows["user_matmul"]["ok"]
    assert rows["user_matmul"]["cases"] == 1
    with pytest.raises(ValueError, match=r"examples names no registered primitive \['user_arcsine'\]"):
        tt.check_rules(examples={"user_arcsine": [(np.array([0.1]),)]})


# ----- requires_grad ------------------------------------------------------------------------------------
def test_an_integer_tensor_made_to_require_grad_by_attribute_raises_at_backward():
    x = tt.tensor([1, 2])
    x.requires_grad = True                    # the constructor and requires_grad_() refuse this
    y = (x * 1.5).sum()
    with pytest.raises(TypeError, match=r"backward: .* has dtype int64 .* only floating-point"):
        y.backward()                          # x.grad was [1, 1] (1.5 truncated), silently
    assert x.grad is None
    with pytest.raises(TypeError, match=r"jvp: .* has dtype int64: .* only floating-point"):
        y.jvp({x: np.array([0.5, 0.5])})       # the tangent was cast to int: [0, 0], silently


# ----- retain_grad ---------------------------------------------------------------------------------------
def test_retain_grad_follows_the_name_through_an_in_place_operator():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y += 1                                    # rebinds y to the recorded y + 1
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad, [6.0, 10.0])     # PyTorch's; it was None
    np.testing.assert_allclose(x.grad, [12.0, 20.0])

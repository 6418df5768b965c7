"""Pictures that never lie: wengert_list, to_dot and draw tell nodes apart by identity.

Two layers that both name their weights W and b must give distinct nodes and labels; a user
name that collides with a generated one must not merge two values; a computation that recorded
nothing is an error, not an empty picture; values and gradients shown are the right ones.
"""

import re
import shutil
import sys

import numpy as np
import pytest

import tinytensor as tt


def lecture_f():
    x1 = tt.tensor(2.0, requires_grad=True, name="x1")
    x2 = tt.tensor(5.0, requires_grad=True, name="x2")
    return x1, x2, tt.log(x1) + x1 * x2 - tt.sin(x2)


def mlp_loss(seed=0):
    model = tt.nn.Sequential(tt.nn.Linear(3, 4, rng=seed), tt.nn.ReLU(), tt.nn.Linear(4, 2, rng=seed + 1))
    x = tt.tensor(np.random.default_rng(seed).standard_normal((5, 3)), name="x")
    return model, x, tt.sum(model(x) ** 2)


def dot_nodes(dot):
    """{node id: label} of the node statements of a DOT source."""
    return dict(re.findall(r'^  ("[^"]*") \[label=("(?:[^"\\]|\\.)*")', dot, flags=re.M))


def dot_edges(dot):
    return re.findall(r'^  ("[^"]*") -> ("[^"]*");', dot, flags=re.M)


# ----- wengert_list ------------------------------------------------------------------------------
def test_the_lecture_f_as_a_wengert_list():
    x1, x2, y = lecture_f()
    assert tt.wengert_list(y) == [("z1", "log", ("x1",)), ("z2", "mul", ("x1", "x2")),
                                  ("z3", "add", ("z1", "z2")), ("z4", "sin", ("x2",)),
                                  ("z5", "sub", ("z3", "z4"))]


def test_two_linear_layers_give_distinct_labels():
    model, x, loss = mlp_loss()
    entries = tt.wengert_list(loss)
    args = [a for _, _, args in entries for a in args]
    assert {"weight", "weight_2", "bias", "bias_2", "x"} <= set(args)
    lhs = [entry[0] for entry in entries]
    assert len(set(lhs)) == len(lhs)
    # The first layer's weight feeds the first matmul, the second layer's weight_2 a later one.
    (first,) = [e for e in entries if "weight" in e[2]]
    (second,) = [e for e in entries if "weight_2" in e[2]]
    assert entries.index(first) < entries.index(second)


def test_names_from_named_parameters_give_qualified_labels():
    model, x, loss = mlp_loss()
    entries = tt.wengert_list(loss, names=dict(model.named_parameters()))
    args = {a for _, _, args in entries for a in args}
    assert {"0.weight", "0.bias", "2.weight", "2.bias", "x"} <= args
    assert "weight" not in args and "weight_2" not in args
    # The reverse mapping (tensor -> label) is accepted too.
    flipped = {p: n for n, p in model.named_parameters()}
    assert tt.wengert_list(loss, names=flipped) == entries


def test_a_user_name_colliding_with_a_generated_one_does_not_merge():
    x = tt.tensor([1.0, 2.0], requires_grad=True)       # unnamed: would be x1
    a = tt.tensor([3.0, 4.0], requires_grad=True, name="x1")
    h = tt.exp(x)                                        # unnamed: would be z1
    g = tt.sin(a)
    g.name = "z1"
    y = tt.sum(h * g)
    entries = tt.wengert_list(y)
    labels = [lhs for lhs, _, _ in entries]
    assert len(set(labels)) == len(labels) == 4
    assert ("z1", "sin", ("x1",)) in entries                 # the user's names are kept ...
    exp_entry = [e for e in entries if e[1] == "exp"][0]
    assert exp_entry[2] != ("x1",) and exp_entry[0] != "z1"  # ... the generated ones step aside
    dot = tt.to_dot(y)
    assert len(dot_nodes(dot)) == 6                          # x, a, exp, sin, mul, sum


def test_the_same_name_three_times_and_a_taken_suffix():
    a = tt.tensor(1.0, requires_grad=True, name="w")
    b = tt.tensor(2.0, requires_grad=True, name="w")
    c = tt.tensor(3.0, requires_grad=True, name="w_2")   # a user name that looks like a suffix
    d = tt.tensor(4.0, requires_grad=True, name="w")
    y = a * b + c * d
    args = [args for _, _, args in tt.wengert_list(y)]
    assert args[0] == ("w", "w_3") and args[1] == ("w_2", "w_4")


def test_constants_and_numbers_are_labelled_without_merging():
    x = tt.tensor([1.0, 2.0], requires_grad=True, name="x")
    k1 = tt.tensor([3.0, 4.0])                 # two constants, both unnamed
    k2 = tt.tensor([5.0, 6.0], name="x")       # a constant that takes a parameter's name
    y = tt.sum(x * k1 + x * k2 + 2.0 * x + 2.0)
    entries = tt.wengert_list(y)
    assert entries[0] == ("z1", "mul", ("x", "c1"))
    assert entries[1] == ("z2", "mul", ("x", "x_2"))
    assert entries[3][2] == ("2.0", "x")
    dot = tt.to_dot(y)
    nodes = dot_nodes(dot)
    assert '"c1"' in nodes and '"x_2"' in nodes and "style=dashed" in dot
    number_nodes = [n for n in nodes if n.startswith('"#number')]
    assert len(number_nodes) == 2              # each use of 2.0 is its own node
    x.name = "#number1"                        # even a label that looks like a number node's id
    nodes = dot_nodes(tt.to_dot(y))
    assert len(nodes) == 12                    # x, c1, x_2 -> x, 7 entries, 2 numbers
    assert nodes['"#number1"'].startswith('"#number1\\ninput')
    assert sorted(n for n in nodes if n.startswith('"#number')) == ['"#number1"', '"#number2"', '"#number3"']


def test_nothing_recorded_is_an_error_that_says_why():
    x = tt.tensor([1.0, 2.0])                  # no input requires grad
    y = tt.sum(tt.exp(x))
    for view in (tt.wengert_list, tt.to_dot, tt.evaluation_trace):
        with pytest.raises(ValueError, match="nothing was recorded.*requires_grad=True"):
            view(y)
    w = tt.tensor([1.0, 2.0], requires_grad=True)
    with tt.no_grad():
        z = tt.sum(w * 2)
    with pytest.raises(ValueError, match=r"no_grad"):
        tt.wengert_list(z)
    with pytest.raises(TypeError, match="got ndarray"):
        tt.wengert_list(np.ones(3))
    with pytest.raises(TypeError, match="names must map labels to Tensors"):
        tt.wengert_list(tt.sum(w * 2), names={"w": np.ones(2)})
    assert tt.wengert_list(w) == []            # a leaf: recorded, but nothing computed yet


def test_the_logistic_regression_list_is_unchanged():
    rng = np.random.default_rng(0)
    x = tt.tensor(rng.standard_normal((4, 5)), name="x")
    W = tt.tensor(rng.standard_normal((5, 3)), requires_grad=True, name="W")
    y = tt.tensor(np.eye(3)[[0, 2, 1, 0]], name="y")
    loss = tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + tt.frobeniusNorm(W)
    assert tt.wengert_list(loss) == [("z1", "dot", ("x", "W")), ("z2", "softmax", ("z1",)),
                                     ("z3", "crossEntropy", ("z2", "y")), ("z4", "frobeniusNorm", ("W",)),
                                     ("z5", "add", ("z3", "z4"))]


# ----- to_dot ----------------------------------------------------------------------------------------
def test_an_mlp_has_one_dot_node_per_distinct_tensor():
    model, x, loss = mlp_loss()
    dot = tt.to_dot(loss)
    nodes = dot_nodes(dot)
    params = list(model.parameters())
    # x, 4 parameters, one node per tape entry, and the exponent 2 of `** 2`
    assert len(nodes) == 1 + len(params) + len(tt.wengert_list(loss)) + 1
    assert [n for n in nodes if n.startswith('"#number')] == ['"#number1"']
    edges = dot_edges(dot)
    assert sum(1 for src, _ in edges if src == '"weight"') == 1     # each weight feeds one layer
    assert sum(1 for src, _ in edges if src == '"weight_2"') == 1
    assert len(set(edges)) == len(edges)


def test_values_and_grads_are_shown_and_grads_are_left_alone():
    x1, x2, y = lecture_f()
    dot = tt.to_dot(y, values=True, grads=True)
    nodes = dot_nodes(dot)
    assert nodes['"x1"'] == '"x1\\ninput\\n()\\nvalue 2\\ngrad 5.5"'
    assert nodes['"x2"'] == '"x2\\ninput\\n()\\nvalue 5\\ngrad 1.716"'
    assert nodes['"z3"'] == '"z3\\nadd\\n()\\nvalue 10.693\\ngrad 1"'
    assert nodes['"z4"'] == '"z4\\nsin\\n()\\nvalue -0.959\\ngrad -1"'
    assert x1.grad is None and x2.grad is None and y.grad is None
    plain = dot_nodes(tt.to_dot(y))
    assert plain['"z2"'] == '"z2\\nmul\\n()"'
    y.backward()
    y.backward()                               # .grad now holds twice the gradient ...
    assert dot_nodes(tt.to_dot(y, grads=True))['"x1"'].endswith('grad 5.5"')   # ... the picture does not
    assert x1.grad == 11.0


def test_array_values_are_summarised():
    model, x, loss = mlp_loss()
    nodes = dot_nodes(tt.to_dot(loss, values=True, grads=True, names=dict(model.named_parameters())))
    label = nodes['"0.weight"']
    assert "(4, 3)\\nvalue in [" in label and "\\ngrad in [" in label
    W = model[0].weight.data
    assert f"in [{tt.scalar._number(float(W.min()))}, {tt.scalar._number(float(W.max()))}]" in label
    assert re.fullmatch(r'"0.bias\\ninput\\n\(4,\)\\nvalue \[.*\]\\ngrad \[.*\]"', nodes['"0.bias"'])


def test_labels_with_quotes_are_escaped():
    x = tt.tensor(1.0, requires_grad=True, name='say "hi" \\ there')
    dot = tt.to_dot(tt.exp(x))
    assert '"say \\"hi\\" \\\\ there"' in dot


# ----- draw ------------------------------------------------------------------------------------------
needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="the Graphviz program `dot` is missing (apt-get install graphviz)")


@needs_dot
def test_draw_renders_svg_and_png(tmp_path):
    pytest.importorskip("graphviz", reason="the graphviz Python package is missing (pip install -e '.[viz]')")
    model, x, loss = mlp_loss()
    svg = tt.draw(loss, tmp_path / "mlp.svg", values=True, names=dict(model.named_parameters()))
    text = open(svg).read()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert "0.weight" in text and "2.weight" in text
    png = tt.draw(loss, str(tmp_path / "mlp.png"), grads=True)
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    out = tt.draw(loss, tmp_path / "picture", format="svg")
    assert "<svg" in open(out).read()


def test_draw_needs_a_known_format(tmp_path):
    _, _, y = lecture_f()
    with pytest.raises(ValueError, match=r"\.svg, \.png or \.pdf"):
        tt.draw(y, tmp_path / "graph")
    with pytest.raises(ValueError, match="nothing was recorded"):
        tt.draw(tt.exp(tt.tensor(1.0)), tmp_path / "g.svg")


def test_draw_without_the_graphviz_package_says_how_to_install(tmp_path, monkeypatch):
    _, _, y = lecture_f()
    monkeypatch.setitem(sys.modules, "graphviz", None)   # import graphviz now raises ImportError
    with pytest.raises(ImportError, match=r'pip install -e "\.\[viz\]".*|apt-get install graphviz'):
        tt.draw(y, tmp_path / "g.svg")


def test_draw_without_the_dot_program_says_how_to_install(tmp_path, monkeypatch):
    pytest.importorskip("graphviz")
    _, _, y = lecture_f()
    monkeypatch.setenv("PATH", str(tmp_path))             # no `dot` on this PATH
    with pytest.raises(RuntimeError, match="`dot` was not found.*apt-get install graphviz"):
        tt.draw(y, tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()

"""nn.functional holds the math; the Modules (layers.py, losses.py) call it, never the reverse."""
import ast
import inspect

import numpy as np

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import functional as F


def test_functional_imports_neither_layers_nor_losses():
    tree = ast.parse(inspect.getsource(F))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 for alias in node.names if node.level == 1 and node.module is None}
    assert not {"layers", "losses"} & imported, imported


def test_dropout_function_and_module_draw_the_same_mask():
    x = tt.tensor(np.arange(1.0, 13.0).reshape(3, 4), requires_grad=True)
    module = nn.Dropout(0.25, rng=7)
    np.testing.assert_array_equal(F.dropout(x, 0.25, rng=7).numpy(), module(x).numpy())
    assert module.mask.shape == (3, 4) and set(np.unique(module.mask)) <= {0.0, 1 / 0.75}
    assert F.dropout(x, 0.25, training=False) is x


def test_loss_modules_are_their_functions_with_options():
    rng = np.random.default_rng(0)
    z, y = rng.standard_normal((5, 3)), np.array([0, 2, 1, 2, -100])
    w = np.array([1.0, 2.0, 0.5])
    np.testing.assert_array_equal(
        nn.CrossEntropyLoss(weight=w, label_smoothing=0.1)(tt.tensor(z), y).numpy(),
        F.cross_entropy(tt.tensor(z), y, weight=w, label_smoothing=0.1).numpy())
    p, t = rng.uniform(0.1, 0.9, (4, 2)), rng.uniform(0, 1, (4, 2))
    np.testing.assert_array_equal(nn.HuberLoss("sum", delta=0.3)(tt.tensor(p), t).numpy(),
                                  F.huber_loss(tt.tensor(p), t, "sum", delta=0.3).numpy())

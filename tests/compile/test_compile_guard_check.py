"""The fast guard check (`guard.ok()`, one and-ed expression) says exactly what comparing the
guard's tuple says: for each change of what a program read, ok() is False iff the tuple differs."""

import types

import numpy as np

import tinytensor as tt


def programs(c):
    return list(c.programs.values())


def agree(c):
    for p in programs(c):
        if p.guard is not None:
            assert p.guard.ok() == (p.guard() == p.modes)


def test_ok_agrees_with_the_tuple_under_every_change():
    params = [tt.tensor(np.ones(2)), tt.tensor(np.arange(2.0))]
    config = {"scale": 2.0, "names": ("a", "b")}
    ns = types.SimpleNamespace(fn=tt.tanh, k=3)
    model = tt.nn.Linear(2, 2, rng=0)

    def f(x):
        return tt.sum(ns.fn(model(x * params[0] + params[1])) * config["scale"]) * ns.k

    c = tt.compile(f)
    c.limit = 32                             # one recording per change: no fallback to eager
    x = np.array([[0.5, -1.0]])
    eager = lambda: f(tt.tensor(x)).data    # noqa: E731
    changes = [
        lambda: None,
        lambda: params.__setitem__(0, tt.tensor(np.full(2, 3.0))),     # an item replaced
        lambda: params.append(tt.tensor(np.zeros(2))),                 # the list grows
        lambda: params.pop(),
        lambda: config.__setitem__("scale", -1.0),
        lambda: config.__setitem__("names", ("a", "c")),
        lambda: setattr(ns, "fn", tt.sin),
        lambda: setattr(ns, "k", 4),
        lambda: model.eval(),
        lambda: setattr(model, "weight", tt.nn.Parameter(np.eye(2))),
    ]
    for change in changes:
        change()
        agree(c)
        out = c(x)
        np.testing.assert_array_equal(out.data if isinstance(out, tt.Tensor) else out, eager())
        agree(c)


def test_a_parameter_list_item_replaced_is_seen():
    params = [tt.tensor(np.ones(3)), tt.tensor(np.ones(3))]
    c = tt.compile(lambda x: tt.sum(x * params[0] + params[1]))
    x = np.arange(3.0)
    assert float(c(x)) == 6.0
    params[1] = tt.tensor(np.zeros(3))
    assert float(c(x)) == 3.0
    assert len(c.recompiles) == 2

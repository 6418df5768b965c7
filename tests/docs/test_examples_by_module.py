"""Every public name of a finished module has a docstring example (test_doctests.py runs them), so
a name added to one of these modules without an example fails here, by name (test_reference.py's
FLOOR only counts). A module joins COMPLETE when its last example lands; once every module has,
COMPLETE is tt_api.PUBLIC_MODULES."""
import importlib
import sys
import types

import numpy as np
import pytest
from docs_api import has_example, own_docstring, tt_api

COMPLETE = list(tt_api.PUBLIC_MODULES)      # every public module: 486 of 486 names have one


def missing_examples(modname):
    mod = importlib.import_module(modname)
    return [n for n in tt_api.public_names(modname) if not has_example(own_docstring(getattr(mod, n)))]


@pytest.mark.parametrize("modname", COMPLETE)
def test_every_public_name_has_an_example(modname):
    missing = missing_examples(modname)
    assert missing == [], (f"{modname}: public names without a docstring example: {missing}; give each "
                           f"an Examples section (tests/docs/test_doctests.py runs it)")


def test_a_name_without_an_example_is_caught(monkeypatch):
    mod = types.ModuleType("tinytensor._docs_probe")
    exec('__all__ = ["shown", "told", "borrowed"]\n'
         'def shown(x):\n    """x.\n\n    >>> 1 + 1\n    2\n    """\n'
         'def told(x):\n    """x, with no example."""\n', mod.__dict__)
    mod.borrowed = type("Borrowed", (), {"__doc__": np.exp.__doc__})()   # NumPy's example: not ours
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    assert missing_examples(mod.__name__) == ["told", "borrowed"]

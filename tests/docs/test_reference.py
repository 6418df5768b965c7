"""The API reference lists every public name, each with a docstring (docs/_ext/tt_api.py writes
the pages from each public module's __all__; `python docs/_ext/tt_api.py` rewrites them)."""
import importlib
import inspect
import sys
import types

import pytest
from docs_api import ROOT, has_example, own_docstring, public_objects, tt_api

MODULES = list(tt_api.PUBLIC_MODULES)


@pytest.mark.parametrize("modname", MODULES)
def test_the_page_lists_exactly_the_public_names(modname):
    page = ROOT / "docs" / "api" / f"{modname}.rst"
    assert page.exists(), f"no reference page for {modname}: run python docs/_ext/tt_api.py"
    listed = {name for module, name in tt_api.documented(page.read_text()) if module == modname}
    public = set(tt_api.public_names(modname))
    assert not public - listed, (f"public names missing from docs/api/{modname}.rst: "
                                 f"{sorted(public - listed)}; run python docs/_ext/tt_api.py")
    assert not listed - public, \
        f"docs/api/{modname}.rst lists names that are not public: {sorted(listed - public)}"


@pytest.mark.parametrize("modname", MODULES)
def test_every_public_looking_name_is_declared(modname):
    """A new function without a leading underscore must join __all__ (and so the reference), or
    be marked internal in tt_api.INTERNAL."""
    assert tt_api.undeclared(modname) == [], \
        f"{modname} defines names in neither __all__ nor tt_api.INTERNAL: {tt_api.undeclared(modname)}"


def test_every_public_submodule_has_a_page():
    for modname in MODULES:
        for sub in tt_api.public_submodules(modname):
            assert sub in tt_api.PUBLIC_MODULES or sub in tt_api.NAMESPACES, \
                f"{sub} is public ({modname}.__all__) but has no reference page (tt_api.PUBLIC_MODULES)"


def test_the_pages_are_up_to_date():
    for name, text in tt_api.expected_pages().items():
        assert (ROOT / "docs" / "api" / name).read_text() == text, \
            f"docs/api/{name} is stale: run python docs/_ext/tt_api.py"


def test_every_public_name_has_a_docstring():
    missing = [q for q, obj in public_objects() if not (own_docstring(obj) or "").strip()]
    assert missing == [], f"{len(missing)} public names without a docstring: {missing}"


def test_docstring_example_coverage(capsys):
    """The share of public names whose docstring has a runnable example (tests/docs/
    test_doctests.py runs them). It may only grow: raise FLOOR when you add examples."""
    FLOOR = 486      # every public name (test_examples_by_module.py names a missing one)
    names = public_objects()
    with_example = [q for q, obj in names if has_example(own_docstring(obj))]
    with capsys.disabled():
        print(f"\ndocstring examples: {len(with_example)} of {len(names)} public names")
    assert len(with_example) >= FLOOR


def test_namespaces_exist():
    for modname in tt_api.NAMESPACES:
        assert isinstance(importlib.import_module(modname), types.ModuleType)
        assert inspect.getdoc(importlib.import_module(modname))


def test_the_checks_catch_a_new_name(monkeypatch):
    """A function added without __all__ is undeclared; once public, a page without it misses it,
    and without a docstring it has none: each check above would fail."""
    mod = types.ModuleType("tinytensor._docs_probe")
    exec("__all__ = []\ndef shiny(x):\n    return x\n", mod.__dict__)
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    assert tt_api.undeclared(mod.__name__) == ["shiny"]
    mod.__all__ = ["shiny"]
    assert tt_api.undeclared(mod.__name__) == []
    assert tt_api.public_names(mod.__name__) == ["shiny"]
    page = ".. currentmodule:: tinytensor._docs_probe\n\n.. autosummary::\n   :nosignatures:\n\n   other\n"
    assert ("tinytensor._docs_probe", "shiny") not in tt_api.documented(page)
    assert ("tinytensor._docs_probe", "other") in tt_api.documented(page)
    assert not own_docstring(mod.shiny)
    del mod.__all__
    with pytest.raises(AssertionError, match="no __all__"):
        tt_api.public_names(mod.__name__)

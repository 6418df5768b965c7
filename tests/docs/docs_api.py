"""The docs' list of public modules and names (docs/_ext/tt_api.py), for the tests here."""
import importlib.util
from pathlib import Path

import numpy as np

import tinytensor as tt

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("tt_api", ROOT / "docs" / "_ext" / "tt_api.py")
tt_api = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tt_api)


def public_objects():
    """[(qualified name, object)] for every public name of every public module."""
    out = []
    for modname in tt_api.PUBLIC_MODULES:
        mod = importlib.import_module(modname)
        for name in tt_api.public_names(modname):
            out.append((f"{modname}.{name}", getattr(mod, name)))
    return out


def own_docstring(obj):
    """The docstring the reference shows for `obj`: a class's, a function's, a primitive's, an
    instance's of tinytensor's own classes (tt.scipy.stats.norm). Constants of built-in types
    (dicts, numbers) are documented by their value and a comment: they count as documented."""
    if type(obj).__module__ == "builtins" and not callable(obj):
        return "(a constant)"
    return getattr(obj, "__doc__", None)


def has_example(doc):
    return bool(doc) and ">>>" in doc and not tt_api.borrowed_from(doc)


GLOBS = {"np": np, "tt": tt}

"""The ops/ package: one import path per module (no alias modules), and the families reach no
sibling's privates."""
import ast
import importlib
import inspect
from pathlib import Path

import tinytensor as tt


def test_one_import_path_per_module():
    """No module only re-exports another (the old ops_elementwise.py, graph.py, ... aliases): each
    name has one public path, the one in the API reference. Package __init__ files gather names."""
    root = Path(tt.__file__).parent
    for path in sorted(root.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        body = ast.parse(path.read_text()).body
        assert any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in body), \
            f"{path.relative_to(root.parent)} defines nothing: an alias module"
    from tinytensor.ops import NUMPY_FUNCTIONS, PUBLIC, defprim, numpy_dispatch  # noqa: F401
    from tinytensor.ops.table import elementwise
    assert tt.wengert_list is importlib.import_module("tinytensor.views").wengert_list
    assert callable(elementwise) and inspect.ismodule(tt.ops.elementwise)   # the shorthand; the family
    # tt.* are the public table's entries (with PyTorch's dim=/keepdim= where a reduction takes
    # axes); tt.ops.<name> are the rows themselves, which the library calls internally
    assert PUBLIC["softmax"] is tt.softmax and PUBLIC["sum"] is tt.sum and PUBLIC["log1p"] is tt.log1p
    assert tt.ops.exp is tt.exp and callable(tt.ops.softmax) and callable(tt.ops.sum)


def test_families_import_privates_from_the_table_only():
    for family in ("core", "softmax_xent", "elementwise", "reductions", "shape"):
        module = importlib.import_module(f"tinytensor.ops.{family}")
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module != "table":
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"ops/{family}.py takes {private} from ops/{node.module}.py"

"""The ops/ package: old import paths still work, and the families reach no sibling's privates."""
import ast
import importlib
import inspect

import tinytensor as tt


def test_old_import_paths_are_the_new_modules():
    for old, new in [("ops_elementwise", "ops.elementwise"), ("ops_reductions", "ops.reductions"),
                     ("ops_shape", "ops.shape"), ("graph", "views")]:
        assert importlib.import_module(f"tinytensor.{old}") is importlib.import_module(f"tinytensor.{new}")
    from tinytensor.graph import wengert_list
    from tinytensor.ops import NUMPY_FUNCTIONS, PUBLIC, defprim, elementwise, numpy_dispatch  # noqa: F401
    assert wengert_list is tt.wengert_list
    assert callable(elementwise) and tt.ops.elementwise is elementwise    # the shorthand, not the module
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

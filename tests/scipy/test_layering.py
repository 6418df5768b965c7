"""tt.scipy stands above the engine (issue 30), as jax.scipy above jax.numpy: no module of the
engine imports it, even lazily inside a function, so no tt.scipy module is in the engine's import
circle, and specs.py and scipy/specs.py no longer import each other."""

import ast
import pathlib

import tinytensor

ROOT = pathlib.Path(tinytensor.__file__).parent


def _modules():
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("tinytensor",) + path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _graph():
    """module -> the tinytensor modules it imports anywhere in its text (function bodies too)."""
    modules = _modules()
    graph = {m: set() for m in modules}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1]
                                    + ([node.module] if node.module else []))
                elif (node.module or "").startswith("tinytensor"):
                    base = node.module
                else:
                    continue
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("tinytensor")]
            for target in targets:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def _reachable(graph, start):
    seen, stack = set(), [start]
    while stack:
        for nxt in graph[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def test_no_scipy_module_is_in_the_engines_import_circle():
    graph = _graph()
    circle = {m for m in _reachable(graph, "tinytensor.tape") if "tinytensor.tape" in _reachable(graph, m)}
    assert {"tinytensor.tape", "tinytensor.tensor", "tinytensor.ops.core"} <= circle
    assert not {m for m in circle if m.startswith("tinytensor.scipy")}, sorted(circle)
    for engine in ("tinytensor.tape", "tinytensor.tensor", "tinytensor.ops.core", "tinytensor.ops_science",
                   "tinytensor.transforms", "tinytensor.linalg"):
        assert not {m for m in _reachable(graph, engine) if m.startswith("tinytensor.scipy")}, engine


def test_the_spec_tables_import_one_way():
    graph = _graph()
    assert "tinytensor.scipy.specs" in graph["tinytensor.specs"]
    assert "tinytensor.specs" not in _reachable(graph, "tinytensor.scipy.specs")

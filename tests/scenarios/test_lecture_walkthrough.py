"""examples/lecture_walkthrough.ipynb runs from a clean kernel, every cell, and its tables are the
lecture's. The stored copy keeps its outputs (a reader sees them on GitHub without running it)."""

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[dev]' (nbformat, nbclient, ipykernel)")
nbclient = pytest.importorskip("nbclient", reason="pip install -e '.[dev]' (nbformat, nbclient, ipykernel)")

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "lecture_walkthrough.ipynb"


def printed(nb):
    """Everything the code cells printed, as one text."""
    return "".join(o.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                   for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def test_the_stored_notebook_has_its_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code and all(cell.execution_count for cell in code)
    assert "dy/dx1 = 5.5" in printed(nb)


@pytest.mark.slow
def test_the_notebook_runs_and_prints_the_lectures_tables():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()   # raises CellExecutionError, naming the cell, if any cell fails
    text = printed(nb)
    for line in ["v5 = sub['v3', 'v4']", "= (1)(0.5) + (1)(5)", "dy/dx1 = 5.5", "dy/dx2 = 1.716",
                 "v3 = add(v1, v2) = 10.693   dv3/dx1 = 5.5   dy/dv3 = 1",
                 "from x1: ['x1', 'v2', 'v1', 'v3', 'v5']", "gradcheck, both modes: True"]:
        assert line in text, line
    assert not any(o.get("output_type") == "error" for cell in nb.cells for o in cell.get("outputs", []))


def test_lecture_examples_script_prints_both_engines_tables(capsys, monkeypatch):
    import runpy

    monkeypatch.syspath_prepend(str(ROOT))
    runpy.run_path(str(ROOT / "examples" / "lecture_examples.py"), run_name="__main__")
    out = capsys.readouterr().out
    for line in ["v2 = mul['x1', 'x2']    = 10", "\t= (1)(0.5) + (1)(5)              = 5.5",
                 "dy/dx2 = 1.716", "v3 = add(v1, v2) = 10.693   dv3/dx1 = 5.5   dy/dv3 = 1",
                 "gradcheck (both modes):            True"]:
        assert line in out, line
    from tinytensor.scalar import Node
    assert Node.verbose is False   # the script switched it back off

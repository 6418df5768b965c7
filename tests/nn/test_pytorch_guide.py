"""docs/guides/pytorch.md: every ```python block runs, top to bottom, in one namespace (as the
guides' docs test runs every page; kept here so this page is checked on its own branch too)."""

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "pytorch.md"
FENCE = re.compile(r"^(`{3,})python[ \t]*\n(.*?)^\1[ \t]*$", re.M | re.S)


def test_the_pytorch_guide_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "guide_pytorch"}
    blocks = [m.group(2) for m in FENCE.finditer(GUIDE.read_text())]
    assert len(blocks) >= 5
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/guides/pytorch.md (python block {i + 1})", "exec"), namespace)

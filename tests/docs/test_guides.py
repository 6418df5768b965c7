"""Every ```python block of every guide (docs/guides/*.md) runs: top to bottom, in one fresh
namespace per page, in a temporary directory. ```text, ```bash and ```console blocks are not run."""
import os
import re

import matplotlib
import pytest
from docs_api import ROOT

GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md"))
FENCE = re.compile(r"^(`{3,})python[ \t]*\n(.*?)^\1[ \t]*$", re.M | re.S)


def python_blocks(text):
    return [m.group(2) for m in FENCE.finditer(text)]


def test_the_fence_reader():
    page = "a\n```python\nx = 1\n```\n```text\nnot run\n```\n````python\ny = '```'\n````\n"
    assert python_blocks(page) == ["x = 1\n", "y = '```'\n"]


@pytest.mark.parametrize("guide", GUIDES, ids=[g.stem for g in GUIDES])
def test_guide_runs(guide, tmp_path, monkeypatch, global_state):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TINYTENSOR_DOCS_QUICK", "1")
    namespace = {"__name__": f"guide_{guide.stem}"}
    for i, block in enumerate(python_blocks(guide.read_text())):
        code = compile(block, f"{guide.relative_to(ROOT)} (python block {i + 1})", "exec")
        exec(code, namespace)
    assert os.getcwd() == str(tmp_path)

"""The README: at most 250 lines, its Python runs, its links lead somewhere, and the commands of
its first block name files that exist."""
import re

from docs_api import ROOT

README = (ROOT / "README.md").read_text()
# Guides other developers are moving out of the README now; the README links them already.


def test_fits_on_a_few_screens():
    assert len(README.splitlines()) <= 250


def test_the_first_block_keeps_the_two_commands():
    first = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    assert 'pip install -e ".[examples]" && python examples/train_mlp.py' in first
    assert 'pip install -e ".[dev]" && python -m pytest' in first


def test_the_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "readme"}
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", README, re.S)):
        exec(compile(block, f"README.md (python block {i + 1})", "exec"), namespace)


def test_links_and_launch_lines_lead_somewhere():
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if target.startswith(("http://", "https://")):
            continue
        path = ROOT / target
        assert path.exists(), f"README links {target}, which does not exist"
    for script in re.findall(r"python ((?:examples|docs|benchmarks)/[\w/]+\.py)", README):
        assert (ROOT / script).exists(), f"README runs {script}, which does not exist"

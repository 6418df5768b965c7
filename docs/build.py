"""Build the site: python docs/build.py [--quick-prose] [sphinx-build options...]

Warnings are errors (-W), cross-references are checked (-n, nitpicky), nothing is fetched from the
network (no intersphinx). The site lands in docs/_build/html; open docs/_build/html/index.html.

    python docs/build.py                 # everything: reference, guides, notebook, gallery
    python docs/build.py --quick-prose   # without executing the gallery and the notebook
"""
import os
import subprocess
import sys
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent


def main(argv):
    env = dict(os.environ, TINYTENSOR_DOCS_QUICK=os.environ.get("TINYTENSOR_DOCS_QUICK", "1"))
    # the notebook's kernel is another process: it imports this checkout's tinytensor too
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(DOCS.parent), env.get("PYTHONPATH")]))
    if "--quick-prose" in argv:
        argv = [a for a in argv if a != "--quick-prose"]
        env["TINYTENSOR_DOCS_PROSE_ONLY"] = "1"
    # -E: read every page again (Sphinx does not notice an edited docstring)
    cmd = [sys.executable, "-m", "sphinx", "-W", "-n", "-E", "--keep-going", "-q", "-b", "html",
           "-d", str(DOCS / "_build" / "doctrees"), str(DOCS), str(DOCS / "_build" / "html"), *argv]
    start = time.perf_counter()
    code = subprocess.call(cmd, env=env)
    index = DOCS / "_build" / "html" / "index.html"
    if code == 0 and not index.exists():   # an example calling sys.exit(0) ends Sphinx quietly
        print("sphinx-build stopped before writing the site (did an example call sys.exit?)")
        code = 1
    print(f"docs built in {time.perf_counter() - start:.1f} s: {DOCS / '_build' / 'html' / 'index.html'}"
          if code == 0 else f"docs build failed ({code})")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

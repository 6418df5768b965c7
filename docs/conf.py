"""Sphinx configuration of tinytensor's site: the API reference from the docstrings (autodoc,
autosummary, NumPy-style via napoleon), the guides in MyST Markdown and the lecture notebook
executed at build time (myst-nb), and examples/ as a gallery (sphinx-gallery).

Build (from the repository root):  python docs/build.py   (warnings are errors, nitpicky, offline)
"""
import os
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

import tinytensor  # noqa: E402

project = "tinytensor"
author = "the tinytensor developers"
copyright = "the tinytensor developers, MIT licence"
release = version = tinytensor.__version__ if hasattr(tinytensor, "__version__") else "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "myst_nb",
    "sphinx_gallery.gen_gallery",
    "tt_api",
]

# ----- sources ---------------------------------------------------------------------------------
# The lecture notebook lives in examples/ (the suite runs it there); the site executes a copy.
(DOCS / "lecture").mkdir(exist_ok=True)
NOTEBOOK = "lecture_walkthrough.ipynb"
shutil.copyfile(ROOT / "examples" / NOTEBOOK, DOCS / "lecture" / NOTEBOOK)

exclude_patterns = ["_build", "build", "**.ipynb_checkpoints", "gallery/*.ipynb", "gallery/*.py",
                    "gallery/*.zip", "gallery/*.json"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"

# ----- the reference ---------------------------------------------------------------------------
autosummary_generate = False          # docs/api/*.rst are written by docs/_ext/tt_api.py
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"undoc-members": False}
# NumPy-style docstrings go through napoleon in tt_api (types as plain text: no cross-references
# to NumPy's docs, which are not fetched); the house's plain style is read as such there too.
nitpicky = True
# Types in NumPy-style sections name NumPy's and Python's own types, whose docs are not fetched.
nitpick_ignore_regex = [("py:class", r"(ndarray|array_like|array|bool|int|float|str|tuple|list|dict|"
                                     r"callable|optional|None|Tensor|dtype|generator)")]
suppress_warnings = ["config.cache"]   # sphinx_gallery_conf holds the scraper function
add_module_names = False

# ----- MyST and notebooks ----------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
myst_heading_anchors = 3
nb_execution_mode = "force"           # the lecture notebook and every {code-cell} run at build time
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_merge_streams = True

# ----- the gallery -----------------------------------------------------------------------------
os.environ.setdefault("TINYTENSOR_DOCS_QUICK", "1")   # the examples run fewer steps for the site

sys.path.insert(0, str(DOCS))
from gallery_scraper import png_files_scraper  # noqa: E402

PROSE_ONLY = os.environ.get("TINYTENSOR_DOCS_PROSE_ONLY") == "1"   # docs/build.py --quick-prose
if PROSE_ONLY:
    nb_execution_mode = "off"

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "gallery",
    "filename_pattern": r".*\.py$",     # run every example (in quick mode)
    "ignore_pattern": r"curves\.py$",   # a helper the training examples import
    "image_scrapers": (png_files_scraper,),   # the examples save their figures to runs/*.png
    "download_all_examples": False,
    "remove_config_comments": True,
    "plot_gallery": "False" if PROSE_ONLY else "True",
    "abort_on_example_error": True,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "min_reported_time": 10**6,
}

# ----- HTML ------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "tinytensor"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "icon_links": [],
    "footer_start": ["copyright"],
    "footer_end": [],
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []
html_show_sourcelink = False
html_copy_source = False

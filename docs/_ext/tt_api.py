"""The public API of tinytensor, as the reference documents it, and a Sphinx extension for it.

One list (PUBLIC_MODULES) says which modules are public; a module's public names are its
`__all__`. `python docs/_ext/tt_api.py` writes docs/api/<module>.rst from that list (one page per
module: an autosummary table and one autodoc entry per name); tests/docs/test_reference.py fails
when a public name is missing from those pages, lacks a docstring, or when a module defines a
public-looking name that is in neither its `__all__` nor INTERNAL.

As a Sphinx extension it teaches autodoc that a `Primitive` (tt.exp, tt.sum, ...) is a function,
reads NumPy-style docstrings with napoleon and the house's plain style (backticks for code,
indented blocks for examples) as such, and shows a one-paragraph pointer in place of a
docstring borrowed from NumPy or SciPy.
"""
import importlib
import inspect
import re
import sys
import types
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent
API = DOCS / "api"

# module: (page title, one line). Order is the order of the reference's table of contents.
PUBLIC_MODULES = {
    "tinytensor": "tt: tensors, operations, differentiation",
    "tinytensor.linalg": "tt.linalg: linear algebra",
    "tinytensor.nn": "tt.nn: modules, layers, losses",
    "tinytensor.nn.functional": "tt.nn.functional: layers and losses as functions",
    "tinytensor.nn.init": "tt.nn.init: initialisation in place",
    "tinytensor.nn.utils": "tt.nn.utils: gradient clipping, parameter vectors",
    "tinytensor.nn.parallel": "tt.nn.parallel: data-parallel training",
    "tinytensor.optim": "tt.optim: optimizers",
    "tinytensor.optim.lr_scheduler": "tt.optim.lr_scheduler: learning-rate schedules",
    "tinytensor.data": "tt.data: minibatches",
    "tinytensor.scipy.special": "tt.scipy.special",
    "tinytensor.scipy.stats": "tt.scipy.stats",
    "tinytensor.scipy.linalg": "tt.scipy.linalg",
    "tinytensor.scipy.integrate": "tt.scipy.integrate",
    "tinytensor.scipy.signal": "tt.scipy.signal",
    "tinytensor.distributed": "tt.distributed: MPI collectives",
    "tinytensor.optim.zero": "tt.distributed.optim: the optimizer step sharded over the ranks",
    "tinytensor.fft": "tt.fft: discrete Fourier transforms",
    "tinytensor.nn.utils.rnn": "tt.nn.utils.rnn: packed sequences",
    "tinytensor.scalar": "tt.scalar: the lecture's scalar engine",
    "tinytensor.backend": "tt.backend: devices and array libraries",
}
# Public modules documented by their docstring only: their names live on another page.
NAMESPACES = ["tinytensor.scipy", "tinytensor.ops", "tinytensor.rng", "tinytensor.nn.attention"]

# Names defined in a public module, without a leading underscore, that are not public on purpose:
# the library's own helpers (the rows behind a public function, constants of the rules).
INTERNAL = {
    "tinytensor.nn.functional": {"conv2d_prim", "conv2d_grad_input", "conv2d_grad_weight",
                                 "max_pool2d_prim", "avg_pool2d_prim", "embedding_prim",
                                 "binary_cross_entropy_prim", "linear_prim", "check_class_range"},
    "tinytensor.linalg": {"einsum", "tensordot", "outer", "inner", "kron"},   # documented as tt.*
}

# Public names a module's `__all__` leaves out on purpose (set from elsewhere, or kept out of
# `import *`).
EXTRA_PUBLIC = {
    "tinytensor.nn.functional": ["scaled_dot_product_attention"],   # set by tt.nn, as PyTorch's F.
    "tinytensor.scalar": ["abs"],   # out of `import *` so that it does not hide the builtin
}

# tt's own names, in sections by the module that defines them (first match wins).
TOP_SECTIONS = [
    ("Tensors and creation", ("tinytensor.tensor",)),
    ("Differentiation", ("tinytensor.transforms", "tinytensor.tape", "tinytensor.inference")),
    ("Checking gradients, your own primitive", ("tinytensor.checks", "tinytensor.user_primitives")),
    ("Looking at the tape", ("tinytensor.views",)),
    ("The lecture's operations", ("tinytensor.ops.softmax_xent",)),
    ("Arithmetic and core operations", ("tinytensor.ops.core",)),
    ("Elementwise functions", ("tinytensor.ops.elementwise",)),
    ("Reductions", ("tinytensor.ops.reductions",)),
    ("Shapes and indexing", ("tinytensor.ops.shape",)),
    ("Linear algebra", ("tinytensor.linalg",)),
    ("NumPy's other functions", ("tinytensor.ops_science",)),
    ("PyTorch's spellings and random state", ("tinytensor.ops_torch", "tinytensor.rng")),
    ("Compiling, saving and loading", ("tinytensor.compile", "tinytensor.serialization")),
]


def primitive_class():
    from tinytensor.tape import Primitive
    return Primitive


def home(obj):
    """The module that defines `obj` (a Primitive's is its forward function's)."""
    if isinstance(obj, primitive_class()):
        obj = obj.fun
    return getattr(obj, "__module__", None)


def public_names(modname):
    """The module's public names (its `__all__`), submodules left out."""
    mod = importlib.import_module(modname)
    names = getattr(mod, "__all__", None)
    if names is None:
        raise AssertionError(f"{modname} has no __all__: the reference cannot tell its public names")
    names = list(dict.fromkeys(list(names) + EXTRA_PUBLIC.get(modname, [])))
    return [n for n in names if not isinstance(getattr(mod, n, None), types.ModuleType)]


def public_submodules(modname):
    mod = importlib.import_module(modname)
    return [f"{modname}.{n}" for n in getattr(mod, "__all__", ())
            if isinstance(getattr(mod, n, None), types.ModuleType)]


def undeclared(modname):
    """Functions, classes and primitives defined in the module, without a leading underscore,
    that are neither public (`__all__`) nor INTERNAL: a new name someone forgot to publish."""
    mod = importlib.import_module(modname)
    declared = set(public_names(modname)) | INTERNAL.get(modname, set())
    found = []
    for name, obj in vars(mod).items():
        if name.startswith("_") or name in declared:
            continue
        if (inspect.isfunction(obj) or inspect.isclass(obj) or isinstance(obj, primitive_class())) \
                and home(obj) == modname:
            found.append(name)
    return found


def kind(obj):
    if isinstance(obj, primitive_class()):
        return "primitive"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def sections(modname):
    """[(title or None, [names])] for the module's page."""
    names = public_names(modname)
    if modname != "tinytensor":
        return [(None, sorted(names, key=lambda n: (n.lower(), n)))]
    import tinytensor as tt
    out, left = [], set(names)
    for title, homes in TOP_SECTIONS:
        picked = sorted((n for n in left if (home(getattr(tt, n)) or "").startswith(homes)),
                        key=lambda n: (n.lower(), n))
        if picked:
            out.append((title, picked))
            left -= set(picked)
    if left:
        out.append(("Other names", sorted(left, key=lambda n: (n.lower(), n))))
    return out


def page(modname):
    title = PUBLIC_MODULES[modname]
    mod = importlib.import_module(modname)
    lines = [f".. _api-{modname}:", "", title, "=" * len(title), "",
             f".. automodule:: {modname}", "   :no-members:", "", f".. currentmodule:: {modname}", ""]
    subs = [s for s in public_submodules(modname)]
    if subs:
        lines += ["Submodules: " + ", ".join(f":mod:`{s}`" for s in subs) + ".", ""]
    for title, names in sections(modname):
        if title:
            lines += [title, "-" * len(title), ""]
        lines += [".. autosummary::", "   :nosignatures:", ""] + [f"   {n}" for n in names] + [""]
        for n in names:
            k = kind(getattr(mod, n))
            lines += [f".. auto{k}:: {n}"]
            if k == "class":
                lines += ["   :members:"]
            if k == "data" and type(getattr(mod, n)).__module__ != "builtins":
                lines += ["   :no-value:"]     # an object with its own docstring (REGISTRY): not its repr
            lines += [""]
    return "\n".join(lines).rstrip() + "\n"


def index_page():
    lines = ["API reference", "=============", "",
             "Every public name of tinytensor, one page per module, generated from the docstrings.",
             "The examples assume ``import numpy as np`` and ``import tinytensor as tt``; they run",
             "as doctests in the test suite.", "", ".. toctree::", "   :maxdepth: 1", ""]
    lines += [f"   {m}" for m in PUBLIC_MODULES] + ["   namespaces", ""]
    return "\n".join(lines)


def namespaces_page():
    lines = ["Namespaces", "==========", "",
             "Modules whose names are documented on another page.", ""]
    for m in NAMESPACES:
        lines += [f".. automodule:: {m}", "   :no-members:", ""]
    return "\n".join(lines).rstrip() + "\n"


def expected_pages():
    pages = {f"{m}.rst": page(m) for m in PUBLIC_MODULES}
    pages["index.rst"] = index_page()
    pages["namespaces.rst"] = namespaces_page()
    return pages


def documented(text):
    """(module, name) pairs that an API page's autosummary tables list."""
    out, module, in_table = set(), None, False
    for line in text.splitlines():
        m = re.match(r"\.\. currentmodule:: (\S+)", line)
        if m:
            module = m.group(1)
        if line.startswith(".. autosummary::"):
            in_table = True
        elif in_table and line.startswith("   ") and not line.strip().startswith(":"):
            out.add((module, line.strip()))
        elif in_table and line.strip() and not line.startswith("   "):
            in_table = False
    return out


def write():
    API.mkdir(exist_ok=True)
    for name, text in expected_pages().items():
        (API / name).write_text(text)


# ----- the Sphinx extension ------------------------------------------------------------------
def setup(app):
    from sphinx.ext.autodoc import FunctionDocumenter

    class PrimitiveDocumenter(FunctionDocumenter):
        """A Primitive (tt.exp, tt.sum, F.conv2d, ...) is documented as the function it is."""
        objtype = "primitive"
        directivetype = "function"
        priority = FunctionDocumenter.priority + 1

        @classmethod
        def can_document_member(cls, member, membername, isattr, parent):
            in_class = inspect.isclass(getattr(parent, "object", None))
            return isinstance(member, primitive_class()) and not in_class

        def format_args(self, **kwargs):
            try:
                return str(inspect.signature(self.object.fun)).replace("\\", r"\\")
            except (TypeError, ValueError):
                return "(*args, **kwargs)"

    app.setup_extension("sphinx.ext.autodoc")
    app.add_autodocumenter(PrimitiveDocumenter)
    app.connect("autodoc-skip-member", _skip_primitive_methods)
    app.connect("autodoc-process-docstring", _house_style_to_rst)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# ----- docstrings in the house style, read as reStructuredText --------------------------------------
NUMPY_SECTIONS = ("Parameters", "Returns", "Raises", "Examples", "Yields", "Notes", "See Also",
                  "Attributes", "Methods", "Warns", "References")


def first_section(lines):
    """The index of the first NumPy-style section header (`Examples` over `--------`), or None."""
    for i, (a, b) in enumerate(zip(lines, lines[1:])):
        if a.strip() in NUMPY_SECTIONS and b.strip() and set(b.strip()) == {"-"}:
            return i
    return None


def is_numpy_style(lines):
    return first_section(lines) is not None


_BORROWED = None


def borrowed_from(doc):
    """The NumPy or SciPy function whose docstring `doc` is (a primitive that stands for it
    carries its documentation, for help()), or None."""
    global _BORROWED
    if _BORROWED is None:
        import numpy as np
        import scipy.linalg
        import scipy.signal
        import scipy.special
        _BORROWED = {}
        for prefix, mod in [("scipy.signal", scipy.signal), ("scipy.linalg", scipy.linalg),
                            ("scipy.special", scipy.special), ("numpy.linalg", np.linalg),
                            ("numpy", np)]:
            for name in dir(mod):
                d = getattr(getattr(mod, name, None), "__doc__", None)
                if isinstance(d, str) and len(d) > 200:
                    _BORROWED[_key(d)] = f"{prefix}.{name}"
    return _BORROWED.get(_key(doc)) if doc else None


def _key(doc):
    """A docstring without its signature line (autodoc strips it) and surrounding blank lines."""
    lines = inspect.cleandoc(doc).strip().splitlines()
    if lines and re.match(r"^[\w.]+\(.*\)", lines[0]):
        lines = lines[1:]
    return "\n".join(lines).strip()


def _summary(doc):
    """The first sentence-ish line of a NumPy or SciPy docstring (after its signature line)."""
    for line in inspect.cleandoc(doc).splitlines():
        line = line.strip()
        if line and not re.match(r"^[\w.]+\(.*\)$", line) and "(" not in line[:1]:
            return line
    return ""


_LITERAL = re.compile(r"(``.*?``|`[^`]+`)")


def _inline(text):
    """House style to RST in running text: `code` is a literal; stray * | and name_ are escaped."""
    out = []
    for piece in _LITERAL.split(text):
        if out and out[-1].endswith("``") and piece[:1].isalnum():
            out.append("\\ ")                 # `TraceRow`s: a literal followed by a letter
        if piece.startswith("``"):
            out.append(piece)
        elif piece.startswith("`") and piece.endswith("`") and len(piece) > 1:
            out.append("``" + piece[1:-1] + "``" if piece[1:-1].strip() == piece[1:-1] else piece)
        else:
            piece = piece.replace("\\", "\\\\").replace("*", r"\*").replace("|", r"\|")
            out.append(re.sub(r"(\w)_(?=\W|$)", r"\1\\_", piece))
    return "".join(out)


def house_style_to_rst(lines):
    """Docstrings written in the house's plain style (backticks for code, indented blocks for
    examples) rendered as RST: indented blocks become literal blocks, the rest escapes its marks."""
    out, literal_indent, prev_indent, doctest = [], None, 0, False
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        doctest = stripped.startswith(">>>") or (doctest and bool(stripped))
        if doctest:                                     # a doctest block: as written
            out.append(line)
            continue
        if literal_indent is not None:
            if not stripped or indent >= literal_indent:
                out.append(line)
                continue
            literal_indent = None
            out.append("")
        if stripped and indent > prev_indent:          # an indented block: a literal block
            if out and out[-1].strip():
                out.append("")
            out += ["::", ""]
            out.append(line)
            literal_indent = indent
            continue
        out.append(_inline(line))
        if stripped:
            prev_indent = indent
    return out


def with_true_margin(obj, lines):
    """autodoc dedents a docstring by its least indented line, so a body that is all one
    indented example loses its indentation; the closing quotes' line gives the true margin."""
    from sphinx.util.docstrings import prepare_docstring
    raw = getattr(obj, "__doc__", None)
    if not isinstance(raw, str) or "\n" not in raw or raw.split("\n")[-1].strip():
        return lines
    if [line.rstrip() for line in prepare_docstring(raw)] != [line.rstrip() for line in lines]:
        return lines    # not the docstring autodoc read (a signature line taken off, ...)
    margin = len(raw.split("\n")[-1])
    first, *rest = raw.split("\n")
    out = [first.strip()] + [line[margin:] if line[:margin].strip() == "" else line.lstrip()
                             for line in rest]
    while out and not out[-1].strip():
        out.pop()
    return out + [""]


def _house_style_to_rst(app, what, name, obj, options, lines):
    doc = "\n".join(lines)
    source = borrowed_from(doc)
    if source:
        summary = _summary(doc)
        lines[:] = [_inline(summary), "",
                    f"Differentiable ``{source}``: the same arguments and results, recorded on the tape "
                    "with both rules (reverse and forward mode). The full description is in "
                    f"{source.split('.')[0].capitalize()}'s documentation of ``{source}``.", ""]
        return
    cut = first_section(lines)
    if cut is not None:   # NumPy's sections, after a description that may be in the house style
        from sphinx.ext.napoleon import Config
        from sphinx.ext.napoleon.docstring import NumpyDocstring
        config = Config(napoleon_use_param=False, napoleon_use_rtype=False, napoleon_use_ivar=True,
                        napoleon_preprocess_types=False)
        head = house_style_to_rst(lines[:cut])
        lines[:] = str(NumpyDocstring(head + [""] + lines[cut:], config, app, what, name, obj,
                                      options)).splitlines()
    else:
        lines[:] = house_style_to_rst(with_true_margin(obj, lines))


def _skip_primitive_methods(app, what, name, obj, skip, options):
    """Tensor's methods that are primitives (t.exp(), ...) are documented once, as tt.<name>."""
    if what == "class" and isinstance(obj, primitive_class()):
        return True
    return None


if __name__ == "__main__":
    sys.path.insert(0, str(DOCS.parent))
    write()
    print(f"wrote {len(expected_pages())} pages to {API}")

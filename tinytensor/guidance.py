"""Which tt.scipy function to use instead, when a SciPy function met a Tensor that requires grad.

SciPy converts its arguments with asarray, which tinytensor refuses while recording (the
gradient would be lost). `hint()` looks at the calling frames for the SciPy function that made
the conversion and names its differentiable twin in tt.scipy, if there is one. It lives below
the engine (tensor.py asks it) and finds tt.scipy among the loaded modules, never importing it:
tt.scipy stands above the engine, as jax.scipy above jax.numpy.
"""

import inspect
import sys

SUBPACKAGES = ("stats", "special", "linalg", "integrate", "signal")


def _spelling(frame):
    """("stats", "norm.logpdf") for a frame of a SciPy function or method; None if not public."""
    module = frame.f_globals.get("__name__", "")
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] == "_lib":      # a decorator of SciPy's: the function it wraps
        for value in frame.f_locals.values():
            inner = getattr(value, "__module__", None) or ""
            if callable(value) and inner.split(".")[1:2] and inner.split(".")[1] in SUBPACKAGES:
                return inner.split(".")[1], value.__name__
        return None
    if len(parts) < 2 or parts[1] not in SUBPACKAGES:
        return None
    name = frame.f_code.co_name
    owner = frame.f_locals.get("self")
    if owner is not None:
        owner = getattr(owner, "dist", owner)          # a frozen distribution: its distribution
        kind = getattr(owner, "name", None) or type(owner).__name__
        for suffix in ("_gen", "_frozen"):
            kind = kind[:-len(suffix)] if kind.endswith(suffix) else kind
        return parts[1], f"{kind}.{name}"
    return parts[1], name


def _twin(sub, dotted):
    target = sys.modules.get(f"{__package__}.scipy.{sub}")      # loaded with tinytensor itself
    if target is None:
        return False
    for part in dotted.split("."):
        target = inspect.getattr_static(target, part, None)   # not SciPy's, through __getattr__
        if target is None or part.startswith("_"):
            return False
    return True


def hint(skip=2):
    """' Here scipy.stats.norm.logpdf was given it: use tt.scipy.stats.norm.logpdf ...', or ''."""
    frame = sys._getframe(skip)
    spellings = []
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("scipy."):
            spelling = _spelling(frame)
            if spelling:
                spellings.append(spelling)
        elif spellings and not module.startswith("numpy"):
            break                               # the caller of the outermost SciPy frame
        frame = frame.f_back
    for sub, dotted in reversed(spellings):     # the outermost (public) name first
        if _twin(sub, dotted):
            return (f". Here scipy.{sub}.{dotted} was given it: tt.scipy.{sub}.{dotted} takes the same "
                    f"arguments and is differentiable")
    return ""

"""Random draws that tt.compile replays: `draw(fun, rng, *args)` is `fun(rng, *args)`, and while
tt.compile records a function it is noted as a line of the program, so every call of the
compiled program draws anew from the same generator, in the order the eager function would.

Every random number tinytensor makes inside a function goes through `draw` (`tt.randn`,
`tt.rand`, `nn.Dropout`'s masks). `rng` is what the caller gave: an np.random.Generator, a
seed, or None, resolved by `fun` on every call. A draw made past it (a Generator's own methods
inside a compiled function) is found at trace time and refused by tt.compile.
"""

import functools
import inspect
import types
import weakref

import numpy as np

from .rng import generator
from .state import STATE


def draw(fun, rng, *args, **kwargs):
    """fun(rng, *args, **kwargs), noted by tt.compile's recorder as a draw to repeat per call."""
    if STATE.batch:          # inside tt.vmap: its randomness= decides (vmap.batched_draw)
        _refuse_inside_vmap(fun)
    return draw_once(fun, rng, *args, **kwargs)


def draw_once(fun, rng, *args, **kwargs):
    """`draw` without tt.vmap's check (vmap.batched_draw has made it)."""
    recorder = STATE.recorder
    if recorder is not None:
        return recorder.draw(fun, rng, args, kwargs)
    return fun(rng, *args, **kwargs)


_NAMES = {"standard_normal": "tt.randn", "uniform": "tt.rand", "_multinomial": "tt.multinomial"}


def _refuse_inside_vmap(fun):
    """A draw made inside tt.vmap outside Dropout: randomness="same" (every vmap around it) draws
    it once for all examples; "error" raises, and so does "different" (only Dropout's masks are
    drawn per example: draw the rest outside vmap, one per example, and map over them)."""
    modes = {frame.randomness for frame in STATE.batch}
    if modes == {"same"}:
        return
    name = _NAMES.get(getattr(fun, "__name__", ""), "a random draw")
    err = RuntimeError(
        f"{name} inside tt.vmap with randomness={'error' if 'error' in modes else 'different'!r}: "
        f"{'say what the examples should get' if 'error' in modes else 'only nn.Dropout draws per example'}"
        f". Draw it once for all examples with tt.vmap(f, randomness='same'), or draw one per example "
        f"outside vmap (shape (batch, ...)) and pass it as a mapped argument")
    err._not_batchable = True
    raise err


def standard_normal(rng, shape):
    return generator(rng).standard_normal(shape)     # None: the global generator (tt.manual_seed)


def uniform(rng, shape):
    return generator(rng).random(shape)


def generators_in(*objects):
    """The np.random.Generators (and legacy RandomStates) among objects and, one level down,
    their attributes, closure cells and containers (where tt.compile looks for generators a
    function may draw from)."""
    found, seen = [], {}     # id -> the most levels below it visited (met again higher up: again)

    def visit(obj, depth):
        if seen.get(id(obj), -1) >= depth or type(obj) in weakref.ProxyTypes:    # (a proxy: maybe dead)
            return
        first = id(obj) not in seen
        seen[id(obj)] = depth
        if isinstance(obj, (np.random.Generator, np.random.RandomState)):
            if first:
                found.append(obj)
            return
        if depth == 0:
            return
        if isinstance(obj, functools.partial):
            items = [obj.func, *obj.args, *obj.keywords.values()]
        elif isinstance(obj, (tuple, list)):
            items = obj
        elif isinstance(obj, dict):
            items = obj.values()
        elif callable(obj) and isinstance(_attribute(obj, "__code__"), types.CodeType):
            cells = [c.cell_contents for c in (obj.__closure__ or ()) if _filled(c)]
            glob = getattr(obj, "__globals__", {})
            items = cells + [glob[n] for n in obj.__code__.co_names if n in glob]
        elif not isinstance(obj, type) and isinstance(_attribute(obj, "__dict__"), dict):
            items = list(vars(obj).values())
        else:
            return
        for item in items:
            visit(item, depth - 1)

    for obj in objects:
        visit(obj, 3)
    return found


def _filled(cell):
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


def _attribute(obj, name):
    """obj.name, or None where it has none, without running a __getattr__ of obj's class (a
    user's may raise anything)."""
    try:
        inspect.getattr_static(obj, name)
        return getattr(obj, name, None)
    except Exception:
        return None

"""The one global random generator behind every random default (as PyTorch's default generator).

`tt.randn`, `tt.rand`, `tt.multinomial`, layer initialisation, `nn.init.*`, a `Dropout` made
without `rng=` and `tt.data` shuffles all draw from it when no `rng` is given, so

    tt.manual_seed(0)          # makes a whole program reproducible
    state = tt.get_rng_state() # a uint64 array (savable in a state dict or a safetensors file)
    tt.set_rng_state(state)    # and back

An explicit `rng=` (a seed or an np.random.Generator) still gives a private stream.
"""

import numpy as np

from .state import refuse_read_while_recording, refuse_while_recording

_GLOBAL = np.random.default_rng()   # one object for the whole process; seeding rewinds it in place


def generator(rng=None):
    """The Generator to draw from: the global one for None, else np.random.default_rng(rng)
    (a seed gives a fresh private stream, a Generator is used as it is)."""
    return _GLOBAL if rng is None else np.random.default_rng(rng)


def manual_seed(seed):
    """Seed the global generator (every random default); returns it, as torch.manual_seed."""
    refuse_while_recording("tt.manual_seed()")
    _GLOBAL.bit_generator.state = np.random.PCG64(int(seed)).state
    return _GLOBAL


def seed():
    """Seed the global generator from the operating system's entropy (as torch.seed)."""
    refuse_while_recording("tt.seed()")
    _GLOBAL.bit_generator.state = np.random.PCG64().state


_MASK64 = (1 << 64) - 1


def state_of(gen):
    """The state of an np.random.Generator (PCG64, NumPy's default) as 6 uint64s: what a state
    dict or a safetensors file can hold."""
    state = gen.bit_generator.state
    if state.get("bit_generator") != "PCG64":
        raise TypeError(f"the generator's state can be saved only for NumPy's default PCG64 bit "
                        f"generator, got {state.get('bit_generator')!r}; make it with "
                        f"np.random.default_rng(seed)")
    s, inc = state["state"]["state"], state["state"]["inc"]
    return np.array([s >> 64, s & _MASK64, inc >> 64, inc & _MASK64, state["has_uint32"],
                     state["uinteger"]], dtype=np.uint64)


def set_state_of(gen, array):
    """Restore a state made by `state_of` into `gen` (in place)."""
    a = [int(v) for v in np.asarray(array, dtype=np.uint64).reshape(-1)]
    if len(a) != 6:
        raise ValueError(f"a generator state is 6 uint64 values (see tt.get_rng_state), got {len(a)}")
    gen.bit_generator.state = {"bit_generator": "PCG64",
                               "state": {"state": (a[0] << 64) | a[1], "inc": (a[2] << 64) | a[3]},
                               "has_uint32": a[4], "uinteger": a[5]}
    return gen


def get_rng_state():
    """The global generator's state, a uint64 array of 6 (as torch.get_rng_state's ByteTensor).

    Examples
    --------
    >>> state = tt.get_rng_state()
    >>> a = tt.rand(2)
    >>> tt.set_rng_state(state)
    >>> bool((tt.rand(2).numpy() == a.numpy()).all())
    True
    """
    refuse_read_while_recording("tt.get_rng_state()")
    return state_of(_GLOBAL)


def set_rng_state(state):
    """Rewind the global generator to a state from `get_rng_state()`.

    Examples
    --------
    >>> state = tt.get_rng_state()
    >>> a = tt.randn(2)
    >>> tt.set_rng_state(state)
    >>> bool((tt.randn(2).numpy() == a.numpy()).all())
    True
    """
    refuse_while_recording("tt.set_rng_state()")
    set_state_of(_GLOBAL, state)

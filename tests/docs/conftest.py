import pytest

import tinytensor as tt
from tinytensor import backend, scalar


@pytest.fixture
def global_state(registry, monkeypatch):
    """What a guide or a docstring example may change for the whole process, put back
    afterwards: the primitives it registers (conftest's registry), the devices it registers
    (tt.backend.register_device's example), the scalar engine's printing, the global generator."""
    monkeypatch.setattr(scalar.Node, "verbose", scalar.Node.verbose)
    monkeypatch.setattr(backend, "_DEVICES", dict(backend._DEVICES))
    monkeypatch.setattr(backend, "_BY_TYPE", dict(backend._BY_TYPE))
    rng_state = tt.get_rng_state()
    yield
    tt.set_rng_state(rng_state)
    scalar.reset_names()

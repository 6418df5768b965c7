import pytest

import tinytensor as tt
from tinytensor import scalar


@pytest.fixture
def global_state(registry, monkeypatch):
    """What a guide or a docstring example may change for the whole process, put back
    afterwards: the primitives it registers (conftest's registry), the scalar engine's printing,
    the global generator."""
    monkeypatch.setattr(scalar.Node, "verbose", scalar.Node.verbose)
    rng_state = tt.get_rng_state()
    yield
    tt.set_rng_state(rng_state)
    scalar.reset_names()

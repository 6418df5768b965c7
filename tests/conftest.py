import pytest

import tinytensor as tt


@pytest.fixture
def registry():
    """User primitives register globally by name; take the test's ones out again."""
    saved = dict(tt.REGISTRY)
    yield
    tt.REGISTRY.clear()
    tt.REGISTRY.update(saved)

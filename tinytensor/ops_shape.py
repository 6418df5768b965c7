"""Old import path: the module is tinytensor/ops/shape.py (this name is that module, not a copy)."""
import importlib
import sys

sys.modules[__name__] = importlib.import_module(".ops.shape", __package__)

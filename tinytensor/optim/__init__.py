"""Optimizers (`SGD`, `Adam`, `AdamW`, `RMSprop`) and learning-rate schedules
(`tt.optim.lr_scheduler`), with PyTorch's exact update rules; see optimizer.py."""

from . import lr_scheduler
from .optimizer import SGD, Adam, AdamW, Optimizer, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]

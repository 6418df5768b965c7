"""`tt.inference_mode()`, PyTorch's spelling for evaluation: here the same as `no_grad` (nothing
is recorded; tinytensor has no separate inference tensors). A context manager and a decorator,
bare or called; `inference_mode(False)` leaves the grad mode as it is, as PyTorch's."""

from .tape import STATE, _GradMode


class inference_mode(_GradMode):
    """As PyTorch's `torch.inference_mode`: nothing is recorded inside (as `tt.no_grad`); a
    context manager or a decorator.

    Examples
    --------
    >>> w = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> with tt.inference_mode():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """
    def __new__(cls, mode=True):
        if callable(mode):                # used bare as a decorator: @tt.inference_mode
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self._prev and not self.mode

    def _fresh(self):
        return inference_mode(self.mode)

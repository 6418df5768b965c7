"""The engine's modes, one set per thread (`STATE`).

PyTorch keeps grad mode per thread; so does tinytensor: a `no_grad` evaluator in one thread, a
trainer in another and `tt.compile` recording in a third never see each other's modes.

* `grad_enabled`  False inside `no_grad()`
* `anomaly`       True inside `detect_anomaly()`
* `depth`         how many transforms are tracing their function in this thread
* `recorder`      `tt.compile`'s tracer while it records a function in this thread, else None
* `hook`          what `Primitive.__call__` tells about each new Tensor: the recorder, or the
                  anomaly check, or None (see `update_hook`)
* `memory_write`  the stamp of the last in-place write this thread made (`tensor.mark_modified`)
* `batch`         the frames of the `tt.vmap` calls running in this thread, outermost first
                  (vmap.py); while one runs, `Primitive.__call__` asks it about batched operands

Like JAX's autodidax `bind -> find_top_trace -> process_primitive`: every primitive call,
NumPy dispatch on Tensors and rule applied by a sweep asks `STATE` whether something is
recording, and nothing process-wide is ever patched.

Reading a `threading.local` costs about twice a plain attribute, twice per primitive: measured
as +5 % on a chain of 300 primitives. So the hot paths first read `SHARED.quiet`, a plain
attribute that is True while no thread has gradients off, a recorder or anomaly mode (a training
loop's forward and backward), and read `STATE` only when it is False.
"""

import contextlib
import threading


class _Shared:
    quiet = True      # no thread is in no_grad, detect_anomaly or a tt.compile recording


SHARED = _Shared()
_UNUSUAL = [0]        # how many threads are not quiet
_LOCK = threading.Lock()


class _State(threading.local):
    anomaly = False
    depth = 0
    recorder = None
    hook = None
    memory_write = -1
    batch = ()
    _grad = True
    _unusual = False

    @property
    def grad_enabled(self):
        return self._grad

    @grad_enabled.setter
    def grad_enabled(self, flag):
        self._grad = flag
        _refresh(self)


STATE = _State()


def refuse_while_recording(what):
    """Raise if tt.compile is recording in this thread: `what` (an optimizer step, a scheduler
    step, gradient clipping) changes state the compiled program would not change again."""
    if not SHARED.quiet and STATE.recorder is not None:
        raise RuntimeError(
            f"tt.compile: {what} inside a compiled function changes state (parameters, .grad, "
            f"optimizer or scheduler state) that the compiled program would not change again on "
            f"later calls. Call it outside: compile the loss and its gradients, "
            f"step = tt.compile(tt.value_and_grad(loss)), then update in Python (hand the "
            f"gradients to p.grad and call optimizer.step(), or p.data -= lr * g)")


def refuse_read_while_recording(what):
    """Raise if tt.compile is recording in this thread: `what` reads state (the global
    generator's) that is not a value the program computes, so it would keep the recording's."""
    if not SHARED.quiet and STATE.recorder is not None:
        raise RuntimeError(
            f"tt.compile: {what} inside a compiled function reads the global generator's state, "
            f"which the program would keep from the recording call (its draws are replayed, the "
            f"state is not a value it computes). Call it outside the compiled function")


def call_warning(text):
    """A UserWarning about how an operation was called (its arguments' spelling, not their
    values): tt.compile gives it again on every call of a program that made that call."""
    warning = UserWarning(text)
    warning.tt_every_call = True
    return warning


def number_value(x):
    """x itself, or, where x is a number argument tt.compile is recording (a stand-in a
    transform differentiates or batches), its 0-d array as a line of the program: the number
    stays an input of the program instead of a key of its cache."""
    recorder = STATE.recorder
    if recorder is not None and type(x) in recorder.number_types:
        return recorder.number_array(x)
    return x


def traced_data(t):
    """t.data (t a Tensor) for tinytensor's own code that computes on the value with NumPy
    (a mask from a shape parameter, counts): while tt.compile records, the traced array, whose
    NumPy operations are recorded as lines of the program (recomputed on every call) instead of
    a value frozen at the recording."""
    recorder = None if SHARED.quiet else STATE.recorder
    return t.data if recorder is None else recorder.data_of(t)


def traced_array(a):
    """An array tinytensor hands to user code as it is (Dropout's `.mask`): while tt.compile
    records and `a` is a traced value, the traced array (user code's NumPy operations on it are
    recorded); else `a`."""
    recorder = None if SHARED.quiet else STATE.recorder
    return a if recorder is None else recorder.array_of(a)


def constant_read(t, how):
    """t.data, read by tinytensor's own code as a constant of what it computes (repeat's counts,
    a fill value, quantile's q, a size): while tt.compile records, a guard on the whole value
    (the program records anew when it changes) instead of a number frozen at the recording."""
    recorder = None if SHARED.quiet else STATE.recorder
    if recorder is not None:
        recorder.read(t, how)
    return t.data


def recording():
    """Whether tt.compile records in this thread."""
    return not SHARED.quiet and STATE.recorder is not None


def replayed_while_recording(what, method, *args, **kwargs):
    """While tt.compile records in this thread: `method(*args, **kwargs)` (an optimizer's
    step or zero_grad, a scheduler's step, gradient clipping) runs now and becomes a line of the
    compiled program, which calls it again on every call (a whole training step); returns
    (True, its result). Otherwise (False, None): the caller does its work as usual."""
    if SHARED.quiet or STATE.recorder is None:
        return False, None
    return True, STATE.recorder.effect(what, method, args, kwargs)


@contextlib.contextmanager
def off_the_record(anomaly_check):
    """The block runs with this thread's tt.compile recording paused (what it computes is not
    noted: an effect run now that the program repeats, a check run whole), then resumed."""
    recorder = STATE.recorder
    STATE.recorder = None
    update_hook(anomaly_check)
    try:
        yield recorder
    finally:
        STATE.recorder = recorder
        update_hook(anomaly_check)


def update_hook(anomaly_check):
    """Set STATE.hook after a change of `anomaly` or `recorder` (the recorder checks anomalies
    itself while it records)."""
    STATE.hook = STATE.recorder or (anomaly_check if STATE.anomaly else None)
    _refresh(STATE)


def set_batch(frames):
    """Set STATE.batch (tt.vmap's frames in this thread); SHARED.quiet follows."""
    STATE.batch = frames
    _refresh(STATE)


def _refresh(state):
    """Count this thread as quiet or not after a change of its modes; SHARED.quiet follows."""
    unusual = not state._grad or state.hook is not None or bool(state.batch)
    if unusual != state._unusual:
        state._unusual = unusual
        with _LOCK:
            _UNUSUAL[0] += 1 if unusual else -1
            SHARED.quiet = _UNUSUAL[0] == 0

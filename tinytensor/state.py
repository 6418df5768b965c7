"""The engine's modes, one set per thread (`STATE`).

PyTorch keeps grad mode per thread; so does tinytensor: a `no_grad` evaluator in one thread, a
trainer in another and `tt.compile` recording in a third never see each other's modes.

* `grad_enabled`  False inside `no_grad()`
* `anomaly`       True inside `detect_anomaly()`
* `depth`         how many transforms are tracing their function in this thread
* `recorder`      `tt.compile`'s tracer while it records a function in this thread, else None
* `memory_write`  the stamp of the last in-place write this thread made (`tensor.mark_modified`)
* `hook`          what `Primitive.__call__` tells about each new Tensor: the recorder, or the
                  anomaly check, or None (one test on the hot path for both; see `update_hook`)

Like JAX's autodidax `bind -> find_top_trace -> process_primitive`: every primitive call,
NumPy dispatch on Tensors and rule applied by a sweep asks `STATE` whether something is
recording, and nothing process-wide is ever patched.
"""

import threading


class _State(threading.local):
    grad_enabled = True
    anomaly = False
    depth = 0
    recorder = None
    hook = None
    memory_write = -1     # the stamp of this thread's last in-place write (what tt.compile checks)


STATE = _State()


def update_hook(anomaly_check):
    """Set STATE.hook after a change of `anomaly` or `recorder` (the recorder checks anomalies
    itself while it records)."""
    STATE.hook = STATE.recorder or (anomaly_check if STATE.anomaly else None)

"""What both benchmark scripts share: timing with medians, tables, the machine, the slope fit.

The scripts pin BLAS (and XLA, torch) to one thread in their first lines, before NumPy loads,
and time everything in one process, so that the ratios printed side by side come from the
same machine under the same load.
"""

import gc
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:   # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# ----- timing ---------------------------------------------------------------------------------------
# The clock: wall time by default. On a machine shared with other jobs, CPU time of this
# process (`use_cpu_clock()`) is far less noisy: time slices taken by other processes do not
# count. Every framework here runs on one thread, so both clocks measure the same work.
CLOCK = {"timer": time.perf_counter, "name": "wall clock (time.perf_counter)"}


def use_cpu_clock():
    CLOCK.update(timer=time.process_time, name="CPU time of this process (time.process_time)")


def calibrate(fn, min_time):
    """How many calls of `fn` take at least `min_time` seconds (at least 1); calls fn a few times."""
    clock = CLOCK["timer"]
    number = 1
    while True:
        start = clock()
        for _ in range(number):
            fn()
        elapsed = clock() - start
        if elapsed >= min_time:
            return number
        number = max(number + 1, math.ceil(number * min_time / max(elapsed, 1e-7) * 1.1))


def time_calls(fn, number, repeats):
    """`repeats` samples of the time per call, each the mean over `number` consecutive calls."""
    clock = CLOCK["timer"]
    samples = []
    for _ in range(repeats):
        start = clock()
        for _ in range(number):
            fn()
        samples.append((clock() - start) / number)
    return samples


class gc_paused:
    """Collect, then keep the cyclic garbage collector off inside (as `timeit` does).

    Both scalar engines build graphs of 10^5 to 10^6 Python objects per step; with the collector
    on, CPython re-traverses them over and over while they grow (several times the cost of the
    step itself), which would measure the collector's heuristics rather than the engines.
    """

    def __enter__(self):
        gc.collect()
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self._was_enabled:
            gc.enable()


def time_per_call(fn, min_time=0.1, repeats=5, warmup=1):
    """Median seconds per call of `fn` over `repeats` samples of at least `min_time` each
    (the garbage collector paused, see `gc_paused`)."""
    with gc_paused():
        for _ in range(warmup):
            fn()
        number = calibrate(fn, min_time)
        return statistics.median(time_calls(fn, number, repeats))


def median(values):
    return statistics.median(values)


# ----- printing ---------------------------------------------------------------------------------------
def format_time(seconds):
    """1.23 s, 45.6 ms, 789 µs, 1.2 µs: three significant figures."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_ratio(ratio):
    if ratio is None or not math.isfinite(ratio):
        return "—"
    return f"{ratio:.3g}×" if ratio < 100 else f"{ratio:,.0f}×"


def markdown_table(headers, rows, align=None):
    """A GitHub markdown table; `align` is a string of 'l'/'r' per column (default: l then r)."""
    align = align or "l" + "r" * (len(headers) - 1)
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row):
        return "| " + " | ".join(c.ljust(w) if a == "l" else c.rjust(w)
                                 for c, w, a in zip(row, widths, align)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if a == "r" else ("-" * (w + 2))
                          for w, a in zip(widths, align)) + "|"
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def machine_description(extra_versions=()):
    """The lines that say where and with what a table was measured."""
    cpu = "unknown CPU"
    try:
        for row in Path("/proc/cpuinfo").read_text().splitlines():
            if row.startswith("model name"):
                cpu = row.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    threads = ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in THREAD_VARIABLES)
    versions = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    versions += [f"{name} {version}" for name, version in extra_versions]
    return [f"machine: {os.cpu_count()} CPU cores (nproc), {cpu}, {platform.system()} {platform.machine()}",
            f"versions: {', '.join(versions)}",
            f"threads: {threads}"]


def package_version(name):
    """The installed version of a distribution, or None when it is not installed."""
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# ----- fitting ------------------------------------------------------------------------------------------
def loglog_slope(x, y):
    """The slope of log y against log x (least squares): time ∝ size**slope."""
    if len(x) < 2:
        return float("nan")
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])

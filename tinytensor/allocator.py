"""glibc's allocator, tuned once at import for arrays that come and go every step.

Why: glibc serves a request of at least M_MMAP_THRESHOLD bytes (128 kB to start with) with a
fresh `mmap`, and gives the pages back with `munmap` when the array is freed; heap memory above
M_TRIM_THRESHOLD at the top is given back too. A training step that makes and frees the same
few hundred kB-sized temporaries on every call (a transformer's attention scores: 16 x 4 x 32 x
32 float32 = 256 kB) then pays a page fault for every 4 kB page of every such array, on every
call, and the kernel zeroes each page. The threshold is "dynamic" (it rises to the size of a
freed mmapped block, up to 32 MB), which helps a program that frees its temporaries one at a
time, but not one that holds many of them at once and frees them together, as a generated
program or a long backward pass does: the heap then grows past the trim threshold and is
trimmed at the end of every step.

Measured on the transformer step of `benchmarks/bench_transformer.py` (2-core AMD EPYC, one BLAS
thread, CPU time per step, median of 20 steps): eager 23.2 -> 17.6 ms, compiled 30.8 -> 16.6 ms,
page faults per step 1,537 -> 0 and 6,178 -> 0. PyTorch has its own caching allocator and is
unaffected (12 ms either way).

What: M_MMAP_THRESHOLD = 32 MB (the dynamic threshold's own ceiling, now fixed) and
M_TRIM_THRESHOLD = 256 MB, set through `mallopt`, so freed blocks below 32 MB are reused from
the heap instead of being unmapped, and up to 256 MB of free heap stay with the process. The
cost: a process keeps up to its peak heap (+256 MB of slack) instead of returning it between
steps. Arrays of 32 MB and more are still mapped and unmapped as before.

Opt out with the environment variable TINYTENSOR_MALLOC=0 (set before importing tinytensor);
a user's own MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ (glibc's variables) are respected:
nothing is changed when either is set. Elsewhere than glibc (macOS, Windows, musl) nothing is
done.
"""

import ctypes
import os
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 256 * 2**20

# What was done at import: None (nothing: not glibc, opted out, or the user's own settings),
# else the (parameter, value) pairs that mallopt accepted.
TUNED = None


def tune(environ=os.environ):
    """Set the thresholds above once (see the module docstring); returns what was set, or None."""
    if environ.get("TINYTENSOR_MALLOC", "1") == "0":
        return None
    if "MALLOC_MMAP_THRESHOLD_" in environ or "MALLOC_TRIM_THRESHOLD_" in environ:
        return None
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    done = [(name, value) for name, param, value in (
        ("M_MMAP_THRESHOLD", M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        ("M_TRIM_THRESHOLD", M_TRIM_THRESHOLD, TRIM_THRESHOLD)) if mallopt(param, value) == 1]
    return tuple(done) or None


TUNED = tune()

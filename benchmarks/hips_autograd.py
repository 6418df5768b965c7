"""HIPS autograd's own SciPy tests and example programs, run against tinytensor (issue 30).

  * the SciPy tests (tests/scipy/hips/hips_scipy_cases.py, 93 of them): pass or fail with the
    reason, in autograd's modes and strictly (both modes at every order);
  * the example programs (tests/scipy/hips/hips_examples.py, 27): each run with autograd and with
    tinytensor at the same seed, numbers compared (match: 1e-6 relative), and the time of each
    backend's run (median of --rounds, one BLAS thread) as tinytensor / autograd.

    python benchmarks/hips_autograd.py [--rounds 3]

The suite runs the same cases (tests/scipy/hips/); this prints the whole table and the counts.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "scipy" / "hips")]

from common import machine_description, markdown_table, package_version  # noqa: I001

import hips_examples
import hips_scipy_cases


def scipy_tests():
    rows, counts = [], {"autograd's modes": 0, "both modes": 0}
    for name in hips_scipy_cases.CASES:
        cells = [name]
        for strict, key in ((False, "autograd's modes"), (True, "both modes")):
            try:
                hips_scipy_cases.run(name, strict=strict)
                cells.append("pass")
                counts[key] += 1
            except Exception as err:
                cells.append(f"FAIL ({type(err).__name__})")
        reason = hips_scipy_cases.NOT_SUPPORTED.get(name) or hips_scipy_cases.STRICT_FAILS.get(name, "")
        rows.append(cells + [reason])
    return rows, counts


def _timed(fn, backend, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(backend)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def examples(rounds):
    autograd, tinytensor = hips_examples.autograd_backend(), hips_examples.tinytensor_backend()
    rows, matches = [], 0
    for name, fn in hips_examples.EXAMPLES.items():
        status, detail = hips_examples.compare(name, autograd, tinytensor)
        matches += status == "match"
        ratio = ""
        if status != "error":
            ratio = f"{_timed(fn, tinytensor, rounds) / _timed(fn, autograd, rounds):.2f}"
        rows.append([name, status, detail, ratio])
    return rows, matches


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print("\n".join(machine_description([("autograd", package_version("autograd"))])))
    rows, counts = scipy_tests()
    print("\n## autograd's SciPy tests (tests/test_scipy.py)\n")
    print(markdown_table(["test", "autograd's modes", "both modes", "reason"], rows))
    total = len(hips_scipy_cases.CASES)
    modes = "autograd's modes"
    print(f"\nSciPy tests: {counts[modes]} of {total} pass in autograd's modes, "
          f"{counts['both modes']} of {total} in both modes at every order (target: >= 85)")
    try:
        import autograd  # noqa: F401
    except ImportError:
        print("\nThe example programs are compared with HIPS autograd: pip install autograd")
        return
    rows, matches = examples(args.rounds)
    print("\n## autograd's example programs (examples/)\n")
    print(markdown_table(["program", "status", "numbers", "time tinytensor / autograd"], rows))
    print(f"\nExamples: {matches} of {len(rows)} match autograd's numbers "
          "(target: >= 26, ode_net among them)")
    print("Not ported, and why:")
    for name, reason in hips_examples.NOT_PORTED.items():
        print(f"  {name}: {reason}")


if __name__ == "__main__":
    main()

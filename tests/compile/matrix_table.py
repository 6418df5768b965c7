"""Print issue 29's compile-vs-eager matrix as Markdown: python tests/compile/matrix_table.py

Options: -v lists every case; a substring argument runs only the cases whose name contains it.
"""

import collections
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(os.path.dirname(HERE))]  # the cases, then this checkout

from matrix_cases import CASES  # noqa: E402
from matrix_harness import CLASS_NAMES, classify, first_line  # noqa: E402

OUTCOMES = ("equal", "refused", "differ-after-warning", "silent-difference", "crashed")


def summary(results):
    """The Markdown table of the classes' counts (what docs/guides/compile.md shows)."""
    by_cls = collections.defaultdict(list)
    for r in results:
        by_cls[r.case.cls].append(r)
    rows = ["| class | cases | equal | refused | failing (warn / silent / crashed) "
            "| want=equal only refused | refusal messages (first lines) |",
            "|---|---|---|---|---|---|---|"]
    total = collections.Counter()
    for cls in sorted(by_cls):
        rs = by_cls[cls]
        cnt = collections.Counter(r.outcome for r in rs)
        total.update(cnt)
        only_refused = sum(r.outcome == "refused" and r.case.want == "equal" for r in rs)
        total["want-equal-refused"] += only_refused
        msgs = sorted({_message(r.detail) for r in rs if r.outcome == "refused"})
        fail = cnt["differ-after-warning"] + cnt["silent-difference"] + cnt["crashed"]
        rows.append(f"| {CLASS_NAMES[cls]} | {len(rs)} | {cnt['equal']} | {cnt['refused']} | {fail} "
                    f"({cnt['differ-after-warning']} / {cnt['silent-difference']} / {cnt['crashed']}) "
                    f"| {only_refused} | {'<br>'.join(m.replace('|', '/') for m in msgs)} |")
    fail = total["differ-after-warning"] + total["silent-difference"] + total["crashed"]
    rows.append(f"| all | {len(results)} | {total['equal']} | {total['refused']} | {fail} "
                f"({total['differ-after-warning']} / {total['silent-difference']} / {total['crashed']}) "
                f"| {total['want-equal-refused']} | |")
    return "\n".join(rows)


def _message(detail):
    """A refusal's first line without the function's name (a lambda, f): stable across cases."""
    text = first_line(detail.split(": ", 1)[-1])
    text = re.sub(r"tt\.compile: (<lambda>|\w+) (changed|drew|wrote|reaches)", r"tt.compile: f \2", text)
    return text[:90]


def write(path, table):
    """Put `table` between the page's matrix markers."""
    with open(path) as f:
        page = f.read()
    start, end = page.index(START) + len(START), page.index(END)
    with open(path, "w") as f:
        f.write(page[:start] + "\n" + table + "\n" + page[end:])


def current(path):
    with open(path) as f:
        page = f.read()
    return page[page.index(START) + len(START):page.index(END)].strip()


START, END = "<!-- matrix:start -->", "<!-- matrix:end -->"


def main(argv):
    verbose = "-v" in argv
    target = argv[argv.index("--write") + 1] if "--write" in argv else None
    pattern = [a for a in argv if not a.startswith("-") and a != target]
    cases = [c for c in CASES if not pattern or any(p in c.name for p in pattern)]
    t0 = time.perf_counter()
    results = [classify(c) for c in cases]
    seconds = time.perf_counter() - t0
    table = summary(results)
    print(table)
    if target:
        write(target, table)
        print(f"\nwritten into {target}")
    print(f"\n{len(results)} cases in {seconds:.1f} s")
    churn = [r for r in results if r.case.max_traces is not None and r.outcome == "equal"
             and (r.traces is None or r.traces > r.case.max_traces)]
    if churn:
        print("\nequal, but re-recorded past the limit (a changing float is a cache key):\n")
        for r in churn:
            print(f"- {r.case.name}: {r.traces} recordings in {r.case.n} calls "
                  f"(at most {r.case.max_traces})")
    if verbose or pattern:
        print("\n| case | class | want | outcome | detail |\n|---|---|---|---|---|")
        for r in results:
            print(f"| {r.case.name} | {r.case.cls} | {r.case.want} | {r.outcome} "
                  f"| {r.detail.replace('|', '/')[:200]} |")
    else:
        print("\nfailing cases:\n")
        for r in results:
            if r.outcome not in ("equal", "refused"):
                print(f"- {r.case.name} ({r.outcome}): {r.detail[:200]}")


if __name__ == "__main__":
    main(sys.argv[1:])

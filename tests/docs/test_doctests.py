"""Every example in a public docstring runs (doctest), with `np` and `tt` imported as the
reference says; borrowed NumPy/SciPy docstrings (shown as pointers) are not run."""
import doctest
import inspect

import numpy as np
import pytest
from docs_api import GLOBS, own_docstring, public_objects, tt_api

DEFAULT_PRINTOPTIONS = dict(precision=8, threshold=1000, edgeitems=3, linewidth=75, suppress=False,
                           nanstr="nan", infstr="inf", sign="-", floatmode="maxprec", legacy=False)


def _examples():
    seen, out = set(), []
    for qualname, obj in public_objects():
        targets = [(qualname, obj)]
        if inspect.isclass(obj):
            targets += [(f"{qualname}.{n}", m) for n, m in vars(obj).items()
                        if not n.startswith("_") and (inspect.isfunction(m) or isinstance(m, property))]
        for name, target in targets:
            doc = own_docstring(target.fget if isinstance(target, property) else target)
            if not doc or ">>>" not in doc or tt_api.borrowed_from(doc) or id(target) in seen:
                continue
            seen.add(id(target))
            out.append(pytest.param(name, doc, id=name))
    return out


@pytest.mark.parametrize("name, doc", _examples())
def test_docstring_example(name, doc, global_state):
    parser = doctest.DocTestParser()
    test = parser.get_doctest(doc, dict(GLOBS), name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out = []
    with np.printoptions(**DEFAULT_PRINTOPTIONS):   # what a user sees, whatever another test set
        runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)

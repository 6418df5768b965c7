"""NumPy's floating-point error handling under tt.compile: f's own `with np.errstate(...)` is kept
line by line, the caller's is followed on every call, a warning shows as many times as eagerly,
and an error f catches (its branch depends on the values) or a setting f leaves changed is refused."""

import warnings

import numpy as np
import pytest

import tinytensor as tt


@pytest.fixture(autouse=True)
def _errstate_back():
    old = np.geterr()
    yield
    np.seterr(**old)


def _calls(f, xs):
    """[(result, [warning messages])] of f on each x."""
    out = []
    for x in xs:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = f(x)
        out.append((np.asarray(y).copy(), [str(w.message) for w in caught]))
    return out


def _same(eager, compiled):
    assert len(eager) == len(compiled)
    for (a, wa), (b, wb) in zip(eager, compiled):
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == np.asarray(b).dtype
        assert wa == wb


XS = [np.array([1.0, -1.0, 2.0]), np.array([3.0, 4.0, 5.0]), np.array([-2.0, 0.0, 1.0])]


def test_errstate_inside_f_is_kept_line_by_line():
    def f(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log(x)
        return y + np.sqrt(x)          # outside: the caller's setting (warn)
    g = tt.compile(f)
    _same(_calls(f, XS), _calls(g, XS))
    assert g.traces == 1


def test_errstate_inside_tensor_code():
    def f(x):
        with np.errstate(invalid="ignore"):
            return tt.log(x) * 2
    xs = [tt.tensor(x) for x in XS]
    _same(_calls(f, xs), _calls(tt.compile(f), xs))


def test_seterr_inside_restored():
    def f(x):
        old = np.seterr(all="ignore")
        try:
            return np.log(x)
        finally:
            np.seterr(**old)
    _same(_calls(f, XS), _calls(tt.compile(f), XS))


def test_warning_shows_once_on_the_recording_call():
    def f(x):
        return np.sqrt(x) * 2
    eager, compiled = _calls(f, XS), _calls(tt.compile(f), XS)
    assert eager[0][1] == ["invalid value encountered in sqrt"]
    _same(eager, compiled)


def test_the_callers_setting_is_followed_on_each_call():
    g = tt.compile(lambda x: np.log(x))
    g(XS[1])
    np.seterr(invalid="raise")
    with pytest.raises(FloatingPointError):
        g(XS[0])
    np.seterr(invalid="ignore")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(g(XS[0])[1])


def test_raise_inside_f_caught_on_a_later_call_runs_f():
    def f(x):
        with np.errstate(invalid="raise"):
            try:
                return np.log(x)
            except FloatingPointError:
                return x * 0
    xs = [XS[1], XS[1] + 1, XS[0], XS[1], XS[2]]
    _same(_calls(f, xs), _calls(tt.compile(f), xs))


def test_raise_caught_while_recording_is_refused():
    def f(x):
        with np.errstate(invalid="raise"):
            try:
                return np.log(x)
            except FloatingPointError:
                return x * 0
    with pytest.raises(RuntimeError, match="caught the FloatingPointError.*uncompiled"):
        tt.compile(f)(XS[0])


def test_linalg_error_caught_while_recording_is_refused():
    def f(a):
        try:
            return tt.linalg.inv(a)
        except np.linalg.LinAlgError:
            return a * 0
    with pytest.raises(RuntimeError, match="caught the LinAlgError"):
        tt.compile(f)(tt.zeros((2, 2)))


def test_seterr_left_changed_is_refused():
    def f(x):
        np.seterr(invalid="ignore")
        return np.log(x)
    before = np.geterr()
    with pytest.raises(RuntimeError, match="np.seterr"):
        tt.compile(f)(XS[1])
    assert np.geterr() == before


def test_warning_filters_f_sets_are_kept_line_by_line():
    def f(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = np.log(x)
        return y + np.sqrt(x)
    _same(_calls(f, XS), _calls(tt.compile(f), XS))

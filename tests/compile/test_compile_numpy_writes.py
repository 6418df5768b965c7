"""NumPy code in f that reads or writes a plain NumPy array through values computed from traced
data (`m[x.data > 0] = 0`, `W[mask]`, `np.fill_diagonal(m, x.data[0])`): NumPy does it in C, where
the recording cannot see it, so the values would be frozen. Each case is equal to eager on every
call (the values change each call) or refused while recording with a message naming the fix;
the cases at the end are the same idioms on values that are not traced, which must compile."""
import warnings

import numpy as np
import pytest

import tinytensor as tt

W = np.arange(6.0)
TABLE = {"a": np.arange(3.0)}


def _m_mask(x):
    m = np.ones(x.shape)
    m[x.data > 0] = 0
    return x * m


def _m_mask_named(x):
    mask = x.data > 0
    m = np.ones(x.shape)
    m[mask] = 0.0
    return x * m


def _m_value(x):
    m = np.zeros(x.shape)
    m[:, 0] = x.data[:, 0]
    return x * m


def _m_value_expr(x):
    m = np.ones(x.shape)
    m[0] = x.data[0] * 2
    return x * m


def _m_augmented(x):
    m = np.ones(x.shape)
    m[0] += x.data[0]
    return x * m


def _plain_getitem_mask(x):
    return tt.tensor(W[:3][x.data[0] > 0].sum()) + x.sum()


def _plain_getitem_argmax(x):
    return tt.tensor(W[x.data.argmax(1)]) * x.sum()


def _closed_table_index(x):
    return tt.tensor(TABLE["a"][x.data.argmax(1)]) * x.sum()


def _attr_container(x):
    class Box:
        pass
    b = Box()
    b.m = np.ones(x.shape)
    b.m[x.data < 0] = 3.0
    return x * b.m


def _helper_mask(x):
    def build(v):
        m = np.ones(v.shape)
        m[v > 0] = 0.0
        return m
    return x * build(x.data)


def _fill_diagonal(x):
    m = np.zeros((3, 3))
    np.fill_diagonal(m, x.data[0])
    return x @ m


def _fill_diagonal_tensor(x):
    m = np.zeros((3, 3))
    np.fill_diagonal(m, x[0])
    return x @ m


def _arr_fresh_setitem(x):
    m = np.ones(x.shape)
    m[x < 0] = 0
    return m * 2


def _arr_plain_getitem(x):
    return W[:3][x[0] > 0].sum()


def _arr_value(x):
    m = np.zeros(x.shape)
    m[:, 1] = x[:, 1]
    return m


def _arr_fill_diagonal(x):
    m = np.zeros((3, 3))
    np.fill_diagonal(m, x[0])
    return m


TENSOR_CASES = [_m_mask, _m_mask_named, _m_value, _m_value_expr, _m_augmented, _plain_getitem_mask,
                _plain_getitem_argmax, _closed_table_index, _attr_container, _helper_mask,
                _fill_diagonal, _fill_diagonal_tensor]
ARRAY_CASES = [_arr_fresh_setitem, _arr_plain_getitem, _arr_value, _arr_fill_diagonal]


def _value(v):
    return np.asarray(v.data if isinstance(v, tt.Tensor) else v)


def _outcome(f, make, calls=12):
    g = tt.compile(f)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(calls):
            x = make(rng)
            e = f(x)
            try:
                c = g(x)
            except RuntimeError as err:
                assert "tt.compile" in str(err)
                return "refused"
            assert type(c) is type(e), (i, type(e), type(c))
            assert np.array_equal(_value(e), _value(c)), (i, _value(e), _value(c))
    return "equal"


@pytest.mark.parametrize("f", TENSOR_CASES, ids=lambda f: f.__name__)
def test_traced_tensor_values_through_numpy_are_equal_or_refused(f):
    _outcome(f, lambda rng: tt.tensor(rng.standard_normal((2, 3))))


@pytest.mark.parametrize("f", ARRAY_CASES, ids=lambda f: f.__name__)
def test_array_argument_values_through_numpy_are_equal_or_refused(f):
    _outcome(f, lambda rng: rng.standard_normal((2, 3)))


def test_the_refusal_names_the_line_and_the_fix():
    g = tt.compile(_m_mask)
    with pytest.raises(RuntimeError, match=r"test_compile_numpy_writes.py:\d+.*np.where"):
        g(tt.tensor(np.ones((2, 3))))


# ----- the same idioms on values that are not traced compile (no refusal) -----
def _static_causal(x):
    T = x.shape[0]
    mask = np.zeros((T, T))
    mask[np.triu_indices(T, 1)] = -np.inf
    h = x.data > 0                    # the frame holds a traced array too
    return (x @ x.T + mask).sum() + tt.tensor(h.sum())


def _static_loop(x):
    m = np.zeros(x.shape)
    for i in range(x.shape[0]):
        m[i, i % x.shape[1]] = 1.0
    return x * m + x.data.max()


def _dict_and_list_stores(x):
    out = {}
    out["loss"] = (x * x).sum()
    parts = [None, None]
    parts[0] = x.data.sum()
    parts[1] = x.mean()
    return out["loss"] + parts[1] + float(parts[0])


def _tensor_store(x):
    y = x * 1.0
    y[x.data > 0] = 0.0
    return y


def _closed_getitem_static(x):
    idx = np.arange(2)
    return x * W[idx].sum() + x.data.sum()


@pytest.mark.parametrize("f", [_static_causal, _static_loop, _dict_and_list_stores,
                               _closed_getitem_static],
                         ids=lambda f: f.__name__)
def test_static_numpy_indexing_still_compiles(f):
    assert _outcome(f, lambda rng: tt.tensor(rng.standard_normal((3, 3)))) == "equal"


def test_tensor_setitem_with_a_traced_mask_is_equal_or_refused():
    _outcome(_tensor_store, lambda rng: tt.tensor(rng.standard_normal((3, 3))))


# ----- NumPy functions that give several arrays: one line of the program, its parts by index --
U = tt.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
SEVERAL = {
    "histogram": lambda x: np.histogram(x, bins=3, range=(-2, 2))[0],
    "histogram_auto_bins": lambda x: np.histogram(x, bins="auto")[0],
    "histogram_weights_U": lambda x: (U * np.histogram(x, bins=3, range=(-2, 2))[0]).sum(),
    "slogdet": lambda x: np.linalg.slogdet(x.reshape(2, 2) + 3 * np.eye(2)),
    "slogdet_part": lambda x: np.linalg.slogdet(x.reshape(2, 2))[1] * 2,
    "eigh": lambda x: np.linalg.eigh(x.reshape(2, 2) + x.reshape(2, 2).T),
    "divmod": lambda x: np.divmod(x, 0.5),
    "frexp": lambda x: np.frexp(x),
    "divmod_tensor": lambda x: np.divmod(tt.tensor(x), 0.5),
    "histogram_data": lambda x: tt.tensor(np.histogram(tt.tensor(x).data, bins=3, range=(-2, 2))[0] * 1.0),
}


@pytest.mark.parametrize("name", sorted(SEVERAL))
def test_numpy_functions_giving_several_arrays_are_recomputed(name):
    f = SEVERAL[name]
    g = tt.compile(f)
    rng = np.random.default_rng(1)
    for i in range(8):
        x = rng.standard_normal(4) * (50.0 if i == 5 else 1.0)     # other bins on call 6
        e, c = f(x), g(x)
        assert type(e) is type(c), (i, type(e), type(c))
        for a, b in zip(e if isinstance(e, tuple) else (e,), c if isinstance(c, tuple) else (c,)):
            a, b = (np.asarray(v.data if isinstance(v, tt.Tensor) else v) for v in (a, b))
            assert a.dtype == b.dtype and np.array_equal(a, b), (i, a, b)


# ----- an array argument's operators and attributes are NumPy's -------------------------------
ARRAY_OPS = {
    "invert_bool": (lambda x: ~(x > 0), "f"),
    "invert_int": (lambda x: ~x, "i"),
    "and_or_xor": (lambda x: ((x > 0) & (x < 2)) | ((x > 1) ^ (x > -1)), "f"),
    "int_and_number": (lambda x: (x & 3) | (1 ^ x), "i"),
    "shifts": (lambda x: (x << 2) + (x >> 1) + (1 << (x % 3)), "i"),
    "round_element": (lambda x: round(x[0]), "f"),
    "round_digits": (lambda x: round(x[1], 2), "f"),
    "tobytes": (lambda x: x.tobytes(), "f"),
    "view_dtype": (lambda x: x.view(np.int64), "f"),
}


@pytest.mark.parametrize("name", sorted(ARRAY_OPS))
def test_array_argument_operators_are_numpys(name):
    f, kind = ARRAY_OPS[name]
    g = tt.compile(f)
    rng = np.random.default_rng(2)
    for i in range(6):
        x = rng.standard_normal(5) * 3 if kind == "f" else rng.integers(-8, 8, 5)
        e, c = f(x), g(x)
        assert type(e) is type(c), (i, type(e), type(c))
        if isinstance(e, np.ndarray):
            assert e.dtype == c.dtype and np.array_equal(e, c), (i, e, c)
        else:
            assert e == c, (i, e, c)


@pytest.mark.parametrize("call", ["x.contiguous()", "x.view(5, -1)", "x.numel()", "x.sign()",
                                  "x.clamp(0, 1)", "x.unsqueeze(0)"])
def test_tensor_only_attributes_of_an_array_argument_raise_as_eagerly(call):
    f = eval(f"lambda x: {call}")
    x = np.ones(5)
    with pytest.raises(Exception) as eager:
        f(x)
    with pytest.raises(type(eager.value)):
        tt.compile(f)(x)


@pytest.mark.parametrize("make", [lambda: np.ones(3), lambda: tt.tensor(np.ones(3))], ids=["array", "Tensor"])
def test_the_same_argument_twice_is_one_object_inside(make):
    f = lambda a, b: a * 2 if a is b else a * 3      # noqa: E731
    g = tt.compile(f)
    for same in (True, False, True, False):
        x = make()
        y = x if same else make()
        e, c = f(x, y), g(x, y)
        assert np.array_equal(_value(e), _value(c)), (same, e, c)
    assert g.traces == 2


def test_container_arguments_returned_are_the_callers_own():
    d = {"a": np.ones(2)}
    v = [np.ones(2), tt.tensor(np.ones(2))]
    g1 = tt.compile(lambda d: d)
    g2 = tt.compile(lambda v: (v, v[0] * 2))
    g3 = tt.compile(lambda a, b: {"x": a, "y": [b["k"], 1]})
    b = {"k": [np.ones(1)]}
    for _ in range(3):
        assert g1(d) is d
        assert g2(v)[0] is v
        assert g3(np.ones(2), b)["y"][0] is b["k"]


@pytest.mark.parametrize("f", [
    lambda x, s: x + tt.randn(2, rng=np.random.default_rng(s)),
    lambda x, s: (x, tt.get_rng_state()),
    lambda x, s: x + 0 * tt.manual_seed(s).random(),
    lambda x, s: (tt.set_rng_state(STATE0), x)[1],
], ids=["generator_made_inside", "get_rng_state", "manual_seed", "set_rng_state"])
def test_generator_state_reads_and_fresh_generators_inside_are_refused(f):
    global STATE0
    STATE0 = tt.get_rng_state()
    with pytest.raises(RuntimeError, match="tt.compile"):
        tt.compile(f)(np.zeros(2), 0)


def test_a_seed_as_rng_draws_the_same_numbers_each_call_as_eagerly():
    f = lambda x, s: x + tt.randn(2, rng=s)      # noqa: E731
    g = tt.compile(f)
    for s in (0, 0, 1, 0):
        assert np.array_equal(_value(f(np.zeros(2), s)), _value(g(np.zeros(2), s)))


def test_user_warnings_follow_the_branch_taken_on_each_call():
    def f(x):
        if float(x.sum()) > 0:
            warnings.warn("positive", stacklevel=1)
        return x * 2
    g = tt.compile(f)
    for v, warned in ((1.0, True), (-1.0, False), (2.0, True), (-2.0, False), (-3.0, False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            g(np.array([v]))
        assert any("positive" in str(w.message) for w in caught) == warned, v


W_CLOSED = tt.tensor(np.ones(2))


@pytest.mark.parametrize("f", [
    lambda x: (np.asarray(x).__iadd__(1.0), x * 2)[1],
    lambda x: (np.asarray(W_CLOSED).__imul__(0.5), x * W_CLOSED)[1],
    lambda x: (np.asarray(x).sort(), x * 2)[1],
], ids=["argument_iadd", "closed_over_imul", "sort_in_place"])
def test_in_place_writes_through_asarray_of_a_traced_tensor_are_refused(f):
    with pytest.raises(RuntimeError, match=r"tt.compile: .*np.asarray\(t\)"):
        tt.compile(f)(tt.tensor(np.array([2.0, 1.0])))


def test_asarray_of_a_traced_tensor_still_reads_and_returns_itself():
    x = np.arange(3.0)
    g = tt.compile(lambda x: (np.asarray(x), np.asarray(x).sum()))
    for i in range(3):
        a, s = g(x + i) if i else g(x)
        assert s == (x + i).sum() if i else s == x.sum()
    assert g(x)[0] is x


def test_a_view_taken_with_an_index_read_from_an_argument_is_never_written_in_place():
    def f(x, idx):
        b = tt.exp(x)
        a = b[:, idx[0]] + 1.0
        return a + b[:, idx[0]]

    def h(b, i):
        return b[i[0]] + b[i[1]]

    g = tt.compile(f)
    for i in range(3):
        assert np.array_equal(f(np.zeros((2, 3)), np.array([i])), g(np.zeros((2, 3)), np.array([i])))
    caller = np.arange(12.0).reshape(3, 4)
    tt.compile(h)(caller, np.array([0, 1]))
    assert np.array_equal(caller, np.arange(12.0).reshape(3, 4))


VALUES_READ = {
    "slice_bounds": (lambda x, o: tt.sum(x[o[0]:o[1]]), [np.array([0, 3]), np.array([2, 7])]),
    "slice_step": (lambda x, n: tt.sum(x[::n[0]]), [np.array([1]), np.array([3])]),
    "repeat_counts": (lambda x, n: tt.repeat(x[:2], n[0]), [np.array([2]), np.array([3])]),
    "full_value": (lambda x, n: tt.full((2,), n[0]), [np.array([0.2]), np.array([0.5])]),
    "quantile_q": (lambda x, n: tt.quantile(tt.tensor(x), n[0]), [np.array([0.2]), np.array([0.5])]),
    "interpolate_size": (lambda x, n: tt.nn.functional.interpolate(
        tt.tensor(x.reshape(1, 1, 10)), size=n[0], mode="linear"), [np.array([4]), np.array([6])]),
    "grad_times_number": (lambda x, n: tt.grad(lambda w: tt.sum(w ** 2))(x) * float(n[0]) / 2.0 + 1,
                          [np.array([0.5]), np.array([0.25])]),
}


@pytest.mark.parametrize("name", sorted(VALUES_READ))
def test_values_tinytensor_reads_from_arguments_are_not_frozen(name):
    f, seconds = VALUES_READ[name]
    g = tt.compile(f)
    x = np.arange(10.0)
    for n in seconds + seconds[::-1]:
        e, c = f(x, n), g(x, n)
        assert np.array_equal(_value(e), _value(c)), (name, n, _value(e), _value(c))


@pytest.mark.parametrize("op", ["mul", "div", "add"])
def test_a_gradient_array_with_a_number_argument_is_recorded(op):
    fun = {"mul": lambda a, b: a * b, "div": lambda a, b: a / b, "add": lambda a, b: a + b}[op]
    f = lambda w, lr: fun(tt.grad(lambda w: tt.sum(w ** 2))(w), lr)      # noqa: E731
    g = tt.compile(f)
    for lr in (0.5, 0.25, np.float64(2.0), 3):
        assert np.array_equal(f(np.ones(3), lr), g(np.ones(3), lr))


def _write_float(x):
    w = np.ones(3)
    w[0] = float(x.data[0, 0])
    return x * w


def _write_int_index(x):
    w = np.ones(3)
    w[int(np.argmax(x.data[0]))] = 5.0
    return x * w


def _write_into_own_copy(x):
    d = x.data.copy()
    d[x.data > 0] = 0.0
    return x * d


def _teacher_forcing(x):
    dec = np.roll(x.data, 1, axis=1)
    dec[:, 0] = 1.0
    return x * dec


@pytest.mark.parametrize("f", [_write_float, _write_int_index, _write_into_own_copy, _teacher_forcing],
                         ids=lambda f: f.__name__)
def test_ordinary_writes_compile_and_follow_the_values(f):
    assert _outcome(f, lambda rng: tt.tensor(rng.standard_normal((2, 3)))) == "equal"


def test_writing_into_a_tensors_own_data_is_refused_and_into_a_viewed_copy_followed():
    def into_data(x):
        d = x.data
        d[0] = 0.0
        return x * 2

    def viewed(x):
        d = x.data.copy()
        v = d[0]           # a view of d, taken before the write: it sees the 5.0, as eagerly
        d[0] = 5.0
        return x * v

    with pytest.raises(RuntimeError, match="tt.compile"):
        tt.compile(into_data)(tt.tensor(np.ones((2, 3))))
    assert _outcome(viewed, lambda rng: tt.tensor(rng.standard_normal((2, 3)))) == "equal"


def test_one_dict_passed_twice_is_one_object_in_f():
    """f(d, d): f sees one dict (`a is b`), as eagerly; f(d, dict(d)) two, with the same array."""
    def f(a, b):
        return a is b, a["w"] * 2
    g = tt.compile(f)
    x = np.arange(3.0)
    d = {"w": x}
    for args in [(d, d), (d, {"w": x}), (d, d), ({"w": x}, {"w": x + 1})]:
        same, y = g(*args)
        assert same is (args[0] is args[1])
        np.testing.assert_array_equal(y, f(*args)[1])


# ----- writes into an array f made from traced data, through a view of it, and views kept -------
def _w_row_iadd(d):
    c = d * 1
    c[0] += 1              # c[0] is a row view: an in-place add into it, then c[0] = it
    return c


def _w_view_setitem(d):
    c = d.copy()
    v = c[1:]
    v[0] = 5.0
    return c, v


def _w_transpose_setitem(d):
    c = d.copy()
    c.T[0] = 1.0
    return c


def _w_chain(d):
    c = d * 2
    c -= 1
    c /= 3
    c **= 2
    return c


def _w_sort_then_set(d):
    c = d.copy()
    c.sort(axis=0)
    c[0] = 0
    return c


def _w_view_kept_across_a_write(d):
    c = d.copy()
    row = c[0]             # a view taken first, read after the owner is written
    c[0] = -1.0
    c[1, 1] += row[2]
    return row * 2, c


def _w_two_writes(d):
    c = d[0] * 1
    c[0] = 1.0
    c[1] = c[0] + d[1, 1]
    return c


def _w_view_of_view(d):
    c = d + 0
    v = c[:, 1:]
    w = v[1]
    w += 10
    return c, v


def _w_loop_rows(d):
    c = d.copy()
    for i in range(c.shape[0]):
        c[i] -= c[i].mean()
    return c


@pytest.mark.parametrize("f", [_w_row_iadd, _w_view_setitem, _w_transpose_setitem, _w_chain,
                               _w_sort_then_set, _w_view_kept_across_a_write, _w_two_writes,
                               _w_view_of_view, _w_loop_rows])
def test_writes_into_arrays_f_made_through_views_follow_the_values(f):
    g = tt.compile(lambda x: f(x.data))
    rng = np.random.default_rng(7)
    for _ in range(4):
        x = tt.tensor(rng.normal(size=(3, 4)))
        want, got = f(x.data.copy()), g(x)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        for w, c in zip(want, got):
            assert type(w) is type(c) and w.dtype == c.dtype and np.array_equal(w, c)


def test_a_view_of_a_gradient_taken_before_a_write_sees_it():
    """row = w.grad[0], then w.grad[0] = 0 and w.data[...] = ... inside a whole step: row and
    w.data.T, read afterwards, see the writes, as eagerly."""
    def make():
        w = tt.tensor(np.random.default_rng(0).normal(size=(3, 4)), requires_grad=True)

        def step(x):
            w.grad = None
            ((x @ w.T) ** 2).sum().backward()
            row = w.grad[0]
            w.grad[0] = 0.0
            t = w.data.T
            w.data[...] = w.data - 0.1 * w.grad
            return row * 1, t * 1
        return w, step

    (we, eager), (wc, step) = make(), make()
    compiled = tt.compile(step)
    rng = np.random.default_rng(1)
    for _ in range(5):
        x = tt.tensor(rng.normal(size=(2, 4)))
        for a, b in zip(eager(x), compiled(x)):
            assert np.array_equal(a, b)
        assert np.array_equal(we.data, wc.data) and np.array_equal(we.grad, wc.grad)

"""HIPS autograd's gradient check (`autograd.test_util.check_grads`/`combo_check` and the
`unary_ufunc_check` of its tests/numpy_utils.py), rewritten over tinytensor's transforms.

The criterion is autograd's, unchanged: for random directions v (inputs) and u (output),
reverse mode passes when <v, vjp(u)> equals <u, (f(x + eps v/2) - f(x - eps v/2)) / eps> and
forward mode when <jvp(v), w> equals the difference quotient's <., w>, both within 1e-6 absolute
or relative (eps = 1e-6, float64). order=2 checks the gradient functions themselves,
(x, u) -> vjp(u) and (x, v) -> jvp(v), the same way. Both modes are checked for every case
when asked (`MODES`, set per case by hips_scipy_cases.run: autograd's own choice, reverse mode
only for most SciPy tests, or both for the strict run). An output that does not depend on an
input has derivative zero there, as in autograd (allow_unused=True: gammasgn).
"""

import itertools

import numpy as np

import tinytensor as tt

TOL = RTOL = EPS = 1e-6
MODES = ["fwd", "rev"]     # the modes a check uses when its caller names none


def _close(a, b):
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


def _leaves(x):
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in _leaves(item)]
    leaf = np.asarray(x.data if isinstance(x, tt.Tensor) else x)
    return [leaf if np.iscomplexobj(leaf) else leaf.astype(float)]


def _like(x, leaves):
    """leaves (flat, in _leaves order) rebuilt into x's structure."""
    leaves = iter(leaves)

    def fill(node):
        if isinstance(node, (tuple, list)):
            return type(node)(fill(item) for item in node)
        return next(leaves)
    return fill(x)


def _randn(x, rs):
    return _like(x, [rs.randn(*leaf.shape) for leaf in _leaves(x)])


def _inner(a, b):
    return sum(float(np.sum(p * q)) for p, q in zip(_leaves(a), _leaves(b)))


def _step(x, v, scale):
    return _like(x, [p + scale * q for p, q in zip(_leaves(x), _leaves(v))])


def _numerical_jvp(f, x, v):
    plus, minus = f(*_step(x, v, EPS / 2)), f(*_step(x, v, -EPS / 2))
    return _like(plus, [(p - m) / EPS for p, m in zip(_leaves(plus), _leaves(minus))])


def _check_vjp(f, x, rs):
    y, vjp_fn = tt.vjp(f, *x, allow_unused=True)
    v, u = _randn(x, rs), _randn(y, rs)
    exact = _inner(v, vjp_fn(u))
    numeric = _inner(u, _numerical_jvp(f, x, v))
    assert _close(numeric, exact), f"VJP check of {_name(f)}: analytic {exact!r}, numeric {numeric!r}"


def _check_jvp(f, x, rs):
    v = _randn(x, rs)
    _, exact = tt.jvp(f, tuple(x), tuple(v), allow_unused=True)
    numeric = _numerical_jvp(f, x, v)
    w = _randn(numeric, rs)
    a, b = _inner(exact, w), _inner(numeric, w)
    assert _close(a, b), f"JVP check of {_name(f)}: analytic {a!r}, numeric {b!r}"


def _name(f):
    return getattr(f, "__name__", repr(f))


def check_grads(f, argnums=(0,), modes=None, order=2, rs=None):
    """check_grads(f, argnums)(*args, **kwargs): autograd's check of f's derivatives in args[argnums]."""
    modes = MODES if modes is None else modes
    rs = rs if rs is not None else np.random.RandomState(0)
    argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def checked(*args, **kwargs):
        def g(*chosen):
            full = list(args)
            for i, value in zip(argnums, chosen):
                full[i] = value
            return f(*full, **kwargs)
        g.__name__ = _name(f)
        _check_all(g, [args[i] for i in argnums], modes, order, rs)
    return checked


def _check_all(g, x, modes, order, rs):
    if "fwd" in modes:
        _check_jvp(g, x, rs)
        if order > 1:
            n = len(x)

            def jvp_g(*xv):
                return tt.jvp(g, tuple(xv[:n]), tuple(xv[n:]), allow_unused=True)[1]
            jvp_g.__name__ = f"jvp_{_name(g)}"
            _check_all(jvp_g, list(x) + list(_randn(x, rs)), modes, order - 1, rs)
    if "rev" in modes:
        _check_vjp(g, x, rs)
        if order > 1:
            n = len(x)

            def vjp_g(*xu):
                return tt.vjp(g, *xu[:n], allow_unused=True)[1](xu[n])
            vjp_g.__name__ = f"vjp_{_name(g)}"
            y = g(*x)
            _check_all(vjp_g, list(x) + [_randn(y, rs)], modes, order - 1, rs)


def combo_check(f, argnums=(0,), **options):
    """combo_check(f, argnums)(arg_choices..., kw=choices): check_grads on every combination."""
    def checked(*arg_choices, **kwarg_choices):
        keys = list(kwarg_choices)
        for args in itertools.product(*arg_choices):
            for values in itertools.product(*(kwarg_choices[k] for k in keys)):
                check_grads(f, argnums, **options)(*args, **dict(zip(keys, values)))
    return checked


def unary_ufunc_check(f, lims=(-2.0, 2.0), test_complex=True, rs=None, **options):
    """A unary ufunc checked at a scalar, a vector and two matrices inside lims (and at complex
    points where test_complex, as autograd's helper)."""
    rs = rs if rs is not None else np.random.RandomState(0)
    lo, hi = lims

    def inside(x):
        return x * (hi - lo) + lo
    check = combo_check(f, (0,), rs=rs, **options)
    check([inside(0.4), inside(rs.rand(2)), inside(rs.rand(3, 2)), inside(rs.rand(1, 2))])
    if test_complex:
        check([inside(0.4) + 0.1j * inside(0.3), inside(rs.rand(3, 2)) + 0.1j * rs.rand(3, 2)])

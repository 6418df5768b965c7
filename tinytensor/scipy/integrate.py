"""`tt.scipy.integrate.odeint`: SciPy's ODE solver (LSODA), differentiable in y0, t and args.

    ys = tt.scipy.integrate.odeint(func, y0, t, args=(theta,))   # func(y, t, *args) -> dy/dt

One primitive. Its VJP is the adjoint method (as HIPS autograd's odeint): one backward solve of
the augmented system [y, a, a_t, a_args], da/dt = -a^T df/dy, from each observation time to the
previous one, with the VJPs of `func` taken by tt.vjp. Its JVP solves the forward sensitivity
system ds/dt = df/dy s + df/dargs dargs alongside y (tt.jvp of `func`). Both rules run NumPy
solves: first derivatives in both modes, no higher orders. `func` is written with NumPy (or tt)
operations; y0 is 1-D, as SciPy's.
"""

import numpy as np
import scipy.integrate

from ..tape import REGISTRY, Primitive
from ..tensor import Tensor
from ..transforms import jvp, vjp


def _flat(arrays):
    return np.concatenate([np.reshape(a, -1) for a in arrays]) if arrays else np.zeros(0)


def _unflat(flat, like):
    out, at = [], 0
    for a in like:
        n = np.size(a)
        out.append(np.reshape(flat[at:at + n], np.shape(a)))
        at += n
    return out


def _plain(func):
    """func on arrays, its result an array (func may use tt operations)."""
    def f(y, t, *args):
        out = func(y, t, *args)
        return np.asarray(out.data if isinstance(out, Tensor) else out, dtype=np.float64)
    return f


def _forward(y0, t, *args, func, options):
    return scipy.integrate.odeint(_plain(func), y0, t, args=tuple(args), **options)


def _adjoint_vjp(g, ys, y0, t, *args, func, options):
    """(gradient of y0, of t, of each arg) for the cotangent g of ys (len(t), D)."""
    T, D = ys.shape
    args = [np.asarray(a, dtype=np.float64) for a in args]
    n_args = sum(np.size(a) for a in args)
    f = _plain(func)

    def dynamics(state, s, flat_args):
        y, a = state[:D], state[D:2 * D]
        theta = _unflat(flat_args, args)
        dy, pull = vjp(lambda y, s, *theta: func(y, s, *theta), y, np.float64(s), *theta)
        grads = pull(-a)
        return np.concatenate([np.reshape(dy, -1), np.reshape(grads[0], -1), np.reshape(grads[1], -1),
                               _flat(grads[2:])])

    flat_args = _flat(args)
    a, a_t0, a_args = g[-1].astype(np.float64), 0.0, np.zeros(n_args)
    t_grads = []
    for i in range(T - 1, 0, -1):
        moved = float(np.dot(f(ys[i], t[i], *args), g[i]))     # moving the observation time t_i
        t_grads.append(moved)
        a_t0 = a_t0 - moved
        state = np.concatenate([ys[i], a, [a_t0], a_args])
        state = scipy.integrate.odeint(dynamics, state, np.array([t[i], t[i - 1]]), args=(flat_args,),
                                       **options)[1]
        a, a_t0, a_args = state[D:2 * D] + g[i - 1], state[2 * D], state[2 * D + 1:]
    t_grads.append(a_t0)
    dtype = ys.dtype
    return (a.astype(dtype), np.array(t_grads[::-1], dtype=np.result_type(t, np.float32)),
            *[np.asarray(x, dtype=np.result_type(x_like, np.float32))
              for x, x_like in zip(_unflat(a_args, args), args)])


def _sensitivity_jvp(tangents, ys, y0, t, *args, func, options):
    """The tangent of ys from the tangents of y0, t and args (None: zero)."""
    t_y0, t_t, *t_args = tangents
    args = [np.asarray(a, dtype=np.float64) for a in args]
    t_args = [np.zeros(np.shape(a)) if d is None else np.asarray(d, dtype=np.float64)
              for a, d in zip(args, t_args)]
    D = ys.shape[1]
    f = _plain(func)
    s0 = np.zeros(D) if t_y0 is None else np.asarray(t_y0, dtype=np.float64).copy()
    if t_t is not None:
        s0 -= f(ys[0], t[0], *args) * t_t[0]

    def dynamics(state, s):
        y, sens = state[:D], state[D:]
        dy, ds = jvp(lambda y, *theta: func(y, s, *theta), (y, *args), (sens, *t_args))
        return np.concatenate([np.reshape(dy, -1), np.reshape(ds, -1)])

    out = scipy.integrate.odeint(dynamics, np.concatenate([ys[0], s0]), t, **options)[:, D:]
    if t_t is not None:
        out = out + np.stack([f(ys[i], t[i], *args) for i in range(len(t))]) * np.asarray(t_t)[:, None]
    return out.astype(ys.dtype)


def _first_order_only(rule):
    """The rules solve ODEs in NumPy: given Tensors (a second derivative, or tt.compile's
    trace), they say so instead of failing inside SciPy."""
    def checked(c, ans, *inputs, **params):
        if any(isinstance(x, Tensor) for x in (c, ans, *inputs)) or (
                isinstance(c, (list, tuple)) and any(isinstance(x, Tensor) for x in c)):
            raise NotImplementedError("odeint: its rules (adjoint VJP, sensitivity JVP) run NumPy ODE "
                                      "solves, so second derivatives (hvp, grad of grad, hessian) and "
                                      "tt.compile are not supported through it")
        return rule(c, ans, *inputs, **params)
    return checked


# Not a built-in row of specs.OP_SPECS (the sweeps there take second derivatives and compile every
# row): checked in tests/scipy/test_integrate.py, and left out of tt.check_rules()'s registry.
_odeint = Primitive(_forward, "odeint", nargs=None)
_odeint.defvjp(_first_order_only(_adjoint_vjp))
_odeint.defjvp_joint(_first_order_only(_sensitivity_jvp))
REGISTRY.pop("odeint")


def odeint(func, y0, t, args=(), Dfun=None, col_deriv=0, full_output=0, ml=None, mu=None, rtol=None,
           atol=None, tcrit=None, h0=0.0, hmax=0.0, hmin=0.0, ixpr=0, mxstep=0, mxhnil=0, mxordn=12,
           mxords=5, printmessg=0, tfirst=False):
    """scipy.integrate.odeint(func, y0, t, args): y at each time in t, shape (len(t), len(y0)),
    differentiable in y0, t and every array in args (adjoint-method VJP, sensitivity JVP)."""
    if full_output or Dfun is not None or tfirst:
        raise TypeError("odeint: full_output, Dfun and tfirst are not supported on Tensors")
    if np.ndim(y0.data if isinstance(y0, Tensor) else y0) != 1:
        raise ValueError("odeint: y0 must be 1-D, as SciPy's")
    options = {k: v for k, v in dict(rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax, hmin=hmin,
                                     h0=h0).items() if v is not None}
    for a in (y0, t, *args):
        if isinstance(a, Tensor) and a.data.dtype.kind != "f":
            raise TypeError("odeint: y0, t and args must be float arrays")
    y0 = y0 if isinstance(y0, Tensor) else np.asarray(y0, dtype=np.float64)
    t = t if isinstance(t, Tensor) else np.asarray(t, dtype=np.float64)
    args = tuple(a if isinstance(a, Tensor) else np.asarray(a, dtype=np.float64) for a in args)
    return _odeint(y0, t, *args, func=func, options=options)


__all__ = ["odeint"]

"""The op table, as a package: `tt.ops.<name>`, `from tinytensor.ops import <name>` and the old
module's names keep working (re-exported here).

    table.py          the registry (PUBLIC, NUMPY_FUNCTIONS, METHODS, BUILTIN), the shorthands
                      (defprim, elementwise, deflinear, nondifferentiable, public/publish) and
                      numpy_dispatch: every family imports from here
    core.py           arithmetic, exp/log/trig, sum/mean/max/logsumexp, the shape primitives,
                      matmul/dot/linear, frobenius_norm, setitem
    softmax_xent.py   softmax, log_softmax, cross-entropy and the fused softmax-cross-entropy
    elementwise.py    NumPy's other elementwise functions (old path: tinytensor.ops_elementwise)
    reductions.py     min, prod, var, std, cumsum, argmax, ... (tinytensor.ops_reductions)
    shape.py          NumPy's functions that move, copy or pick entries (tinytensor.ops_shape)

Importing the package registers every row: the families below are imported for that.
"""

# The families, in the order their rows register. `elementwise` is then rebound to the shorthand
# (table.elementwise), as it was before the package: the family module of that name stays
# reachable as tinytensor.ops_elementwise.
from . import complex_numbers, core, elementwise, reductions, shape, softmax_xent, table  # noqa: F401
from .core import (  # noqa: F401
    _index_adjoint,
    _linear,
    _to_device,
    abs,
    add,
    astype,
    broadcast_to,
    concatenate,
    cos,
    div,
    dot,
    exp,
    frobenius_norm,
    frobeniusNorm,
    getitem,
    linear,
    log,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    minimum,
    mul,
    neg,
    power,
    relu,
    reshape,
    setitem,
    sigmoid,
    sin,
    sqrt,
    square,
    stack,
    sub,
    sum,
    swapaxes,
    tanh,
    transpose,
)
from .softmax_xent import (  # noqa: F401
    FUSED_INTO_LOSS,
    _cross_entropy,
    _log_softmax,
    _softmax,
    _softmax_cross_entropy,
    cross_entropy,
    crossEntropy,
    fused_into_loss,
    log_softmax,
    softmax,
    softmax_cross_entropy,
)
from .table import (  # noqa: F401
    BUILTIN,
    METHODS,
    NONDIFFERENTIABLE,
    NUMPY_FUNCTIONS,
    PUBLIC,
    _keepdims,
    _safe,
    _swap_last,
    complex_rules,
    deflinear,
    defprim,
    elementwise,  # noqa: E402,F811  (the shorthand; see above)
    nondifferentiable,
    numpy_dispatch,
    on_values,
    public,
    publish,
)

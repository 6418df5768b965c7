"""The op table, as a package: the rows themselves (`tt.ops.<name>`), which the library calls
internally; users call the public entries `tt.<name>`.

    table.py          the registry (PUBLIC, NUMPY_FUNCTIONS, METHODS, BUILTIN), the shorthands
                      (defprim, elementwise, deflinear, nondifferentiable, public/publish) and
                      numpy_dispatch: every family imports from here
    core.py           arithmetic, exp/log/trig, sum/mean/max/logsumexp, the shape primitives,
                      matmul/dot/linear, frobenius_norm, setitem
    softmax_xent.py   softmax, log_softmax, cross-entropy and the fused softmax-cross-entropy
    elementwise.py    NumPy's other elementwise functions
    reductions.py     min, prod, var, std, cumsum, argmax, ...
    shape.py          NumPy's functions that move, copy or pick entries
    batching.py       tt.vmap's batching rules, keyed by primitive name (table.BATCHING)

Importing the package registers every row: the families below are imported for that.
"""

# The families, in the order their rows register. `tt.ops.elementwise` is the family module; the
# shorthand of that name is `tinytensor.ops.table.elementwise` (one path per name).
from . import (  # noqa: F401
    batching,  # noqa: F401,E402  (after the rows: its rules call them by name)
    complex_numbers,
    core,
    elementwise,
    reductions,
    shape,
    softmax_xent,
    table,
)
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
    nondifferentiable,
    numpy_dispatch,
    on_values,
    public,
    publish,
)

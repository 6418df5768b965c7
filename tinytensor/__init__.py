"""tinytensor: a vectorised tensor autograd on NumPy, with both modes on one tape.

    import tinytensor as tt
    x = tt.tensor([[1.0, 2.0]], requires_grad=True, name="x")
    W = tt.tensor(np.ones((2, 3)), requires_grad=True, name="W")
    loss = tt.crossEntropy(tt.softmax(tt.dot(x, W)), [[0.0, 1.0, 0.0]]) + tt.frobeniusNorm(W)
    loss.backward()          # reverse mode: W.grad
    loss.jvp({W: dW})        # forward mode: the directional derivative along dW
"""

# allocator first (alphabetically too): glibc's thresholds are set before any array is made
from . import (  # noqa: F401
    allocator,
    backend,
    data,
    fft,
    linalg,
    nn,
    ops,
    optim,
    scalar,
)
from . import distributed as distributed  # tt.distributed: MPI collectives (extra [distributed])
from .checks import GradcheckError, check_rules, gradcheck, numerical_grad
from .compile import compile
from .compile.tracer import install_array_absent as _install_array_absent
from .inference import inference_mode
from .ops_science import median as _median  # noqa: F401  (NumPy's sort, median, interp, ... on Tensors)
from .ops_torch import get_rng_state, manual_seed, set_rng_state  # PyTorch's spellings (tt.cat, ...)
from .scipy import special as _scipy_special  # noqa: F401  (tt.scipy; scipy.special's ufuncs on Tensors)
from .serialization import load, save
from .tape import (
    REGISTRY,
    Primitive,
    detect_anomaly,
    enable_grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
    unbroadcast,
)
from .tensor import (
    Tensor,
    arange,
    eye,
    full,
    full_like,
    ones,
    ones_like,
    rand,
    randn,
    tensor,
    zeros,
    zeros_like,
)
from .transforms import grad, hessian, hvp, jacobian, jvp, value_and_grad, vjp
from .user_primitives import primitive
from .views import draw, evaluation_trace, to_dot, wengert_list
from .vmap import vmap

ops.batching.install()   # the batching column, once every family has registered its primitives
_install_array_absent()  # tt.compile: an array argument lacks the Tensor methods (all defined now)

# Every public operation (tt.exp, tt.sum, tt.crossEntropy, ...) is declared by its row in the op
# modules (ops.PUBLIC, filled by `defprim(..., numpy=..., method=...)` and `@public`): exported here.
globals().update(ops.PUBLIC)

__all__ = [
    "Tensor", "tensor", "zeros", "ones", "randn",
    "zeros_like", "ones_like", "full", "arange", "eye", "rand", "full_like",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "detect_anomaly", "primitive", "Primitive", "REGISTRY", "unbroadcast",
    "numerical_grad", "gradcheck", "GradcheckError", "check_rules",
    "wengert_list", "to_dot", "evaluation_trace", "draw", "ops", "data", "nn", "optim", "scalar", "backend",
    "grad", "value_and_grad", "vjp", "jvp", "jacobian", "hvp", "hessian", "vmap", "save", "load", "compile",
    "manual_seed", "get_rng_state", "set_rng_state", "rng", "distributed", "scipy", "linalg", "fft",
] + sorted(ops.PUBLIC)

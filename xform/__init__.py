"""xform: stage plain numpy code to a graph, transform it (grad, jvp, vjp, vmap, ...),
optimize it and run it as generated Python."""
# Registration happens here, first, not in the packages that read the rule table.
from xform import rules  # noqa: F401  (registers every primitive's rules)
from xform import numpy  # noqa: F401  (after rules: fills the numpy protocol's tables)
from xform import passes  # noqa: F401  (xform.passes.optimize, trace_passes, ...)
from xform import scipy  # noqa: F401  (SciPy stand-ins, installed once the user imports SciPy)
from xform import tree  # noqa: F401  (xform.tree: JAX's tree_util names)
from xform.api import (closure_convert, eval_shape, grad, hessian, jacfwd, jacrev, jit, jvp,
                       linear_transpose, linearize, make_graph, split_graph, value_and_grad,
                       vjp, vmap)
from xform.codegen.xla import describe_split
from xform.runtime.cache import cache_info, clear_cache, set_cache_size
from xform.runtime.config import config
from xform.errors import (CapturedArrayWarning, ConcretizationError, GraphCheckError,
                          MissingRuleError, OutOfMemoryError, PathLimitError, PathLimitWarning,
                          RegistrationError, RuleError, RestagingWarning, ShapeError,
                          SideEffectError, SolverError, StagingRecursionError,
                          TreeMismatchError, TypeCheckError, UnstagedEffectWarning,
                          UnsupportedError, XformError)
from xform.ir.avals import ShapedArray, float0
from xform.ir.core import Equation, Graph, Literal, Primitive, Var
from xform.ir.interpret import eval_graph
from xform.numpy import implements, index_add
from xform.rules.call import function
from xform.extend import context, non_differentiable, overlay
from xform.rules.custom import custom_jvp, custom_vjp
from xform.rules.threaded_map import threaded_map
from xform.rules.control_flow import cond, fori_loop, scan, switch, while_loop
from xform.rules.unary import stop_gradient
from xform.api.maps import associative_scan, map  # noqa: A004  (JAX's lax.map)
from xform.api.collectives import all_gather, pmax, pmean, pmin, psum
from xform.api.checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat
from xform.transforms import batch_graph, jvp_graph, vjp_graph

tree_util = tree  # JAX's module name, for code pasted from JAX

# Last: the stand-ins of SciPy modules imported before xform (a first staging would install
# them), then the tables derived from the rules, which those installers add to.
from xform.numpy.stand_ins import install_pending  # noqa: E402
from xform.ir.registry import derive_all  # noqa: E402
install_pending()
derive_all()
del install_pending, derive_all

__version__ = "0.1.0"

__all__ = [
    "CapturedArrayWarning", "ConcretizationError", "Equation", "Graph", "GraphCheckError",
    "Literal", "MissingRuleError", "OutOfMemoryError", "PathLimitError", "PathLimitWarning",
    "Primitive", "RegistrationError", "RestagingWarning", "RuleError", "ShapeError",
    "ShapedArray", "SideEffectError", "SolverError", "StagingRecursionError",
    "TreeMismatchError", "TypeCheckError", "UnstagedEffectWarning", "UnsupportedError", "Var",
    "XformError", "batch_graph", "cache_info",
    "clear_cache", "closure_convert", "cond", "config", "context", "custom_jvp", "custom_vjp",
    "describe_split", "split_graph",
    "eval_graph", "eval_shape", "float0", "fori_loop", "function", "grad", "hessian", "implements",
    "index_add", "jacfwd", "jacrev", "jit", "jvp", "jvp_graph", "linear_transpose", "linearize",
    "make_graph", "non_differentiable", "overlay", "scan", "set_cache_size", "stop_gradient",
    "switch", "threaded_map", "tree", "tree_util", "value_and_grad", "vjp", "vjp_graph", "vmap",
    "while_loop",
]
__all__ += ["associative_scan", "map"]
__all__ += ["all_gather", "checkpoint", "checkpoint_name", "checkpoint_policies", "pmax",
            "pmean", "pmin", "psum", "remat"]

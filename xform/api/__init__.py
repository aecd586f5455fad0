"""The public transforms: flatten arguments, stage, transform the graph, run or re-emit it.

Every entry point follows one path (`dispatch`): a signature key from the flattened arguments;
on a miss, stage the function to a graph, transform it, optimize and compile it (`pipeline`);
then run the compiled code, or, when called while another function is being staged, re-emit
the transformed graph into that staging (which is how transforms nest).
"""
from xform.api.checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat
from xform.api.collectives import all_gather, pmax, pmean, pmin, psum
from xform.api.forward import jvp, linearize
from xform.api.jacobians import hessian, jacfwd, jacrev
from xform.api.mapping import vmap
from xform.api.maps import associative_scan, map  # noqa: A004  (lax.map's name)
from xform.api.reverse import grad, linear_transpose, value_and_grad, vjp
from xform.api.staging import closure_convert, eval_shape, jit, make_graph, split_graph

__all__ = ["closure_convert", "eval_shape", "grad", "hessian", "jacfwd", "jacrev", "jit",
           "jvp", "linear_transpose", "linearize", "make_graph", "split_graph", "value_and_grad",
           "vjp", "vmap"]
__all__ += ["associative_scan", "map"]
__all__ += ["all_gather", "pmax", "pmean", "pmin", "psum"]

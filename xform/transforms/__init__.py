"""Graph-to-graph transforms: jvp_graph, vjp_graph, transpose (backward_pass), batch_graph."""
from xform.transforms.batch import batch_eval, batch_graph
from xform.transforms.jvp import jvp_eval, jvp_graph
from xform.transforms.transpose import backward_pass
from xform.transforms.vjp import split_graph, vjp_eval, vjp_graph

__all__ = ["batch_eval", "batch_graph", "jvp_eval", "jvp_graph", "backward_pass",
           "split_graph", "vjp_eval", "vjp_graph"]

"""Lowering graphs to Python source: `graph_source` and `compile_graph` (xform.codegen.emit),
with the scalar path (scalar, scalar_plan) and the analyses the emitter reads (analyses)."""
from xform.codegen.emit import compile_graph, graph_source

__all__ = ["compile_graph", "graph_source"]

"""Lowering graphs to Python source."""
from xform.codegen.python import compile_graph, graph_source

__all__ = ["compile_graph", "graph_source"]

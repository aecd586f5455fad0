"""Graph -> Graph passes over networkx, and the default pipeline `optimize`.

PIPELINE, in order:
  1. eliminate_dead_code: drop equations no output needs (precondition: none).
"""
from __future__ import annotations

from xform.passes.dce import eliminate_dead_code

dce = eliminate_dead_code
PIPELINE = (eliminate_dead_code,)


def optimize(graph):
    """Run the default pipeline on `graph` and return the new graph."""
    for run_pass in PIPELINE:
        graph = run_pass(graph)
    return graph


__all__ = ["PIPELINE", "dce", "eliminate_dead_code", "optimize"]

"""Graph -> Graph passes over networkx, the default pipeline `optimize`, and `trace_passes`.
Every pass is pure, keeps `graph.check()`, the results and the equation order, and returns
its input graph itself when it has nothing to change.

PIPELINE, in order (what each step does; its precondition):
  1. inline_calls: open non-recursive, small calls, so later passes see across call
     boundaries. Precondition: none (a closed, checked graph).
  2. fold_constants: evaluate what is known, take known branches, drop loops that never run,
     simplify x*1, x+0, identity reshapes/transposes. Precondition: 1, so that constants
     passed into calls meet the callee's equations.
  3. simplify: algebraic rewrites from a table (xform.passes.simplify.REWRITES):
     where with a known mask, sum(kron(a, b)) -> sum(a) * sum(b), ... Precondition: 2
     (constants known). EXACT_PIPELINE holds simplify_exactly instead (only the rules that
     keep numpy's bits; xform.config.algebra "exact").
  4. eliminate_common_subexpressions: merge repeated equations. Precondition: 2, so that
     equations differing only by a foldable input have become identical.
  5. accumulate_pads: replace each tree of `add`s over zero-valued `pad`s (the cotangents
     of `x[i]` in a Python loop) by one `pad_sum`, one array instead of one per use.
     Precondition: 2-4, which fold and merge the pads first (a pad that 4 merged, read by
     several sums, joins each of them).
  6. forward_writes: a read of what a `scatter` wrote takes the written value, a read of
     what it did not write reads its input; a scatter whose written elements nobody reads
     goes (the rows a loop's reverse pass zeroes in its cotangent). Precondition: 5, whose
     window updates are scatters and reads.
  7. eliminate_dead_code: drop what no output needs, and unused outputs of loops and calls
     (Hooks.dce). Precondition: 1-6, which leave dead equations and constants behind (5:
     the reshapes that fed the pads it replaced; 6: the writes it dropped).
"""
from __future__ import annotations

from xform.passes.accumulate import accumulate_pads
from xform.passes.cse import eliminate_common_subexpressions
from xform.passes.dce import eliminate_dead_code
from xform.passes.fold import fold_constants
from xform.passes.fuse import clean_region, fuse_elementwise
from xform.passes.inline import inline_calls
from xform.passes.nested import optimize_subgraphs
from xform.passes.simplify import simplify, simplify_exactly
from xform.passes.writes import forward_writes

PIPELINE = (inline_calls, fold_constants, simplify, eliminate_common_subexpressions,
            accumulate_pads, forward_writes, eliminate_dead_code)
"""The passes `optimize` runs by default, in order (the module docstring says why)."""
EXACT_PIPELINE = tuple(simplify_exactly if p is simplify else p for p in PIPELINE)
"""PIPELINE with `simplify_exactly` (used when `xform.config.algebra` is "exact")."""


def pipeline_for(algebra: str) -> tuple:
    """The passes compiled code gets under `xform.config.algebra`: EXACT_PIPELINE for
    "exact" (numpy's bits), PIPELINE otherwise."""
    return EXACT_PIPELINE if algebra == "exact" else PIPELINE

# Short names. (They shadow the submodules as attributes: reach a module itself with
# `from xform.passes.fold import ...`, which goes through sys.modules.)
dce = eliminate_dead_code
# Not in PIPELINE: reverse mode fuses before differentiating (xform.config "fusion").
fuse = fuse_elementwise
fold = fold_constants
cse = eliminate_common_subexpressions
inline = inline_calls
accumulate = accumulate_pads
writes = forward_writes


def optimize(graph, passes=PIPELINE, *, checks: bool = False, _done=None):
    """Run `passes` (default: PIPELINE) on every sub-graph of `graph` (fused regions,
    branches, loop bodies, calls, custom rule graphs; xform.passes.nested), then on `graph`
    itself, and return the new graph. With `checks` (callers pass `xform.config.checks`)
    the graph checker runs after every pass.

    >>> graph = xform.make_graph(lambda x: np.sin(x) + np.sin(x) * 1.0)(np.float64(1.0))
    >>> print(xform.passes.optimize(graph))    # `* 1.0` folded away, then one `sin`
    { lambda a:f64[] . let
        b:f64[] = sin a
        c:f64[] = add b b
      in (c) }
    """
    done = {} if _done is None else _done
    graph = optimize_subgraphs(
        graph, lambda sub: optimize(sub, passes, checks=checks, _done=done), done)
    for run_pass in passes:
        graph = run_pass(graph)
        if checks:
            graph.check()
    return graph


def trace_passes(graph, passes=PIPELINE) -> list:
    """`[(pass name, graph before, graph after), ...]` for each pass of `passes`, for notebooks.

    >>> @xform.function
    ... def square(x):
    ...     return x * x
    >>> graph = xform.make_graph(lambda x: square(x) * 1.0 + square(x))(1.0)
    >>> [(name, len(after.equations)) for name, _, after in xform.passes.trace_passes(graph)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('inline_calls', 4), ('fold_constants', 3), ('simplify', 3),
     ('eliminate_common_subexpressions', 2), ('accumulate_pads', 2), ('forward_writes', 2),
     ('eliminate_dead_code', 2)]
    """
    steps = []
    for run_pass in passes:
        after = run_pass(graph)
        steps.append((run_pass.__name__, graph, after))
        graph = after
    return steps


__all__ = ["EXACT_PIPELINE", "PIPELINE", "simplify", "simplify_exactly", "accumulate", "accumulate_pads", "clean_region", "cse", "dce",
           "eliminate_common_subexpressions", "fuse", "fuse_elementwise",
           "eliminate_dead_code", "fold", "fold_constants", "forward_writes", "inline",
           "inline_calls", "writes",
           "optimize", "pipeline_for", "trace_passes"]

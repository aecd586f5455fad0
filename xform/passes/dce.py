"""Dead-code elimination: keep only the equations an output depends on, and let `Hooks.dce`
hooks drop the unused outputs of the multi-output equations that stay."""
from __future__ import annotations

from xform.ir.core import Graph, Literal
from xform.ir.nx import with_equations
from xform.ir.registry import RULES, has_effects, kept_primitives


def eliminate_dead_code(graph: Graph) -> Graph:
    """Drop every equation no output depends on and that has no effect (a random draw).

    A primitive whose rules have `dce(eqn, used_outputs) -> Equation | None` (`used_outputs`
    a tuple of bools) may return a smaller equation computing only the used outputs (the same
    Vars), e.g. a loop that stops carrying values nobody reads.
    >>> from xform.passes import eliminate_dead_code
    >>> print(eliminate_dead_code(xform.make_graph(lambda x: (np.sin(x), x)[1])(1.0)))  # no sin
    { lambda a:~f64[] . let
      in (a) }
    """
    # A graph's equations are in a topological order, so one backward sweep sees every
    # reader before the equation it reads.
    # (Literals go into `live` with the inputs, harmlessly: no Var is one.)
    live = {a for a in graph.outputs if type(a) is not Literal}
    always = kept_primitives()
    kept = []
    changed = False
    for eqn in reversed(graph.equations):
        outputs = eqn.outputs
        if len(outputs) == 1:                           # most equations: used or not
            if outputs[0] not in live and not has_effects(eqn):
                changed = True
                continue
        else:
            used = tuple([var in live for var in outputs])
            # an unused draw still draws; a guard has no outputs but checks the path
            if not any(used) and eqn.primitive not in always and not has_effects(eqn):
                changed = True
                continue
            rules = RULES.get(eqn.primitive)
            if not all(used) and rules is not None and rules.hooks.dce is not None:
                smaller = rules.hooks.dce(eqn, used)
                if smaller is not None:
                    eqn, changed = smaller, True
        live.update(eqn.inputs)
        kept.append(eqn)
    if not changed and all(var in live for var, _ in graph.consts):
        return graph
    return with_equations(graph, kept[::-1])


__all__ = ["eliminate_dead_code"]

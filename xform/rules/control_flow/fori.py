"""fori_loop: a scan over static bounds, a while_loop over traced ones."""
from __future__ import annotations

import numpy as np

from xform.ir.tracer import Tracer
from xform.rules.control_flow.scan import scan
from xform.rules.control_flow.while_loop import while_loop
from xform.rules.subgraphs import is_concrete
from xform.rules.unary import astype


def fori_loop(lower, upper, body_fun, init_val):
    """`for i in range(lower, upper): val = body_fun(i, val)`. Static bounds become a scan
    (differentiable in reverse to any order); traced bounds a while_loop.

    >>> xform.fori_loop(0, 3, lambda i, x: x * 2.0, 1.0)
    np.float64(8.0)
    """
    if is_concrete(lower) and is_concrete(upper):
        lower, upper = int(lower), int(upper)
        steps = max(upper - lower, 0)
        if steps == 0:
            return init_val
        carry, _ = scan(lambda c, i: (body_fun(i, c), None), init_val,
                        np.arange(lower, upper, dtype=np.int64))
        return carry

    def loop_cond(state):
        return state[0] < state[1]

    def loop_body(state):
        i, stop, val = state
        return i + 1, stop, body_fun(i, val)
    start = astype(lower, np.int64) if type(lower) is Tracer else np.int64(lower)
    stop = astype(upper, np.int64) if type(upper) is Tracer else np.int64(upper)
    return while_loop(loop_cond, loop_body, (start, stop, init_val))[2]


__all__ = ["fori_loop"]

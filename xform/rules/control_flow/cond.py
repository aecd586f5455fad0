"""cond and switch: one primitive choosing among closed branch graphs of equal type by index;
its rules transform every branch (a per-lane index under vmap runs them all and selects)."""
from __future__ import annotations

import numpy as np

from xform.errors import ShapeError, TypeCheckError
from xform.ir.ad import NOT_MAPPED, Zero, aval, instantiate, move_to_front
from xform.ir.avals import is_differentiable
from xform.ir.builder import stage_function
from xform.ir.core import Primitive, rewire
from xform.ir.execute import runtime
from xform.ir.interpret import eval_graph
from xform.ir.registry import Hooks, register
from xform.rules.call import PendingRecursion
from xform.rules.subgraphs import (describe_types, is_concrete, lane_mask, out_avals,
                                   same_types, transpose_from_vjp)
from xform.rules.unary import astype
from xform.source_info import user_frame_info
from xform.transforms.derived import batch_of, jvp_of, vjp_of
from xform.tree import tree_flatten, tree_unflatten


cond_p = Primitive("cond", multiple_results=True)


def _cond_impl(index, *operands, branches):
    index = min(max(int(index), 0), len(branches) - 1)
    return runtime().compiled(branches[index])(*operands)


def _cond_abstract_eval(index, *operands, branches):
    return out_avals(branches[0])


def _cond_jvp(primals, tangents, *, branches):
    index, *operands = primals
    nonzeros = [type(t) is not Zero for t in tangents[1:]]
    jvp_branches = tuple(jvp_of(b, nonzeros) for b in branches)
    live_tangents = [t for t in tangents[1:] if type(t) is not Zero]
    outs = cond_p.bind(index, *operands, *live_tangents, branches=jvp_branches)
    n_out = len(branches[0].outputs)
    return outs[:n_out], outs[n_out:]


def _cond_vjp(primals, outs, cts, *, branches):
    index, *operands = primals
    live_cts = [instantiate(ct) for ct, a in zip(cts, out_avals(branches[0]))
                if is_differentiable(a)]
    grads = iter(cond_p.bind(index, *operands, *live_cts,
                             branches=tuple(vjp_of(b) for b in branches)))
    return [None] + [next(grads) if is_differentiable(v.aval) else None
                     for v in branches[0].inputs]


def _cond_batch(size, args, dims, *, branches):
    index, *operands = args
    index_dim, *operand_dims = dims
    batched = [batch_of(b, operand_dims, size) for b in branches]
    if index_dim is NOT_MAPPED:
        outs = cond_p.bind(index, *operands, branches=tuple(batched))
        return outs, [0] * len(outs)
    # A per-lane predicate: every branch runs on the whole batch, then each lane selects.
    results = [eval_graph(b, *operands) for b in batched]
    index = np.clip(move_to_front(index, index_dim, size), 0, len(branches) - 1)
    outs = []
    for k in range(len(branches[0].outputs)):
        out = results[-1][k]
        for j in reversed(range(len(branches) - 1)):
            out = np.where(lane_mask(index == j, out, size), results[j][k], out)
        outs.append(out)
    return outs, [0] * len(outs)


def _cond_fold(eqn, known):
    from xform.ir.registry import UNKNOWN
    if known[0] is UNKNOWN:
        return None
    branches = eqn.params["branches"]
    index = min(max(int(known[0]), 0), len(branches) - 1)
    return branches[index], list(eqn.inputs[1:])


register(cond_p, impl=_cond_impl, abstract_eval=_cond_abstract_eval, jvp=_cond_jvp,
         vjp=_cond_vjp, transpose=transpose_from_vjp(_cond_vjp, _cond_abstract_eval),
         batch=_cond_batch, hooks=Hooks(fold=_cond_fold), symbolic_zeros=True,
         construct="xform.cond (or xform.switch)")


def _stage_branches(functions, operands, what):
    """Stage each branch on the operands; all graphs get the same inputs: the operand leaves,
    then the union of every branch's captured values."""
    leaves, in_tree = tree_flatten(tuple(operands))
    avals = [aval(x) for x in leaves]
    staged, pending = [], []
    for i, fn in enumerate(functions):
        try:
            staged.append(stage_function(fn, in_tree, avals))
        except PendingRecursion as recursion:
            staged.append(None)
            pending.append((i, recursion))
    done = [s for s in staged if s is not None]
    if pending and not done:
        raise pending[0][1]
    for i, recursion in pending:
        # A recursive call whose type is still unknown: type it as the other branches.
        recursion.ref.assume(recursion.key, out_avals(done[0][0]), done[0][2])
        staged[i] = stage_function(functions[i], in_tree, avals)
    out_tree = staged[0][2]
    branch_avals = out_avals(staged[0][0])
    for graph, _, tree in staged[1:]:
        if tree != out_tree:
            raise TypeCheckError(f"{what} branches return different structures: {out_tree} "
                                 f"and {tree}", user_frame_info())
        if not same_types(out_avals(graph), branch_avals):
            raise ShapeError(f"{what} branches return different types: "
                             f"{describe_types(branch_avals)} and "
                             f"{describe_types(out_avals(graph))}",
                             user_frame_info(), "make every branch return the same shapes "
                             "and dtypes (cast with .astype or broadcast explicitly)")
    captured = []
    for _, branch_captured, _ in staged:
        for tracer in branch_captured:
            if all(tracer is not c for c in captured):
                captured.append(tracer)
    graphs = []
    for graph, branch_captured, _ in staged:
        own = dict(zip(map(id, branch_captured), graph.inputs[len(leaves):]))
        inputs = list(graph.inputs[:len(leaves)]) + [own.get(id(t), t.aval) for t in captured]
        graphs.append(rewire(graph, inputs))
    return graphs, leaves + captured, out_tree


def switch(index, branches, *operands):
    """Apply `branches[index](*operands)`; the index is clamped into range (as JAX does).

    >>> xform.switch(1, [lambda x: x, lambda x: 2 * x], 3.0)
    6.0
    """
    branches = list(branches)
    if not branches:
        raise TypeCheckError("switch needs at least one branch", user_frame_info())
    index_aval = aval(index)
    if index_aval.shape != () or index_aval.dtype.kind not in "iub":
        raise TypeCheckError(f"switch index must be a scalar integer, got "
                             f"{index_aval.str_short()}", user_frame_info())
    if is_concrete(index):
        # A known index stages only the branch taken: the others are never traced.
        return branches[min(max(int(index), 0), len(branches) - 1)](*operands)
    graphs, args, out_tree = _stage_branches(branches, operands, "switch")
    outs = cond_p.bind(index, *args, branches=tuple(graphs))
    return tree_unflatten(out_tree, outs)


def cond(pred, true_fun, false_fun, *operands):
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)`, with a traced `pred`.

    >>> f = lambda x: xform.cond(x > 0, lambda x: x, lambda x: -x, x)
    >>> xform.jit(f)(-2.0)
    np.float64(2.0)
    >>> xform.make_graph(f)(1.0).equations[-1].primitive    # staged as one `cond` equation
    cond
    """
    pred_aval = aval(pred)
    if pred_aval.shape != () or pred_aval.dtype != np.dtype(bool):
        raise TypeCheckError(f"cond predicate must be a scalar boolean, got "
                             f"{pred_aval.str_short()}", user_frame_info(),
                             "compare explicitly, e.g. cond(x > 0, ...), and reduce arrays "
                             "with np.any/np.all")
    if is_concrete(pred):
        return (true_fun if bool(pred) else false_fun)(*operands)
    return switch(astype(pred, np.int64), [false_fun, true_fun], *operands)


__all__ = ["cond", "cond_p", "switch"]

"""Control flow: cond/switch, while_loop, fori_loop and scan, each a primitive holding closed
sub-graphs in its params, with jvp, vjp and batch rules built from transformed sub-graphs."""
from __future__ import annotations

import numpy as np

from xform.errors import ShapeError, TypeCheckError
from xform.ir.avals import ShapedArray, is_differentiable, tangent_aval
from xform.ir.builder import GraphBuilder, stage_function, using_builder
from xform.ir.core import Graph, Primitive, Var, rewire
from xform.ir.interpret import eval_graph
from xform.source_info import user_frame_info
from xform.ir.tracer import Tracer
from xform.ir.ad import NOT_MAPPED, Zero, aval, instantiate, move_to_front
from xform.ir.rules import loop_batch, register
from xform.tree import tree_flatten, tree_unflatten


def _compiled(graph):
    from xform.runtime.cache import CACHE
    return CACHE.compiled(graph)


def _same_type(avals_a, avals_b) -> bool:
    return [(a.shape, a.dtype) for a in avals_a] == [(b.shape, b.dtype) for b in avals_b]


def _types(avals) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _memo(graph: Graph, key, build):
    """Transformed sub-graphs are built once per (graph, transform), in the one cache, and
    optimized: they are compiled and run as they are (often once per loop iteration)."""
    from xform.runtime.cache import CACHE
    from xform.passes import optimize

    def make():
        built = build()
        return tuple(optimize(g) for g in built) if isinstance(built, tuple) else optimize(built)
    return CACHE.build(graph, ("sub-graph",) + key, make, record=False).value


def _out_avals(graph):
    return [a.aval for a in graph.outputs]


def _vjp_of(graph: Graph, with_outputs: bool) -> Graph:
    """(inputs, cts of the differentiable outputs) -> ([outputs,] cotangents of the
    differentiable inputs)."""
    from xform.transforms.vjp import vjp_eval
    builder = GraphBuilder()
    with using_builder(builder):
        ins = [builder.new_input(v.aval) for v in graph.inputs]
        cts = [builder.new_input(tangent_aval(a.aval)) if is_differentiable(a.aval)
               else Zero(a.aval) for a in graph.outputs]
        outs, cts_in = vjp_eval(graph, ins, cts)
        grads = [instantiate(ct) for ct, v in zip(cts_in, graph.inputs)
                 if is_differentiable(v.aval)]
    return builder.build((list(outs) if with_outputs else []) + grads)


def _vjp_parts(graph: Graph):
    """Forward and backward graphs of `graph`'s vjp (see transforms.vjp.split_graph).

    forward: inputs -> (outputs, residuals); backward: (residuals, cts of the differentiable
    outputs) -> cotangents of the differentiable inputs. Residual count is `len(forward.outputs)
    - len(graph.outputs)`.
    """
    from xform.transforms.vjp import split_graph
    return _memo(graph, ("vjp_parts",), lambda: split_graph(
        _vjp_of(graph, with_outputs=True), len(graph.inputs), len(graph.outputs)))


def _vjp_combined(graph: Graph):
    """(inputs, cts of differentiable outputs) -> cotangents of differentiable inputs."""
    return _memo(graph, ("vjp",), lambda: _vjp_of(graph, with_outputs=False))


def _jvp(graph: Graph, nonzeros):
    from xform.transforms.jvp import jvp_graph
    return _memo(graph, ("jvp", tuple(nonzeros)), lambda: jvp_graph(graph, nonzeros))


def _batch(graph: Graph, dims, size):
    from xform.transforms.batch import batch_graph
    return _memo(graph, ("batch", tuple(dims), size), lambda: batch_graph(graph, dims, size))


def _lane_mask(mask, like, size):
    """`mask` of shape (size,) shaped to broadcast against batched `like`."""
    return np.reshape(mask, (size,) + (1,) * (len(aval(like).shape) - 1))


# == cond / switch ============================================================================

cond_p = Primitive("cond", multiple_results=True)


def _cond_impl(index, *operands, branches):
    index = min(max(int(index), 0), len(branches) - 1)
    return _compiled(branches[index])(*operands)


def _cond_abstract_eval(index, *operands, branches):
    return _out_avals(branches[0])


def _cond_jvp(primals, tangents, *, branches):
    index, *operands = primals
    nonzeros = [type(t) is not Zero for t in tangents[1:]]
    jvp_branches = tuple(_jvp(b, nonzeros) for b in branches)
    live_tangents = [t for t in tangents[1:] if type(t) is not Zero]
    outs = cond_p.bind(index, *operands, *live_tangents, branches=jvp_branches)
    n_out = len(branches[0].outputs)
    return outs[:n_out], outs[n_out:]


def _cond_vjp(primals, outs, cts, *, branches):
    index, *operands = primals
    live_cts = [instantiate(ct) for ct, a in zip(cts, _out_avals(branches[0]))
                if is_differentiable(a)]
    grads = iter(cond_p.bind(index, *operands, *live_cts,
                             branches=tuple(_vjp_combined(b) for b in branches)))
    return [None] + [next(grads) if is_differentiable(v.aval) else None
                     for v in branches[0].inputs]


def _cond_batch(size, args, dims, *, branches):
    index, *operands = args
    index_dim, *operand_dims = dims
    batched = [_batch(b, operand_dims, size) for b in branches]
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
            out = np.where(_lane_mask(index == j, out, size), results[j][k], out)
        outs.append(out)
    return outs, [0] * len(outs)


def _cond_fold(eqn, known):
    from xform.ir.rules import UNKNOWN
    if known[0] is UNKNOWN:
        return None
    branches = eqn.params["branches"]
    index = min(max(int(known[0]), 0), len(branches) - 1)
    return branches[index], list(eqn.inputs[1:])


register(cond_p, impl=_cond_impl, abstract_eval=_cond_abstract_eval, jvp=_cond_jvp,
         vjp=_cond_vjp, batch=_cond_batch, fold=_cond_fold, symbolic_zeros=True)


def _stage_branches(functions, operands, what):
    """Stage each branch on the operands; all graphs get the same inputs: the operand leaves,
    then the union of every branch's captured values."""
    from xform.rules.call import PendingRecursion
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
        recursion.ref.assume(recursion.key, _out_avals(done[0][0]), done[0][2])
        staged[i] = stage_function(functions[i], in_tree, avals)
    out_tree = staged[0][2]
    out_avals = _out_avals(staged[0][0])
    for graph, _, tree in staged[1:]:
        if tree != out_tree:
            raise TypeCheckError(f"{what} branches return different structures: {out_tree} "
                                 f"and {tree}", user_frame_info())
        if not _same_type(_out_avals(graph), out_avals):
            raise ShapeError(f"{what} branches return different types: "
                             f"{_types(out_avals)} and {_types(_out_avals(graph))}",
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


def _is_concrete(x) -> bool:
    return type(x) is not Tracer


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
    if _is_concrete(index):
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
    if _is_concrete(pred):
        return (true_fun if bool(pred) else false_fun)(*operands)
    from xform.rules.unary import astype
    return switch(astype(pred, np.int64), [false_fun, true_fun], *operands)


# == while_loop ===============================================================================

while_p = Primitive("while_loop", multiple_results=True)
while_grad_p = Primitive("while_loop_grad", multiple_results=True)


def _while_split(args, n_carry, n_cond_consts):
    return (list(args[:n_carry]), list(args[n_carry:n_carry + n_cond_consts]),
            list(args[n_carry + n_cond_consts:]))


def _while_impl(*args, cond_graph, body_graph, n_carry, n_cond_consts):
    carry, cond_consts, body_consts = _while_split(args, n_carry, n_cond_consts)
    cond_fn, body_fn = _compiled(cond_graph), _compiled(body_graph)
    while cond_fn(*carry, *cond_consts)[0]:
        carry = body_fn(*carry, *body_consts)
    return carry


def _while_abstract_eval(*avals, cond_graph, body_graph, n_carry, n_cond_consts):
    return [v.aval for v in body_graph.inputs[:n_carry]]


def _while_jvp(primals, tangents, *, cond_graph, body_graph, n_carry, n_cond_consts):
    carry, cond_consts, body_consts = _while_split(primals, n_carry, n_cond_consts)
    t_carry, _, t_body_consts = _while_split(tangents, n_carry, n_cond_consts)
    # Every differentiable carry gets a tangent: the body may make a zero one nonzero.
    carry_nz = [is_differentiable(aval(x)) for x in carry]
    consts_nz = [type(t) is not Zero for t in t_body_consts]
    jvp_body = _jvp(body_graph, carry_nz + consts_nz)
    n_body_consts = len(body_consts)
    n_t_carry = sum(carry_nz)
    ins = jvp_body.inputs
    primal_carry, primal_consts = ins[:n_carry], ins[n_carry:n_carry + n_body_consts]
    tangent_carry = ins[n_carry + n_body_consts:n_carry + n_body_consts + n_t_carry]
    tangent_consts = ins[n_carry + n_body_consts + n_t_carry:]
    carried_tangent_outs = [n_carry + i for i, nz in enumerate(carry_nz) if nz]
    body = rewire(jvp_body, [*primal_carry, *tangent_carry, *primal_consts, *tangent_consts],
                  list(range(n_carry)) + carried_tangent_outs)
    tangent_avals = [tangent_aval(v.aval) for v in tangent_carry]
    cond_ins = cond_graph.inputs
    new_cond = rewire(cond_graph, [*cond_ins[:n_carry], *tangent_avals, *cond_ins[n_carry:]])
    live_t_carry = [instantiate(t) for t, nz in zip(t_carry, carry_nz) if nz]
    live_t_consts = [t for t in t_body_consts if type(t) is not Zero]
    outs = while_p.bind(*carry, *live_t_carry, *cond_consts, *body_consts, *live_t_consts,
                        cond_graph=new_cond, body_graph=body, n_carry=n_carry + n_t_carry,
                        n_cond_consts=n_cond_consts)
    out_tangents = iter(outs[n_carry:])
    return outs[:n_carry], [next(out_tangents) if nz else Zero(tangent_aval(aval(x)))
                            for x, nz in zip(carry, carry_nz)]


def _while_vjp(primals, outs, cts, *, cond_graph, body_graph, n_carry, n_cond_consts):
    carry, cond_consts, body_consts = _while_split(primals, n_carry, n_cond_consts)
    live_cts = [instantiate(ct) for ct, x in zip(cts, carry) if is_differentiable(aval(x))]
    grads = iter(while_grad_p.bind(*primals, *live_cts, cond_graph=cond_graph,
                                   body_graph=body_graph, n_carry=n_carry,
                                   n_cond_consts=n_cond_consts))
    return ([next(grads) if is_differentiable(aval(x)) else None for x in carry]
            + [None] * len(cond_consts)
            + [next(grads) if is_differentiable(aval(x)) else None for x in body_consts])


def _while_batch(size, args, dims, *, cond_graph, body_graph, n_carry, n_cond_consts):
    carry, cond_consts, body_consts = _while_split(args, n_carry, n_cond_consts)
    _, cond_dims, body_dims = _while_split(dims, n_carry, n_cond_consts)
    # Carries are batched throughout (the body may mix in batched values); lanes whose
    # predicate is false keep their carry while the others go on.
    carry = [move_to_front(x, d, size) for x, d in zip(carry, dims[:n_carry])]
    batched_cond = _batch(cond_graph, [0] * n_carry + list(cond_dims), size)
    batched_body = _batch(body_graph, [0] * n_carry + list(body_dims), size)

    def any_lane(*args):
        return np.sum(eval_graph(batched_cond, *args[:n_carry], *args[n_carry:])[0]) > 0

    def step(*args):
        lanes, consts_cond = args[:n_carry], args[n_carry:n_carry + n_cond_consts]
        consts_body = args[n_carry + n_cond_consts:]
        running = eval_graph(batched_cond, *lanes, *consts_cond)[0]
        new = eval_graph(batched_body, *lanes, *consts_body)
        return [np.where(_lane_mask(running, n, size), n, old) for n, old in zip(new, lanes)]

    avals = [aval(x) for x in carry]
    cond_avals = [aval(x) for x in cond_consts]
    body_avals = [aval(x) for x in body_consts]
    new_cond = _stage_flat(any_lane, avals + cond_avals)
    new_body = _stage_flat(step, avals + cond_avals + body_avals)
    outs = while_p.bind(*carry, *cond_consts, *cond_consts, *body_consts,
                        cond_graph=new_cond, body_graph=new_body, n_carry=n_carry,
                        n_cond_consts=n_cond_consts)
    return outs, [0] * n_carry


def _stage_flat(fun, avals) -> Graph:
    leaves_tree = tree_flatten(tuple(range(len(avals))))[1]
    graph, captured, _ = stage_function(fun, leaves_tree, avals)
    assert not captured
    return graph


def _while_fold(eqn, known):
    """A loop whose condition is known false on entry disappears (its carry passes through).
    Only the inputs the condition reads need to be known."""
    from xform.ir.rules import UNKNOWN
    params = eqn.params
    n_carry, n_cond = params["n_carry"], params["n_cond_consts"]
    cond_graph = params["cond_graph"]
    read = {a for e in cond_graph.equations for a in e.inputs} | set(cond_graph.outputs)
    cond_args = []
    for var, value in zip(cond_graph.inputs, known[:n_carry] + known[-n_cond:] if n_cond
                          else known[:n_carry]):
        if value is UNKNOWN:
            if var in read:
                return None
            value = np.zeros(var.aval.shape, var.aval.dtype)
        cond_args.append(value)
    if _compiled(cond_graph)(*cond_args)[0]:
        return None
    identity_inputs = [Var(a.aval) for a in eqn.inputs[:n_carry]]
    return Graph(identity_inputs, (), (), identity_inputs), list(eqn.inputs[:n_carry])


register(while_p, impl=_while_impl, abstract_eval=_while_abstract_eval, jvp=_while_jvp,
         vjp=_while_vjp, batch=_while_batch, fold=_while_fold, symbolic_zeros=True)


def _while_grad_impl(*args, cond_graph, body_graph, n_carry, n_cond_consts):
    """Reverse mode through a loop whose trip count is known only at run time.

    Notes: the forward loop runs the body's forward part and pushes each iteration's
    residuals on a stack local to this call (so the compiled rule holds no per-call state and
    is safe under threads and recursion); the backward loop pops them in reverse order, as
    Mooncake's block stack does.
    """
    n_primal = len(body_graph.inputs) + n_cond_consts
    primals, cts = args[:n_primal], list(args[n_primal:])
    carry, cond_consts, body_consts = _while_split(primals, n_carry, n_cond_consts)
    forward, backward = _vjp_parts(body_graph)
    cond_fn, forward_fn, backward_fn = (_compiled(cond_graph), _compiled(forward),
                                        _compiled(backward))
    stack = []
    while cond_fn(*carry, *cond_consts)[0]:
        outs = forward_fn(*carry, *body_consts)
        carry = outs[:n_carry]
        stack.append(outs[n_carry:])
    carry_diff = [is_differentiable(v.aval) for v in body_graph.inputs[:n_carry]]
    consts_diff = [is_differentiable(v.aval) for v in body_graph.inputs[n_carry:]]
    n_live = sum(carry_diff)
    ct_consts = [np.zeros(v.aval.shape, v.aval.dtype)
                 for v, d in zip(body_graph.inputs[n_carry:], consts_diff) if d]
    while stack:
        grads = backward_fn(*stack.pop(), *cts)
        cts = grads[:n_live]
        ct_consts = [acc + g for acc, g in zip(ct_consts, grads[n_live:])]
    return list(cts) + ct_consts


def _while_grad_abstract_eval(*avals, cond_graph, body_graph, n_carry, n_cond_consts):
    return [tangent_aval(v.aval) for v in body_graph.inputs if is_differentiable(v.aval)]


register(while_grad_p, impl=_while_grad_impl, abstract_eval=_while_grad_abstract_eval,
         batch=loop_batch(while_grad_p), symbolic_zeros=True)


def while_loop(cond_fun, body_fun, init_val):
    """`while cond_fun(val): val = body_fun(val)`, staged; differentiable in both modes, also
    when the trip count depends on the data.

    >>> xform.while_loop(lambda x: x < 10.0, lambda x: x * 2.0, 1.0)
    np.float64(16.0)
    """
    leaves, tree = tree_flatten(init_val)
    avals = [aval(x) for x in leaves]
    args_tree = tree_flatten((init_val,))[1]
    cond_graph, cond_captured, _ = stage_function(cond_fun, args_tree, avals)
    cond_out = _out_avals(cond_graph)
    if len(cond_out) != 1 or cond_out[0].shape != () or cond_out[0].dtype != np.dtype(bool):
        raise TypeCheckError("while_loop cond_fun must return a scalar boolean, got "
                             f"{_types(cond_out)}", user_frame_info())
    body_graph, body_captured, body_tree = stage_function(body_fun, args_tree, avals)
    if body_tree != tree:
        raise TypeCheckError(f"while_loop body_fun returns structure {body_tree}, but the "
                             f"carry has structure {tree}", user_frame_info())
    if not _same_type(_out_avals(body_graph), avals):
        raise ShapeError(f"while_loop body_fun changes the carry from {_types(avals)} to "
                         f"{_types(_out_avals(body_graph))}", user_frame_info(),
                         "the carry must keep its shapes and dtypes across iterations")
    outs = while_p.bind(*leaves, *cond_captured, *body_captured, cond_graph=cond_graph,
                        body_graph=body_graph, n_carry=len(leaves),
                        n_cond_consts=len(cond_captured))
    return tree_unflatten(tree, outs)


# == scan =====================================================================================

scan_p = Primitive("scan", multiple_results=True)


def _scan_split(args, n_carry, n_xs):
    return list(args[:n_carry]), list(args[n_carry:n_carry + n_xs]), list(args[n_carry + n_xs:])


def _scan_impl(*args, body, n_carry, n_xs, length, reverse):
    carry, xs, consts = _scan_split(args, n_carry, n_xs)
    body_fn = _compiled(body)
    ys = []
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = body_fn(*carry, *[x[i] for x in xs], *consts)
        carry = outs[:n_carry]
        ys.append(outs[n_carry:])
    if reverse:
        ys.reverse()
    y_avals = _out_avals(body)[n_carry:]
    stacked = [np.stack([np.asarray(y[k]) for y in ys]) if ys else
               np.zeros((0,) + a.shape, a.dtype) for k, a in enumerate(y_avals)]
    return list(carry) + stacked


def _scan_abstract_eval(*avals, body, n_carry, n_xs, length, reverse):
    outs = _out_avals(body)
    return [v.aval for v in body.inputs[:n_carry]] + [
        ShapedArray((length,) + a.shape, a.dtype) for a in outs[n_carry:]]


def _scan_jvp(primals, tangents, *, body, n_carry, n_xs, length, reverse):
    carry, xs, consts = _scan_split(primals, n_carry, n_xs)
    t_carry, t_xs, t_consts = _scan_split(tangents, n_carry, n_xs)
    carry_nz = [is_differentiable(aval(x)) for x in carry]
    xs_nz = [type(t) is not Zero for t in t_xs]
    consts_nz = [type(t) is not Zero for t in t_consts]
    jvp_body = _jvp(body, carry_nz + xs_nz + consts_nz)
    ins = list(jvp_body.inputs)
    n_primal = len(body.inputs)
    p_carry, p_xs, p_consts = _scan_split(ins[:n_primal], n_carry, n_xs)
    tangent_ins = ins[n_primal:]
    n_tc, n_tx = sum(carry_nz), sum(xs_nz)
    tc, tx, tk = (tangent_ins[:n_tc], tangent_ins[n_tc:n_tc + n_tx],
                  tangent_ins[n_tc + n_tx:])
    n_out = len(body.outputs)
    n_y = n_out - n_carry
    y_diff = [is_differentiable(a) for a in _out_avals(body)[n_carry:]]
    out_order = (list(range(n_carry)) + [n_out + i for i, nz in enumerate(carry_nz) if nz]
                 + list(range(n_carry, n_out))
                 + [n_out + n_carry + i for i, d in enumerate(y_diff) if d])
    new_body = rewire(jvp_body, [*p_carry, *tc, *p_xs, *tx, *p_consts, *tk], out_order)
    live = [instantiate(t) for t, nz in zip(t_carry, carry_nz) if nz]
    outs = scan_p.bind(*carry, *live, *xs, *[t for t in t_xs if type(t) is not Zero],
                       *consts, *[t for t in t_consts if type(t) is not Zero],
                       body=new_body, n_carry=n_carry + n_tc, n_xs=n_xs + n_tx,
                       length=length, reverse=reverse)
    carry_out, t_carry_out = outs[:n_carry], iter(outs[n_carry:n_carry + n_tc])
    ys, t_ys = outs[n_carry + n_tc:n_carry + n_tc + n_y], iter(outs[n_carry + n_tc + n_y:])
    out_avals = _scan_abstract_eval(body=body, n_carry=n_carry, n_xs=n_xs, length=length,
                                    reverse=reverse)
    tangents_out = [next(t_carry_out) if nz else Zero(tangent_aval(a))
                    for nz, a in zip(carry_nz, out_avals[:n_carry])]
    tangents_out += [next(t_ys) if d else Zero(tangent_aval(a))
                     for d, a in zip(y_diff, out_avals[n_carry:])]
    return list(carry_out) + list(ys), tangents_out


def _scan_vjp(primals, outs, cts, *, body, n_carry, n_xs, length, reverse):
    """Forward scan over the body's forward part, stacking residuals per iteration; then a
    reverse scan over its backward part. Both are scans, so this differentiates again."""
    carry, xs, consts = _scan_split(primals, n_carry, n_xs)
    forward, backward = _vjp_parts(body)
    n_out = len(body.outputs)
    n_res = len(forward.outputs) - n_out
    body_consts = body.inputs[n_carry + n_xs:]
    # Residuals that are loop constants are passed once instead of stacked per iteration.
    res_vars = forward.outputs[n_out:]
    const_index = {v: i for i, v in enumerate(forward.inputs[n_carry + n_xs:])}
    stacked_res = [i for i, v in enumerate(res_vars) if v not in const_index]
    fwd_body = rewire(forward, forward.inputs,
                      list(range(n_carry)) + [n_out + i for i in stacked_res])
    fwd_outs = scan_p.bind(*carry, *xs, *consts, body=fwd_body, n_carry=n_carry, n_xs=n_xs,
                           length=length, reverse=reverse)
    res_stacks = fwd_outs[n_carry:]

    carry_diff = [is_differentiable(v.aval) for v in body.inputs[:n_carry]]
    xs_diff = [is_differentiable(v.aval) for v in body.inputs[n_carry:n_carry + n_xs]]
    consts_diff = [is_differentiable(v.aval) for v in body_consts]
    out_diff = [is_differentiable(a) for a in _out_avals(body)]
    n_ct_carry = sum(carry_diff)
    ct_carry = [instantiate(ct) for ct, d in zip(cts[:n_carry], out_diff[:n_carry]) if d]
    ct_ys = [instantiate(ct) for ct, d in zip(cts[n_carry:], out_diff[n_carry:]) if d]
    acc_avals = [tangent_aval(v.aval) for v, d in zip(body_consts, consts_diff) if d]
    const_res = [consts[const_index[res_vars[i]]] for i in range(n_res)
                 if i not in stacked_res]
    const_res_pos = [i for i in range(n_res) if i not in stacked_res]
    n_xdiff = sum(xs_diff)

    def backward_step(*args):
        ct_c = args[:n_ct_carry]
        acc = args[n_ct_carry:n_ct_carry + len(acc_avals)]
        rest = args[n_ct_carry + len(acc_avals):]
        res_slices = rest[:len(stacked_res)]
        ct_y = rest[len(stacked_res):len(stacked_res) + len(ct_ys)]
        fixed = rest[len(stacked_res) + len(ct_ys):]
        residuals = [None] * n_res
        for i, r in zip(stacked_res, res_slices):
            residuals[i] = r
        for i, r in zip(const_res_pos, fixed):
            residuals[i] = r
        grads = eval_graph(backward, *residuals, *ct_c, *ct_y)
        new_ct_c = grads[:n_ct_carry]
        ct_x = grads[n_ct_carry:n_ct_carry + n_xdiff]
        ct_k = grads[n_ct_carry + n_xdiff:]
        return (*new_ct_c, *[a + g for a, g in zip(acc, ct_k)], *ct_x)

    carry_avals = [aval(c) for c in ct_carry] + acc_avals
    slice_avals = [ShapedArray(aval(r).shape[1:], aval(r).dtype) for r in res_stacks]
    slice_avals += [ShapedArray(aval(c).shape[1:], aval(c).dtype) for c in ct_ys]
    fixed_avals = [aval(r) for r in const_res]
    bwd_graph = _stage_flat(backward_step, carry_avals + slice_avals + fixed_avals)
    acc_init = [np.zeros(a.shape, a.dtype) for a in acc_avals]
    bwd_outs = scan_p.bind(*ct_carry, *acc_init, *res_stacks, *ct_ys, *const_res,
                           body=bwd_graph, n_carry=len(carry_avals),
                           n_xs=len(slice_avals), length=length, reverse=not reverse)
    ct_init = iter(bwd_outs[:n_ct_carry])
    ct_consts = iter(bwd_outs[n_ct_carry:len(carry_avals)])
    ct_xs = iter(bwd_outs[len(carry_avals):])
    return ([next(ct_init) if d else None for d in carry_diff]
            + [next(ct_xs) if d else None for d in xs_diff]
            + [next(ct_consts) if d else None for d in consts_diff])


def _scan_batch(size, args, dims, *, body, n_carry, n_xs, length, reverse):
    carry, xs, consts = _scan_split(args, n_carry, n_xs)
    carry_dims, xs_dims, consts_dims = _scan_split(dims, n_carry, n_xs)
    carry = [move_to_front(x, d, size) for x, d in zip(carry, carry_dims)]
    # xs are sliced along axis 0 by the loop, so their batch axis goes to 1.
    xs = [x if d is NOT_MAPPED else np.moveaxis(x, d, 1) for x, d in zip(xs, xs_dims)]
    x_dims = [NOT_MAPPED if d is NOT_MAPPED else 0 for d in xs_dims]
    batched = _batch(body, [0] * n_carry + x_dims + list(consts_dims), size)
    outs = scan_p.bind(*carry, *xs, *consts, body=batched, n_carry=n_carry, n_xs=n_xs,
                       length=length, reverse=reverse)
    ys = [np.moveaxis(y, 1, 0) for y in outs[n_carry:]]
    return list(outs[:n_carry]) + ys, [0] * len(outs)


register(scan_p, impl=_scan_impl, abstract_eval=_scan_abstract_eval, jvp=_scan_jvp,
         vjp=_scan_vjp, batch=_scan_batch, symbolic_zeros=True)


def scan(f, init, xs=None, length=None, reverse=False):
    """JAX's scan: `carry, y = f(carry, x)` over the leading axis of `xs`; returns
    `(carry, stacked ys)`.

    >>> xform.scan(lambda c, x: (c + x, c + x), 0.0, np.arange(4.0))    # running sums
    (np.float64(6.0), array([0., 1., 3., 6.]))
    """
    carry_leaves, carry_tree = tree_flatten(init)
    x_leaves, _ = tree_flatten(xs)
    lengths = {aval(x).shape[0] for x in x_leaves if aval(x).shape}
    if any(not aval(x).shape for x in x_leaves):
        raise ShapeError("scan xs must have a leading axis to scan over", user_frame_info())
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise ShapeError(f"scan got inconsistent lengths {sorted(lengths)} (xs leading axes "
                         "and length=)", user_frame_info())
    (length,) = lengths
    carry_avals = [aval(x) for x in carry_leaves]
    x_avals = [ShapedArray(aval(x).shape[1:], aval(x).dtype) for x in x_leaves]
    args_tree = tree_flatten((init, xs))[1]
    graph, captured, out_tree = stage_function(f, args_tree, carry_avals + x_avals)
    if out_tree.kind is not tuple or len(out_tree.children) != 2:
        raise TypeCheckError("scan's f must return a pair (carry, y)", user_frame_info())
    new_carry_tree, y_tree = out_tree.children
    if new_carry_tree != carry_tree or not _same_type(
            _out_avals(graph)[:len(carry_leaves)], carry_avals):
        raise ShapeError(f"scan's f changes the carry from {_types(carry_avals)} to "
                         f"{_types(_out_avals(graph)[:len(carry_leaves)])}",
                         user_frame_info(), "the carry must keep its structure, shapes "
                         "and dtypes")
    outs = scan_p.bind(*carry_leaves, *x_leaves, *captured, body=graph,
                       n_carry=len(carry_leaves), n_xs=len(x_leaves), length=length,
                       reverse=bool(reverse))
    return (tree_unflatten(carry_tree, outs[:len(carry_leaves)]),
            tree_unflatten(y_tree, outs[len(carry_leaves):]))


def fori_loop(lower, upper, body_fun, init_val):
    """`for i in range(lower, upper): val = body_fun(i, val)`. Static bounds become a scan
    (differentiable in reverse to any order); traced bounds a while_loop.

    >>> xform.fori_loop(0, 3, lambda i, x: x * 2.0, 1.0)
    np.float64(8.0)
    """
    if _is_concrete(lower) and _is_concrete(upper):
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
    from xform.rules.unary import astype
    start = astype(lower, np.int64) if type(lower) is Tracer else np.int64(lower)
    stop = astype(upper, np.int64) if type(upper) is Tracer else np.int64(upper)
    return while_loop(loop_cond, loop_body, (start, stop, init_val))[2]


__all__ = ["cond", "cond_p", "fori_loop", "scan", "scan_p", "switch", "while_loop",
           "while_p"]

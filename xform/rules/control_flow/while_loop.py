"""while_loop: a primitive holding a closed condition and body graph. Reverse mode, for a trip
count known only at run time, is the `while_loop_grad` primitive: a forward loop keeping each
iteration's residuals, then a backward loop over them."""
from __future__ import annotations

import numpy as np

from xform.errors import ShapeError, TypeCheckError
from xform.ir.ad import Zero, aval, instantiate, move_to_front
from xform.ir.avals import is_differentiable, tangent_aval
from xform.ir.builder import stage_function
from xform.ir.core import Graph, Primitive, Var, rewire
from xform.ir.execute import compiled
from xform.ir.interpret import eval_graph
from xform.ir.rules import loop_batch, register
from xform.rules.subgraphs import describe_types, lane_mask, out_avals, same_types, stage_flat
from xform.source_info import user_frame_info
from xform.transforms.derived import batch_of, jvp_of, vjp_parts_of
from xform.tree import tree_flatten, tree_unflatten


while_p = Primitive("while_loop", multiple_results=True)
while_grad_p = Primitive("while_loop_grad", multiple_results=True)


def _while_split(args, n_carry, n_cond_consts):
    return (list(args[:n_carry]), list(args[n_carry:n_carry + n_cond_consts]),
            list(args[n_carry + n_cond_consts:]))


def _while_impl(*args, cond_graph, body_graph, n_carry, n_cond_consts):
    carry, cond_consts, body_consts = _while_split(args, n_carry, n_cond_consts)
    cond_fn, body_fn = compiled(cond_graph), compiled(body_graph)
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
    jvp_body = jvp_of(body_graph, carry_nz + consts_nz)
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
    batched_cond = batch_of(cond_graph, [0] * n_carry + list(cond_dims), size)
    batched_body = batch_of(body_graph, [0] * n_carry + list(body_dims), size)

    def any_lane(*args):
        return np.sum(eval_graph(batched_cond, *args[:n_carry], *args[n_carry:])[0]) > 0

    def step(*args):
        lanes, consts_cond = args[:n_carry], args[n_carry:n_carry + n_cond_consts]
        consts_body = args[n_carry + n_cond_consts:]
        running = eval_graph(batched_cond, *lanes, *consts_cond)[0]
        new = eval_graph(batched_body, *lanes, *consts_body)
        return [np.where(lane_mask(running, n, size), n, old) for n, old in zip(new, lanes)]

    avals = [aval(x) for x in carry]
    cond_avals = [aval(x) for x in cond_consts]
    body_avals = [aval(x) for x in body_consts]
    new_cond = stage_flat(any_lane, avals + cond_avals)
    new_body = stage_flat(step, avals + cond_avals + body_avals)
    outs = while_p.bind(*carry, *cond_consts, *cond_consts, *body_consts,
                        cond_graph=new_cond, body_graph=new_body, n_carry=n_carry,
                        n_cond_consts=n_cond_consts)
    return outs, [0] * n_carry


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
    if compiled(cond_graph)(*cond_args)[0]:
        return None
    identity_inputs = [Var(a.aval) for a in eqn.inputs[:n_carry]]
    return Graph(identity_inputs, (), (), identity_inputs), list(eqn.inputs[:n_carry])


register(while_p, impl=_while_impl, abstract_eval=_while_abstract_eval, jvp=_while_jvp,
         vjp=_while_vjp, batch=_while_batch, fold=_while_fold, symbolic_zeros=True,
         construct="xform.while_loop")


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
    forward, backward = vjp_parts_of(body_graph)
    cond_fn, forward_fn, backward_fn = (compiled(cond_graph), compiled(forward),
                                        compiled(backward))
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
         batch=loop_batch(while_grad_p), symbolic_zeros=True,
         construct="the reverse-mode derivative of xform.while_loop")


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
    cond_out = out_avals(cond_graph)
    if len(cond_out) != 1 or cond_out[0].shape != () or cond_out[0].dtype != np.dtype(bool):
        raise TypeCheckError("while_loop cond_fun must return a scalar boolean, got "
                             f"{describe_types(cond_out)}", user_frame_info())
    body_graph, body_captured, body_tree = stage_function(body_fun, args_tree, avals)
    if body_tree != tree:
        raise TypeCheckError(f"while_loop body_fun returns structure {body_tree}, but the "
                             f"carry has structure {tree}", user_frame_info())
    if not same_types(out_avals(body_graph), avals):
        raise ShapeError(f"while_loop body_fun changes the carry from {describe_types(avals)} to "
                         f"{describe_types(out_avals(body_graph))}", user_frame_info(),
                         "the carry must keep its shapes and dtypes across iterations")
    outs = while_p.bind(*leaves, *cond_captured, *body_captured, cond_graph=cond_graph,
                        body_graph=body_graph, n_carry=len(leaves),
                        n_cond_consts=len(cond_captured))
    return tree_unflatten(tree, outs)


__all__ = ["while_grad_p", "while_loop", "while_p"]

"""while_loop: a primitive holding a closed condition and body graph. Reverse mode, for a trip
count known only at run time, is the `while_loop_grad` primitive: a forward loop keeping each
iteration's residuals, then a backward loop over them. Its own jvp and vjp are
while_loop_grads of the loop carrying tangents, and its batch rule one masked loop, so every
order costs one loop pair."""
from __future__ import annotations

import numpy as np

from xform.errors import ShapeError, TypeCheckError, UnsupportedError
from xform.ir.ad import NOT_MAPPED, Undefined, Zero, aval, instantiate, move_to_front
from xform.ir.avals import is_differentiable, tangent_aval
from xform.ir.builder import stage_function
from xform.ir.core import Graph, Primitive, Var, rewire
from xform.ir.execute import runtime
from xform.ir.interpret import eval_graph
from xform.ir.registry import Hooks, register
from xform.rules.subgraphs import (describe_types, lane_mask, out_avals, same_types, stage_flat,
                                   transpose_from_vjp)
from xform.source_info import user_frame_info
from xform.transforms.derived import batch_of, batched_outputs, jvp_of, vjp_parts_of
from xform.tree import tree_flatten, tree_unflatten


while_p = Primitive("while_loop", multiple_results=True)
while_grad_p = Primitive("while_loop_grad", multiple_results=True)


def _while_split(args, n_carry, n_cond_consts):
    return (list(args[:n_carry]), list(args[n_carry:n_carry + n_cond_consts]),
            list(args[n_carry + n_cond_consts:]))


def _while_impl(*args, cond_graph, body_graph, n_carry, n_cond_consts):
    carry, cond_consts, body_consts = _while_split(args, n_carry, n_cond_consts)
    cond_fn, body_fn = runtime().compiled(cond_graph), runtime().compiled(body_graph)
    while cond_fn(*carry, *cond_consts)[0]:
        carry = body_fn(*carry, *body_consts)
    return carry


def _while_abstract_eval(*avals, cond_graph, body_graph, n_carry, n_cond_consts):
    return [v.aval for v in body_graph.inputs[:n_carry]]


def _jvp_loop(cond_graph, body_graph, n_carry, carry_nz, consts_nz):
    """(cond, body) of the loop carrying tangents along: carry (carries, tangents of the
    `carry_nz` carries), condition consts as before, body consts (consts, tangents of the
    `consts_nz` consts); the body is jvp_of(body_graph)."""
    jvp_body = jvp_of(body_graph, list(carry_nz) + list(consts_nz))
    n_body_consts = len(body_graph.inputs) - n_carry
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
    return new_cond, body


def _while_jvp(primals, tangents, *, cond_graph, body_graph, n_carry, n_cond_consts):
    carry, cond_consts, body_consts = _while_split(primals, n_carry, n_cond_consts)
    t_carry, _, t_body_consts = _while_split(tangents, n_carry, n_cond_consts)
    # Every differentiable carry gets a tangent: the body may make a zero one nonzero.
    carry_nz = [is_differentiable(aval(x)) for x in carry]
    consts_nz = [type(t) is not Zero for t in t_body_consts]
    new_cond, body = _jvp_loop(cond_graph, body_graph, n_carry, carry_nz, consts_nz)
    live_t_carry = [instantiate(t) for t, nz in zip(t_carry, carry_nz) if nz]
    live_t_consts = [t for t in t_body_consts if type(t) is not Zero]
    outs = while_p.bind(*carry, *live_t_carry, *cond_consts, *body_consts, *live_t_consts,
                        cond_graph=new_cond, body_graph=body, n_carry=n_carry + sum(carry_nz),
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


def _carries_batched(cond_graph, body_graph, n_carry, carry_dims, cond_dims, body_dims,
                     size):
    """(which carries the batch reaches, whether the predicate is the same in every lane):
    a carry is batched if it enters batched or the body makes it so (a fixpoint)."""
    batched = [d is not NOT_MAPPED for d in carry_dims]
    while True:
        outs = batched_outputs(body_graph, _dims_of(batched) + list(body_dims), size)
        grown = [a or b for a, b in zip(batched, outs)]
        if grown == batched:
            break
        batched = grown
    predicate = batched_outputs(cond_graph, _dims_of(batched) + list(cond_dims), size)[0]
    return batched, not predicate


def _dims_of(batched):
    return [0 if b else NOT_MAPPED for b in batched]


def _masked_loop(cond_graph, body_graph, n_carry, n_cond_consts, carry_avals, cond_dims,
                 body_dims, size, shared_predicate=False):
    """(cond, body) of the loop over batched carries: it runs while any lane's predicate
    holds, and lanes whose predicate is false keep their carry (with a `shared_predicate`,
    lane 0's decides and no lane is masked). The new body's consts are the condition's
    consts, then the body's."""
    batched_cond = batch_of(cond_graph, [0] * n_carry + list(cond_dims), size)
    batched_body = batch_of(body_graph, [0] * n_carry + list(body_dims), size)

    def any_lane(*args):
        running = eval_graph(batched_cond, *args[:n_carry], *args[n_carry:])[0]
        return running[0] if shared_predicate else np.sum(running) > 0

    def step(*args):
        lanes, consts_cond = args[:n_carry], args[n_carry:n_carry + n_cond_consts]
        consts_body = args[n_carry + n_cond_consts:]
        new = eval_graph(batched_body, *lanes, *consts_body)
        if shared_predicate:
            return new
        running = eval_graph(batched_cond, *lanes, *consts_cond)[0]
        return [np.where(lane_mask(running, n, size), n, old) for n, old in zip(new, lanes)]

    cond_avals = [v.aval for v in batched_cond.inputs[n_carry:]]
    body_avals = [v.aval for v in batched_body.inputs[n_carry:]]
    return (stage_flat(any_lane, carry_avals + cond_avals),
            stage_flat(step, carry_avals + cond_avals + body_avals))


def _while_batch(size, args, dims, *, cond_graph, body_graph, n_carry, n_cond_consts):
    carry, cond_consts, body_consts = _while_split(args, n_carry, n_cond_consts)
    carry_dims, cond_dims, body_dims = _while_split(dims, n_carry, n_cond_consts)
    batched, shared = _carries_batched(cond_graph, body_graph, n_carry, carry_dims, cond_dims,
                                       body_dims, size)
    if shared:
        # Every lane runs as many iterations: one loop over the batched body, and carries the
        # batch never reaches stay unbatched.
        carry_axes = _dims_of(batched)
        carry = [move_to_front(x, d, size) if b else x
                 for x, d, b in zip(carry, carry_dims, batched)]
        body = batch_of(body_graph, carry_axes + list(body_dims), size, carry_axes)
        cond = batch_of(cond_graph, carry_axes + list(cond_dims), size, [None])
        outs = while_p.bind(*carry, *cond_consts, *body_consts, cond_graph=cond,
                            body_graph=body, n_carry=n_carry, n_cond_consts=n_cond_consts)
        return outs, carry_axes
    # Carries are batched throughout (the body may mix in batched values).
    carry = [move_to_front(x, d, size) for x, d in zip(carry, carry_dims)]
    new_cond, new_body = _masked_loop(cond_graph, body_graph, n_carry, n_cond_consts,
                                      [aval(x) for x in carry], cond_dims, body_dims, size)
    outs = while_p.bind(*carry, *cond_consts, *cond_consts, *body_consts,
                        cond_graph=new_cond, body_graph=new_body, n_carry=n_carry,
                        n_cond_consts=n_cond_consts)
    return outs, [0] * n_carry


def _while_fold(eqn, known):
    """A loop whose condition is known false on entry disappears (its carry passes through).
    Only the inputs the condition reads need to be known."""
    from xform.ir.registry import UNKNOWN
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
    if runtime().compiled(cond_graph)(*cond_args)[0]:
        return None
    identity_inputs = [Var(a.aval) for a in eqn.inputs[:n_carry]]
    return Graph(identity_inputs, (), (), identity_inputs), list(eqn.inputs[:n_carry])


register(while_p, impl=_while_impl, abstract_eval=_while_abstract_eval, jvp=_while_jvp,
         vjp=_while_vjp, transpose=transpose_from_vjp(_while_vjp, _while_abstract_eval),
         batch=_while_batch, hooks=Hooks(fold=_while_fold), symbolic_zeros=True,
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
    compiled = runtime().compiled
    cond_fn, forward_fn, backward_fn = compiled(cond_graph), compiled(forward), compiled(backward)
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


def _grad_split(args, body_graph, n_carry, n_cond_consts):
    """(carry, cond consts, body consts, cotangents of the differentiable carries)."""
    n_primal = len(body_graph.inputs) + n_cond_consts
    return (*_while_split(args[:n_primal], n_carry, n_cond_consts), list(args[n_primal:]))


def _while_grad_jvp(primals, tangents, *, cond_graph, body_graph, n_carry, n_cond_consts):
    """Forward over reverse in one loop pair, with no loop per tangent direction.

    Notes: with F the loop (carry, body consts) -> carry and J its Jacobian at p, this
    primitive computes J^T ct. The loop F' = (F, J dp) (body jvp_of(body_graph)) has, at
    (p, t) and cotangent (s, ct), the cotangents (J^T s + (dJ[t])^T ct, J^T ct) (second
    derivatives are symmetric): exactly the tangent and the value of J^T ct along (t, s). So
    the jvp is this primitive again, over F', and differentiates again the same way.
    """
    params = dict(cond_graph=cond_graph, body_graph=body_graph, n_carry=n_carry,
                  n_cond_consts=n_cond_consts)
    carry, cond_consts, body_consts, cts = _grad_split(primals, **_dims(params))
    t_carry, _, t_consts, t_cts = _grad_split(tangents, **_dims(params))
    carry_nz = [is_differentiable(v.aval) for v in body_graph.inputs[:n_carry]]
    consts_nz = [is_differentiable(v.aval) for v in body_graph.inputs[n_carry:]]
    new_cond, new_body = _jvp_loop(cond_graph, body_graph, n_carry, carry_nz, consts_nz)
    n_diff_carry, n_diff_consts = sum(carry_nz), sum(consts_nz)
    outs = while_grad_p.bind(
        *carry, *_live(t_carry, carry_nz), *cond_consts, *body_consts,
        *_live(t_consts, consts_nz), *[instantiate(t) for t in t_cts], *cts,
        cond_graph=new_cond, body_graph=new_body, n_carry=n_carry + n_diff_carry,
        n_cond_consts=n_cond_consts)
    # Outputs: cotangents of (carries, their tangents, consts, their tangents), the
    # differentiable ones.
    ct_carry = outs[:n_diff_carry]
    grad_carry = outs[n_diff_carry:2 * n_diff_carry]
    ct_consts = outs[2 * n_diff_carry:2 * n_diff_carry + n_diff_consts]
    grad_consts = outs[2 * n_diff_carry + n_diff_consts:]
    return [*grad_carry, *grad_consts], [*ct_carry, *ct_consts]


def _dims(params):
    return dict(body_graph=params["body_graph"], n_carry=params["n_carry"],
                n_cond_consts=params["n_cond_consts"])


def _live(tangents, nonzeros):
    return [instantiate(t) for t, nz in zip(tangents, nonzeros) if nz]


def _loop_tangent(loop_primals, directions, params):
    """J u: the tangents of the loop's differentiable carries along `directions` (one per
    differentiable carry and body const, as this primitive's outputs)."""
    tangents = [Zero(tangent_aval(aval(x))) if d is None else d
                for d, x in zip(_spread(loop_primals, directions, params), loop_primals)]
    _, out_tangents = _while_jvp(loop_primals, tangents, **params)
    return [instantiate(t) for t, v in zip(out_tangents, params["body_graph"].inputs)
            if is_differentiable(v.aval)]


def _while_grad_vjp(primals, outs, cts, *, cond_graph, body_graph, n_carry, n_cond_consts):
    """For G(p, ct) = J(p)^T ct and cotangent u: the cotangent of ct is J u, that of p is
    (dJ[u])^T ct, the tangent of G along (u, 0) (see _while_grad_jvp)."""
    params = dict(cond_graph=cond_graph, body_graph=body_graph, n_carry=n_carry,
                  n_cond_consts=n_cond_consts)
    n_primal = len(body_graph.inputs) + n_cond_consts
    loop_primals = list(primals[:n_primal])
    directions = [instantiate(u) for u in cts]
    spread = _spread(loop_primals, directions, params)
    tangents = [Zero(tangent_aval(aval(x))) if d is None else d
                for d, x in zip(spread, loop_primals)]
    t_cts = [Zero(tangent_aval(aval(c))) for c in primals[n_primal:]]
    _, ct_p = _while_grad_jvp(primals, tangents + t_cts, **params)
    ct_p = iter(ct_p)
    return ([None if d is None else next(ct_p) for d in spread]
            + _loop_tangent(loop_primals, directions, params))


def _spread(loop_primals, directions, params):
    """Per loop input: its entry of `directions` (one per differentiable carry and body
    const), None for the others and the condition's consts."""
    body_graph, n_carry, n_cond = (params["body_graph"], params["n_carry"],
                                   params["n_cond_consts"])
    directions = iter(directions)
    per_body_input = [next(directions) if is_differentiable(v.aval) else None
                      for v in body_graph.inputs]
    return per_body_input[:n_carry] + [None] * n_cond + per_body_input[n_carry:]


def _while_grad_transpose(cts_out, *args, cond_graph, body_graph, n_carry, n_cond_consts):
    """Linear in the cotangents (the others known): the transpose of ct -> J^T ct is J."""
    params = dict(cond_graph=cond_graph, body_graph=body_graph, n_carry=n_carry,
                  n_cond_consts=n_cond_consts)
    n_primal = len(body_graph.inputs) + n_cond_consts
    if any(type(x) is Undefined for x in args[:n_primal]):
        raise UnsupportedError("transposing a while_loop gradient in the loop's own inputs "
                               "(it is linear only in the cotangents)", user_frame_info())
    directions = [instantiate(u) for u in cts_out]
    return [None] * n_primal + _loop_tangent(list(args[:n_primal]), directions, params)


def _while_grad_batch(size, args, dims, *, cond_graph, body_graph, n_carry, n_cond_consts):
    """One while_loop_grad of the masked loop (_masked_loop). Every carry and body const is
    batched, so that the cotangents of each lane stay apart."""
    params = dict(cond_graph=cond_graph, body_graph=body_graph, n_carry=n_carry,
                  n_cond_consts=n_cond_consts)
    carry, cond_consts, body_consts, cts = _grad_split(args, **_dims(params))
    _, cond_dims, _, cts_dims = _grad_split(dims, **_dims(params))
    n_primal = len(body_graph.inputs) + n_cond_consts
    carry = [move_to_front(x, d, size) for x, d in zip(carry, dims[:n_carry])]
    body_consts = [move_to_front(x, d, size)
                   for x, d in zip(body_consts, dims[n_carry + n_cond_consts:n_primal])]
    cts = [move_to_front(x, d, size) for x, d in zip(cts, cts_dims)]
    _, shared = _carries_batched(cond_graph, body_graph, n_carry, dims[:n_carry], cond_dims,
                                 dims[n_carry + n_cond_consts:n_primal], size)
    new_cond, new_body = _masked_loop(cond_graph, body_graph, n_carry, n_cond_consts,
                                      [aval(x) for x in carry], cond_dims,
                                      [0] * len(body_consts), size, shared)
    outs = while_grad_p.bind(*carry, *cond_consts, *cond_consts, *body_consts, *cts,
                             cond_graph=new_cond, body_graph=new_body, n_carry=n_carry,
                             n_cond_consts=n_cond_consts)
    # Drop the cotangents of the condition consts' copies among the new body's consts.
    n_diff_carry = sum(is_differentiable(v.aval) for v in body_graph.inputs[:n_carry])
    n_cond_copies = sum(is_differentiable(aval(x)) for x in cond_consts)
    grads = list(outs[:n_diff_carry]) + list(outs[n_diff_carry + n_cond_copies:])
    return grads, [0] * len(grads)


register(while_grad_p, impl=_while_grad_impl, abstract_eval=_while_grad_abstract_eval,
         jvp=_while_grad_jvp, vjp=_while_grad_vjp, transpose=_while_grad_transpose,
         batch=_while_grad_batch, symbolic_zeros=True,
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

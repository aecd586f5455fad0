"""scan: a primitive looping a closed body graph over the leading axis of its inputs, carrying
state and stacking outputs; its vjp is two scans (forward keeping residuals, then reverse)."""
from __future__ import annotations

import numpy as np

from xform.errors import ShapeError, TypeCheckError
from xform.ir.ad import NOT_MAPPED, Zero, aval, instantiate, move_to_front
from xform.ir.avals import ShapedArray, is_differentiable, tangent_aval
from xform.ir.builder import stage_function
from xform.ir.core import Primitive, rewire
from xform.ir.execute import runtime
from xform.ir.interpret import eval_graph
from xform.ir.registry import register
from xform.rules.subgraphs import (describe_types, out_avals, same_types, stage_flat,
                                   transpose_from_vjp)
from xform.source_info import user_frame_info
from xform.transforms.derived import batch_of, jvp_of, vjp_parts_of
from xform.tree import tree_flatten, tree_unflatten


scan_p = Primitive("scan", multiple_results=True)


def _scan_split(args, n_carry, n_xs):
    return list(args[:n_carry]), list(args[n_carry:n_carry + n_xs]), list(args[n_carry + n_xs:])


def _scan_impl(*args, body, n_carry, n_xs, length, reverse):
    carry, xs, consts = _scan_split(args, n_carry, n_xs)
    body_fn = runtime().compiled(body)
    ys = []
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = body_fn(*carry, *[x[i] for x in xs], *consts)
        carry = outs[:n_carry]
        ys.append(outs[n_carry:])
    if reverse:
        ys.reverse()
    y_avals = out_avals(body)[n_carry:]
    stacked = [np.stack([np.asarray(y[k]) for y in ys]) if ys else
               np.zeros((0,) + a.shape, a.dtype) for k, a in enumerate(y_avals)]
    return list(carry) + stacked


def _scan_abstract_eval(*avals, body, n_carry, n_xs, length, reverse):
    outs = out_avals(body)
    return [v.aval for v in body.inputs[:n_carry]] + [
        ShapedArray((length,) + a.shape, a.dtype) for a in outs[n_carry:]]


def _scan_jvp(primals, tangents, *, body, n_carry, n_xs, length, reverse):
    carry, xs, consts = _scan_split(primals, n_carry, n_xs)
    t_carry, t_xs, t_consts = _scan_split(tangents, n_carry, n_xs)
    carry_nz = [is_differentiable(aval(x)) for x in carry]
    xs_nz = [type(t) is not Zero for t in t_xs]
    consts_nz = [type(t) is not Zero for t in t_consts]
    jvp_body = jvp_of(body, carry_nz + xs_nz + consts_nz)
    ins = list(jvp_body.inputs)
    n_primal = len(body.inputs)
    p_carry, p_xs, p_consts = _scan_split(ins[:n_primal], n_carry, n_xs)
    tangent_ins = ins[n_primal:]
    n_tc, n_tx = sum(carry_nz), sum(xs_nz)
    tc, tx, tk = (tangent_ins[:n_tc], tangent_ins[n_tc:n_tc + n_tx],
                  tangent_ins[n_tc + n_tx:])
    n_out = len(body.outputs)
    n_y = n_out - n_carry
    y_diff = [is_differentiable(a) for a in out_avals(body)[n_carry:]]
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
    outs_avals = _scan_abstract_eval(body=body, n_carry=n_carry, n_xs=n_xs, length=length,
                                     reverse=reverse)
    tangents_out = [next(t_carry_out) if nz else Zero(tangent_aval(a))
                    for nz, a in zip(carry_nz, outs_avals[:n_carry])]
    tangents_out += [next(t_ys) if d else Zero(tangent_aval(a))
                     for d, a in zip(y_diff, outs_avals[n_carry:])]
    return list(carry_out) + list(ys), tangents_out


def _scan_vjp(primals, outs, cts, *, body, n_carry, n_xs, length, reverse):
    """Forward scan over the body's forward part, stacking residuals per iteration; then a
    reverse scan over its backward part. Both are scans, so this differentiates again."""
    carry, xs, consts = _scan_split(primals, n_carry, n_xs)
    forward, backward = vjp_parts_of(body)
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
    out_diff = [is_differentiable(a) for a in out_avals(body)]
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
    bwd_graph = stage_flat(backward_step, carry_avals + slice_avals + fixed_avals)
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
    batched = batch_of(body, [0] * n_carry + x_dims + list(consts_dims), size)
    outs = scan_p.bind(*carry, *xs, *consts, body=batched, n_carry=n_carry, n_xs=n_xs,
                       length=length, reverse=reverse)
    ys = [np.moveaxis(y, 1, 0) for y in outs[n_carry:]]
    return list(outs[:n_carry]) + ys, [0] * len(outs)


register(scan_p, impl=_scan_impl, abstract_eval=_scan_abstract_eval, jvp=_scan_jvp,
         vjp=_scan_vjp, transpose=transpose_from_vjp(_scan_vjp, _scan_abstract_eval),
         batch=_scan_batch, symbolic_zeros=True, construct="xform.scan (or xform.fori_loop)")


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
    if new_carry_tree != carry_tree or not same_types(
            out_avals(graph)[:len(carry_leaves)], carry_avals):
        raise ShapeError(f"scan's f changes the carry from {describe_types(carry_avals)} to "
                         f"{describe_types(out_avals(graph)[:len(carry_leaves)])}",
                         user_frame_info(), "the carry must keep its structure, shapes "
                         "and dtypes")
    outs = scan_p.bind(*carry_leaves, *x_leaves, *captured, body=graph,
                       n_carry=len(carry_leaves), n_xs=len(x_leaves), length=length,
                       reverse=bool(reverse))
    return (tree_unflatten(carry_tree, outs[:len(carry_leaves)]),
            tree_unflatten(y_tree, outs[len(carry_leaves):]))


__all__ = ["scan", "scan_p"]

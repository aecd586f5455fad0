"""Checkpointing (rematerialisation): the `checkpoint` primitive runs a closed graph whose
reverse mode recomputes the graph's intermediates in the backward pass instead of storing
them, keeping only what its policy saves; `checkpoint_name` marks values a policy can name.

Notes: the backward pass is one more `checkpoint` equation, over the graph that recomputes
and differentiates; being one opaque equation with its own graph, no pass (CSE, fusion)
can merge the recomputation with the forward pass and so undo it. A policy is decided when
the function is staged: the equation's graph then also outputs the saved residuals (the
forward part of the vjp, `vjp_parts_of`), which DCE drops when nothing differentiates it.
"""
from __future__ import annotations

import attrs

from xform.errors import XformError
from xform.ir.ad import Zero, aval, instantiate
from xform.ir.avals import is_differentiable
from xform.ir.builder import (GraphBuilder, current_builder, known_values, stage_function,
                               using_builder)
from xform.ir.core import Graph, Params, Primitive, Var
from xform.ir.execute import runtime
from xform.ir.interpret import eval_graph
from xform.ir.registry import Hooks, effectful_primitives, graph_has_effects, register
from xform.ir.tracer import Tracer
from xform.passes import eliminate_dead_code
from xform.rules.contract import dot_p, einsum_p, matmul_p
from xform.rules.subgraphs import out_avals, transpose_from_vjp
from xform.transforms.derived import batch_of, jvp_of, memo, vjp_of, vjp_parts_of
from xform.tree import tree_flatten, tree_map, tree_unflatten


# == names and policies ==========================================================================

name_p = Primitive("checkpoint_name")


def _name_jvp(primals, tangents, *, name):
    return name_p.bind(primals[0], name=name), tangents[0]


register(name_p, impl=lambda x, *, name: x, abstract_eval=lambda a, *, name: a,
         jvp=_name_jvp, transpose=lambda ct, x, *, name: [ct],
         batch=lambda size, args, dims, *, name: (name_p.bind(args[0], name=name), dims[0]),
         linear_in=(0,), construct="xform.checkpoint_name")


def checkpoint_name(x, name: str):
    """`x` (a pytree), marked with `name` for the policy `save_only_these_names`.

    >>> xform.checkpoint_name(np.ones(2), "h")
    array([1., 1.])
    """
    return tree_map(lambda leaf: name_p.bind(leaf, name=name)
                    if type(leaf) is Tracer else leaf, x)


def everything_saveable(prim, *avals, **params) -> bool:
    """Save every residual (no recomputation: as without checkpoint)."""
    return True


def nothing_saveable(prim, *avals, **params) -> bool:
    """Save nothing but the inputs: recompute everything (the default, `policy=None`)."""
    return False


def dots_saveable(prim, *avals, **params) -> bool:
    """Save the results of matrix products (matmul, dot, einsum), recompute the rest."""
    return prim in (matmul_p, dot_p, einsum_p)


@attrs.frozen
class save_only_these_names:   # noqa: N801 (JAX's name: a policy made by a call)
    """Save only the values marked by `checkpoint_name` with one of `names`."""

    names: frozenset = attrs.field(converter=frozenset)

    def __init__(self, *names):
        self.__attrs_init__(names)

    def __call__(self, prim, *avals, **params) -> bool:
        return prim is name_p and params["name"] in self.names


class checkpoint_policies:     # noqa: N801 (JAX's namespace)
    """The policies of `xform.checkpoint`, as `jax.checkpoint_policies`. A policy is any
    `policy(primitive, *input_avals, **params) -> bool` saying whether the output of such an
    equation may be saved for the backward pass."""

    everything_saveable = staticmethod(everything_saveable)
    nothing_saveable = staticmethod(nothing_saveable)
    dots_saveable = staticmethod(dots_saveable)
    checkpoint_dots = staticmethod(dots_saveable)
    save_only_these_names = save_only_these_names


# == the primitive ===============================================================================

remat_p = Primitive("checkpoint", multiple_results=True)


def _saved_residuals(forward: Graph, n_out: int, policy) -> tuple:
    """The values of `forward` (the forward part of a vjp: outputs, then residuals) that
    `policy` saves: the saveable residuals, and the saveable values nearest to the others
    that they are recomputed from (recomputation stops there)."""
    def saveable(eqn):
        return len(eqn.outputs) == 1 and bool(
            policy(eqn.primitive, *[a.aval for a in eqn.inputs], **eqn.params))
    made_by = {v: e for e in forward.equations for v in e.outputs}
    saved = []
    pending = [a for a in forward.outputs[n_out:] if type(a) is Var]
    seen = set()
    while pending:
        var = pending.pop()
        if var in seen or var not in made_by:
            continue
        seen.add(var)
        eqn = made_by[var]
        if saveable(eqn):
            saved.append(var)
        else:
            pending.extend(a for a in eqn.inputs if type(a) is Var)
    order = {v: i for i, e in enumerate(forward.equations) for v in e.outputs}
    return tuple(sorted(saved, key=order.__getitem__))


def _forward_saving(parts, n_out: int, saved: tuple) -> Graph:
    """inputs -> (outputs, saved values), from the forward part of the vjp."""
    forward = parts[0]
    return memo(forward, ("checkpoint forward", saved), lambda: eliminate_dead_code(Graph(
        forward.inputs, forward.consts, forward.equations,
        list(forward.outputs[:n_out]) + list(saved))))


def _backward_graph(parts, n_out: int, saved: tuple) -> Graph:
    """(inputs, saved values, cotangents of the differentiable outputs) -> cotangents of the
    differentiable inputs, recomputing the residuals that are not saved."""
    forward, backward = parts

    def make():
        saved_set = set(saved)
        recompute = Graph(list(forward.inputs) + list(saved), forward.consts,
                          [e for e in forward.equations
                           if not any(v in saved_set for v in e.outputs)],
                          forward.outputs[n_out:])
        builder = GraphBuilder()
        with using_builder(builder):
            ins = [builder.new_input(v.aval) for v in recompute.inputs]
            cts = [builder.new_input(v.aval)
                   for v in backward.inputs[len(forward.outputs) - n_out:]]
            residuals = eval_graph(recompute, *ins)
            grads = eval_graph(backward, *residuals, *cts)
        return builder.build(grads)
    return memo(forward, ("checkpoint backward", saved), make)


def _remat_impl(*args, graph, base, parts, saved, policy):
    return runtime().compiled(graph)(*args)


def _remat_abstract_eval(*avals, graph, base, parts, saved, policy):
    return out_avals(graph)


def _remat_jvp(primals, tangents, *, graph, base, parts, saved, policy):
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    jvp = jvp_of(graph, nonzeros)
    outs = remat_p.bind(*primals, *[t for t in tangents if type(t) is not Zero], graph=jvp,
                        base=jvp, parts=None, saved=(),
                        policy=policy)
    n_out = len(graph.outputs)
    return outs[:n_out], outs[n_out:]


def _remat_vjp(primals, outs, cts, *, graph, base, parts, saved, policy):
    n_out = len(base.outputs)
    if saved and all(type(ct) is Zero for ct in cts[n_out:]):
        live = [instantiate(ct) for ct, v in zip(cts[:n_out], base.outputs)
                if is_differentiable(v.aval)]
        bwd = _backward_graph(parts, n_out, saved)
        grads = iter(remat_p.bind(*primals, *outs[n_out:], *live, graph=bwd, base=bwd,
                                  parts=None, saved=(), policy=policy))
    else:
        # Recompute everything: the vjp of the whole graph, run as one opaque equation.
        live = tuple(type(ct) is not Zero and is_differentiable(v.aval)
                     for ct, v in zip(cts, graph.outputs))
        if not any(live):
            return [None] * len(primals)
        bwd = vjp_of(graph, live)
        grads = iter(remat_p.bind(*primals, *[ct for ct, is_live in zip(cts, live) if is_live],
                                  graph=bwd, base=bwd, parts=None, saved=(), policy=policy))
    return [next(grads) if is_differentiable(aval(x)) else None for x in primals]


def _remat_batch(size, args, dims, *, graph, base, parts, saved, policy):
    batched = batch_of(graph, dims, size)
    outs = remat_p.bind(*args, graph=batched, base=batched, parts=None, saved=(),
                        policy=policy)
    return outs, [0] * len(outs)


def _remat_dce(eqn, used):
    """Saved values nothing reads (the function is not differentiated) are not computed."""
    params = eqn.params
    n_out, saved = len(params["base"].outputs), params["saved"]
    kept = tuple(v for v, is_used in zip(saved, used[n_out:]) if is_used)
    if kept == saved:
        return None
    graph = _forward_saving(params["parts"], n_out, kept) if kept else params["base"]
    outputs = list(eqn.outputs[:n_out]) + [o for o, u in zip(eqn.outputs[n_out:], used[n_out:])
                                           if u]
    return attrs.evolve(eqn, outputs=outputs,
                        params=Params({**params, "graph": graph, "saved": kept}))


register(remat_p, impl=_remat_impl, abstract_eval=_remat_abstract_eval, jvp=_remat_jvp,
         vjp=_remat_vjp, transpose=transpose_from_vjp(_remat_vjp, _remat_abstract_eval),
         batch=_remat_batch, symbolic_zeros=True, construct="xform.checkpoint",
         # draws are saved (checkpoint_call)
         hooks=Hooks(dce=_remat_dce, draws_once_in_reverse=True))


def _saving_effects(policy):
    def saveable(prim, *avals, **params):
        return prim in effectful_primitives() or bool(
            policy is not None and policy(prim, *avals, **params))
    return saveable


def checkpoint_call(fun, args, policy=None):
    """`fun(*args)`, staged as one `checkpoint` equation when anything in `args` or what
    `fun` closes over is traced; run as it is otherwise."""
    if current_builder() is None:
        return fun(*args)
    leaves, in_tree = tree_flatten(tuple(args))
    # with this call's values where the enclosing staging has them: Python's `if` on them
    # inside is answered and guarded, as outside the checkpoint
    graph, captured, out_tree = stage_function(fun, in_tree, [aval(x) for x in leaves],
                                               known_values(leaves))
    if not captured and not any(type(x) is Tracer for x in leaves):
        return tree_unflatten(out_tree, runtime().compiled(graph)(*leaves))
    parts, saved, forward = None, (), graph
    if graph_has_effects(graph):
        # A draw is saved, never recomputed: the backward pass must not draw again.
        policy = _saving_effects(policy)
    if policy is not None and policy is not nothing_saveable:
        try:
            parts = vjp_parts_of(graph)
        except XformError:
            # Not differentiable in reverse mode (a primitive without rules): nothing to save;
            # the error comes back if reverse mode is asked for.
            parts = None
        saved = _saved_residuals(parts[0], len(graph.outputs), policy) if parts else ()
        if saved:
            forward = _forward_saving(parts, len(graph.outputs), saved)
        else:
            parts = None
    outs = remat_p.bind(*leaves, *captured, graph=forward, base=graph, parts=parts,
                        saved=saved, policy=policy)
    return tree_unflatten(out_tree, outs[:len(graph.outputs)])


__all__ = ["checkpoint_call", "checkpoint_name", "checkpoint_policies", "dots_saveable",
           "everything_saveable", "name_p", "nothing_saveable", "remat_p",
           "save_only_these_names"]

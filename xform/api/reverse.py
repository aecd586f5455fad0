"""Reverse mode: `grad`, `value_and_grad` and `vjp`, cached per signature; their graphs come
from xform.transforms.derived."""
from __future__ import annotations

import functools
import itertools

import numpy as np

from xform.api.dispatch import (FIRST_RESULT, StaticPositions, Transformed, aval_of_signature,
                                leaf_signature, normalize_argnums, present_argnums, run,
                                static_positions, transformed)
from xform.api.forward import as_dtype
from xform.api.pipeline import as_built, finish_graph, fuse_if_enabled, owned_values
from xform.errors import (MissingRuleError, ShapeError, TreeMismatchError, TypeCheckError,
                          not_callable_error)
from xform.ir.ad import Zero, instantiate
from xform.ir.avals import float0, is_differentiable, shaped_array
from xform.ir.core import Equation, Graph, Params, Var
from xform.ir.registry import primitive_for
from xform.ir.builder import stage_function
from xform.ir.values import staged_values
from xform.source_info import user_frame_info
from xform.tracebacks import api_boundary
from xform.transforms.derived import vjp_split
from xform.transforms.transpose import backward_pass
from xform.transforms.vjp import computable_at_once, gradient_values, vjp_graph
from xform.tree import tree_flatten, tree_leaves, tree_unflatten


def _float0_zeros(aval):
    return np.zeros(aval.shape, float0)


def _check_scalar_output(graph, has_aux, out_tree, fun_name, holomorphic):
    if has_aux:
        if out_tree.kind is not tuple or len(out_tree.children) != 2:
            raise TypeCheckError(f"{fun_name} with has_aux=True needs the function to return "
                                 "a pair (output, aux)", user_frame_info())
        if out_tree.children[0].num_leaves != 1:
            raise TypeCheckError(f"{fun_name}: the output (first of the pair) must be a "
                                 "scalar", user_frame_info())
    elif out_tree.num_leaves != 1:
        raise TypeCheckError(f"{fun_name} needs a function with one scalar output, got a "
                             f"pytree {out_tree}", user_frame_info(), _one_output_hint(out_tree))
    out_aval = graph.outputs[0].aval
    if out_aval.size != 1 or not is_differentiable(out_aval):
        raise TypeCheckError(
            f"{fun_name} needs a scalar float output, got {out_aval.str_short()}",
            user_frame_info(), "use xform.vjp or xform.jacrev for non-scalar outputs, or "
            "reduce the output (e.g. np.sum)")
    check_output_dtype(fun_name, out_aval, holomorphic)


def _one_output_hint(out_tree) -> str:
    if out_tree.kind is type(None):
        return "the function returned None: return the loss"
    if out_tree.kind is tuple and out_tree.children and out_tree.children[0].num_leaves == 1:
        return "a function returning (loss, aux) needs has_aux=True"
    return "return one scalar; xform.jacrev or xform.vjp differentiate several outputs"


def check_output_dtype(fun_name, aval, holomorphic):
    """As JAX: a complex output needs holomorphic=True, which needs a complex output."""
    if holomorphic and aval.dtype.kind != "c":
        raise TypeCheckError(f"{fun_name} with holomorphic=True needs complex outputs, got "
                             f"{aval.str_short()}", user_frame_info())
    if not holomorphic and aval.dtype.kind == "c":
        raise TypeCheckError(
            f"{fun_name} needs real outputs, got {aval.str_short()}", user_frame_info(),
            "pass holomorphic=True to differentiate a holomorphic function; for other "
            "functions with complex outputs use xform.vjp directly")


def check_input_dtypes(fun_name, avals, holomorphic, allow_int):
    """As JAX: differentiated inputs are inexact (integers with allow_int, getting float0
    gradients); complex with holomorphic=True."""
    for aval in avals:
        if holomorphic and aval.dtype.kind != "c":
            raise TypeCheckError(f"{fun_name} with holomorphic=True needs complex inputs, "
                                 f"got {aval.str_short()}", user_frame_info())
        if not is_differentiable(aval) and not allow_int:
            setting = ("a Python int among the values differentiated is most often a setting "
                       "(a layer count in a dict of parameters): pass it as its own argument, "
                       "or keep settings in an object of your class, whose ints are static; "
                       if aval.weak_type else "")
            raise TypeCheckError(
                f"{fun_name} needs float or complex inputs to differentiate, got "
                f"{aval.str_short()}", user_frame_info(),
                setting + "to differentiate, pass floats (x.astype(float), np.arange(3.0) "
                "for np.arange(3)); allow_int=True gives float0 (empty) gradients of integer "
                "inputs, or leave the argument out of argnums (it is then a static value)")


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, *,
                   static_argnums=(), static_argnames=(), backend=None):
    """`(fun(*args), gradient of fun w.r.t. args[argnums])`; with has_aux, `fun` returns
    `(out, aux)` and the result is `((out, aux), grads)`. Arguments are as in `grad`.

    >>> xform.value_and_grad(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
    (np.float64(5.0), array([2., 4.]))
    """
    return _gradient_transform(fun, argnums, has_aux, holomorphic, allow_int, static_argnums,
                               static_argnames, with_value=True, backend=backend)


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, *,
         static_argnums=(), static_argnames=(), backend=None):
    """The gradient of scalar-output `fun` w.r.t. `args[argnums]` (a pytree like them); with
    has_aux, `fun` returns `(out, aux)` and the result is `(grads, aux)`.

    As in JAX: `holomorphic=True` differentiates a complex function of complex inputs
    (giving f'(z)); integer inputs in argnums need `allow_int=True` (float0 gradients). The
    other arguments reach `fun` as they are passed when they are Python ints or bools, or not
    arrays (functions, strings): such values are static, and a new value stages `fun` again
    (a RestagingWarning past xform.api.dispatch.STATIC_RESTAGING_LIMIT); arrays and floats
    are traced. `static_argnums`/`static_argnames` make any argument static. `backend`
    chooses what runs the gradient's graph, as in `jit`.

    >>> xform.grad(lambda x: x ** 3 + np.sin(x))(0.0)    # 3 x**2 + cos(x)
    np.float64(1.0)
    >>> xform.grad(lambda w, i: np.sum(w[i:i + 2]))(np.ones(4), 1)    # i is a Python int
    array([0., 1., 1., 0.])
    """
    return _gradient_transform(fun, argnums, has_aux, holomorphic, allow_int, static_argnums,
                               static_argnames, with_value=False, backend=backend)


def differentiated_static(fun, argnums, static_argnums, static_argnames, name):
    """`(static, static_keywords)` for a transform differentiating `argnums`: the positions
    it does not differentiate are automatic, static_argnums/static_argnames explicit."""
    explicit_spec, static_keywords = static_positions(fun, static_argnums, static_argnames)
    # Shared by the transforms of these positions: grad(f) is often made anew for each call.
    memo_key = static = None
    if type(argnums) in (int, tuple):
        memo_key = (name, argnums, explicit_spec)
        try:
            static = _STATIC_POSITIONS.get(memo_key)
        except TypeError:   # something unhashable among the positions: its call says what
            memo_key = None
    if static is not None:
        return static, static_keywords

    def of(n_args):
        nums = normalize_argnums(argnums, n_args)
        explicit = present_argnums(explicit_spec, n_args)
        if set(nums) & set(explicit):
            raise TypeCheckError(f"{name}: argnums {argnums} and the static arguments "
                                 f"{explicit} overlap", user_frame_info())
        return explicit, tuple(i for i in range(n_args) if i not in nums)
    static = StaticPositions(of)
    if memo_key is not None:
        if len(_STATIC_POSITIONS) >= 1024:
            _STATIC_POSITIONS.clear()
        _STATIC_POSITIONS[memo_key] = static
    return static, static_keywords


_STATIC_POSITIONS: dict = {}   # (transform, argnums, explicit static positions) -> static


def _gradient_transform(fun, argnums, has_aux, holomorphic, allow_int, static_argnums,
                        static_argnames, with_value, backend=None):
    name = "value_and_grad" if with_value else "grad"
    if not callable(fun):
        raise not_callable_error(fun, name)

    def forward(fun, in_tree, avals, known):
        """The function's graph, ready for reverse mode, with vjp_graph's options and the
        unflatten of the results: what both tiers of a gradient start from."""
        nums, wanted = _differentiated_leaves(argnums, in_tree)
        check_input_dtypes(name, [avals[i] for i in wanted], holomorphic, allow_int)
        if known is not None:
            known = known.perturbing(wanted)
        graph, captured, out_tree = stage_function(fun, in_tree, avals, known)
        _check_scalar_output(graph, has_aux, out_tree, name, holomorphic)
        out_shape = graph.outputs[0].aval.shape
        if out_shape:   # a size-1 array output (as autograd): differentiate it as a scalar
            graph = _first_output_as_scalar(graph)
        # Fused here, for both tiers: the first call must compute what later calls compute,
        # bit for bit, and a fused region's vjp (NDual) rounds differently from its
        # equations' rules.
        graph = fuse_if_enabled(graph, values_returned=with_value or has_aux)
        n_outs = len(graph.outputs)
        kept = range(n_outs) if with_value else range(1, n_outs) if has_aux else ()
        # The output's cotangent is 1.
        options = dict(live=(True,) + (False,) * (n_outs - 1), wanted=wanted, kept=kept)
        n_kept = len(kept)
        grads_of = _grads_unflattener(in_tree, nums, argnums, wanted, avals)
        if with_value:
            def unflatten(results):
                values = list(results[:n_kept])
                if out_shape:
                    values[0] = np.reshape(values[0], out_shape)
                return tree_unflatten(out_tree, values), grads_of(results[n_kept:])
        elif has_aux:
            aux_tree = out_tree.children[1]

            def unflatten(results):
                return grads_of(results[n_kept:]), tree_unflatten(aux_tree, results[:n_kept])
        else:
            unflatten = grads_of
        return graph, options, captured, unflatten

    def reverse_graph(graph, options):
        # The forward pass is `graph` itself (adopted).
        return vjp_graph(graph, seed_ones=True, adopt=True, **options)

    def build(fun, in_tree, avals, known=None):
        graph, options, captured, unflatten = forward(fun, in_tree, avals, known)
        return reverse_graph(graph, options), captured, unflatten

    def first_call(fun, in_tree, avals, known=None):
        """The interpreted tier's first call: the gradient computed at once, by the rules on
        concrete values, and no reverse-mode graph built until the next call compiles."""
        graph, options, captured, unflatten = forward(fun, in_tree, avals, known)
        run = first = None
        if computable_at_once(graph, options["wanted"]):
            run = functools.partial(gradient_values_owned, graph, options)
            values = staged_values(graph)
            if values is not None:      # the forward pass, computed while staging
                first = functools.partial(gradient_values_owned, graph,
                                          {**options, "known": values})
        return run, lambda: reverse_graph(graph, options), captured, unflatten, first

    static, static_keywords = differentiated_static(fun, argnums, static_argnums,
                                                    static_argnames, name)
    return transformed(fun, name, build, (argnums, has_aux, holomorphic, allow_int),
                       finish=_finish_fused, static=static, static_keywords=static_keywords,
                       keywords=bool(static_argnames), first_call=first_call, backend=backend)


def _differentiated_leaves(argnums, in_tree):
    """`(positions, leaves)`: the normalized `argnums` of a call whose arguments are laid out
    as `in_tree`, and the indices of their leaves among the call's."""
    # Remembered across transforms: grad(f) is often made anew for each call.
    key = (argnums, in_tree)
    try:
        found = _DIFFERENTIATED.get(key)
    except TypeError:   # a list, or something unhashable among the positions
        found = key = None
    if found is None:
        nums = normalize_argnums(argnums, len(in_tree.children))
        offsets = list(itertools.accumulate((c.num_leaves for c in in_tree.children),
                                            initial=0))
        found = nums, tuple(i for n in nums for i in range(offsets[n], offsets[n + 1]))
        if key is not None:
            if len(_DIFFERENTIATED) >= 1024:
                _DIFFERENTIATED.clear()
            _DIFFERENTIATED[key] = found
    return found


_DIFFERENTIATED: dict = {}   # (argnums, argument tree) -> _differentiated_leaves's answer


def gradient_values_owned(graph, options, args):
    """gradient_values's results, each an array the caller owns (as finish_graph's are)."""
    return owned_values(gradient_values(graph, args, **options), graph)


def _first_output_as_scalar(graph):
    """`graph` with its first output, of size 1, reshaped to a 0-d value."""
    out = graph.outputs[0]
    scalar = Var(shaped_array((), out.aval.dtype))
    reshape = Equation(primitive_for("reshape"), (out,), (scalar,), Params({"shape": ()}))
    return Graph(graph.inputs, graph.consts, (*graph.equations, reshape),
                 (scalar, *graph.outputs[1:]))


def _finish_fused(graph):
    """A gradient's finish: fused after reverse mode too (xform.api.pipeline.fuse_if_enabled)."""
    return finish_graph(graph, fuse=True)


def _grads_unflattener(in_tree, nums, argnums, wanted, avals):
    """gradient outputs -> the pytree of gradients (float0 zeros for integer leaves)."""
    # Gradients of arrays and scalars (no containers, nothing integer) are the outputs as
    # they are: built in C, not by the pytree walk below (about 5 us for four arguments).
    if _plain_gradients(in_tree, nums, wanted, avals):
        return FIRST_RESULT if isinstance(argnums, int) else tuple

    def unflatten(grad_results):
        grad_iter = iter(grad_results)
        leaves = iter([next(grad_iter) if is_differentiable(avals[i])
                       else _float0_zeros(avals[i]) for i in wanted])
        trees = [tree_unflatten(in_tree.children[n],
                                [next(leaves) for _ in range(in_tree.children[n].num_leaves)])
                 for n in nums]
        return trees[0] if isinstance(argnums, int) else tuple(trees)
    return unflatten


def _plain_gradients(in_tree, nums, wanted, avals) -> bool:
    """Whether the arguments at `nums` are leaves, and their leaves `wanted` differentiable.
    (Loops, not generators: every first call asks.)"""
    children = in_tree.children
    for n in nums:
        if children[n].kind is not None:
            return False
    for i in wanted:
        if not is_differentiable(avals[i]):
            return False
    return True


@api_boundary
def vjp(fun, *primals, has_aux=False, backend=None):
    """`(fun(*primals), vjp_fn)`; `vjp_fn(cotangent)` returns a tuple of cotangents, one per
    primal. With has_aux: `(out, vjp_fn, aux)`.

    >>> out, f_vjp = xform.vjp(lambda x: x ** 2, 3.0)
    >>> out, f_vjp(1.0)
    (np.float64(9.0), (np.float64(6.0),))
    """
    if not callable(fun):
        raise not_callable_error(fun, "vjp")
    return Transformed(fun, "vjp", functools.partial(_build_vjp, has_aux), (has_aux,),
                       finish=as_built, backend=backend)(*primals)


def _build_vjp(has_aux, fun, in_tree, avals, known=None):
    """The forward graph (leaves -> outputs, residuals) and an unflatten giving `vjp`'s result,
    whose vjp_fn runs the backward graph on the call's residuals."""
    if known is not None:
        known = known.perturbing(range(len(avals)))
    graph, captured, out_tree = stage_function(fun, in_tree, avals, known)
    if has_aux:
        if out_tree.kind is not tuple or len(out_tree.children) != 2:
            raise TypeCheckError("vjp with has_aux=True needs fun to return (output, aux)",
                                 user_frame_info())
        n_main = out_tree.children[0].num_leaves
        main_tree = out_tree.children[0]
    else:
        n_main, main_tree = out_tree.num_leaves, out_tree
    graph = fuse_if_enabled(graph)
    live = [i < n_main and is_differentiable(a.aval) for i, a in enumerate(graph.outputs)]
    forward, backward = vjp_split(graph, live, range(len(avals)))
    # Residuals are read only by the backward part: no copies of them.
    forward = finish_graph(forward, fuse=True, own_outputs=False)
    backward = _finish_fused(backward)
    n_out = len(graph.outputs)
    main_avals = [a.aval for a in graph.outputs[:n_main]]

    def vjp_fn_of(residuals):
        @api_boundary
        def vjp_fn(cotangent):
            ct_leaves, ct_tree = tree_flatten(cotangent)
            if ct_tree != main_tree:
                raise TreeMismatchError(f"vjp_fn got a cotangent of structure {ct_tree}, "
                                        f"expected the output's structure {main_tree}",
                                        user_frame_info(), "pass one cotangent per output, in "
                                        "the output's pytree structure (e.g. a pair for a "
                                        "function returning a pair)")
            diff_cts = []
            for ct, aval in zip(ct_leaves, main_avals):
                shape = leaf_signature(ct)[0]
                if shape != aval.shape:
                    raise ShapeError(f"vjp_fn got a cotangent of shape {shape} for an output "
                                     f"of shape {aval.shape}", user_frame_info(),
                                     "each cotangent has its output's shape "
                                     "(e.g. np.ones_like(out))")
                if is_differentiable(aval):
                    diff_cts.append(as_dtype(ct, aval.dtype, "cotangent"))
            grads = iter(run(backward, [*residuals, *diff_cts]))
            grad_leaves = [next(grads) if is_differentiable(a) else _float0_zeros(a)
                           for a in avals]
            return tree_unflatten(in_tree, grad_leaves)
        return vjp_fn

    def unflatten(results):
        out_value = tree_unflatten(out_tree, results[:n_out])
        vjp_fn = vjp_fn_of(results[n_out:])
        if has_aux:
            return out_value[0], vjp_fn, out_value[1]
        return out_value, vjp_fn
    return forward, captured, unflatten


def linear_transpose(fun, *primals):
    """The transpose of linear `fun`, as JAX's: `transpose_fn(cotangent)` returns a tuple of
    cotangents, one per primal; `primals` give only shapes and dtypes. A `fun` that is not
    linear in its inputs raises a TypeCheckError naming the non-linear operation's line.

    >>> t = xform.linear_transpose(lambda x: 2.0 * x[:2], np.ones(3))
    >>> t(np.array([1.0, 1.0]))
    (array([2., 2., 0.]),)
    """
    p_leaves, p_tree = tree_flatten(primals)
    avals = [aval_of_signature(leaf_signature(x)) for x in p_leaves]

    def build(fun, ct_tree, ct_avals, known=None):
        # (the primals give shapes only: the function is staged on abstract values)
        graph, captured, out_tree = stage_function(fun, p_tree, avals)
        if ct_tree.children[0] != out_tree:
            raise TreeMismatchError(f"linear_transpose: a cotangent of structure "
                                    f"{ct_tree.children[0]} for outputs of structure {out_tree}",
                                    user_frame_info())
        out_avals = [atom.aval for atom in graph.outputs]
        for ct_aval, aval in zip(ct_avals, out_avals):
            if ct_aval.shape != aval.shape:
                raise ShapeError(f"linear_transpose: a cotangent of shape {ct_aval.shape} for "
                                 f"an output of shape {aval.shape}", user_frame_info())
        linear = [is_differentiable(a) for a in avals]

        def transpose(cotangent):
            cts = [as_dtype(ct, aval.dtype) if is_differentiable(aval) else Zero(aval)
                   for ct, aval in zip(tree_leaves(cotangent), out_avals)]
            known = [None] * len(avals) + list(captured)
            try:
                results = iter(backward_pass(graph, known, linear + [False] * len(captured),
                                             cts))
            except MissingRuleError as err:
                raise TypeCheckError(f"linear_transpose: the function is not linear in its "
                                     f"inputs ('{err.primitive}' of an input)",
                                     err.source) from None
            except TypeCheckError as err:   # a product of two inputs reaches a transpose
                raise TypeCheckError("linear_transpose: the function is not linear in its "
                                     "inputs", err.source) from None
            return tree_unflatten(p_tree, [instantiate(next(results)) if is_lin
                                           else _float0_zeros(a)
                                           for a, is_lin in zip(avals, linear)])
        graph_t, captured_t, t_tree = stage_function(transpose, ct_tree, ct_avals)
        return graph_t, captured_t, lambda outs: tree_unflatten(t_tree, outs)

    transposed = Transformed(fun, "linear_transpose", build, (p_tree, tuple(avals)))
    return functools.wraps(fun)(lambda cotangent: transposed(cotangent))

"""The public transforms: flatten arguments, stage, transform the graph, run or re-emit it.

Every entry point follows one path: a signature key from the flattened arguments; on a miss,
stage the function to a graph, transform it, optimize and compile it; then run the compiled
code, or, when called while another function is being staged, re-emit the transformed graph
into that staging (which is how transforms nest).
"""
from __future__ import annotations

import functools
import operator

import numpy as np

from xform.runtime.cache import CACHE
from xform.runtime.config import config
from xform.errors import ShapeError, TreeMismatchError, TypeCheckError
from xform.ir.avals import ShapedArray, float0, is_differentiable, tangent_aval
from xform.ir.builder import (GraphBuilder, _current_builder, current_builder, stage_function,
                               using_builder)
from xform.ir.interpret import eval_graph
from xform.source_info import user_frame_info
from xform.ir.tracer import Tracer
from xform.ir.core import Equation, Graph, Var
from xform.passes import optimize
from xform.passes.fuse import fuse_elementwise
from xform.rules.shape import broadcast_to_p, copy_p
from xform.ir.ad import NOT_MAPPED, instantiate, move_to_front, zero_tangent
from xform.transforms import batch_eval, jvp_eval, split_graph, vjp_eval
from xform.tree import broadcast_prefix, tree_flatten, tree_map, tree_unflatten



_SCALAR_SIGNATURES = {
    float: ((), np.dtype(np.float64), True), int: ((), np.dtype(np.int64), True),
    bool: ((), np.dtype(bool), False), complex: ((), np.dtype(np.complex128), True),
    **{t: ((), np.dtype(t), False) for t in (np.float64, np.float32, np.int64, np.int32,
                                            np.bool_, np.complex128)}}


# The cached call path runs on every call, so it binds what it needs once: the current
# builder's getter without the current_builder() call around it, numpy's array type. Its
# functions take the first argument as a parameter of its own, so that the common call, on one
# argument, packs no tuple; _NO_ARGUMENT is that parameter's value in a call without arguments.
_builder_now = _current_builder.get
_ndarray = np.ndarray
_NO_ARGUMENT = object()


def _arg_key(arg):
    """The cached call path's key of one flat argument, or None when it is not flat: the
    type of a scalar (which fixes its signature), (shape, dtype) of an array."""
    kind = type(arg)
    if kind is _ndarray:
        return (arg.shape, arg.dtype)
    return kind if kind in _SCALAR_SIGNATURES else None


def _flat_signature(args):
    """The cached call path's key of several flat arguments (arrays and scalars only), or
    None: their `_arg_key`s, computed in one pass."""
    signature = []
    for arg in args:
        kind = type(arg)
        if kind is _ndarray:
            signature.append((arg.shape, arg.dtype))
        elif kind in _SCALAR_SIGNATURES:
            signature.append(kind)
        else:
            return None
    return tuple(signature)


def _unflattener(out_tree):
    """outputs -> result pytree; a single output is returned as it is, with no pytree work."""
    if out_tree.kind is None:
        return operator.itemgetter(0)
    return functools.partial(tree_unflatten, out_tree)


def _leaf_signature(leaf):
    """A cheap hashable stand-in for a leaf's aval (the cached call path uses it)."""
    kind = type(leaf)
    if kind is np.ndarray:
        return (leaf.shape, leaf.dtype, False)
    signature = _SCALAR_SIGNATURES.get(kind)
    if signature is not None:
        return signature
    if kind is Tracer:
        aval = leaf.aval
        return (aval.shape, aval.dtype, aval.weak_type)
    if isinstance(leaf, np.generic) and leaf.dtype.kind in "biufc":
        return ((), leaf.dtype, False)
    if isinstance(leaf, np.ndarray):
        return (leaf.shape, leaf.dtype, False)
    raise TypeCheckError(f"argument of type {type(leaf).__name__} is not an array or scalar; "
                         "xform transforms take arrays, numbers and pytrees of them",
                         user_frame_info())


def _aval_of_signature(signature) -> ShapedArray:
    shape, dtype, weak = signature
    return ShapedArray(shape, dtype, weak)


_stage = stage_function


def _run(graph, args):
    """Run `graph`: re-emit it into the enclosing staging, or call its compiled code."""
    if current_builder() is not None:
        return eval_graph(graph, *args)
    return CACHE.compiled(graph)(*args)


def _fuse(graph):
    """Element-wise regions as `elementwise` equations (xform.config.fusion): before reverse
    mode so that their vjp keeps only partial derivatives, after it to merge each region
    with its NDual form (bench/NDUAL.md)."""
    return fuse_elementwise(graph) if config.fusion else graph


def _finish(graph, fuse=False):
    """The graph that gets compiled: the default passes applied, then results that would be
    a constant or a read-only broadcast view copied, so callers get their own writable
    arrays as numpy would give them (e.g. the gradient of np.sum)."""
    graph = optimize(graph, checks=config.checks)
    if fuse:
        graph = _fuse(graph)
    const_vars = {var for var, _ in graph.consts}
    broadcasts = {eqn.outputs[0] for eqn in graph.equations if eqn.primitive is broadcast_to_p}
    shared = [a for a in graph.outputs
              if type(a) is Var and a.aval.shape and (a in const_vars or a in broadcasts)]
    if not shared:
        return graph
    copies = {a: Var(a.aval) for a in shared}
    equations = list(graph.equations) + [Equation(copy_p, [a], [copies[a]]) for a in copies]
    return Graph(graph.inputs, graph.consts, equations, [copies.get(a, a) for a in graph.outputs])


class _CachedCall:
    """The cached call path shared by `jit` and the transforms: flat arguments find their
    entry with no pytree work, one lookup and one check (False once the entry has left the
    cache); anything else goes to `_build_and_call(args)`, which files what it builds with
    `_remember`. One argument, the common case, is keyed without building a tuple; the key
    of an argument that is not flat is never filed, so it misses.
    """

    def __init__(self):
        self._one_arg_entries = {}  # an argument's `_arg_key` -> entry
        self._flat_entries = {}     # several arguments' `_flat_signature` -> entry

    def __call__(self, first=_NO_ARGUMENT, /, *rest):
        if rest or first is _NO_ARGUMENT:
            return self._call_several(() if first is _NO_ARGUMENT else (first, *rest))
        kind = type(first)
        entry = self._one_arg_entries.get((first.shape, first.dtype) if kind is _ndarray
                                          else kind)
        if entry is not None and entry.valid() and _builder_now() is None:
            entry.hits += 1
            fn, finish = entry.value
            return finish(fn(first))
        return self._build_and_call((first,))

    def _call_several(self, args):
        entry = self._flat_entries.get(_flat_signature(args))
        if entry is not None and entry.valid() and _builder_now() is None:
            entry.hits += 1
            fn, finish = entry.value
            return finish(fn(*args))
        return self._build_and_call(args)

    def _build_and_call(self, args):
        raise NotImplementedError

    def _remember(self, args, entry) -> None:
        """File `entry` for the cached path when `args` are flat."""
        if len(args) == 1:
            key = _arg_key(args[0])
            if key is not None:
                self._one_arg_entries[key] = entry
        else:
            signature = _flat_signature(args)
            if signature is not None:
                self._flat_entries[signature] = entry


class _Transformed(_CachedCall):
    """A transformed function with a per-signature cache of (graph, unflatten).

    `build(in_tree, avals) -> (graph, captured, unflatten)`; the graph's inputs are the
    argument leaves followed by `captured`.
    """

    def __init__(self, fun, kind, build, params=(), fuse=False):
        super().__init__()
        self.fun = fun
        self.kind = kind
        self.build = build
        self.params = params
        self.fuse = fuse
        functools.update_wrapper(self, fun, updated=())

    def _build_and_call(self, args):
        leaves, in_tree = tree_flatten(args)
        signature = tuple(map(_leaf_signature, leaves))
        if current_builder() is not None:
            graph, captured, unflatten = self.build(in_tree,
                                                    [_aval_of_signature(s) for s in signature])
            return unflatten(eval_graph(graph, *leaves, *captured))

        def make():
            graph, captured, unflatten = self.build(in_tree,
                                                    [_aval_of_signature(s) for s in signature])
            assert not captured, "nothing can be captured outside any staging"
            return CACHE.compiled(_finish(graph, self.fuse)).fn, unflatten
        entry = CACHE.build(self.fun, (self.kind, self.params, in_tree, signature), make)
        self._remember(args, entry)
        fn, unflatten = entry.value
        return unflatten(fn(*leaves))


# -- make_graph and jit ----------------------------------------------------------------------

def _split_static(args, static_argnums):
    static = tuple((i, args[i]) for i in static_argnums)
    dynamic = tuple(a for i, a in enumerate(args) if i not in static_argnums)
    return dynamic, static


def _with_static(fun, static, n_args):
    if not static:
        return fun

    def call(*dynamic):
        dynamic = iter(dynamic)
        fixed = dict(static)
        return fun(*[fixed[i] if i in fixed else next(dynamic) for i in range(n_args)])
    return call


def _normalize_argnums(argnums, n_args):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    result = []
    for i in nums:
        if not -n_args <= i < n_args:
            raise TypeCheckError(f"argnums {argnums} out of range for {n_args} arguments",
                                 user_frame_info())
        result.append(i % n_args)
    return tuple(result)


def make_graph(fun, static_argnums=()):
    """Stage `fun` and return its graph, as staged (no passes run).

    >>> print(xform.make_graph(lambda x: np.sin(x) * 2.0)(np.ones(3)))
    { lambda a:f64[3] . let
        b:f64[3] = sin a
        c:f64[3] = multiply b 2.0
      in (c) }
    """
    static_nums_spec = ((static_argnums,) if isinstance(static_argnums, int)
                        else tuple(static_argnums))

    def staged(*args):
        static_nums = (_normalize_argnums(static_nums_spec, len(args))
                       if static_nums_spec else ())
        dynamic, static = _split_static(args, static_nums)
        leaves, in_tree = tree_flatten(dynamic)
        avals = [_aval_of_signature(_leaf_signature(x)) for x in leaves]
        graph, captured, out_tree = _stage(_with_static(fun, static, len(args)), in_tree, avals)
        return graph
    return staged


def jit(fun, static_argnums=()):
    """Compile `fun` per abstract signature (pytree structure, shapes, dtypes, statics).

    The compiled function computes what `fun` computes eagerly with numpy: the same values
    bit for bit, dtypes, Python types and floating-point warnings. The one exception is
    opt-in: under `xform.config.update("scalar_math", "fast")`, 0-d float64 work may use
    Python's `math` functions, each within 4 ulp of numpy's (docs/ARCHITECTURE.md, "What
    compiled code promises").

    >>> f = xform.jit(lambda x: x * x + 1.0)
    >>> f(np.arange(3.0))    # staged and compiled now; later f64[3] calls reuse the code
    array([1., 2., 5.])
    """
    return _Jitted(fun, static_argnums)


class _Jitted(_CachedCall):
    def __init__(self, fun, static_argnums):
        super().__init__()
        self.fun = fun
        self.static_argnums = ((static_argnums,) if isinstance(static_argnums, int)
                               else static_argnums)
        functools.update_wrapper(self, fun, updated=())

    def _build_and_call(self, args):
        fun = self.fun
        if current_builder() is not None:
            return fun(*args)
        static_nums = (_normalize_argnums(self.static_argnums, len(args))
                       if self.static_argnums else ())
        dynamic, static = _split_static(args, static_nums)
        leaves, in_tree = tree_flatten(dynamic)
        signature = tuple(map(_leaf_signature, leaves))

        def make():
            avals = [_aval_of_signature(s) for s in signature]
            graph, _, out_tree = _stage(_with_static(fun, static, len(args)), in_tree, avals)
            return CACHE.compiled(_finish(graph)).fn, _unflattener(out_tree)
        entry = CACHE.build(fun, ("jit", in_tree, signature, static), make)
        if not static:  # a static argument's value is part of the key: no cached path
            self._remember(args, entry)
        fn, finish = entry.value
        return finish(fn(*leaves))


# -- reverse mode -----------------------------------------------------------------------------

def _float0_zeros(aval):
    return np.zeros(aval.shape, float0)


def _check_scalar_output(graph, has_aux, out_tree, fun_name):
    if has_aux:
        if out_tree.kind is not tuple or len(out_tree.children) != 2:
            raise TypeCheckError(f"{fun_name} with has_aux=True needs the function to return "
                                 "a pair (output, aux)", user_frame_info())
        if out_tree.children[0].num_leaves != 1:
            raise TypeCheckError(f"{fun_name}: the output (first of the pair) must be a "
                                 "scalar", user_frame_info())
    elif out_tree.num_leaves != 1:
        raise TypeCheckError(f"{fun_name} needs a function with one scalar output, got a "
                             f"pytree {out_tree}", user_frame_info())
    out_aval = graph.outputs[0].aval
    if out_aval.shape != () or not is_differentiable(out_aval):
        raise TypeCheckError(
            f"{fun_name} needs a scalar float output, got {out_aval.str_short()}",
            user_frame_info(), "use xform.vjp or xform.jacrev for non-scalar outputs, or "
            "reduce the output (e.g. np.sum)")


def value_and_grad(fun, argnums=0, has_aux=False):
    """`(fun(*args), gradient of fun w.r.t. args[argnums])`; with has_aux, `fun` returns
    `(out, aux)` and the result is `((out, aux), grads)`.

    >>> xform.value_and_grad(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
    (np.float64(5.0), array([2., 4.]))
    """
    return _gradient_transform(fun, argnums, has_aux, with_value=True)


def grad(fun, argnums=0, has_aux=False):
    """The gradient of scalar-output `fun` w.r.t. `args[argnums]` (a pytree like them); with
    has_aux, `fun` returns `(out, aux)` and the result is `(grads, aux)`.

    >>> xform.grad(lambda x: x ** 3 + np.sin(x))(0.0)    # 3 x**2 + cos(x)
    np.float64(1.0)
    """
    return _gradient_transform(fun, argnums, has_aux, with_value=False)


def _gradient_transform(fun, argnums, has_aux, with_value):
    name = "value_and_grad" if with_value else "grad"

    def build(in_tree, avals):
        nums = _normalize_argnums(argnums, len(in_tree.children))
        graph, captured, out_tree = _stage(fun, in_tree, avals)
        _check_scalar_output(graph, has_aux, out_tree, name)
        graph = _fuse(graph)
        offsets = np.cumsum([0] + [c.num_leaves for c in in_tree.children])
        wanted = [i for n in nums for i in range(offsets[n], offsets[n + 1])]
        builder = GraphBuilder()
        with using_builder(builder):
            ins = builder.adopt_inputs(graph)  # the forward pass is `graph` itself
            out_aval = graph.outputs[0].aval
            cts = [np.ones((), out_aval.dtype)[()]] + [
                zero_tangent(a.aval) for a in graph.outputs[1:]]
            outs, cts_in = vjp_eval(graph, ins, cts)
            grads = [instantiate(cts_in[i]) for i in wanted if is_differentiable(avals[i])]
        kept = list(outs) if with_value else list(outs[1:]) if has_aux else []
        grad_graph = builder.build(kept + grads)
        n_kept = len(kept)
        grads_of = _grads_unflattener(in_tree, nums, argnums, wanted, avals)
        if with_value:
            def unflatten(results):
                return tree_unflatten(out_tree, results[:n_kept]), grads_of(results[n_kept:])
        elif has_aux:
            aux_tree = out_tree.children[1]

            def unflatten(results):
                return grads_of(results[n_kept:]), tree_unflatten(aux_tree, results[:n_kept])
        else:
            unflatten = grads_of
        return grad_graph, captured, unflatten

    return _Transformed(fun, name, build, (argnums, has_aux), fuse=True)


def _grads_unflattener(in_tree, nums, argnums, wanted, avals):
    """gradient outputs -> the pytree of gradients (float0 zeros for integer leaves)."""
    if isinstance(argnums, int) and in_tree.children[nums[0]].kind is None \
            and is_differentiable(avals[wanted[0]]):
        return operator.itemgetter(0)

    def unflatten(grad_results):
        grad_iter = iter(grad_results)
        leaves = iter([next(grad_iter) if is_differentiable(avals[i])
                       else _float0_zeros(avals[i]) for i in wanted])
        trees = [tree_unflatten(in_tree.children[n],
                                [next(leaves) for _ in range(in_tree.children[n].num_leaves)])
                 for n in nums]
        return trees[0] if isinstance(argnums, int) else tuple(trees)
    return unflatten


def vjp(fun, *primals, has_aux=False):
    """`(fun(*primals), vjp_fn)`; `vjp_fn(cotangent)` returns a tuple of cotangents, one per
    primal. With has_aux: `(out, vjp_fn, aux)`.

    >>> out, f_vjp = xform.vjp(lambda x: x ** 2, 3.0)
    >>> out, f_vjp(1.0)
    (np.float64(9.0), (np.float64(6.0),))
    """
    leaves, in_tree = tree_flatten(primals)
    avals = [_aval_of_signature(_leaf_signature(x)) for x in leaves]
    graph, captured, out_tree = _stage(fun, in_tree, avals)
    if has_aux:
        if out_tree.kind is not tuple or len(out_tree.children) != 2:
            raise TypeCheckError("vjp with has_aux=True needs fun to return (output, aux)",
                                 user_frame_info())
        n_main = out_tree.children[0].num_leaves
        main_tree = out_tree.children[0]
    else:
        n_main, main_tree = out_tree.num_leaves, out_tree
    forward, backward = _vjp_pair(_fuse(graph), len(leaves), n_main)
    results = _run(forward, [*leaves, *captured])
    n_out = len(graph.outputs)
    outs, residuals = results[:n_out], results[n_out:]
    main_avals = [a.aval for a in graph.outputs[:n_main]]

    def vjp_fn(cotangent):
        ct_leaves, ct_tree = tree_flatten(cotangent)
        if ct_tree != main_tree:
            raise TreeMismatchError(f"vjp_fn got a cotangent of structure {ct_tree}, "
                                    f"expected the output's structure {main_tree}",
                                    user_frame_info())
        diff_cts = []
        for ct, aval in zip(ct_leaves, main_avals):
            shape = _leaf_signature(ct)[0]
            if shape != aval.shape:
                raise ShapeError(f"vjp_fn got a cotangent of shape {shape} for an output of "
                                 f"shape {aval.shape}", user_frame_info())
            if is_differentiable(aval):
                diff_cts.append(_as_dtype(ct, aval.dtype))
        grads = iter(_run(backward, [*residuals, *diff_cts]))
        grad_leaves = [next(grads) if is_differentiable(a) else _float0_zeros(a)
                       for a in avals]
        return tree_unflatten(in_tree, grad_leaves)

    out_value = tree_unflatten(out_tree, outs)
    if has_aux:
        return out_value[0], vjp_fn, out_value[1]
    return out_value, vjp_fn


def _vjp_pair(graph, n_leaves, n_main):
    """Forward and backward graphs for cotangents on the first `n_main` outputs, gradients
    for the first `n_leaves` inputs (the rest are captured values)."""
    builder = GraphBuilder()
    with using_builder(builder):
        ins = [builder.new_input(v.aval) for v in graph.inputs]
        cts = [builder.new_input(tangent_aval(a.aval))
               if i < n_main and is_differentiable(a.aval) else zero_tangent(a.aval)
               for i, a in enumerate(graph.outputs)]
        outs, cts_in = vjp_eval(graph, ins, cts)
        grads = [instantiate(ct) for ct, v in zip(cts_in[:n_leaves], graph.inputs)
                 if is_differentiable(v.aval)]
    combined = builder.build(list(outs) + grads)
    forward, backward = split_graph(combined, len(graph.inputs), len(outs))
    return _fuse(optimize(forward, checks=config.checks)), _finish(backward, fuse=True)


# -- forward mode -----------------------------------------------------------------------------

def _as_dtype(value, dtype):
    """A tangent or cotangent in the dtype its primal's tangent has (float32 tangents for
    float64 primals are cast, as autograd and torch do, rather than refused)."""
    if type(value) is Tracer:
        return value if value.dtype == dtype else value.astype(dtype)
    if isinstance(value, np.ndarray) and value.dtype == dtype:
        return value
    return np.asarray(value, dtype)[()] if np.ndim(value) == 0 else np.asarray(value, dtype)


def _check_tangents(primal_leaves, tangent_leaves, p_tree, t_tree):
    if p_tree != t_tree:
        raise TreeMismatchError(f"tangents have structure {t_tree}, primals {p_tree}",
                                user_frame_info())
    for p, t in zip(primal_leaves, tangent_leaves):
        p_shape, t_shape = _leaf_signature(p)[0], np.shape(t)
        if p_shape != t_shape:
            raise ShapeError(f"tangent of shape {t_shape} for a primal of shape {p_shape}",
                             user_frame_info())


def jvp(fun, primals, tangents):
    """`(fun(*primals), J @ tangents)`: forward-mode derivative along `tangents`.

    >>> xform.jvp(lambda x: x ** 2, (3.0,), (0.5,))    # (x**2, 2 x * 0.5)
    (np.float64(9.0), np.float64(3.0))
    """
    primals, tangents = tuple(primals), tuple(tangents)
    p_leaves, p_tree = tree_flatten(primals)
    t_leaves, t_tree = tree_flatten(tangents)
    _check_tangents(p_leaves, t_leaves, p_tree, t_tree)
    avals = [_aval_of_signature(_leaf_signature(x)) for x in p_leaves]
    diff = [is_differentiable(a) for a in avals]

    def build(in_tree, _avals):
        graph, captured, out_tree = _stage(fun, p_tree, avals)
        builder = GraphBuilder()
        with using_builder(builder):
            ins = [builder.new_input(a) for a in avals]
            t_ins = [builder.new_input(tangent_aval(a)) if d else zero_tangent(a)
                     for a, d in zip(avals, diff)]
            ins += [builder.new_input(v.aval) for v in graph.inputs[len(avals):]]
            t_ins += [zero_tangent(v.aval) for v in graph.inputs[len(avals):]]
            outs, t_outs = jvp_eval(graph, ins, t_ins)
            t_outs = [instantiate(t) for t in t_outs]
        jvp_graph_ = builder.build(list(outs) + t_outs)

        def unflatten(results):
            n = len(outs)
            return tree_unflatten(out_tree, results[:n]), tree_unflatten(out_tree, results[n:])
        return jvp_graph_, captured, unflatten

    diff_tangents = [_as_dtype(t, a.dtype) for t, a, d in zip(t_leaves, avals, diff) if d]
    return _Transformed(fun, "jvp", build)(primals, diff_tangents)


def linearize(fun, *primals):
    """`(fun(*primals), f_jvp)` where `f_jvp(*tangents)` evaluates only the linear part.

    >>> out, f_jvp = xform.linearize(lambda x: x ** 2, 3.0)
    >>> out, f_jvp(0.5)
    (np.float64(9.0), np.float64(3.0))
    """
    p_leaves, p_tree = tree_flatten(primals)
    avals = [_aval_of_signature(_leaf_signature(x)) for x in p_leaves]
    diff = [is_differentiable(a) for a in avals]
    graph, captured, out_tree = _stage(fun, p_tree, avals)
    builder = GraphBuilder()
    with using_builder(builder):
        ins = [builder.new_input(v.aval) for v in graph.inputs]
        t_ins = [builder.new_input(tangent_aval(a)) if d else zero_tangent(a)
                 for a, d in zip(avals, diff)]
        t_ins += [zero_tangent(v.aval) for v in graph.inputs[len(avals):]]
        outs, t_outs = jvp_eval(graph, ins, t_ins)
        t_outs = [instantiate(t) for t in t_outs]
    combined = builder.build(list(outs) + t_outs)
    forward, linear = split_graph(combined, len(graph.inputs), len(outs))
    defined = set(forward.inputs) | {v for e in forward.equations for v in e.outputs}
    if all(type(a) is not Var or a in defined for a in forward.outputs):
        forward, linear = optimize(forward, checks=config.checks), _finish(linear)
        results = _run(forward, [*p_leaves, *captured])
        outs, residuals = results[:len(graph.outputs)], results[len(graph.outputs):]
    else:
        # A primitive whose jvp yields primal and tangent outputs in one equation (cond,
        # while_loop) cannot be cut in two: the linear function then re-runs the whole jvp.
        outs = _run(optimize(graph, checks=config.checks), [*p_leaves, *captured])
        residuals = [*p_leaves, *captured]
        linear = _finish(Graph(combined.inputs, combined.consts, combined.equations,
                               combined.outputs[len(outs):]))

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_flatten(tangents)
        _check_tangents(p_leaves, t_leaves, p_tree, t_tree)
        diff_tangents = [_as_dtype(t, a.dtype) for t, a, d in zip(t_leaves, avals, diff) if d]
        return tree_unflatten(out_tree, _run(linear, [*residuals, *diff_tangents]))

    return tree_unflatten(out_tree, outs), f_jvp


# -- vmap -------------------------------------------------------------------------------------

def vmap(fun, in_axes=0, out_axes=0):
    """Map `fun` over axis `in_axes` of its arguments (None: not mapped; a pytree prefix of the
    arguments), stacking results along `out_axes`.

    >>> xform.vmap(lambda x: np.dot(x, x))(np.ones((5, 3))).shape
    (5,)
    """
    def build(in_tree, avals):
        args_tree = in_tree
        axes = _in_axes_leaves(in_axes, args_tree)
        dims = []
        size = None
        for aval, axis in zip(avals, axes):
            if axis is None:
                dims.append(NOT_MAPPED)
                continue
            if not isinstance(axis, int):
                raise TypeCheckError(f"vmap in_axes entries must be int or None, got {axis!r}",
                                     user_frame_info())
            if not -aval.ndim <= axis < max(aval.ndim, 1) or aval.ndim == 0:
                raise ShapeError(f"vmap in_axes={axis} is out of range for an argument of "
                                 f"shape {aval.shape}", user_frame_info())
            axis %= aval.ndim
            if size is not None and aval.shape[axis] != size:
                raise ShapeError(f"vmap got inconsistent sizes along the mapped axes: "
                                 f"{size} and {aval.shape[axis]}", user_frame_info())
            size = aval.shape[axis]
            dims.append(axis)
        if size is None:
            raise TypeCheckError("vmap needs at least one argument with a mapped axis "
                                 "(in_axes is None everywhere)", user_frame_info())
        example_avals = [aval if d is NOT_MAPPED else
                         ShapedArray(aval.shape[:d] + aval.shape[d + 1:], aval.dtype,
                                     aval.weak_type)
                         for aval, d in zip(avals, dims)]
        graph, captured, out_tree = _stage(fun, args_tree, example_avals)
        out_axes_leaves = _out_axes_leaves(out_axes, out_tree)
        builder = GraphBuilder()
        with using_builder(builder):
            ins = [builder.new_input(a) for a in avals]
            ins += [builder.new_input(v.aval) for v in graph.inputs[len(avals):]]
            all_dims = dims + [NOT_MAPPED] * len(captured)
            outs, out_dims = batch_eval(graph, ins, all_dims, size)
            results = []
            for x, d, axis in zip(outs, out_dims, out_axes_leaves):
                if axis is None:
                    if d is not NOT_MAPPED:
                        raise TypeCheckError("vmap out_axes=None for an output that depends "
                                             "on the mapped axis", user_frame_info())
                    results.append(x)
                else:
                    x = move_to_front(x, d, size)
                    results.append(x if axis == 0 else np.moveaxis(x, 0, axis))
        batched = builder.build(results)
        return batched, captured, lambda outs: tree_unflatten(out_tree, outs)

    return _Transformed(fun, "vmap", build, (_freeze(in_axes), _freeze(out_axes)))


def _freeze(tree):
    leaves, treedef = tree_flatten(tree)
    return (treedef, tuple(leaves))


def _in_axes_leaves(in_axes, args_tree):
    n_args = len(args_tree.children)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(in_axes, tuple) and len(in_axes) != n_args:
        raise TreeMismatchError(f"vmap in_axes has {len(in_axes)} entries for {n_args} "
                                "arguments", user_frame_info())
    if not isinstance(in_axes, tuple):
        in_axes = (in_axes,) * n_args
    dummy_args = tree_unflatten(args_tree, [0] * args_tree.num_leaves)
    try:
        return broadcast_prefix(in_axes, dummy_args)
    except TreeMismatchError as err:
        raise TreeMismatchError(f"vmap in_axes: {err.cause}", user_frame_info()) from None


def _out_axes_leaves(out_axes, out_tree):
    dummy_out = tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    try:
        return broadcast_prefix(out_axes, dummy_out)
    except TreeMismatchError as err:
        raise TreeMismatchError(f"vmap out_axes: {err.cause}", user_frame_info()) from None


# -- Jacobians and Hessians ---------------------------------------------------------------------

def _std_basis(x):
    """An identity basis for `x`'s elements, shaped (size, *x.shape)."""
    shape = np.shape(x)
    size = int(np.prod(shape, dtype=np.int64))
    dtype = _aval_of_signature(_leaf_signature(x)).dtype
    return np.eye(size, dtype=dtype).reshape((size,) + tuple(shape))


def jacfwd(fun, argnums=0):
    """The Jacobian by forward mode: shape `out.shape + x.shape` for each output leaf.

    >>> xform.jacfwd(lambda x: x * 2.0)(np.ones(2))
    array([[2., 0.],
           [0., 2.]])
    """
    def jac_f(*args):
        nums = _normalize_argnums(argnums, len(args))
        jacobians = []
        for n in nums:
            x = args[n]

            def push(t, n=n):
                tangents = tuple(t if i == n else tree_map(_zero_like_tangent, a)
                                 for i, a in enumerate(args))
                return jvp(fun, args, tangents)[1]
            basis = _std_basis(x)
            columns = vmap(push)(basis)
            in_shape = np.shape(x)
            jacobians.append(tree_map(lambda c: _columns_to_jacobian(c, in_shape), columns))
        return jacobians[0] if isinstance(argnums, int) else tuple(jacobians)
    return jac_f


def _zero_like_tangent(x):
    aval = _aval_of_signature(_leaf_signature(x))
    return np.zeros(aval.shape, aval.dtype if is_differentiable(aval) else float0)


def _columns_to_jacobian(columns, in_shape):
    # columns: (in_size, *out_shape) -> (*out_shape, *in_shape)
    out_ndim = np.ndim(columns) - 1
    moved = np.moveaxis(columns, 0, -1) if out_ndim else columns
    return np.reshape(moved, tuple(np.shape(columns)[1:]) + tuple(in_shape))


def jacrev(fun, argnums=0):
    """The Jacobian by reverse mode: shape `out.shape + x.shape`; `fun` has one array output.

    >>> xform.jacrev(lambda x: x * 2.0)(np.ones(2))
    array([[2., 0.],
           [0., 2.]])
    """
    def jac_f(*args):
        nums = _normalize_argnums(argnums, len(args))
        out, pullback = vjp(fun, *args)
        if not isinstance(out, (np.ndarray, np.generic, float, int, Tracer)):
            raise TypeCheckError("jacrev needs a function with a single array output",
                                 user_frame_info())
        basis = _std_basis(out)
        rows = vmap(lambda ct: tuple(pullback(ct)[n] for n in nums))(basis)
        out_shape = np.shape(out)
        jacobians = [np.reshape(r, tuple(out_shape) + tuple(np.shape(r)[1:])) for r in rows]
        return jacobians[0] if isinstance(argnums, int) else tuple(jacobians)
    return jac_f


def hessian(fun, argnums=0):
    """The Hessian, forward-over-reverse: `jacfwd(jacrev(fun))`.

    >>> xform.hessian(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    return jacfwd(jacrev(fun, argnums), argnums)


__all__ = ["grad", "hessian", "jacfwd", "jacrev", "jit", "jvp", "linearize", "make_graph",
           "value_and_grad", "vjp", "vmap"]

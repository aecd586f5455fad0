"""`make_graph` (a function's graph, as staged) and `jit` (its compiled code per abstract
signature)."""
from __future__ import annotations

import functools

import attrs
import numpy as np

from xform.api.dispatch import (FIRST_RESULT, aval_of_signature, leaf_signature,
                                normalize_argnums, present_argnums, run, split_static,
                                static_positions, transformed, with_statics)
from xform.api.pipeline import checked_backend, finish_graph, using_backend
from xform.codegen.xla import is_device_array
from xform.errors import TreeMismatchError, not_callable_error
from xform.ir.avals import ShapedArray
from xform.ir.builder import KnownValues, stage_function
from xform.runtime.cache import staging_outside_a_build
from xform.runtime.effects import Watch
from xform.source_info import user_frame_info
from xform.tracebacks import api_boundary
from xform.tree import tree_flatten, tree_unflatten


def _unflattener(out_tree):
    """outputs -> result pytree; a single output is returned as it is, with no pytree work."""
    if out_tree.kind is None:
        return FIRST_RESULT
    return functools.partial(tree_unflatten, out_tree)


def make_graph(fun, static_argnums=()):
    """Stage `fun` and return its graph, as staged (no passes run).

    >>> print(xform.make_graph(lambda x: np.sin(x) * 2.0)(np.ones(3)))
    { lambda a:f64[3] . let
        b:f64[3] = sin a
        c:f64[3] = multiply b 2.0
      in (c) }
    """
    if not callable(fun):
        raise not_callable_error(fun, "make_graph")
    static_nums_spec = ((static_argnums,) if isinstance(static_argnums, int)
                        else tuple(static_argnums))

    @api_boundary
    def staged(*args):
        static_nums = (normalize_argnums(static_nums_spec, len(args))
                       if static_nums_spec else ())
        leaves, in_tree, statics = split_static(args, static_nums, (), _is_shaped_only)
        # a static leaf: an unused input while staged, dropped from the graph
        leaves = [False if j in statics else leaf for j, leaf in enumerate(leaves)]
        avals = [_aval_of_example(x) for x in leaves]
        # Arrays and numbers are staged with their values: Python's questions about them
        # are answered and shown as guards. Abstract shapes (ShapedArray) stage without.
        known = (None if any(isinstance(x, ShapedArray) or not _is_value(x) for x in leaves)
                 else KnownValues.of(leaves))
        # its random draws appear as random_draw equations; a failure leaves no entry
        with staging_outside_a_build(), Watch(fun, tuple(statics.values())):
            graph = stage_function(with_statics(fun, in_tree, statics), in_tree, avals,
                                   known)[0]
        if not statics:
            return graph
        return attrs.evolve(graph, inputs=[var for j, var in enumerate(graph.inputs)
                                           if j not in statics])
    return staged


def _is_shaped_only(x) -> bool:
    """An abstract example: a ShapedArray or anything with shape and dtype that is no array
    (JAX's ShapeDtypeStruct)."""
    return isinstance(x, ShapedArray) or (hasattr(x, "shape") and hasattr(x, "dtype")
                                          and not isinstance(x, (np.ndarray, np.generic)))


def _is_value(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic, bool, int, float, complex))


def split_graph(fun, static_argnums=(), *, backend="xla"):
    """The graph `jit(fun, backend=backend)` runs on these arguments: staged, optimized, and
    split into XLA segments (`xla_call` equations, each holding its segment's graph) and the
    equations left to the host, which run with numpy (`xform.describe_split` lists them):
    for numpy arguments, XLA gets the parts where a call into it pays
    (`xform.config.xla_placement`; docs/backends.md).

    >>> import scipy.linalg    # its expm is SciPy's own kernel: it runs on the host
    >>> def f(a):
    ...     return np.sum(np.sin(scipy.linalg.expm(a) * 2.0))
    >>> print(xform.describe_split(xform.split_graph(f)(np.eye(100))))
    host: expm
    xla: 3 equations
    """
    staged = make_graph(fun, static_argnums)
    checked_backend(backend)

    def split(*args):
        graph = staged(*args)
        # jax arrays go to XLA whatever the cost model says, as jit sends them
        device_inputs = any(map(is_device_array, tree_flatten(args)[0]))
        with using_backend(backend, device_inputs):
            return finish_graph(graph)
    return split


def _is_shaped(x) -> bool:
    return isinstance(x, ShapedArray) or (hasattr(x, "shape") and hasattr(x, "dtype"))


def _aval_of_example(x):
    """The aval of an example argument: an array, a number, or anything with `shape` and
    `dtype` (a ShapedArray, JAX's ShapeDtypeStruct)."""
    if _is_shaped_only(x):
        return ShapedArray(tuple(x.shape), np.dtype(x.dtype))
    return aval_of_signature(leaf_signature(x))


@api_boundary
def eval_shape(fun, *args, **kwargs):
    """The shapes and dtypes of `fun(*args, **kwargs)`, as ShapedArrays, found by staging
    (nothing is computed). Arguments may be arrays, numbers, or ShapedArrays.

    >>> xform.eval_shape(lambda x, y: {"out": x @ y}, xform.ShapedArray((2, 3), np.float64),
    ...                  np.ones(3))
    {'out': f64[2]}
    """
    leaves, in_tree = tree_flatten(args, is_leaf=_is_shaped)
    with Watch(fun, tuple(kwargs.values())):    # its random draws are staged, not drawn
        graph, _, out_tree = stage_function(functools.partial(fun, **kwargs), in_tree,
                                            [_aval_of_example(x) for x in leaves])
    return tree_unflatten(out_tree, [atom.aval for atom in graph.outputs])


def closure_convert(fun, *example_args):
    """`(converted, consts)`, as JAX's: `converted(*args, *consts)` computes `fun(*args)` with
    the traced values `fun` closes over (from an enclosing transform) passed explicitly as
    `consts`, e.g. to hand `fun` to a custom_vjp rule, which must not close over them.

    >>> def outer(w):
    ...     converted, consts = xform.closure_convert(lambda x: x * w, 1.0)
    ...     return converted(2.0, *consts)
    >>> xform.grad(outer)(3.0)
    np.float64(2.0)
    """
    leaves, in_tree = tree_flatten(example_args)
    avals = [aval_of_signature(leaf_signature(x)) for x in leaves]
    graph, captured, out_tree = stage_function(fun, in_tree, avals)
    graph = finish_graph(graph)
    n_leaves = len(leaves)

    def converted(*args_and_consts):
        args, consts = args_and_consts[:len(example_args)], args_and_consts[len(example_args):]
        arg_leaves, arg_tree = tree_flatten(args)
        if arg_tree != in_tree or len(consts) != len(graph.inputs) - n_leaves:
            raise TreeMismatchError(f"closure_convert: the converted function takes arguments "
                                    f"like {in_tree} and {len(graph.inputs) - n_leaves} "
                                    f"consts, got {arg_tree} and {len(consts)}",
                                    user_frame_info())
        return tree_unflatten(out_tree, run(graph, [*arg_leaves, *consts]))
    functools.update_wrapper(converted, fun)
    return converted, list(captured)


def jit(fun, static_argnums=(), static_argnames=(), *, backend=None):
    """Compile `fun` per abstract signature (pytree structure, shapes, dtypes, statics).

    The compiled function computes what `fun` computes eagerly with numpy: the same values
    bit for bit, dtypes, Python types and floating-point warnings, on the first call and
    later ones. Opt-in exceptions: under `xform.config.update("scalar_math", "fast")`, 0-d
    float64 work may use Python's `math` functions, each within 4 ulp of numpy's; under
    `algebra="reassociate"` sums may be reordered. Last-bit exceptions kept by default:
    `z ** 2`, `z ** -1`, `z ** 0.5` of a complex array (numpy's operator takes square,
    reciprocal, sqrt; staged as `np.power`), `**` of 0-d numpy scalars (numpy's scalar
    math uses the C library's pow; staged as `np.power`'s loop), `np.add.at` with a traced
    index (the scatter's order of repeated positions), `scipy.linalg.cho_solve` of a stack
    of factors; the section "What compiled code promises" of docs/ARCHITECTURE.md says why.
    As in JAX, every argument is traced except those named by `static_argnums`/
    `static_argnames` (keyed by value; unhashable ones by identity).
    `backend="xla"` runs the compiled graph with XLA through jax instead (XLA's values, not
    numpy's bits; docs/backends.md); None means `xform.config.backend`.

    >>> f = xform.jit(lambda x: x * x + 1.0)
    >>> f(np.arange(3.0))    # staged and compiled now; later f64[3] calls reuse the code
    array([1., 2., 5.])
    >>> first = xform.jit(lambda x, n: x[:n], static_argnames="n")
    >>> first(np.arange(5.0), n=2)
    array([0., 1.])
    """
    if not callable(fun):
        raise not_callable_error(fun, "jit")
    explicit_spec, static_keywords = static_positions(fun, static_argnums, static_argnames)

    def static(n_args):
        return present_argnums(explicit_spec, n_args), ()
    return transformed(fun, "jit", _build_jit, static=static, static_keywords=static_keywords,
                       keywords_automatic=False, keywords=bool(static_argnames), inline=True,
                       backend=checked_backend(backend))


def _build_jit(fun, in_tree, avals, known=None):
    """jit's graph: the function as staged (inside another staging, jit inlines it)."""
    graph, captured, out_tree = stage_function(fun, in_tree, avals, known)
    return graph, captured, _unflattener(out_tree)

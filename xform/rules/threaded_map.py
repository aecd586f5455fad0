"""threaded_map: a scalar function applied element-wise across arrays (or, with axis=0, a
function of one leading-axis slice), in chunks on a shared thread pool (xform.runtime.executors)
or as a dask graph when an input is a dask array. One primitive whose jvp, vjp and batch rules
are threaded_maps again, over the transformed element graph, so derivatives run in parallel
too."""
from __future__ import annotations

import contextvars
import weakref

import attrs
import numpy as np

from xform.errors import ShapeError, TypeCheckError, UnsupportedError, XformError
from xform.ir.avals import ShapedArray, aval_of, broadcast_shapes, is_differentiable
from xform.ir.builder import current_builder, stage_function
from xform.ir.core import Graph, Params, Primitive, Var, rewire
from xform.ir.execute import runtime
from xform.ir.interpret import eval_graph
from xform.source_info import user_frame_info
from xform.ir.tracer import Tracer
from xform.rules.call import call_p
from xform.ir.ad import NOT_MAPPED, Zero, move_to_front, zero_tangent
from xform.ir.registry import Hooks, graph_has_effects, is_elementwise, register
from xform.passes import inline_calls
from xform.transforms.derived import batch_of, derived_graph, memo, vjp_of
from xform.transforms.jvp import jvp_graph
from xform.tree import tree_flatten

_MAX_INLINED = 10_000  # equations of an @xform.function callee opened inside f

_ELEMENTWISE_HINT = ("f gets one scalar per input array: use element-wise math (np.sin, +, "
                     "np.where, np.clip, astype, @xform.function callees of those); reduce, "
                     "index or reshape closed-over arrays, never the element")


# == validation, shared by the public function, the impl and every rule ========================

def is_lazy(x) -> bool:
    """Whether `x` is a dask collection (duck-typed: dask is an optional extra).

    >>> from xform.rules.threaded_map import is_lazy
    >>> is_lazy(np.ones(2))
    False
    """
    return hasattr(type(x), "__dask_graph__")


def _aval(x) -> ShapedArray:
    """`x`'s abstract value, never computing a dask array to find it."""
    if type(x) is Tracer:
        return x.aval
    if is_lazy(x):
        return ShapedArray(tuple(x.shape), np.dtype(x.dtype))
    return aval_of(x)


_body_errors: "weakref.WeakKeyDictionary[Graph, XformError | None]" = weakref.WeakKeyDictionary()


def _body_error(graph: Graph) -> XformError | None:
    """Why `graph` cannot be mapped over chunks (None when it can): every equation must be
    element-wise and every value, input and output a scalar. Remembered per graph."""
    if graph not in _body_errors:
        _body_errors[graph] = _find_body_error(graph)
    return _body_errors[graph]


def _find_body_error(graph: Graph) -> XformError | None:
    for eqn in graph.equations:
        if eqn.primitive is call_p:
            return TypeCheckError(f"threaded_map needs an element-wise f, but f calls the "
                                  f"recursive function {eqn.params['callee']}", eqn.source,
                                  "a recursion needs xform.cond, which is not element-wise")
        # Element-wise primitives (Rules.elementwise) compute on 1-d chunks exactly what
        # they compute on scalars.
        if not is_elementwise(eqn.primitive):
            return TypeCheckError(f"threaded_map needs an element-wise f, but f applies "
                                  f"'{eqn.primitive}' to the element", eqn.source,
                                  _ELEMENTWISE_HINT)
        wide = [a.aval for a in (*eqn.inputs, *eqn.outputs) if a.aval.shape]
        if wide:
            return ShapeError(f"threaded_map needs f to compute on scalars, but "
                              f"'{eqn.primitive}' meets the element with a "
                              f"{wide[0].str_short()} value", eqn.source, _ELEMENTWISE_HINT)
    wide = [a.aval for a in graph.outputs if a.aval.shape]
    if wide:
        return ShapeError(f"threaded_map needs f to return a scalar, got a "
                          f"{wide[0].str_short()} value", None, _ELEMENTWISE_HINT)
    return None


def _check_options(num_threads, chunk_size, source, axis=None) -> None:
    if axis is not None and (type(axis) is not int or axis != 0):
        raise TypeCheckError(f"threaded_map: axis must be None (element-wise) or 0 (one "
                             f"leading-axis slice per call), got {axis!r}", source)
    for name, value in (("num_threads", num_threads), ("chunk_size", chunk_size)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise TypeCheckError(f"threaded_map: {name} must be a positive int or None, got "
                                 f"{value!r}", source)


def _check_operands(avals, graph, n_mapped, num_threads, chunk_size, axis=None, summed=(),
                    source=None) -> None:
    """Raise an XformError unless `avals` (mapped arrays, then extras) fit `graph`."""
    _check_options(num_threads, chunk_size, source, axis)
    if not 1 <= n_mapped <= len(avals) or len(avals) != len(graph.inputs):
        raise TypeCheckError(f"threaded_map: {len(avals)} operands ({n_mapped} mapped) for an "
                             f"element graph of {len(graph.inputs)} inputs", source)
    if summed and (axis is None or len(summed) != len(graph.outputs)):
        raise TypeCheckError("threaded_map: summed outputs need axis=0 and one flag per "
                             "output", source)
    shape = avals[0].shape
    for i, (a, var) in enumerate(zip(avals, graph.inputs)):
        if a.dtype.kind not in "biufc":
            raise TypeCheckError(f"threaded_map: input {i} has dtype {a.dtype}; inputs must "
                                 "be numeric (bool, int, float or complex)", source)
        if axis is None and i < n_mapped and a.shape != shape:
            raise ShapeError(f"threaded_map: inputs must have equal shapes, got {shape} "
                             f"(input 0) and {a.shape} (input {i})", source)
        if axis is None and i >= n_mapped and a.shape:
            raise ShapeError(f"threaded_map: unmapped operand {i} must be a scalar, got "
                             f"{a.str_short()}", source)
        if axis is not None:
            part = a.shape[1:] if i < n_mapped else a.shape
            if (i < n_mapped and (not a.shape or a.shape[:1] != shape[:1])
                    or part != var.aval.shape):
                raise ShapeError(f"threaded_map: input {i} has shape {a.shape}, but f was "
                                 f"staged for {'slices' if i < n_mapped else 'a value'} of "
                                 f"shape {var.aval.shape} (of {shape[:1]} slices)", source)
        if a.dtype != var.aval.dtype:
            raise TypeCheckError(f"threaded_map: input {i} has dtype {a.dtype} but f was "
                                 f"staged for {var.aval.dtype} elements", source)
    if axis is None:
        error = _body_error(graph)
        if error is not None:
            raise type(error)(error.cause, error.source or source, error.hint)


# == the primitive ==============================================================================

# Params: graph (one element's or slice's computation), n_mapped (its first inputs are mapped;
# the rest, extras, are shared), num_threads, chunk_size, axis (None: element-wise; 0: leading
# slices) and summed (axis=0 only: per output, whether the map returns the sum over the slices
# instead of their stack; reverse mode's cotangents of extras; empty: none).
threaded_map_p = Primitive("threaded_map", multiple_results=True)

# Whether a map over dask arrays returns dask arrays: only to a user's eager call, whose numpy
# calls dask then serves lazily. Compiled code (any transform) gets numpy: its primitives need
# concrete values.
_lazy_results = contextvars.ContextVar("xform_threaded_map_lazy", default=False)


def _summed(summed, graph) -> tuple:
    return tuple(summed) or (False,) * len(graph.outputs)


def _out_avals(avals, graph, n_mapped, axis, summed):
    shape = avals[0].shape
    if axis is None:
        return [ShapedArray(shape, a.aval.dtype) for a in graph.outputs]
    return [ShapedArray(a.aval.shape if is_summed else shape[:1] + a.aval.shape, a.aval.dtype)
            for a, is_summed in zip(graph.outputs, _summed(summed, graph))]


def _threaded_map_impl(*operands, graph, n_mapped, num_threads, chunk_size, axis=None,
                       summed=()):
    source = user_frame_info()
    avals = [_aval(x) for x in operands]
    _check_operands(avals, graph, n_mapped, num_threads, chunk_size, axis, summed, source)
    if any(is_lazy(x) for x in operands[:n_mapped]):
        return runtime().map_lazy(graph, n_mapped, operands, num_threads, chunk_size, axis,
                                  summed, _lazy_results.get())
    # A lazy extra (a dask reduction fed back in) is one value for every element: computed.
    operands = [np.asarray(x) if is_lazy(x) else x for x in operands]
    outs = [np.empty(a.shape, a.dtype)
            for a in _out_avals(avals, graph, n_mapped, axis, summed)]
    dests = [o.reshape(-1) for o in outs] if axis is None else outs
    runtime().map_chunks(graph, n_mapped, operands, dests, num_threads, chunk_size, axis=axis,
                         summed=summed)
    return outs


def _threaded_map_abstract_eval(*avals, graph, n_mapped, num_threads, chunk_size, axis=None,
                                summed=()):
    _check_operands(avals, graph, n_mapped, num_threads, chunk_size, axis, summed)
    return _out_avals(avals, graph, n_mapped, axis, summed)


def _jvp_body(graph: Graph, n_mapped: int, nonzeros) -> Graph:
    """Per element: (mapped primals, their tangents, extras, their tangents) -> tangents of
    the differentiable outputs."""
    jvp = jvp_graph(graph, list(nonzeros))
    n_in = len(graph.inputs)
    tangent_vars = iter(jvp.inputs[n_in:])
    tangent_of = [next(tangent_vars) if nz else None for nz in nonzeros]
    inputs = [*jvp.inputs[:n_mapped], *[t for t in tangent_of[:n_mapped] if t is not None],
              *jvp.inputs[n_mapped:n_in], *[t for t in tangent_of[n_mapped:] if t is not None]]
    n_out = len(graph.outputs)
    return rewire(jvp, inputs, [n_out + i for i, a in enumerate(graph.outputs)
                                if is_differentiable(a.aval)])


def _threaded_map_jvp(primals, tangents, *, graph, n_mapped, num_threads, chunk_size,
                      axis=None, summed=()):
    # Primal and tangents are two equations, so that linearize can keep the first in its
    # forward graph; the second recomputes the primal intermediates it needs per chunk.
    params = dict(num_threads=num_threads, chunk_size=chunk_size, axis=axis)
    outs = threaded_map_p.bind(*primals, graph=graph, n_mapped=n_mapped, summed=summed,
                               **params)
    if not any(is_differentiable(a.aval) for a in graph.outputs):
        return outs, [zero_tangent(a.aval) for a in graph.outputs]
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    body = derived_graph(graph, ("threaded_map_jvp", nonzeros),
                         lambda: _jvp_body(graph, n_mapped, nonzeros))
    live_mapped = [t for t in tangents[:n_mapped] if type(t) is not Zero]
    live_extras = [t for t in tangents[n_mapped:] if type(t) is not Zero]
    # A sum of slices' values has the sum of their tangents as tangent.
    tangent_summed = tuple(s for s, a in zip(_summed(summed, graph), graph.outputs)
                           if is_differentiable(a.aval)) if summed else ()
    tangents_out = iter(threaded_map_p.bind(
        *primals[:n_mapped], *live_mapped, *primals[n_mapped:], *live_extras, graph=body,
        n_mapped=n_mapped + len(live_mapped), summed=tangent_summed, **params))
    return outs, [next(tangents_out) if is_differentiable(a.aval) else zero_tangent(a.aval)
                  for a in graph.outputs]


def _vjp_body(graph: Graph, n_mapped: int, live, summed) -> Graph:
    """Per element: (mapped primals, cotangents of the `live` stacked outputs, extras,
    cotangents of the live `summed` outputs) -> cotangents of the differentiable inputs. The
    forward part is recomputed per chunk, so no residual array is stored between the two
    passes."""
    vjp = vjp_of(graph, live)
    n_in = len(graph.inputs)
    cts = iter(vjp.inputs[n_in:])
    ct_of = [next(cts) if is_live else None for is_live in live]
    stacked = [ct for ct, s in zip(ct_of, summed) if ct is not None and not s]
    shared = [ct for ct, s in zip(ct_of, summed) if ct is not None and s]
    return rewire(vjp, [*vjp.inputs[:n_mapped], *stacked, *vjp.inputs[n_mapped:n_in], *shared])


def _threaded_map_vjp(primals, outs, cts, *, graph, n_mapped, num_threads, chunk_size,
                      axis=None, summed=()):
    live = tuple(type(ct) is not Zero and is_differentiable(a.aval)
                 for ct, a in zip(cts, graph.outputs))
    if not any(live):
        return [None] * len(primals)
    flags = _summed(summed, graph)
    body = memo(graph, ("threaded_map_vjp", live, flags),
                lambda: _vjp_body(graph, n_mapped, live, flags))
    stacked = [ct for ct, is_live, s in zip(cts, live, flags) if is_live and not s]
    shared = [ct for ct, is_live, s in zip(cts, live, flags) if is_live and s]
    differentiable = [i for i, var in enumerate(graph.inputs) if is_differentiable(var.aval)]
    # Over slices, an extra's cotangent is summed inside the map (per chunk, then over chunks;
    # on dask a tree reduction), so no stack of per-slice cotangents is ever held.
    grads_summed = tuple(i >= n_mapped for i in differentiable) if axis is not None else ()
    grads = iter(threaded_map_p.bind(*primals[:n_mapped], *stacked, *primals[n_mapped:],
                                     *shared, graph=body, n_mapped=n_mapped + len(stacked),
                                     num_threads=num_threads, chunk_size=chunk_size,
                                     axis=axis, summed=grads_summed))
    cts_in = []
    for i, var in enumerate(graph.inputs):
        if not is_differentiable(var.aval):
            cts_in.append(None)
        elif i < n_mapped or axis is not None:
            cts_in.append(next(grads))
        else:
            # An unmapped scalar's cotangent sums the per-element contributions, after the
            # parallel part: no two threads ever add into one value.
            cts_in.append(np.sum(next(grads)))
    return cts_in


def _threaded_map_batch(size, args, dims, *, graph, n_mapped, num_threads, chunk_size,
                        axis=None, summed=()):
    if axis is not None:
        return _batch_slices(size, args, dims, graph, n_mapped, num_threads, chunk_size,
                             summed)
    mapped = [move_to_front(x, d, size) for x, d in zip(args[:n_mapped], dims[:n_mapped])]
    shape = _aval(mapped[0]).shape
    batched = tuple(d is not NOT_MAPPED for d in dims[n_mapped:])
    # An unmapped scalar that varies across the batch becomes one more mapped input.
    widened = [np.broadcast_to(np.reshape(move_to_front(x, d, size),
                                          (size,) + (1,) * (len(shape) - 1)), shape)
               for x, d in zip(args[n_mapped:], dims[n_mapped:]) if d is not NOT_MAPPED]
    unbatched = [x for x, d in zip(args[n_mapped:], dims[n_mapped:]) if d is NOT_MAPPED]
    extras = graph.inputs[n_mapped:]
    body = derived_graph(graph, ("threaded_map_batch", batched), lambda: rewire(graph, [
        *graph.inputs[:n_mapped], *[v for v, b in zip(extras, batched) if b],
        *[v for v, b in zip(extras, batched) if not b]]))
    outs = threaded_map_p.bind(*mapped, *widened, *unbatched, graph=body,
                               n_mapped=n_mapped + len(widened), num_threads=num_threads,
                               chunk_size=chunk_size)
    return outs, [0] * len(outs)


def _batch_slices(size, args, dims, graph, n_mapped, num_threads, chunk_size, summed):
    """vmap of a map over slices: the batch axis goes right after the mapped axis, and the
    slice graph is batched along it (extras that vary across the batch stay shared, batched
    along their front axis)."""
    moved = []
    for i, (x, d) in enumerate(zip(args, dims)):
        if d is NOT_MAPPED:
            moved.append(x)
        elif i < n_mapped:
            moved.append(np.swapaxes(move_to_front(x, d, size), 0, 1))
        else:
            moved.append(move_to_front(x, d, size))
    in_dims = tuple(NOT_MAPPED if d is NOT_MAPPED else 0 for d in dims)
    body = batch_of(graph, in_dims, size)
    outs = threaded_map_p.bind(*moved, graph=body, n_mapped=n_mapped, num_threads=num_threads,
                               chunk_size=chunk_size, axis=0, summed=summed)
    return outs, [0 if s else 1 for s in _summed(summed, graph)]


def _threaded_map_dce(eqn, used):
    graph = eqn.params["graph"]
    kept = [i for i, is_used in enumerate(used) if is_used]
    body = derived_graph(graph, ("threaded_map_dce", tuple(used)),
                         lambda: rewire(graph, graph.inputs, kept))
    params = {**eqn.params, "graph": body}
    if eqn.params.get("summed"):
        params["summed"] = tuple(eqn.params["summed"][i] for i in kept)
    return attrs.evolve(eqn, outputs=[eqn.outputs[i] for i in kept], params=Params(params))


register(threaded_map_p, impl=_threaded_map_impl, abstract_eval=_threaded_map_abstract_eval,
         jvp=_threaded_map_jvp, vjp=_threaded_map_vjp, batch=_threaded_map_batch,
         symbolic_zeros=True, construct="xform.threaded_map",
         # reverse_by_graph: see xform.transforms.vjp.computable_at_once
         hooks=Hooks(dce=_threaded_map_dce, reverse_by_graph=True))


# == staging f ==================================================================================

def _split(graph: Graph, n_mapped: int) -> tuple[Graph, Graph]:
    """(prelude, body): the prelude computes, once, what depends only on values f closes over
    (`w[0]`, `np.sum(w)`); the body is the per-element part, fed the prelude's results as
    unmapped extras. Only the body must be element-wise."""
    per_element = set(graph.inputs[:n_mapped])
    prelude_eqns, body_eqns = [], []
    for eqn in graph.equations:
        if any(type(a) is Var and a in per_element for a in eqn.inputs):
            body_eqns.append(eqn)
            per_element.update(eqn.outputs)
        else:
            prelude_eqns.append(eqn)
    boundary = []
    for atom in [*[a for eqn in body_eqns for a in eqn.inputs], *graph.outputs]:
        if type(atom) is Var and atom not in per_element and atom not in boundary:
            boundary.append(atom)
    prelude = Graph(graph.inputs[n_mapped:], graph.consts, prelude_eqns, boundary)
    body = Graph([*graph.inputs[:n_mapped], *boundary], (), body_eqns, graph.outputs)
    return prelude, body


def _stage_element_function(f, in_avals, axis):
    """(prelude, body, captured) of `f` staged on one element (or slice) of each input."""
    changed = runtime().mutation_watch(f)
    _, in_tree = tree_flatten(tuple(range(len(in_avals))))
    graph, captured, out_tree = stage_function(f, in_tree, list(in_avals))
    what = changed()
    if what is not None:
        raise XformError(f"threaded_map: f changed {what} while it ran; f must not mutate "
                         "shared state", user_frame_info(),
                         "f is staged once and its graph runs on many threads at once: "
                         "return values from f instead of storing them")
    if out_tree.kind is not None:
        what = "scalar" if axis is None else "array"
        raise TypeCheckError(f"threaded_map needs f to return one {what}, got a pytree "
                             f"{out_tree} (pytree-structured elements are not supported)",
                             user_frame_info())
    # @xform.function callees are opened so that their equations are checked and run as
    # element-wise code; a recursive callee stays a `call` and is refused below.
    graph = inline_calls(graph, _MAX_INLINED)
    prelude, body = _split(graph, len(in_avals))
    error = _body_error(body) if axis is None else None
    if error is not None:
        raise type(error)(error.cause, error.source or user_frame_info(), error.hint)
    return prelude, body, captured


class _ClosesOverTraced(Exception):
    """f closed over traced values of the enclosing staging: its graph is that staging's."""

    def __init__(self, staged):
        super().__init__("not cached")
        self.staged = staged


def _staged(f, in_avals, axis):
    """`_stage_element_function(f, in_avals, axis)`, cached per f and element avals unless f
    closes over traced values (then it belongs to the enclosing staging, itself cached)."""
    def make():
        staged = _stage_element_function(f, in_avals, axis)
        if any(isinstance(g, Graph) and graph_has_effects(g) for g in staged[:2]):
            # Elements run concurrently: the draws' order would be the threads' schedule.
            raise UnsupportedError(
                f"threaded_map of '{getattr(f, '__name__', f)}', which draws random numbers: "
                "its elements run concurrently, so they would not get the same draws as a "
                "loop", user_frame_info(), "draw outside and pass the draws in as a mapped "
                "argument (one row per element), or use xform.vmap")
        if staged[2]:
            raise _ClosesOverTraced(staged)
        return staged
    key = (tuple(a.dtype for a in in_avals) if axis is None
           else ("slices", tuple((a.shape, a.dtype) for a in in_avals)))
    try:
        return runtime().build_staging(f, ("threaded_map", key), make,
                                       shared_by="threaded_map")
    except _ClosesOverTraced as only_here:
        return only_here.staged


# == the public function ========================================================================

def _as_input(x, i, source):
    if type(x) is not Tracer and not is_lazy(x):
        x = np.asarray(x)
    if x.dtype.kind not in "biufc":
        raise TypeCheckError(f"threaded_map: input {i} has dtype {x.dtype}; inputs must be "
                             "numeric arrays (bool, int, float or complex)", source)
    return x


def _check_out(out, shape, dtype, source) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeCheckError(f"threaded_map: out must be a numpy array, got "
                             f"{type(out).__name__}", source)
    if out.shape != shape:
        raise ShapeError(f"threaded_map: out has shape {out.shape}, the inputs {shape}", source)
    if not out.flags.writeable:
        raise TypeCheckError("threaded_map: out is read-only", source)
    if dtype is not None and not np.can_cast(dtype, out.dtype, "safe"):
        raise TypeCheckError(f"threaded_map: f returns {dtype}, which cannot be stored "
                             f"safely in out of dtype {out.dtype}", source,
                             "pass an out array of a wider dtype, or cast inside f")


def threaded_map(f, *xs, out=None, num_threads=None, chunk_size=None, axis=None):
    """Apply `f` across arrays `xs`: element-wise (equal shapes), or with `axis=0` to one
    leading-axis slice of each (equal leading sizes, as `vmap` with `in_axes=0`), in chunks
    on a thread pool (numpy releases the GIL inside its loops, so chunks run in parallel).

    Element-wise, `f` takes one scalar per input and returns one scalar, and must be
    element-wise; with `axis=0` it takes one slice per input and returns one array (or
    scalar), stacked along a new leading axis. Pytree-structured elements are not supported.
    `f` is staged once per element avals (restaged when anything it reads is redefined). It
    may close over scalars and arrays, traced ones included: their gradient sums per-element
    contributions after the parallel part. With `out`, the result is written into it (cast
    safely) and `out` is returned; on failure nothing is written. `num_threads` defaults to
    the usable CPUs (1 runs serially), `chunk_size` (elements, or slices with `axis=0`) to
    about xform.runtime.executors.DEFAULT_CHUNK_SIZE elements. Under staging it is one
    `threaded_map` equation; its jvp, vjp and batch rules are threaded_maps too, so grad, jvp
    and vmap of it run in parallel.

    When an input is a dask array, the map is a dask graph of f's compiled chunk function,
    one task per block, and its result a dask array (numpy inputs are split like it; the
    dask input is a constant, not differentiated). Reverse mode sums the cotangents of what
    f closes over by a dask tree reduction into numpy arrays. Tasks run on dask's scheduler
    (a `dask.distributed.Client` when one is active); workers need xform but never stage.

    >>> xform.threaded_map(lambda x, y: np.sin(x) * y, np.array([0.0, 1.0]), np.float32([2, 3]))
    array([0.        , 2.52441295])
    >>> xform.threaded_map(lambda row: row @ row, np.arange(6.0).reshape(3, 2), axis=0)
    array([ 1., 13., 41.])
    """
    source = user_frame_info()
    _check_options(num_threads, chunk_size, source, axis)
    if not callable(f):
        raise TypeCheckError(f"threaded_map: f must be callable, got {type(f).__name__}",
                             source)
    if not xs:
        raise TypeCheckError("threaded_map needs at least one input array", source)
    xs = [_as_input(x, i, source) for i, x in enumerate(xs)]
    avals = [_aval(x) for x in xs]
    shape = avals[0].shape
    for i, a in enumerate(avals[1:], 1):
        if axis is None and a.shape != shape:
            try:
                broadcast_shapes(shape, a.shape)
                hint = "broadcast them first: np.broadcast_arrays(*xs)"
            except ValueError:
                hint = (f"{shape} and {a.shape} do not broadcast either: pass inputs of one "
                        "shape (f runs on their elements pairwise)")
            raise ShapeError(f"threaded_map: inputs must have equal shapes, got {shape} "
                             f"(input 0) and {a.shape} (input {i})", source, hint)
    if axis is not None:
        for i, a in enumerate(avals):
            if not a.shape or a.shape[0] != shape[0]:
                raise ShapeError(f"threaded_map with axis=0: inputs must have equal leading "
                                 f"sizes, got {shape} (input 0) and {a.shape} (input {i})",
                                 source, "give every input the same number of rows")
    if out is not None and current_builder() is not None:
        # A staged function is pure: its write would happen once, while it is staged.
        raise TypeCheckError("threaded_map: out= cannot be used inside a staged function "
                             "(jit, grad, vmap, ...)", source,
                             "return the result instead of writing it into out")
    if out is not None and axis is None:
        _check_out(out, shape, None, source)
    in_avals = [ShapedArray((), a.dtype) if axis is None else ShapedArray(a.shape[1:], a.dtype)
                for a in avals]
    prelude, body, captured = _staged(f, tuple(in_avals), axis)
    params = dict(graph=body, n_mapped=len(xs), num_threads=num_threads,
                  chunk_size=chunk_size, axis=axis)
    operands = [*xs, *eval_graph(prelude, *captured)]
    if out is None:
        token = _lazy_results.set(True)
        try:
            return threaded_map_p.bind(*operands, **params)[0]
        finally:
            _lazy_results.reset(token)
    out_aval = _out_avals([_aval(x) for x in operands], body, len(xs), axis, ())[0]
    _check_out(out, out_aval.shape, out_aval.dtype, source)
    _check_operands([_aval(x) for x in operands], **params, source=source)
    if axis is not None or any(is_lazy(x) for x in operands):
        # Computed whole first (on dask: every block), so a failure writes nothing.
        np.copyto(out, np.asarray(threaded_map_p.bind(*operands, **params)[0]),
                  casting="safe")
        return out
    # Into a buffer of our own, copied over only once every chunk succeeded: a chunk that
    # raises leaves `out` as it was (one extra pass over the result).
    dest = np.empty(shape, body.outputs[0].aval.dtype)
    runtime().map_chunks(body, len(xs), operands, [dest.reshape(-1)], num_threads, chunk_size)
    np.copyto(out, dest, casting="safe")
    return out


__all__ = ["is_lazy", "threaded_map", "threaded_map_p"]

"""The passes between a transformed graph and its compiled code: optional element-wise
fusion, the default pipeline, copies of outputs callers must own, and the backend's split
(`using_backend`: XLA segments and host equations, xform.codegen.xla)."""
from __future__ import annotations

import contextvars

import numpy as np

from xform.codegen import xla
from xform.errors import TypeCheckError
from xform.ir.builder import current_builder
from xform.ir.core import Equation, Graph, Var
from xform.ir.registry import primitive_for
from xform.ir.values import keep_fused_values
from xform.passes import eliminate_dead_code, optimize, pipeline_for
from xform.passes.simplify import simplify
from xform.passes.fuse import fuse_elementwise
from xform.runtime.cache import collector_paused
from xform.runtime.config import config
from xform.source_info import user_frame_info

BACKENDS = ("numpy", "xla")
# The backend of the build in progress: a transform's `backend=` keyword, else config.backend.
_backend = contextvars.ContextVar("xform_backend", default=None)


def checked_backend(backend):
    """`backend` (None: xform.config.backend at build time) if it names a backend."""
    if backend is not None and backend not in BACKENDS:
        raise TypeCheckError(f"backend={backend!r} is not a backend", user_frame_info(),
                             "backend is 'numpy' (the default) or 'xla' (pip install "
                             "'xform[xla]')")
    return backend


# Whether the call being built was passed jax arrays: then XLA runs all it can, whatever its
# cost model says, so that the arrays stay on their device.
_device_inputs = contextvars.ContextVar("xform_device_inputs", default=False)


class using_backend:
    """The builds inside finish their graphs for `backend` (None: xform.config.backend), for
    arguments among which are jax arrays (`device_inputs`) or not."""

    __slots__ = ("backend", "device_inputs", "_tokens")

    def __init__(self, backend, device_inputs=False):
        self.backend = backend
        self.device_inputs = device_inputs

    def __enter__(self):
        self._tokens = (_backend.set(self.backend) if self.backend is not None else None,
                        _device_inputs.set(self.device_inputs))

    def __exit__(self, *exc_info):
        backend, device_inputs = self._tokens
        _device_inputs.reset(device_inputs)
        if backend is not None:
            _backend.reset(backend)


def backend_unchanged(backend, device_inputs) -> bool:
    """Whether `using_backend(backend, device_inputs)` would change nothing here."""
    return backend is None and device_inputs == _device_inputs.get()


def backend_in_use(backend=None) -> str:
    return backend or _backend.get() or config.backend


def arguments_for_backend(leaves, backend=None):
    """The flat arguments of a call, jax arrays among them read into numpy unless XLA runs
    the call (numpy's functions would otherwise call jax's methods on them, in jax's default
    float32). Only the uncached path sees jax arrays: the cached one takes numpy values."""
    if backend_in_use(backend) == "xla" or not any(map(xla.is_device_array, leaves)):
        return leaves
    return [np.asarray(x) if xla.is_device_array(x) else x for x in leaves]


def for_backend(graph):
    """`graph` as the backend in use runs it: itself on numpy; under "xla", split into XLA
    segments and host equations (where XLA pays, xform.config.xla_placement; everything XLA
    can run when jax arrays came in). Only at the top level: a graph finished inside a
    staging is re-emitted there, and the enclosing graph is split when it is finished."""
    if backend_in_use() == "xla" and current_builder() is None:
        return xla.lower(graph, "always" if _device_inputs.get() else config.xla_placement)
    return graph


def fuse_if_enabled(graph, values_returned=True):
    """Before reverse mode: algebraic simplification (xform.config.algebra), so that the
    gradient differentiates sum(a) * sum(b) rather than sum(kron(a, b)); then element-wise
    regions as `elementwise` equations (xform.config.fusion), so that their vjp keeps only
    partial derivatives. After reverse mode, fusion merges each region with its NDual form
    (bench/NDUAL.md). Without `values_returned` (only derivatives are), "exact" admits the
    rules that only change rounding: numpy defines no bits for a derivative."""
    level = config.algebra
    if level == "exact" and not values_returned:
        level = "gradient"
    graph = simplify(graph, level=level)
    if not config.fusion:
        return graph
    fused = fuse_elementwise(graph)
    if fused is not graph:
        keep_fused_values(graph, fused)     # a first call's regions: computed while staging
    return fused


def finish_graph(graph, fuse=False, own_outputs=True):
    """The graph that gets compiled: the default passes applied, then (`own_outputs`) results
    that would be a constant or a read-only broadcast view copied, so callers get their own
    writable arrays as numpy would give them (e.g. the gradient of np.sum). Residuals, which
    only xform reads, are left as they are. Last, the backend's split (`for_backend`)."""
    with collector_paused():
        graph = optimize(graph, pipeline_for(config.algebra), checks=config.checks)
        if fuse and config.fusion:
            graph = fuse_elementwise(graph)
    return for_backend(with_own_outputs(graph) if own_outputs else graph)


def with_own_outputs(graph):
    """`graph` with the outputs that would be a constant or a read-only broadcast view
    copied (finish_graph's last step)."""
    arrays = [a for a in graph.outputs if type(a) is Var and a.aval.shape]
    if not arrays:      # (scalars are immutable: no scan of the equations)
        return graph
    const_vars = {var for var, _ in graph.consts}
    broadcast_to = primitive_for("broadcast_to")
    broadcasts = {eqn.outputs[0] for eqn in graph.equations if eqn.primitive is broadcast_to}
    shared = [a for a in arrays if a in const_vars or a in broadcasts]
    if not shared:
        return graph
    copies = {a: Var(a.aval) for a in shared}
    equations = list(graph.equations) + [Equation(primitive_for("copy"), [a], [copies[a]])
                                          for a in copies]
    return Graph(graph.inputs, graph.consts, equations, [copies.get(a, a) for a in graph.outputs])


def owned_values(values, graph) -> list:
    """with_own_outputs for values computed at once (xform.transforms.vjp.gradient_values):
    each array that is read-only (a broadcast view, e.g. the gradient of np.sum) or one of
    `graph`'s constants copied. (Scalars are immutable; an input passed through is not
    copied, as the compiled code does not copy it.)"""
    owned = []
    consts = None
    for value in values:
        if type(value) is np.ndarray:
            if not value.flags.writeable:
                value = np.array(value)
            elif graph.consts:
                if consts is None:
                    consts = {id(const) for _, const in graph.consts}
                if id(value) in consts:
                    value = np.array(value)
        owned.append(value)
    return owned


def first_tier_graph(graph, finish):
    """The graph a first call interprets (xform.runtime.tiers) in place of `finish(graph)`:
    without the passes, whose cost on a first call exceeds what they save in one run, except
    dead-code elimination (reverse mode leaves dead equations, e.g. the forward products a
    matmul's transpose does not read); with finish_graph's copies of shared
    outputs (a graph `as_built` has them already)."""
    if finish is as_built:
        return graph
    # The dead-code pass itself, not a lighter sweep: its hooks drop the unused outputs of the
    # equations that stay (a threaded_map's vjp would otherwise compute the cotangent of every
    # mapped row, gigabytes over a dask array), and it keeps unused random draws, which draw.
    graph = eliminate_dead_code(graph)
    if config.checks:
        graph.check()
    return with_own_outputs(graph)


def as_built(graph):
    """The finish of a graph its build already finished (so that a staging re-emits it
    finished too)."""
    return graph

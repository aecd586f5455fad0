"""threaded_map over dask arrays: one dask task per block runs f's compiled chunk function (its
generated Python source plus constants, so workers never stage), on whatever scheduler dask
uses. Imported on first use only: dask is an optional extra."""
from __future__ import annotations

import itertools
import threading
import uuid

import dask
import dask.array as da
import numpy as np

from xform.codegen.emit import graph_source
from xform.errors import XformError
from xform.ir.core import Graph
from xform.runtime.executors import chunk_graph, default_chunk, extra_value

_loaded: dict = {}  # per process: kernel token -> {width: compiled function}
_loaded_lock = threading.Lock()
_MAX_LOADED = 256  # kernels kept per worker process


class ChunkKernel:
    """What a dask task calls on one block: runs the block chunk by chunk with functions
    compiled from source on first use in each process. Pickled by value: the sources and
    their namespaces (constants, numpy and xform's run-time helpers, by reference)."""

    def __init__(self, sources: dict, n_mapped: int, chunk: int, axis, summed, where):
        self.token = uuid.uuid4().hex
        self.sources = sources  # chunk width -> (source, namespace)
        self.n_mapped = n_mapped
        self.chunk = chunk
        self.axis = axis
        self.summed = summed
        self.where = where

    def __dask_tokenize__(self):
        return self.token

    def _functions(self) -> dict:
        with _loaded_lock:
            functions = _loaded.get(self.token)
            if functions is None:
                if len(_loaded) >= _MAX_LOADED:
                    _loaded.clear()
                functions = _loaded[self.token] = {}
                for width, (source, namespace) in self.sources.items():
                    namespace = dict(namespace)
                    exec(compile(source, f"<xform-chunk-{self.token[:8]}-{width}>", "exec"),
                         namespace)
                    functions[width] = namespace["xform_graph"]
        return functions

    def __call__(self, block_index, *args):
        try:
            return self._run(args)
        except XformError:
            raise
        except Exception as err:
            raise XformError(f"threaded_map: f raised {type(err).__name__}: {err} on the dask "
                             f"block {tuple(block_index)}", self.where) from err

    def _run(self, args):
        functions = self._functions()
        blocks, extras = list(args[:self.n_mapped]), args[self.n_mapped:]
        block_shape = blocks[0].shape
        if self.axis is None:
            blocks = [np.ascontiguousarray(b).reshape(-1) for b in blocks]
        size = blocks[0].shape[0]
        pieces = []
        for lo in range(0, size, self.chunk):
            hi = min(size, lo + self.chunk)
            results = functions[hi - lo](*[b[lo:hi] for b in blocks], *extras)
            pieces.append([np.sum(r, axis=0) if s else r for r, s in zip(results, self.summed)])
        outs = []
        for i, is_summed in enumerate(self.summed):
            parts = [p[i] for p in pieces]
            if is_summed:
                outs.append(np.sum(parts, axis=0)[None])  # a leading axis of one per block
            else:
                out = np.concatenate([np.reshape(p, (-1,) + np.shape(p)[1:]) for p in parts])
                outs.append(out.reshape(block_shape) if self.axis is None else out)
        return tuple(outs)


def _run_block(kernel: ChunkKernel, block_index, *args):
    return kernel(block_index, *args)


def _aligned(x, ref, axis):
    """`x` split into `ref`'s blocks: element-wise like `ref`; over slices, `ref`'s row
    blocks with the other axes whole."""
    chunks = ref.chunks if axis is None else (ref.chunks[0],) + tuple((n,) for n in x.shape[1:])
    if isinstance(x, da.Array):
        return x.rechunk(chunks)
    x = np.asarray(x)
    if x.ndim and not any(x.strides):
        # A broadcast value (a cotangent seed): each block broadcasts it, nothing is copied.
        return da.broadcast_to(x[(0,) * x.ndim], x.shape, chunks=chunks)
    return da.from_array(x, chunks=chunks)


def _kernel(graph: Graph, n_mapped, operands, chunk_size, axis, summed) -> ChunkKernel:
    chunk = default_chunk(graph, n_mapped, axis, chunk_size)
    ref = next(x for x in operands[:n_mapped] if isinstance(x, da.Array))
    lengths = ({int(np.prod(shape)) for shape in itertools.product(*map(set, ref.chunks))}
               if axis is None else set(ref.chunks[0]))
    widths = {w for n in lengths if n for w in (min(chunk, n), n % chunk) if w}
    sources = {w: graph_source(chunk_graph(graph, n_mapped, w, axis), scalar_math=None)
               for w in widths}
    where = next((e.source for e in graph.equations if e.source is not None), None)
    return ChunkKernel(sources, n_mapped, chunk, axis, summed, where)


def map_blocks(graph: Graph, n_mapped, operands, chunk_size, axis, summed, lazy) -> list:
    """`graph` mapped over `operands` (some mapped ones dask arrays): a dask array per
    stacked output (computed unless `lazy`); each `summed` output reduced over blocks by a
    dask tree reduction and computed, a numpy array. One compute for all that is computed."""
    summed = tuple(summed) or (False,) * len(graph.outputs)
    ref = next(x for x in operands[:n_mapped] if isinstance(x, da.Array))
    mapped = [_aligned(x, ref, axis) for x in operands[:n_mapped]]
    extras = [extra_value(x, v.aval)
              for x, v in zip(operands[n_mapped:], graph.inputs[n_mapped:])]
    # The kernel (sources, constants) is one value of the graph, sent once to each worker
    # that needs it, not once per task.
    kernel = dask.delayed(_kernel(graph, n_mapped, operands, chunk_size, axis, summed),
                          pure=True)
    run_block = dask.delayed(_run_block, pure=True, nout=len(summed))
    grid = tuple(len(c) for c in ref.chunks) if axis is None else (len(ref.chunks[0]),)
    blocks = [x.to_delayed() for x in mapped]
    shared = [dask.delayed(x) if np.ndim(x) else x for x in extras]
    results = np.empty(grid, dtype=object)
    for index in np.ndindex(*grid):
        block_args = [b[index] if axis is None else b[index + (0,) * (b.ndim - 1)]
                      for b in blocks]
        results[index] = run_block(kernel, index, *block_args, *shared)
    outs, reductions = [], []
    for i, (var, is_summed) in enumerate(zip(graph.outputs, summed)):
        aval = var.aval
        pieces = np.empty(grid, dtype=object)
        for index in np.ndindex(*grid):
            if is_summed:
                shape = (1,) + aval.shape
            elif axis is None:
                shape = tuple(c[k] for c, k in zip(ref.chunks, index))
            else:
                shape = (ref.chunks[0][index[0]],) + aval.shape
            pieces[index] = da.from_delayed(results[index][i], shape, aval.dtype)
        if is_summed:
            reductions.append(da.concatenate(list(pieces.ravel()), axis=0).sum(axis=0))
            outs.append(None)
        elif axis is None:
            outs.append(da.block(pieces.tolist()) if pieces.ndim else pieces[()])
        else:
            outs.append(da.concatenate(list(pieces), axis=0))
    if not lazy:
        values = iter(dask.compute(*[o for o in outs if o is not None], *reductions))
        outs = [o if o is None else np.asarray(next(values)) for o in outs]
        reductions = list(values)
    computed = iter(dask.compute(*reductions)) if reductions and lazy else iter(reductions)
    return [np.asarray(next(computed)) if out is None else out for out in outs]

__all__ = ["ChunkKernel", "map_blocks"]

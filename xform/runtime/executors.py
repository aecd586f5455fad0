"""threaded_map's executor: a scalar graph widened to 1-d chunks (or a slice graph batched over
chunks of rows), compiled once per chunk width, and run chunk by chunk on one shared thread pool
(installed as xform.ir.execute.Runtime.map_chunks; dask inputs go to xform.runtime.dask_backend)."""
from __future__ import annotations

import contextvars
import itertools
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from xform.ir.ad import NOT_MAPPED
from xform.ir.avals import ShapedArray
from xform.ir.builder import GraphBuilder, using_builder
from xform.ir.core import Graph
from xform.ir.execute import runtime
from xform.ir.interpret import eval_graph
from xform.transforms.derived import batch_of

DEFAULT_CHUNK_SIZE = 16384  # elements: temporaries stay in cache; see bench/THREADED_MAP.md
_MAX_WORKERS = 64  # pool threads; more tasks than that just wait for a free thread
_MAX_CHUNK_SIZES = 32  # compiled chunk widths kept per scalar graph

_pool = None
_pool_pid = None
_pool_lock = threading.Lock()


def _shared_pool() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        # A forked child has the pool object but not its threads: it makes its own.
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(_MAX_WORKERS, thread_name_prefix="xform-threaded-map")
            _pool_pid = os.getpid()
        return _pool


def default_num_threads() -> int:
    """The threads threaded_map uses when num_threads is None: the CPUs this process may use.

    >>> from xform.runtime.executors import default_num_threads
    >>> default_num_threads() >= 1    # how many depends on the machine
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _flat(x) -> np.ndarray:
    """`x` as a 1-d array whose slices are views: no copy for 1-d, contiguous and fully
    broadcast inputs (a cotangent seed is often a stride-0 view of one value)."""
    x = np.asarray(x)
    if x.ndim == 1:
        return x
    if x.flags.c_contiguous:
        return x.reshape(-1)
    if not any(x.strides):
        return np.broadcast_to(x[(0,) * x.ndim], (x.size,))
    return np.ravel(x)


def extra_value(x, var_aval: ShapedArray):
    # A weakly typed scalar must stay a Python scalar, or numpy would promote the chunk to it.
    value = np.asarray(x)
    return value.item() if var_aval.weak_type else value[()]


_chunk_graphs: "weakref.WeakKeyDictionary[Graph, dict]" = weakref.WeakKeyDictionary()
_chunk_lock = threading.Lock()


def chunk_graph(graph: Graph, n_mapped: int, size: int, axis=None) -> Graph:
    """`graph` over chunks of `size`: element-wise (`axis=None`), its mapped inputs widened to
    1-d chunks (its equations broadcast, so it computes `size` elements at once); for
    `axis=0`, the slice graph batched over `size` leading-axis slices."""
    if axis is not None:
        dims = (0,) * n_mapped + (NOT_MAPPED,) * (len(graph.inputs) - n_mapped)
        return batch_of(graph, dims, size)
    with _chunk_lock:
        table = _chunk_graphs.setdefault(graph, {})
        widened = table.get(size)
        if widened is None:
            if len(table) >= _MAX_CHUNK_SIZES:  # inputs of ever new sizes: each adds a tail
                table.clear()
            builder = GraphBuilder()
            with using_builder(builder):
                args = [builder.new_input(ShapedArray((size,), v.aval.dtype)) if i < n_mapped
                        else builder.new_input(v.aval) for i, v in enumerate(graph.inputs)]
                widened = table[size] = builder.build(eval_graph(graph, *args))
    return widened


def default_chunk(graph: Graph, n_mapped: int, axis, chunk_size) -> int:
    """Elements (or, for axis=0, slices) per chunk: `chunk_size`, else about
    DEFAULT_CHUNK_SIZE elements of the mapped inputs."""
    if chunk_size:
        return chunk_size
    if axis is None:
        return DEFAULT_CHUNK_SIZE
    per_slice = sum(max(1, v.aval.size) for v in graph.inputs[:n_mapped])
    return max(1, DEFAULT_CHUNK_SIZE // per_slice)


def _run_chunks(n_chunks: int, run_chunk, num_threads) -> None:
    """Call `run_chunk(k)` for every chunk index k, on up to `num_threads` threads.

    Threads take the next chunk from a shared counter; each writes only its own slices, so no
    two threads touch one element.
    """
    counter = itertools.count()
    failed = []

    def work():
        try:
            while not failed:
                k = next(counter)  # atomic under the GIL
                if k >= n_chunks:
                    return
                run_chunk(k)
        except BaseException:
            failed.append(True)
            raise

    tasks = min(num_threads or default_num_threads(), n_chunks)
    futures = []
    try:
        for _ in range(tasks - 1):
            # In a copy of the caller's context: np.errstate and xform's context variables.
            futures.append(_shared_pool().submit(contextvars.copy_context().run, work))
        work()
    finally:
        for future in futures:
            future.cancel()  # a task that has not started finds no chunk left
        wait(futures)  # never return (or raise) while a worker may still write
    for future in futures:
        if not future.cancelled():
            future.result()


def map_chunks(graph, n_mapped, operands, dests, num_threads, chunk_size, axis=None,
               summed=()) -> None:
    """Write `graph` mapped over `operands` into `dests`, chunk by chunk (the contract of
    xform.ir.execute.Runtime.map_chunks).

    Chunk boundaries depend only on the size and `chunk_size`, never on the thread count, so
    results are the same bit for bit for any num_threads: a `summed` output adds its
    per-chunk sums in chunk order after the parallel part.
    """
    if axis is None:
        mapped = [_flat(x) for x in operands[:n_mapped]]
    else:
        mapped = [np.asarray(x) for x in operands[:n_mapped]]
    extras = [extra_value(x, v.aval)
              for x, v in zip(operands[n_mapped:], graph.inputs[n_mapped:])]
    summed = summed or (False,) * len(dests)
    size = mapped[0].shape[0]
    if size == 0:
        for dest, is_summed in zip(dests, summed):
            if is_summed:
                dest[...] = 0
        return
    chunk = min(default_chunk(graph, n_mapped, axis, chunk_size), size)
    n_chunks = -(-size // chunk)
    tail = size - (n_chunks - 1) * chunk
    functions = {width: runtime().compiled(chunk_graph(graph, n_mapped, width, axis))
                 for width in {chunk, tail}}
    partials = [np.empty((n_chunks, *dest.shape), dest.dtype) if is_summed else None
                for dest, is_summed in zip(dests, summed)]

    def run_chunk(k):
        lo, hi = k * chunk, min(size, (k + 1) * chunk)
        results = functions[hi - lo](*[x[lo:hi] for x in mapped], *extras)
        for dest, partial, result in zip(dests, partials, results):
            if partial is None:
                dest[lo:hi] = result
            else:
                partial[k] = np.sum(result, axis=0)

    _run_chunks(n_chunks, run_chunk, num_threads)
    for dest, partial in zip(dests, partials):
        if partial is not None:
            dest[...] = np.sum(partial, axis=0)


def map_lazy(graph, n_mapped, operands, num_threads, chunk_size, axis, summed, lazy) -> list:
    """The contract of xform.ir.execute.Runtime.map_lazy; dask is imported on first use only."""
    from xform.runtime.dask_backend import map_blocks
    return map_blocks(graph, n_mapped, operands, chunk_size, axis, summed, lazy)



__all__ = ["DEFAULT_CHUNK_SIZE", "chunk_graph", "default_chunk", "default_num_threads",
           "extra_value", "map_chunks", "map_lazy"]

"""`np.nditer` over traced arrays, read-only: a stand-in (while staging, for calls given a
Tracer) visiting the broadcast operands' elements as 0-d traced values in the order eager
numpy's iterator visits them (memory order for "K", read from the arrays' layouts), with the
iterator's `multi_index`, `index`, `finished`/`iternext()`, `it[i]`, `value` and
`external_loop` chunks. Writing through the iterator is refused: a traced array is written
by indexing."""
from __future__ import annotations

import numpy as np

from xform.errors import unsupported_error
from xform.ir.tracer import Tracer
from xform.numpy.index import take
from xform.numpy.shape import as_array, ravel
from xform.numpy.stand_ins import define_group, stand_in
from xform.numpy.views import memory_layout

_WRITES = {"readwrite", "writeonly", "allocate", "updateifcopy", "writemasked"}
_TRACKED = {"multi_index", "c_index", "f_index", "external_loop"}
_IGNORED = {"refs_ok", "zerosize_ok", "buffered", "grow_inner", "delay_bufalloc", "reduce_ok",
            "common_dtype", "copy_if_overlap", "ranged"}


def _visits(layouts, order, flags):
    """What numpy's own iterator, run over the operands' data-less layouts, visits."""
    return np.nditer(layouts, flags=["refs_ok", "zerosize_ok", *flags], order=order)


class TracedIterator:
    """What `np.nditer(op, flags, op_flags, op_dtypes, order)` gives for traced operands."""

    def __init__(self, op, flags=None, op_flags=None, op_dtypes=None, order="K", casting="safe",
                 op_axes=None, itershape=None, buffersize=0):
        flags = set(flags or ())
        written = {flag for group in (op_flags or ()) for flag in
                   ((group,) if isinstance(group, str) else group)} & _WRITES
        if written or op_axes is not None or itershape is not None:
            raise unsupported_error(
                "numpy.nditer(...) writing (op_flags readwrite/writeonly/allocate) or with "
                "op_axes/itershape over a traced array",
                "iterate read-only, and write a traced array by indexing: y[i] = ...")
        unknown = flags - _TRACKED - _IGNORED
        if unknown:
            raise unsupported_error(f"numpy.nditer(..., flags={sorted(unknown)}) over a traced "
                                    "array")
        self._single = not isinstance(op, (list, tuple))
        given = (op,) if self._single else tuple(op)
        layouts = [memory_layout(x) if type(x) is Tracer else np.asarray(x) for x in given]
        operands = [as_array(x) for x in given]
        if op_dtypes is not None:
            dtypes = op_dtypes if isinstance(op_dtypes, (list, tuple)) else [op_dtypes]
            operands = [x if dtype is None else x.astype(dtype)
                        for x, dtype in zip(operands, dtypes)]
        self.operands = tuple(np.broadcast_arrays(*operands))
        self.shape = self.operands[0].shape
        self.ndim = len(self.shape)
        visits = _visits(layouts, order, ["multi_index"])
        self._positions = []
        while not visits.finished:
            self._positions.append(visits.multi_index)
            visits.iternext()
        self.itersize = len(self._positions)
        flat = np.ravel_multi_index(tuple(zip(*self._positions)), self.shape) \
            if self._positions and self.ndim else np.arange(self.itersize)
        in_order = np.array_equal(flat, np.arange(self.itersize))
        self._flat = [ravel(x) if in_order else take(ravel(x), flat) for x in self.operands]
        self._chunks = None
        if "external_loop" in flags:
            ends = np.cumsum([np.shape(chunk if self._single else chunk[0])[0]
                              for chunk in _visits(layouts, order, ["external_loop"])])
            self._chunks = list(zip([0, *ends[:-1]], ends))
        self._flags = flags
        self._step = 0

    def _element(self, operand):
        if self._chunks is not None:
            start, stop = self._chunks[self._step]
            return self._flat[operand][start:stop]
        return self._flat[operand][self._step]

    def _current(self):
        values = tuple(self._element(i) for i in range(len(self._flat)))
        return values[0] if self._single else values

    @property
    def finished(self):
        return self._step >= (self.itersize if self._chunks is None else len(self._chunks))

    def __iter__(self):
        return self

    def __next__(self):
        if self.finished:
            raise StopIteration
        value = self._current()
        self._step += 1
        return value

    def iternext(self):
        self._step += 1
        return not self.finished

    def __getitem__(self, operand):
        return self._element(operand)

    @property
    def value(self):
        return self._current()

    @property
    def multi_index(self):
        if "multi_index" not in self._flags:
            raise ValueError("Iterator is not tracking a multi-index")
        return self._positions[self._step]

    @property
    def index(self):
        kind = self._flags & {"c_index", "f_index"}
        if not kind:
            raise ValueError("Iterator does not have an index")
        return int(np.ravel_multi_index(self._positions[self._step], self.shape,
                                        order="F" if "f_index" in kind else "C"))

    def reset(self):
        self._step = 0

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


define_group("numpy.nditer")    # reached by its name
stand_in((np, "nditer"), TracedIterator, group="numpy.nditer")

__all__ = ["TracedIterator"]

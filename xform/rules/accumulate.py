"""pad_sum: the sum of k operands, each placed at a static window of one zero output array.

It is what a sum of zero-valued pads computes (the cotangent of `x[i]` used in a Python loop
is one pad per use), in one array instead of k full-size ones: `xform.passes.accumulate`
rewrites such sums into it. Each window is one `(start, stop, step)` per output axis, like a
`slice`; its operand has the window's shape, except that a one-element window takes a 0-d
operand (a scalar cotangent needs no reshape then). Operands are cast to `dtype`, then added
in order, so overlapping windows add up.
"""
import math

import numpy as np

from xform.ir.avals import ShapedArray, dummy, is_differentiable
from xform.ir.core import Primitive
from xform.ir.index_params import slice_box
from xform.ir.tracer import Tracer
from xform.ir.ad import Undefined, Zero, aval, move_to_front, zero_tangent
from xform.ir.registry import Hooks, register
from xform.ir.window_params import fits, full_window, term_shape  # noqa: F401  (re-exported)
from xform.rules.shape import static_slice

pad_sum_p = Primitive("pad_sum")


def _pad_sum_abstract_eval(*operands, shape, dtype, windows):
    if len(operands) != len(windows):
        raise ValueError(f"{len(operands)} operands for {len(windows)} windows")
    for i, (x, window) in enumerate(zip(operands, windows)):
        if len(window) != len(shape):
            raise ValueError(f"window {window} does not fit an output of shape {shape}")
        for n, (start, stop, step) in zip(shape, window):
            if not (0 <= start <= stop <= n and step >= 1):
                raise ValueError(f"bad window {start}:{stop}:{step} of an axis of length {n}")
        if not fits(x.shape, window):
            raise ValueError(f"operand {i} has shape {x.shape} but its window {window} needs "
                             f"{term_shape(window)}")
        if not np.can_cast(x.dtype, dtype, "same_kind"):
            raise ValueError(f"operand {i} of dtype {x.dtype} cannot be added into {dtype}")
    return ShapedArray(tuple(shape), np.dtype(dtype))


class _Plan:
    """How the terms go in, worked out once per `windows`: each run of one-element windows
    as flat positions (added by one `np.add.at`), each other window as a slice."""

    def __init__(self, shape, windows):
        self.size = math.prod(shape)
        self.steps = []  # (term indices, flat positions) or (term index, slices)
        self.in_place_steps = None   # made on first use by `_pad_sum_in_place`
        run = []
        for i, window in enumerate(tuple(windows) + (None,)):
            if window is not None and not term_shape(window):
                run.append(i)
                continue
            if run:
                starts = [tuple(start for start, _, _ in windows[j]) for j in run]
                flat = (np.ravel_multi_index(tuple(np.array(axis, np.intp)
                                                   for axis in zip(*starts)), shape)
                        if shape else np.zeros(len(run), np.intp))
                self.steps.append((run if len(run) < len(windows) else None, flat))
                run = []
            if window is not None:
                self.steps.append((i, tuple(slice(*bounds) for bounds in window)))


_PLANS: dict = {}  # id(windows) -> (windows, shape, plan); holding `windows` keeps ids unique
_MAX_PLANS = 1024


def _plan(shape, windows):
    # Keyed by identity: hashing a thousand windows would cost more than adding the terms.
    cached = _PLANS.get(id(windows))
    if cached is not None and cached[0] is windows and cached[1] == shape:
        return cached[2]
    plan = _Plan(shape, windows)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[id(windows)] = (windows, shape, plan)
    return plan


def _pad_sum_impl(*operands, shape, dtype, windows):
    plan = _plan(shape, windows)
    flat = np.zeros(plan.size, dtype)
    out = flat.reshape(shape)
    for terms, where in plan.steps:
        if type(terms) is int:
            view = out[where]
            np.add(view, operands[terms], out=view, dtype=dtype)
        else:
            # Scalars, all in one call; add.at adds in order, repeated positions included.
            scalars = operands if terms is None else [operands[i] for i in terms]
            np.add.at(flat, where, np.fromiter(scalars, dtype, len(scalars)))
    return out if shape else out[()]


def _pad_sum_in_place(*operands, shape, dtype, windows):
    # codegen's form when operand 0 is a whole buffer of this call that nothing reads later
    # (xform.codegen.analyses.writes_in_place, hook in_place_applies): the other terms added
    # into it in order, where the impl adds all of them into zeros (so a -0.0 of operand 0
    # stays -0.0; a cotangent's sign of zero carries no meaning)
    out = operands[0]
    plan = _plan(shape, windows)
    steps = plan.in_place_steps
    if steps is None:
        steps = plan.in_place_steps = _in_place_steps(plan)
    for where, terms in steps:
        if type(where) is tuple:
            squeezed, where = where
            view = out[squeezed]
            for i in terms:
                term = operands[i]
                if term.dtype == dtype and term.ndim == view.ndim:
                    view += term           # (an in-place add broadcasting costs twice this)
                else:
                    window = out[where]
                    np.add(window, term, out=window, dtype=dtype)
            continue
        scalars = np.fromiter([operands[i] for i in terms], dtype, len(terms))
        if out.flags.c_contiguous:
            np.add.at(out.reshape(-1), where, scalars)
        else:
            np.add.at(out, np.unravel_index(where, shape), scalars)
    return out


def _in_place_steps(plan) -> list:
    """`plan`'s steps without operand 0: ((index, slices), term indices) for a window, with
    consecutive terms of one window together (a row's cotangents), where `index` selects the
    window without its leading axes of length 1 (`u[t]` for a row); or (flat positions, term
    indices) for a run of scalars."""
    steps = []
    for terms, where in plan.steps:
        if type(terms) is not int:
            steps.append((where, terms))
        elif terms:
            if steps and type(steps[-1][0]) is tuple and steps[-1][0][1] == where:
                steps[-1][1].append(terms)
                continue
            leading = 0
            while leading < len(where) and len(range(*where[leading].indices(1 << 62))) == 1:
                leading += 1
            squeezed = tuple(axis.start for axis in where[:leading]) + where[leading:]
            steps.append(((squeezed, where), [terms]))
    return steps


def _adds_into_first(eqn) -> bool:
    """Whether operand 0 is the whole output, of its dtype: what `_pad_sum_in_place` needs."""
    shape, windows = eqn.params["shape"], eqn.params["windows"]
    first = eqn.inputs[0].aval
    return (bool(windows) and windows[0] == full_window(shape) and first.shape == shape
            and term_shape(windows[0]) == shape and first.dtype == eqn.params["dtype"])


def _written(eqn):
    """The box (one (start, stop) per axis) that `_pad_sum_in_place` writes."""
    boxes = [slice_box(*zip(*window)) for window in eqn.params["windows"][1:]]
    boxes = [box for box in boxes if all(start < stop for start, stop in box)]
    if not boxes:
        return tuple((0, 0) for _ in eqn.params["shape"])
    return tuple((min(starts), max(stops))
                 for starts, stops in (zip(*axis) for axis in zip(*boxes)))


def _pad_sum_jvp(primals, tangents, *, shape, dtype, windows):
    out = pad_sum_p.bind(*primals, shape=shape, dtype=dtype, windows=windows)
    out_aval = aval(out)
    # Linear: terms whose tangent is zero drop out.
    terms = [(t, window) for t, window in zip(tangents, windows)
             if type(t) is not Zero and is_differentiable(aval(t))]
    if not is_differentiable(out_aval) or not terms:
        return out, zero_tangent(out_aval)
    t_out = pad_sum_p.bind(*[t for t, _ in terms], shape=shape, dtype=dtype,
                           windows=tuple(window for _, window in terms))
    return out, t_out


def _pad_sum_transpose(ct, *operands, shape, dtype, windows):
    if type(ct) is Zero:
        return (None,) * len(operands)
    cts = []
    for x, window in zip(operands, windows):
        if type(x) is not Undefined or not is_differentiable(x.aval):
            cts.append(None)
            continue
        starts, stops, steps = zip(*window) if window else ((), (), ())
        piece = static_slice(ct, starts, stops, steps)
        if aval(piece).shape != x.aval.shape:
            piece = np.reshape(piece, x.aval.shape)
        if aval(piece).dtype != x.aval.dtype:
            piece = piece.astype(x.aval.dtype)
        cts.append(piece)
    return tuple(cts)


def _pad_sum_batch(size, args, dims, *, shape, dtype, windows):
    windows = tuple(((0, size, 1),) + window for window in windows)
    operands = []
    for x, d, window in zip(args, dims, windows):
        x = move_to_front(x, d, size)
        if aval(x).shape != term_shape(window):
            x = np.reshape(x, term_shape(window))
        operands.append(x)
    return pad_sum_p.bind(*operands, shape=(size,) + tuple(shape), dtype=dtype,
                          windows=windows), 0


register(pad_sum_p, impl=_pad_sum_impl, abstract_eval=_pad_sum_abstract_eval,
         jvp=_pad_sum_jvp, transpose=_pad_sum_transpose, batch=_pad_sum_batch, symbolic_zeros=True,
         role="pad_sum",
         # a 0-d operand goes through np.fromiter(..., dtype): a Python float converts
         # exactly as its np.float64 would
         hooks=Hooks(takes_floats=True, in_place=_pad_sum_in_place,
                     in_place_applies=_adds_into_first, region=_written))


def pad_sum(operands, windows, shape, dtype=None):
    """Zeros of `shape` with each operand added at its window, in order (overlaps add up).

    A window is one `(start, stop, step)` per axis of `shape`; its operand has the window's
    shape (reshaped here when its size fits). `dtype` defaults to the operands' result type.
    Works on concrete and traced values.

    >>> from xform.rules.accumulate import pad_sum
    >>> pad_sum([np.float64(5.0), np.ones(2)], [((2, 3, 1),), ((0, 3, 2),)], (4,))
    array([1., 0., 6., 0.])
    """
    operands = [x if type(x) is Tracer else np.asarray(x) for x in operands]
    windows = tuple(tuple(tuple(int(b) for b in bounds) for bounds in window)
                    for window in windows)
    shape = tuple(int(n) for n in shape)
    if dtype is None:
        dtype = np.result_type(*[dummy(aval(x)) for x in operands]) if operands \
            else np.dtype(np.float64)
    shaped = []
    for x, window in zip(operands, windows):
        needed = term_shape(window)
        if aval(x).shape != needed and aval(x).size == math.prod(needed):
            x = np.reshape(x, needed)
        shaped.append(x)
    return pad_sum_p.bind(*shaped, shape=shape, dtype=np.dtype(dtype), windows=windows)


__all__ = ["fits", "full_window", "pad_sum", "pad_sum_p", "term_shape"]

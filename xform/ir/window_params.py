"""The windows in the params of `pad_sum`: one `(start, stop, step)` per output axis, like a
`slice`. Here so that the pass that emits pad_sum (xform.passes.accumulate) and its rules
(xform.rules.accumulate) read them the one way."""
import math


def window_shape(window) -> tuple:
    """The shape of the elements `window` covers.

    >>> from xform.ir.window_params import window_shape
    >>> window_shape(((0, 5, 2), (1, 2, 1)))
    (3, 1)
    """
    return tuple(max(0, -(-(stop - start) // step)) for start, stop, step in window)


def term_shape(window) -> tuple:
    """The shape an operand of `window` has: 0-d for a one-element window. (An operand may
    also leave out the window's leading axes of length 1, as a row `u[t]` does: `fits`.)"""
    shape = window_shape(window)
    return () if math.prod(shape) == 1 else shape


def fits(operand_shape, window) -> bool:
    """Whether an operand of `operand_shape` goes into `window`: of its term_shape, or of it
    without leading axes of length 1 (numpy broadcasts it into the window as it is)."""
    needed = term_shape(window)
    leading = len(needed) - len(operand_shape)
    return (leading >= 0 and tuple(needed[leading:]) == tuple(operand_shape)
            and all(n == 1 for n in needed[:leading]))


def full_window(shape) -> tuple:
    """The window covering all of `shape`."""
    return tuple((0, n, 1) for n in shape)


__all__ = ["fits", "full_window", "term_shape", "window_shape"]

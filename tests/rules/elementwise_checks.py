"""Shared by the element-wise rule tests: does staging a numpy call reproduce numpy exactly?

The staged functions are defined in the test files, so an xform error raised while staging
them names that test file (the user's line).
"""
import os

import numpy as np

import xform

# Every dtype numpy's ufuncs know, for the abstract-eval grid.
DTYPE_GRID = (np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64,
              np.float16, np.float32, np.float64, np.complex64, np.complex128)


def _describe(value) -> str:
    array = np.asarray(value)
    return f"{type(value).__name__} {array.dtype}{list(array.shape)} {array!r}"


def _refusal_mismatch(fn, args, numpy_error):
    """None when staging `fn` raises an XformError naming `fn`'s file, as numpy raised."""
    filename = os.path.basename(fn.__code__.co_filename)
    try:
        xform.make_graph(fn)(*args)
    except xform.XformError as err:
        if filename not in str(err):
            return f"staging raised {type(err).__name__} without naming {filename}: {err}"
        return None
    except Exception as err:  # anything but an XformError is itself the failure
        return f"numpy raises {numpy_error!r}, staging raised a non-xform {err!r}"
    return f"numpy raises {numpy_error!r} but staging succeeded"


def staging_mismatch(fn, *args):
    """Why staging `fn` at `args` does not reproduce numpy, or None when it does.

    Reproducing means `xform.jit(fn)(*args)` equals `fn(*args)` bit for bit (Python type,
    dtype, shape and bytes) and the staged output's aval has numpy's shape and dtype. Where
    numpy raises, staging must raise an XformError naming the file that defines `fn`.
    """
    with np.errstate(all="ignore"):
        try:
            expected = fn(*args)
        except Exception as err:  # numpy refused: staging must refuse too
            return _refusal_mismatch(fn, args, err)
        try:
            out_aval = xform.make_graph(fn)(*args).outputs[0].aval
            got = xform.jit(fn)(*args)
        except Exception as err:  # numpy accepted: any error is the failure
            return f"numpy gives {_describe(expected)} but staging raised {err!r}"
    want, have = np.asarray(expected), np.asarray(got)
    if out_aval.shape != want.shape or out_aval.dtype != want.dtype:
        return f"abstract eval {out_aval.str_short()}, numpy gives {_describe(expected)}"
    if (type(got) is not type(expected) or have.dtype != want.dtype
            or have.shape != want.shape or have.tobytes() != want.tobytes()):
        return f"jit gives {_describe(got)}, numpy gives {_describe(expected)}"
    return None


def aval_mismatch(fn, *args):
    """Why the staged output aval of `fn` at `args` differs from numpy's result (shape and
    dtype), or None; where numpy raises, staging must raise an XformError naming the file."""
    with np.errstate(all="ignore"):
        try:
            expected = np.asarray(fn(*args))
        except Exception as err:  # numpy refused: staging must refuse too
            return _refusal_mismatch(fn, args, err)
        try:
            out_aval = xform.make_graph(fn)(*args).outputs[0].aval
        except Exception as err:  # numpy accepted: any error is the failure
            return f"numpy gives {expected.dtype}{list(expected.shape)}, staging raised {err!r}"
    if out_aval.shape != expected.shape or out_aval.dtype != expected.dtype:
        return f"abstract eval {out_aval.str_short()}, numpy {expected.dtype}{list(expected.shape)}"
    return None


def equation_names(fn, *args):
    """The primitive names of the equations staging `fn(*args)` emits, in order."""
    return [eqn.primitive.name for eqn in xform.make_graph(fn)(*args).equations]


FLOAT_VALUES = [-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.nan, np.inf, -np.inf]
INT_VALUES = [-3, -1, 0, 1, 2, 7]


def operand_grid(empty_dtype, without=()):
    """(left, right) operands for staged-vs-numpy checks of binary ufuncs: left ones are 1-d,
    right ones columns, so each pair of values meets once; scalars of every kind too."""
    left = {
        "f32": np.array(FLOAT_VALUES, np.float32),
        "f64": np.array(FLOAT_VALUES),
        "i64": np.array(INT_VALUES),
        "i32": np.array(INT_VALUES, np.int32),
        "bool": np.array([True, False]),
        "empty": np.zeros((0,), empty_dtype),
        "f32_0d": np.array(1.5, np.float32),
        "py_float": 1.5,
        "py_int": 2,
        "py_bool": True,
        "np_f64": np.float64(0.75),
        "np_f32": np.float32(-1.5),
        "np_i32": np.int32(3),
    }
    for kind in without:
        del left[kind]
    right = {kind: value.reshape(-1, 1) if isinstance(value, np.ndarray) and value.ndim
             else value for kind, value in left.items()}
    right["empty"] = np.zeros((2, 0), empty_dtype)
    return left, right

"""The error for a traced value asked to be concrete (`bool(x)`, `float(x)`, `range(n)`,
`A[i]` on a numpy array A, ...): which construct asked, read from the instruction the user's
line was executing, and the fix for that construct. The table of cases is
tests/test_errors.py's `CONCRETIZATION_CASES`.
"""
from __future__ import annotations

import dis
import linecache
import re

import numpy as np

from xform.errors import ConcretizationError, UnsupportedError, own_definition_hint
from xform.source_info import (SourceInfo, called_name, compiled_call_raising,
                                scipy_call_raising, scipy_callee, scipy_callee_name,
                                user_frame, user_frame_info)

# Transforms called on arrays answer these questions from the values; a staging without
# values (abstract shapes, a body of a staged cond or loop, an @xform.function) cannot.
_ABSTRACT = ("this staging has no values (make_graph or eval_shape of shapes, a body of "
             "xform.cond, while_loop or scan, an @xform.function, the function of "
             "xform.threaded_map, a tangent or cotangent a custom rule receives): ")
_CONTROL_FLOW = _ABSTRACT + "stage the choice: np.where(c, a, b), xform.cond(pred, " \
    "true_fn, false_fn, x) or xform.switch; or call the transform on arrays, whose values " \
    "decide"
_LOOP = _ABSTRACT + "stage the loop: xform.while_loop(cond_fn, body_fn, init) or " \
    "xform.fori_loop; or call the transform on arrays, whose values decide"


def _construct(kind: str, instruction, line: str, expression: str):
    """(what was asked, the fix) for a concretization of `kind` at `instruction`."""
    if kind == "bool":
        if expression.startswith(("max(", "min(")):
            name = expression[:3]
            return (f"Python's {name}() of a traced value", _ABSTRACT + f"use np.{name}imum(a, b), "
                    "which stages; or call the transform on arrays, whose values decide")
        if line.startswith("while"):
            return "a Python `while` on a traced value", _LOOP
        if line.startswith(("if", "elif")) or " if " in line:
            return "a Python `if` on a traced value", _CONTROL_FLOW
        if line.startswith("assert"):
            return "an assert on a traced value", \
                "check concrete inputs before calling, or drop the assert from staged code"
        return ("Python control flow (`if`, `while`, `and`, `or`, bool()) on a traced value",
                _CONTROL_FLOW)
    if instruction is not None and instruction.opname == "BINARY_SUBSCR":
        return ("indexing a numpy array with a traced index", "numpy indexes a concrete array "
                "itself: use np.take(A, i, axis=0) or np.take_along_axis(A, i, axis), which "
                "stage, or make A a traced value (pass it as an argument)")
    if instruction is not None and instruction.opname == "STORE_SUBSCR":
        return ("writing a traced value or index into a concrete numpy array (`y[i] = x`, y "
                "made outside the staged function, or by numpy's own methods such as "
                "y = A.copy(): numpy performs the write itself)", "make y inside the "
                "function with numpy's functions, whose writes stage: y = np.zeros(...), "
                "np.empty(...), np.array(A), np.zeros_like(x); or build it "
                "without writes: np.stack([...]), xform.index_add(y, i, x)")
    if kind.startswith("size of "):
        return (f"{kind[8:]} of a traced array (its size depends on the values)", _ABSTRACT +
                "keep the shape with np.where(mask, x, 0); or call the transform on arrays, "
                "whose values give the size")
    if kind.startswith("numpy."):
        return (f"{kind} with a traced shape or size", _ABSTRACT + "build from a traced "
                "array of the right shape (np.zeros_like(x), np.ones_like(x), "
                "np.full_like(x, v)); or call the transform on arrays, whose values give the "
                "size")
    if kind == "index":
        if expression.startswith("range("):
            return "range() of a traced value", _LOOP
        return ("a traced value used as an index, size or count", _ABSTRACT +
                "index with np.take / np.where, or call the transform on arrays, whose values "
                "give the size")
    if kind == "array":
        scalar = _numpy_scalar_call(expression)
        if scalar is not None:
            name, argument = scalar
            return (f"{name}() of a traced value (a numpy scalar holds a concrete number)",
                    f"keep it an array of that dtype: np.asarray({argument}, dtype={name}), "
                    "which stages (and returns a 0-d array on a concrete number)")
        return ("converting a traced value to a numpy array with numpy's own conversion",
                "np.array / np.asarray / np.stack stage when called through `np.`; a name "
                "imported with `from numpy import ...` before staging, or a library's "
                "internal conversion, cannot: call it through np., or use operations xform "
                "stages")
    if kind == "hash":
        return ("a traced value used as a dict key or set member (hash())", _ABSTRACT +
                "key by a Python value known outside the transformed function, or call the "
                "transform on arrays, whose values are hashed")
    if kind == "format":
        return ("formatting a traced value (a format spec in an f-string or format())",
                _ABSTRACT + "format the value outside the transformed function (return it, "
                "or with has_aux=True), or call the transform on arrays, whose values are "
                "shown")
    if expression.startswith("math."):
        return (f"{expression.partition('(')[0]} of a traced value (Python's math module "
                "needs a float)", "use numpy's function instead (np.sin, np.exp, ...), "
                "which stages")
    return (f"{kind}() of a traced value", _ABSTRACT + f"keep it an array (np.asarray(x, "
            f"dtype={kind}) in place of {kind}(x), which eager numpy takes too); or call the "
            "transform on arrays, whose values are read")


def concretization(kind: str) -> ConcretizationError:
    """The ConcretizationError for `kind` ("bool", "float", "int", "complex", "index",
    "array", or a numpy constructor's name, "numpy.zeros", given a traced shape), naming the
    construct at the user's line and its fix."""
    frame = user_frame()
    instruction, line, expression, source = None, "", "", None
    if frame is not None:
        code = frame.f_code
        source = SourceInfo(code.co_filename, frame.f_lineno, code.co_name)
        line = source.line
        instruction = next((i for i in dis.get_instructions(code)
                            if i.offset == frame.f_lasti), None)
        expression = _expression(code.co_filename, instruction)
    what, fix = _construct(kind, instruction, line, expression)
    if kind == "array" and frame is not None and _draws_from_a_generator(frame, expression):
        what, fix = (f"{expression.partition('(')[0]}(...) of a traced parameter, from a "
                     "generator made inside the function (numpy's C code converts the "
                     "parameter),", "make the generator outside the function (a global, a "
                     "closure or an argument), whose draws are staged; to differentiate in "
                     "the parameters, draw from the standard distribution and transform it: "
                     "mu + sigma * rng.standard_normal(size)")
    callee = scipy_callee(frame) if frame is not None else None
    if callee is not None:
        # the conversion happened inside SciPy: name the SciPy function the user called
        what, fix = (f"{callee} (which has no xform version) on a traced value: inside it, "
                     f"{what}", "compute it with numpy or scipy functions that xform stages "
                     "(docs: 'Plain numpy: what works'), or call it on concrete values")
    return ConcretizationError(f"{what} needs a concrete value, but this value is traced",
                               source, fix)


def library_error(err: Exception) -> UnsupportedError | None:
    """The error naming the library function the user's code called on a traced value, and
    the user's line, for `err` raised inside it by code rejecting a Tracer: SciPy's Python,
    or compiled code ("a bytes-like object is required, not 'Tracer'", "'Tracer' object has
    no attribute 'flags'"); None for any other error, the user's own included."""
    from xform.ir.tracer import Tracer
    found = scipy_call_raising(err.__traceback__)
    if found is not None:
        user, called = found
        if not any(type(a) is Tracer or (type(a) in (list, tuple) and Tracer in map(type, a))
                   for a in called.f_locals.values()):
            return None     # a SciPy error about concrete values stays as SciPy raised it
        name = scipy_callee_name(called, user)
    else:
        user = compiled_call_raising(err.__traceback__)
        if user is None or "'Tracer'" not in str(err):
            return None
        name = called_name(user) or "a compiled function"
    code = user.f_code
    return UnsupportedError(
        f"{name} (which has no xform version) on a traced value: inside it, "
        f"{type(err).__name__}: {err}", SourceInfo(code.co_filename, user.f_lineno, code.co_name),
        own_definition_hint(name))


def derivative_cut(kind: str) -> ConcretizationError:
    """The error for `float(x)` or `complex(x)` (also `math.sin(x)`, `x.item()`) of a value a
    derivative flows through: the Python number would carry no derivative."""
    source = user_frame_info()
    what = "a Python float" if kind == "float" else "a Python complex"
    frame = user_frame()
    callee = scipy_callee(frame) if frame is not None else None
    if callee is not None:
        # SciPy's own code asked (boxcox_llf's float(lmb)): no float() of the user's to drop
        return ConcretizationError(
            f"{callee} (which has no xform version) takes {kind}() of a value that is being "
            f"differentiated inside it: {what} carries no derivative", source,
            "compute it with numpy or scipy functions that xform stages (docs: 'Plain "
            "numpy: what works'), or call it on values that are not differentiated")
    return ConcretizationError(
        f"{kind}() of a value that is being differentiated: {what} carries no derivative, "
        "so the derivative would be cut here", source,
        "keep it an array: use numpy's functions (np.sin, np.exp, ...) instead of Python's "
        "math module, and drop the float(); to log it, print(x) (its value while staging) "
        "or return it as an auxiliary output (has_aux=True); to cut the derivative on "
        "purpose, use xform.stop_gradient(x)")


def _numpy_scalar_call(expression: str):
    """("np.float64", "x") when `expression` is a call of a numpy scalar type through `np.`
    or `numpy.` on one argument, e.g. "np.float64(x)"; else None."""
    match = re.fullmatch(r"((?:np|numpy)\.(\w+))\((.+)\)", expression.strip(), re.S)
    if match is None or "," in match.group(3):
        return None
    scalar_type = getattr(np, match.group(2), None)
    if not (isinstance(scalar_type, type) and issubclass(scalar_type, np.generic)):
        return None
    return match.group(1), match.group(3).strip()


def _draws_from_a_generator(frame, expression: str) -> bool:
    """Whether the call at the user's line is a draw of a numpy generator (`rng.normal(...)`
    with `rng` a local or global name): numpy's own C code converts its parameters."""
    match = re.match(r"\s*([A-Za-z_]\w*)\.([A-Za-z_]\w*)\(", expression)
    if match is None:
        return False
    name = match.group(1)
    holder = frame.f_locals.get(name, frame.f_globals.get(name))
    return isinstance(holder, (np.random.Generator, np.random.RandomState))


def _expression(filename: str, instruction) -> str:
    """The source text of `instruction` when it spans one line, e.g. "range(n)"."""
    positions = getattr(instruction, "positions", None)
    if positions is None or positions.lineno is None or positions.lineno != positions.end_lineno:
        return ""
    text = linecache.getline(filename, positions.lineno)
    return text[positions.col_offset:positions.end_col_offset]


def calls_method(frame, name: str) -> bool:
    """Whether the user's line `frame` is running is a call of a method `name` (`.shuffle(`:
    numpy's compiled generator methods have no frame of their own, so what they ask of a
    Tracer is asked from the user's line); memoized per instruction."""
    key = (frame.f_code, frame.f_lasti, name)
    found = _METHOD_CALLS.get(key)
    if found is None:
        instruction = next((i for i in dis.get_instructions(frame.f_code)
                            if i.offset == frame.f_lasti), None)
        expression = _expression(frame.f_code.co_filename, instruction)
        found = re.search(rf"\.{name}\s*\(", expression) is not None
        if len(_METHOD_CALLS) >= 4096:
            _METHOD_CALLS.clear()
        _METHOD_CALLS[key] = found
    return found


_METHOD_CALLS: dict = {}

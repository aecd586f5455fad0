"""Reading code objects: the code nested in a function's (`nested_codes`), a memo per code
object (`per_code`), an instruction's argument (`instruction_argument`). Staging reads them
(numpy's constructors ask which call a frame is making; staged copies of the user's
functions) and so do the runtime's walks (xform.runtime.reads)."""
from __future__ import annotations

import dis
import types
import weakref


def nested_codes(code: types.CodeType) -> list:
    """`code`, then the code of each function and lambda defined in it, depth first.

    >>> [c.co_name for c in nested_codes((lambda: lambda: 0).__code__)]
    ['<lambda>', '<lambda>']
    """
    codes = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            codes += nested_codes(const)
    return codes


def per_code(compute):
    """`compute(code)`, memoized by the code object's identity (hashing a code object hashes
    its bytecode, on every lookup), for as long as the code object lives."""
    known: dict = {}    # id(code) -> (a weak reference to it, compute(code))

    def memoized(code: types.CodeType):
        entry = known.get(id(code))
        if entry is None or entry[0]() is not code:
            key = id(code)
            entry = known[key] = (weakref.ref(code, lambda _: known.pop(key, None)),
                                  compute(code))
        return entry[1]
    return memoized


_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]


def instruction_argument(units: bytes, unit: int) -> int:
    """The argument of the instruction at code unit `unit` of `units` (a code object's
    `co_code`), with its EXTENDED_ARG prefixes: what `dis` decodes, at a fraction of its
    cost."""
    argument, shift = units[2 * unit + 1], 8
    while unit > 0 and units[2 * unit - 2] == _EXTENDED_ARG:
        unit -= 1
        argument |= units[2 * unit + 1] << shift
        shift += 8
    return argument


__all__ = ["instruction_argument", "nested_codes", "per_code"]

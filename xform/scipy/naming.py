"""SciPy functions xform has no version of, named when they fail on tracers: while staging,
each is stood in by a call of itself that turns an xform error raised inside it (np.asarray
of a tracer, a Python `if` on one) into one naming the SciPy function the user called, at the
user's line. Calls that work on tracers keep working. Only a chosen few: every stand-in costs
each staging a swap in and out (0.4 us), and SciPy has hundreds of public functions.
"""
from __future__ import annotations

import types

from xform.errors import ConcretizationError, UnsupportedError, XformError
from xform.numpy.stand_ins import stand_in


def name_failures(module, names) -> None:
    """Stand in the Python functions `names` of SciPy `module` by their named-failure form.

    >>> import scipy.special
    >>> try:
    ...     xform.jit(lambda n: scipy.special.comb(n, 2))(5.0)
    ... except xform.XformError as err:
    ...     print(err.cause.split(":")[0])
    scipy.special.comb is not supported on traced values
    """
    for name in names:
        function = getattr(module, name, None)
        if type(function) is types.FunctionType:
            stand_in(function, _named(function, f"{module.__name__}.{name}"))


def _named(function, name):
    # A copy keeps the original code: the function's own __code__ is the stand-in's trampoline.
    original = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                                  function.__defaults__, function.__closure__)
    original.__kwdefaults__ = function.__kwdefaults__

    def call(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except XformError as err:
            # the innermost cause, named by the outermost SciPy function: the one the user called
            cause = getattr(err, "scipy_cause", err.cause)
            kind = ConcretizationError if isinstance(err, ConcretizationError) else UnsupportedError
            named = kind(f"{name} is not supported on traced values: {cause}", err.source,
                         err.hint)
            named.scipy_cause = cause
            raise named from err
    return call

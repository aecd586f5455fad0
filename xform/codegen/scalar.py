"""Which primitives generated code may compute on Python floats, and what that promises.

0-d float64 work runs faster as Python floats than as numpy scalars. Two policies, chosen by
`xform.config.scalar_math`:

- "exact" (the default): only operations IEEE 754 rounds correctly on every conforming
  machine (+, -, *, /, negation, square, sqrt, absolute value), so compiled results are
  numpy's bit for bit, whatever the CPU. No self-check is needed.
- "fast": also Python's `math` functions (sin, exp, log, ...). Neither libm nor numpy's SIMD
  kernels round these correctly, and both vary by CPU and library, so they differ from numpy
  in the last bits. A function is admitted only when, on a fixed edge-heavy sample, it is
  within `FAST_MAX_ULPS` of numpy and raises wherever numpy would warn. The promise: each such
  operation is within `FAST_MAX_ULPS` ulp of numpy's result for the same operand (measured at
  most 3 across 85,000 values on the machines we tried); a later cancellation can magnify the
  difference, as with any change of libm.

`pinned` fixes the admitted table outright, so tests can force every outcome on any machine.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import math
import random
import struct
from typing import NamedTuple

import numpy as np

from xform.ir.registry import ScalarMath, derived, on_rules_change, scalar_math_rules

EXACT = "exact"
FAST = "fast"

# Measured differences between `math` and numpy reach 3 ulp (tanh, cbrt); one ulp to spare.
FAST_MAX_ULPS = 4


class ScalarOp(NamedTuple):
    """How a primitive is computed on Python floats: `template` is an expression of operand
    names `{0}`, `{1}` (and `{f}`, the `math` function `function`).

    `tracked` operations can overflow or be invalid without Python raising (numpy warns), so
    their non-finite results must be noticed; at the `watched` operand positions a non-finite
    operand may give a finite result, so it is noticed before it goes in (elsewhere it surely
    comes out non-finite, and noticing it can wait). A template that `repeats` an operand
    needs it as a name, not as an expression (computed twice)."""
    template: str
    function: object = None
    watched: tuple = ()
    tracked: bool = False
    repeats: bool = False


class NonFiniteScalar(ArithmeticError):
    """A run of scalar code made inf or nan where numpy may have warned: recompute it."""


# What Python raises where numpy returns inf or nan (and warns): 1.0 / 0.0, math.exp(1000),
# math.log(0.0), math.sin(inf).
SCALAR_FALLBACK = (ZeroDivisionError, OverflowError, ValueError, NonFiniteScalar)

class Candidate(NamedTuple):
    """A primitive that may run on Python floats: the numpy function it is checked against
    (its impl), the Python function that computes it on floats, whether it is exact
    everywhere, and its ScalarOp."""
    ufunc: object
    python: object
    exact: bool
    op: ScalarOp

    @property
    def nin(self) -> int:
        """Its operand count: the ufunc's, else one per `{i}` of its template (at least 1)."""
        return _operand_count(self.ufunc, self.op.template)


def _operand_count(impl, template: str) -> int:
    nin = getattr(impl, "nin", None)
    return nin if nin is not None else max(1, sum(f"{{{i}}}" in template for i in range(10)))


def _candidate(impl, trait: ScalarMath) -> Candidate:
    """The Candidate a primitive's `scalar_math` trait declares."""
    if trait.template is not None:
        # Python's arithmetic overflows or makes nan silently where numpy warns: tracked.
        nin = _operand_count(impl, trait.template)
        watched = tuple(i for i in range(nin) if i not in trait.monotone)
        repeats = any(trait.template.count(f"{{{i}}}") > 1 for i in range(nin))
        op = ScalarOp(trait.template, None, watched, tracked=True, repeats=repeats)
    else:
        # A `math` function raises where it cannot give a finite result (the "fast"
        # self-check holds it to that), so its results need no check.
        nin = getattr(impl, "nin", 1)
        template = "{f}(" + ", ".join(f"{{{i}}}" for i in range(nin)) + ")"
        op = ScalarOp(template, trait.function, watched=tuple(range(nin)))
    return Candidate(impl, trait.function, trait.exact, op)


@derived
def _candidate_table() -> dict:
    return {prim: _candidate(impl, trait) for prim, (impl, trait) in scalar_math_rules().items()}


def candidates() -> dict:
    """primitive -> Candidate, for every primitive registered with a `scalar_math` trait
    (xform.ir.registry.ScalarMath)."""
    return _candidate_table()


# -- the self-check ("fast" only) ---------------------------------------------------------------

def sample_values() -> list[float]:
    """The deterministic self-check sample: signed zeros, subnormals, tiny, huge, inf, nan,
    values next to multiples of pi/4, overflow thresholds, and pseudo-random magnitudes."""
    values = [0.0, 5e-324, 2.2250738585072014e-308, 1e-300, 1e-20, 1e-8, 1e-3, 0.1, 0.5,
              0.9999999, 1.0, 1.0000001, 2.0, math.e, 3.0, 10.0, 100.0, 709.78, 710.0, 1e5,
              1e10, 1e22, 1e100, 1e300, 1.7976931348623157e308, math.inf, math.nan]
    for k in range(-12, 13):
        near = k * math.pi / 4
        values += [near, math.nextafter(near, math.inf), math.nextafter(near, -math.inf)]
    rng = random.Random(20240601)   # (not numpy.random: importing it costs ~9 ms)
    values += [*(rng.uniform(-10.0, 10.0) for _ in range(200)),
               *(10.0 ** rng.uniform(-30.0, 30.0) for _ in range(100)),
               *(1.0 + 10.0 ** rng.uniform(-12.0, 0.0) for _ in range(20))]
    values = [float(v) for v in values]
    return values + [-v for v in values]


_PAIR_SAMPLE = (0.0, 5e-324, 1e-308, 1e-200, 0.1, 1.0, 3.0, math.pi, 1e200, 1e308, math.inf,
                math.nan)


def bits(value) -> bytes:
    return struct.pack("<d", value)


def ulp_distance(a: float, b: float) -> int:
    """How many float64 values lie between `a` and `b` (0 when equal or both nan)."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0
    if math.isnan(a) or math.isnan(b):
        return 2 ** 64

    def ordinal(x):            # float64s in order as integers, -0.0 and 0.0 next to each other
        n = struct.unpack("<q", bits(x))[0]
        return n if n >= 0 else -(n & 0x7FFFFFFFFFFFFFFF)
    return abs(ordinal(a) - ordinal(b))


def agrees(ufunc, python, operand_sets, *, flags_may_hide, max_ulps=0) -> bool:
    """Whether `python` on Python floats computes `ufunc` on the same np.float64 scalars
    (`operand_sets` holds pairs of tuples of both) to within `max_ulps` wherever it does
    not raise, and raises wherever numpy would warn (except, with `flags_may_hide`, where its
    result is inf or nan: the generated code notices those)."""
    with np.errstate(divide="raise", over="raise", invalid="raise", under="ignore"):
        for operands, scalars in operand_sets:
            try:
                got = python(*operands)
            except (ZeroDivisionError, OverflowError, ValueError):
                continue
            try:
                want = ufunc(*scalars)
            except FloatingPointError:
                if not (flags_may_hide and not math.isfinite(got)):
                    return False
                with np.errstate(all="ignore"):
                    want = ufunc(*scalars)
            if type(got) is not float:
                return False
            if bits(got) != bits(float(want)):
                # Which of two nans survives differs between CPython's own paths (float's
                # multiply and the specialized inline one) as between numpy's ufuncs and
                # operators.
                both_nan = len(operands) == 2 and all(math.isnan(x) for x in operands)
                if both_nan and math.isnan(got):
                    continue
                if not math.isfinite(got) or ulp_distance(got, float(want)) > max_ulps:
                    return False
    return True


@functools.cache
def operand_sets(nin: int) -> list:
    """The self-check sample for `nin` operands: (Python floats, np.float64 scalars) pairs."""
    if nin == 1:
        return [((x,), (np.float64(x),)) for x in sample_values()]
    pair_values = _PAIR_SAMPLE + tuple(-x for x in _PAIR_SAMPLE)
    return [(xy, tuple(map(np.float64, xy))) for xy in itertools.product(pair_values, repeat=2)]


# -- the admitted table ---------------------------------------------------------------------------

_verdicts: dict = {}    # (policy, primitive) -> ScalarOp or None, decided so far
_pinned: dict | None = None
on_rules_change(lambda: _verdicts.clear())    # a re-registered primitive is decided anew


def _decide(policy: str, prim):
    candidate = candidates().get(prim)
    if candidate is None:
        return None
    if candidate.exact:
        return candidate.op
    if policy != FAST:
        return None
    ok = agrees(candidate.ufunc, candidate.python, operand_sets(candidate.nin),
                flags_may_hide=False, max_ulps=FAST_MAX_ULPS)
    return candidate.op if ok else None


def scalar_operation(prim, policy: str = EXACT):
    """The ScalarOp computing `prim` on Python floats under `policy`, or None.

    Under "exact" only correctly rounded operations qualify, decided by table. Under "fast" a
    `math` function is admitted by a self-check on a fixed sample, the first time `prim` is
    asked about (about 1 ms), so a program pays only for the operations it uses."""
    if _pinned is not None:
        return _pinned.get(prim)
    key = (policy, prim)
    try:
        return _verdicts[key]
    except KeyError:
        op = _verdicts[key] = _decide(policy, prim)
        return op


def scalar_operations(policy: str = EXACT) -> dict:
    """primitive -> ScalarOp for every primitive admitted under `policy`.

    >>> from xform.codegen.scalar import scalar_operations
    >>> from xform.rules.binary import add_p
    >>> from xform.rules.unary import sin_p
    >>> ops = scalar_operations()
    >>> ops[add_p].template, sin_p in ops
    ('{0} + {1}', False)
    """
    operations = {prim: scalar_operation(prim, policy) for prim in candidates()}
    return {prim: op for prim, op in operations.items() if op is not None}


@contextlib.contextmanager
def pinned(table: dict):
    """Admit exactly `table` (primitive -> ScalarOp) while the block runs, whatever the policy
    and this machine's self-check say. For tests: code compiled meanwhile keeps its choice, so
    clear caches of compiled code on both sides of the block.

    >>> from xform.codegen import graph_source
    >>> from xform.codegen.scalar import pinned
    >>> graph = xform.make_graph(lambda x: x * 2.0 + 1.0)(0.5)
    >>> with pinned({}):
    ...     "to_float(" in graph_source(graph)[0]
    False
    """
    global _pinned
    previous, _pinned = _pinned, dict(table)
    try:
        yield
    finally:
        _pinned = previous

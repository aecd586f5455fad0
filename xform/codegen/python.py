"""Codegen: a graph becomes the source of one Python function, compiled once.

One statement per equation; primitive impls, constants and literals are bound as globals of
the generated module under generated names, so no user text reaches the source. A value is
deleted right after its last use (an unused one right after it is made), so large
intermediates are freed as early as possible.

Three things make the code faster without changing any result (debug mode does none of them,
so that it checks every equation's values as they are made):
- 0-d float64 values made by several scalar operations are held as Python floats and computed
  with Python's arithmetic and the `math` functions that agree with numpy bit for bit on this
  machine (`scalar_operations`). A run of them that raises, or may have hidden one of numpy's
  floating-point warnings, is recomputed with numpy.
- `x[i]` (a `slice` of size 1, then `reshape` to ()) is plain indexing, giving a numpy scalar.
- An element-wise ufunc writes into the buffer of an input that dies with it, when that buffer
  was made by an element-wise ufunc of the same function (never a user's array, nor a view).
"""
from __future__ import annotations

import functools
import itertools
import linecache
import math
import struct
import weakref
from typing import NamedTuple

import numpy as np

from xform.ir.core import Graph, Literal
from xform.rules.registry import rule_for

_counter = itertools.count()


class CompiledGraph:
    """A callable made from a graph: `CompiledGraph(graph)(*args) -> list of outputs`.

    Notes: the graph is held weakly. Caches key compiled code by graph in weak dictionaries;
    a strong reference from the value back to its key would keep both alive forever.
    """

    __slots__ = ("_graph", "source", "fn", "__weakref__")

    def __init__(self, graph: Graph, source: str, fn):
        self._graph = weakref.ref(graph)
        self.source = source
        self.fn = fn

    @property
    def graph(self) -> Graph | None:
        """The graph this was compiled from, or None once nothing else holds it."""
        return self._graph()

    def __call__(self, *args):
        return self.fn(*args)


def check_values(eqn, *values):
    """Debug mode: raise RuleError unless each value matches its abstract value."""
    from xform.errors import RuleError
    for var, value in zip(eqn.outputs, values):
        shape, dtype = np.shape(value), np.result_type(value)
        if shape != var.aval.shape or dtype != var.aval.dtype:
            made_by = f", emitted by the {eqn.origin} rule" if eqn.origin else ""
            raise RuleError(
                f"'{eqn.primitive}' (impl{made_by}) produced {dtype}{list(shape)} where the "
                f"graph promises {var.aval.str_short()}", eqn.source,
                f"check the rules of '{eqn.primitive}'"
                + (f" and of the primitive whose {eqn.origin.split(' of ')[0]} rule emitted it"
                   if eqn.origin else ""))


def _infix_operators() -> dict:
    from xform.rules.binary import add_p, divide_p, multiply_p, subtract_p
    return {add_p: "+", subtract_p: "-", multiply_p: "*", divide_p: "/"}


def _is_numpy_valued(atom) -> bool:
    """Whether the value is surely a numpy array or scalar at run time, never a Python
    scalar: Python scalars only arrive as weak inputs/literals, or as bools."""
    aval = atom.aval
    return bool(aval.shape) or (not aval.weak_type and aval.dtype.kind != "b")


# -- 0-d float64 values as Python floats --------------------------------------------------------

class ScalarOp(NamedTuple):
    """How a primitive is computed on Python floats: `template` is an expression of operand
    names `{0}`, `{1}` (and `{f}`, the `math` function `function`).

    `tracked` operations can overflow or be invalid without Python raising (numpy warns), so
    their non-finite results must be noticed; at `monotone` operand positions a non-finite
    operand surely gives a non-finite result, so noticing it there can wait."""
    template: str
    function: object = None
    monotone: tuple = ()
    tracked: bool = False


class NonFiniteScalar(ArithmeticError):
    """A run of scalar code made inf or nan where numpy may have warned: recompute it."""


# What Python raises where numpy returns inf or nan (and warns): 1.0 / 0.0, math.exp(1000),
# math.log(0.0), math.sin(inf).
_SCALAR_FALLBACK = (ZeroDivisionError, OverflowError, ValueError, NonFiniteScalar)

_MATH_CANDIDATES = {
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "arcsin": math.asin,
    "arccos": math.acos, "arctan": math.atan, "sinh": math.sinh, "cosh": math.cosh,
    "tanh": math.tanh, "arcsinh": math.asinh, "arccosh": math.acosh, "arctanh": math.atanh,
    "exp": math.exp, "exp2": math.exp2, "expm1": math.expm1, "log": math.log,
    "log2": math.log2, "log10": math.log10, "log1p": math.log1p, "sqrt": math.sqrt,
    "cbrt": math.cbrt, "absolute": math.fabs, "fabs": math.fabs, "deg2rad": math.radians,
    "rad2deg": math.degrees,
}


def _arithmetic_candidates() -> list:
    """(primitive, ufunc, template, the same in Python, monotone operand positions)."""
    from xform.rules.binary import add_p, divide_p, multiply_p, subtract_p
    from xform.rules.unary import negative_p, square_p
    return [
        (add_p, np.add, "{0} + {1}", lambda a, b: a + b, (0, 1)),
        (subtract_p, np.subtract, "{0} - {1}", lambda a, b: a - b, (0, 1)),
        (multiply_p, np.multiply, "{0} * {1}", lambda a, b: a * b, (0, 1)),
        (divide_p, np.true_divide, "{0} / {1}", lambda a, b: a / b, (0,)),
        (negative_p, np.negative, "-{0}", lambda a: -a, (0,)),
        (square_p, np.square, "{0} * {0}", lambda a: a * a, (0,)),
    ]


def _sample_values() -> list[float]:
    """The deterministic self-check sample: signed zeros, subnormals, tiny, huge, inf, nan,
    values next to multiples of pi/4, overflow thresholds, and pseudo-random magnitudes."""
    values = [0.0, 5e-324, 2.2250738585072014e-308, 1e-300, 1e-20, 1e-8, 1e-3, 0.1, 0.5,
              0.9999999, 1.0, 1.0000001, 2.0, math.e, 3.0, 10.0, 100.0, 709.78, 710.0, 1e5,
              1e10, 1e22, 1e100, 1e300, 1.7976931348623157e308, math.inf, math.nan]
    for k in range(-12, 13):
        near = k * math.pi / 4
        values += [near, math.nextafter(near, math.inf), math.nextafter(near, -math.inf)]
    rng = np.random.default_rng(20240601)
    values += [*rng.uniform(-10.0, 10.0, 40), *(10.0 ** rng.uniform(-30.0, 30.0, 40)),
               *(1.0 + 10.0 ** rng.uniform(-12.0, 0.0, 10))]
    values = [float(v) for v in values]
    return values + [-v for v in values]


_PAIR_SAMPLE = (0.0, 5e-324, 1e-308, 1e-200, 0.1, 1.0, 3.0, math.pi, 1e200, 1e308, math.inf,
                math.nan)


def _bits(value) -> bytes:
    return struct.pack("<d", value)


def _agrees(ufunc, python, operand_sets, *, flags_may_hide) -> bool:
    """Whether `python` on Python floats computes `ufunc` on the same np.float64 scalars
    (`operand_sets` holds pairs of tuples of both) bit for bit wherever it does
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
            if type(got) is not float or _bits(got) != _bits(float(want)):
                # Which of two nans survives differs between CPython's own paths (float's
                # multiply and the specialized inline one) as between numpy's ufuncs and
                # operators.
                both_nan = len(operands) == 2 and all(math.isnan(x) for x in operands)
                if not (both_nan and math.isnan(got)):
                    return False
    return True


@functools.cache
def scalar_operations() -> dict:
    """primitive -> ScalarOp, for the primitives whose Python float form agrees with numpy on
    np.float64 scalars bit for bit on this machine, decided once by a self-check on a fixed
    sample (`math.tanh`, for one, is off by an ulp here against numpy's tanh).

    >>> scalar_operations()[sin_p].function is math.sin
    True
    """
    from xform.rules.unary import UNARY_PRIMITIVES
    singles = [((x,), (np.float64(x),)) for x in _sample_values()]
    pair_values = _PAIR_SAMPLE + tuple(-x for x in _PAIR_SAMPLE)
    pairs = [(xy, tuple(map(np.float64, xy))) for xy in itertools.product(pair_values, repeat=2)]
    operations = {}
    for prim, ufunc, template, python, monotone in _arithmetic_candidates():
        operand_sets = pairs if ufunc.nin == 2 else singles
        if _agrees(ufunc, python, operand_sets, flags_may_hide=True):
            operations[prim] = ScalarOp(template, None, monotone, tracked=True)
    for name, function in _MATH_CANDIDATES.items():
        if _agrees(getattr(np, name), function, singles, flags_may_hide=False):
            operations[UNARY_PRIMITIVES[name]] = ScalarOp("{f}({0})", function)
    return operations


def _is_float64_scalar(aval) -> bool:
    return aval.shape == () and aval.dtype == np.float64


def _literal_float(literal) -> float | None:
    """The Python float numpy would use for a literal operand of a float64 operation."""
    aval = literal.aval
    if aval.shape != ():
        return None
    if aval.dtype == np.float64:
        return float(literal.value)
    exact_int = type(literal.value) is int and abs(literal.value) <= 2 ** 53
    if aval.weak_type and aval.dtype.kind in "iu" and exact_int:
        return float(literal.value)
    return None


# Rough costs in ns on this project's x86 machines (python -m timeit): what a Python float
# operator saves against numpy's scalar operator, and a `math` call against a ufunc call on a
# scalar; what the conversions cost; and the check of values that leave the Python floats.
_SAVED_BY_OPERATOR_NS = 50
_SAVED_BY_CALL_NS = 150
_TO_FLOAT_NS = 40
_TO_NUMPY_NS = 110
_CHECK_NS = 35
_CHECK_PER_VALUE_NS = 15


def _scalar_equations(graph: Graph, uses: dict, outputs: set) -> dict:
    """equation index -> ScalarOp for the equations computed on Python floats: each connected
    group of candidate equations whose estimated savings exceed its conversions and checks."""
    equations = graph.equations
    if not any(_is_float64_scalar(v.aval) for eqn in equations for v in eqn.outputs):
        return {}                    # and no self-check for graphs of arrays only
    operations = scalar_operations()
    candidates = {}
    for index, eqn in enumerate(equations):
        op = operations.get(eqn.primitive)
        if (op is not None and len(eqn.outputs) == 1
                and _is_float64_scalar(eqn.outputs[0].aval)
                and all(_is_float64_scalar(a.aval) if type(a) is not Literal
                        else _literal_float(a) is not None for a in eqn.inputs)):
            candidates[index] = op
    made_by = {equations[i].outputs[0]: i for i in candidates}
    group = {i: i for i in candidates}

    def root(i):
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i
    for index in candidates:
        for atom in equations[index].inputs:
            if type(atom) is not Literal and atom in made_by:
                group[root(made_by[atom])] = root(index)
    members = {}
    for index in candidates:
        members.setdefault(root(index), []).append(index)
    chosen = {}
    for indices in members.values():
        inside = set(indices)
        made = {equations[i].outputs[0]: i for i in indices}
        inputs = {a for i in indices for a in equations[i].inputs
                  if type(a) is not Literal and a not in made}
        escaping = [v for v in made
                    if v in outputs or any(j not in inside for j, _ in uses.get(v, ()))]
        saved = sum(_SAVED_BY_CALL_NS if candidates[i].function is not None
                    or len(equations[i].inputs) == 1 else _SAVED_BY_OPERATOR_NS
                    for i in indices)
        checked = [v for v in escaping if candidates[made[v]].tracked]
        cost = (_TO_FLOAT_NS * len(inputs) + _TO_NUMPY_NS * len(escaping)
                + (_CHECK_NS + _CHECK_PER_VALUE_NS * len(checked) if checked else 0))
        if saved > cost:
            chosen.update((i, candidates[i]) for i in indices)
    return chosen


def _schedule(graph: Graph, scalar: dict, skipped: set) -> list:
    """The order of emission: equation indices, and runs (lists of scalar equation indices).

    A scalar equation moves up to just after the last equation it depends on, so scalar
    equations gather in few runs: each run converts and checks once."""
    numpy_items = []
    runs = {}
    slot = {}
    for index, eqn in enumerate(graph.equations):
        if index in skipped:
            continue
        if index in scalar:
            after = max((slot.get(a, -1) for a in eqn.inputs if type(a) is not Literal),
                        default=-1)
            runs.setdefault(after, []).append(index)
        else:
            numpy_items.append(index)
            after = len(numpy_items) - 1
        for var in eqn.outputs:
            slot[var] = after
    sequence = [runs[-1]] if -1 in runs else []
    for position, index in enumerate(numpy_items):
        sequence.append(index)
        if position in runs:
            sequence.append(runs[position])
    return sequence


def _item_inputs(graph: Graph, item, indexing: dict) -> list:
    if type(item) is list:
        return [a for i in item for a in graph.equations[i].inputs if type(a) is not Literal]
    if item in indexing:
        return list(graph.equations[indexing[item][0]].inputs)
    return [a for a in graph.equations[item].inputs if type(a) is not Literal]


def _item_outputs(graph: Graph, item) -> list:
    if type(item) is list:
        return [v for i in item for v in graph.equations[i].outputs]
    return list(graph.equations[item].outputs)


def _deaths(graph: Graph, sequence: list, indexing: dict) -> list[list]:
    """For each item of `sequence`, the vars to delete after it, in the order it names them:
    the inputs whose last use it is, then the outputs nobody uses. Outputs of the graph are
    never deleted."""
    last = {}
    for position, item in enumerate(sequence):
        for var in _item_inputs(graph, item, indexing):
            last[var] = position
        for var in _item_outputs(graph, item):
            last.setdefault(var, position)
    for atom in graph.outputs:
        if type(atom) is not Literal:
            last.pop(atom, None)
    deaths = []
    for position, item in enumerate(sequence):
        dead = [v for v in (*_item_inputs(graph, item, indexing), *_item_outputs(graph, item))
                if last.get(v, -1) == position]
        deaths.append(list(dict.fromkeys(dead)))
    return deaths


# -- x[i] as plain indexing -----------------------------------------------------------------------

def _plain_indexing(graph: Graph, uses: dict, outputs: set) -> dict:
    """reshape equation index -> (slice equation index, index tuple), for `reshape[shape=()]`
    of a size-1 slice used by nothing else: `x[i, j]` gives a numpy scalar, which costs far less
    than slice + reshape and, being a copy, is never a view of the user's array. Results of the
    graph keep their 0-d array."""
    from xform.rules.shape import reshape_p, slice_p
    made_by = {v: i for i, eqn in enumerate(graph.equations) for v in eqn.outputs}
    found = {}
    for index, eqn in enumerate(graph.equations):
        if eqn.primitive is not reshape_p or eqn.params["shape"] != ():
            continue
        (source,) = eqn.inputs
        if type(source) is Literal or source in outputs or eqn.outputs[0] in outputs:
            continue
        producer = made_by.get(source)
        if producer is None or len(uses[source]) != 1:
            continue
        sliced = graph.equations[producer]
        if sliced.primitive is slice_p and sliced.params["starts"] and source.aval.size == 1:
            found[index] = (producer, tuple(sliced.params["starts"]))
    return found


# -- writing into dead buffers --------------------------------------------------------------------

# Below this size a fresh array costs less than passing `out=`.
_REUSE_MIN_SIZE = 1024


def _makes_fresh_array(eqn) -> bool:
    """A one-output ufunc on arrays: its result is a new array, never a view."""
    impl = rule_for(eqn, "impl")
    return (isinstance(impl, np.ufunc) and impl.nout == 1 and not eqn.params
            and len(eqn.outputs) == 1 and eqn.outputs[0].aval.shape != ())


def _buffer_reuse(graph: Graph, uses: dict, outputs: set) -> dict:
    """equation index -> position of the input whose buffer the equation's ufunc writes into.

    Only buffers made by a ufunc of this graph qualify, and only when every reader of that
    value is a ufunc (so no view of it exists) and this equation is its last reader."""
    equations = graph.equations
    fresh = [_makes_fresh_array(eqn) for eqn in equations]
    made_by = {v: i for i, eqn in enumerate(equations) for v in eqn.outputs}
    reuse = {}
    for index, eqn in enumerate(equations):
        out = eqn.outputs[0].aval if fresh[index] else None
        if out is None or out.size < _REUSE_MIN_SIZE:
            continue
        for position, atom in enumerate(eqn.inputs):
            if (type(atom) is Literal or atom in outputs or atom.aval.shape != out.shape
                    or atom.aval.dtype != out.dtype):
                continue
            maker = made_by.get(atom)
            if maker is None or not fresh[maker]:
                continue              # an argument or a constant: the user's array
            readers = [j for j, _ in uses[atom]]
            if all(fresh[j] for j in readers) and max(readers) == index:
                reuse[index] = position
                break
    return reuse


# -- the source ---------------------------------------------------------------------------------

def graph_source(graph: Graph, debug: bool = False) -> tuple[str, dict]:
    """(source, globals) of the function computing `graph`; with `debug`, every equation's
    outputs are checked against their abstract values as they are computed.

    Names: `a*` arguments, `c*` constants, `k*` literals, `f*` impls, `m*` `math` functions,
    `v*` values, `s*` values held as Python floats, `e*` equations (debug only); and the
    helpers `to_float`, `to_f64`, `isfinite`, `ScalarFallback`, `NonFiniteScalar` (and the
    local `fallback`).
    """
    equations = graph.equations
    names: dict = {}
    namespace: dict = {}
    literals = itertools.count()

    def name_of(atom):
        if type(atom) is Literal:
            key = f"k{next(literals)}"
            namespace[key] = atom.value
            return key
        return names[atom]

    def constant(value):
        key = f"k{next(literals)}"
        namespace[key] = value
        return key

    args = []
    for i, var in enumerate(graph.inputs):
        names[var] = f"a{i}"
        args.append(names[var])
    for i, (var, value) in enumerate(graph.consts):
        names[var] = f"c{i}"
        namespace[names[var]] = value
    values = itertools.count()
    for eqn in equations:
        for var in eqn.outputs:
            names[var] = f"v{next(values)}"

    uses: dict = {}
    for index, eqn in enumerate(equations):
        for position, atom in enumerate(eqn.inputs):
            if type(atom) is not Literal:
                uses.setdefault(atom, []).append((index, position))
    outputs = {a for a in graph.outputs if type(a) is not Literal}
    if debug:
        indexing, scalar, reuse = {}, {}, {}
    else:
        indexing = _plain_indexing(graph, uses, outputs)
        scalar = _scalar_equations(graph, uses, outputs)
        reuse = _buffer_reuse(graph, uses, outputs)
    absorbed = {producer for producer, _ in indexing.values()}
    sequence = _schedule(graph, scalar, absorbed)
    deaths = _deaths(graph, sequence, indexing)
    infix = _infix_operators()

    # where each value is bound on every path: its numpy name, its Python float name
    has_numpy = set(graph.inputs) | {var for var, _ in graph.consts}
    float_names: dict = {}
    floats = itertools.count()
    body = []
    if scalar:
        namespace.update(to_float=float, to_f64=np.float64, isfinite=math.isfinite,
                         ScalarFallback=_SCALAR_FALLBACK, NonFiniteScalar=NonFiniteScalar)

    def as_numpy(atoms, indent, on_every_path=True):
        for atom in dict.fromkeys(a for a in atoms if type(a) is not Literal):
            if atom not in has_numpy:
                body.append(f"{indent}{names[atom]} = to_f64({float_names[atom]})")
                if on_every_path:
                    has_numpy.add(atom)

    def numpy_statement(index, indent):
        eqn = equations[index]
        impl = rule_for(eqn, "impl")
        fn_name = f"f{index}"
        in_names = [name_of(a) for a in eqn.inputs]
        ins = ", ".join(in_names)
        outs = ", ".join(names[v] for v in eqn.outputs)
        operator = infix.get(eqn.primitive)
        checked = True
        if index in indexing:
            slice_index, where = indexing[index]
            (source,) = equations[slice_index].inputs
            body.append(f"{indent}{outs} = {names[source]}[{constant(where)}]")
        elif index in reuse:
            namespace[fn_name] = impl
            body.append(f"{indent}{outs} = {fn_name}({ins}, out={in_names[reuse[index]]})")
        elif operator is not None and any(_is_numpy_valued(a) for a in eqn.inputs):
            # numpy's own scalar and array operators compute exactly what the ufunc does,
            # without the ufunc call overhead (which dominates on scalars).
            body.append(f"{indent}{outs} = {in_names[0]} {operator} {in_names[1]}")
        elif not eqn.outputs:
            namespace[fn_name] = functools.partial(impl, **eqn.params) if eqn.params else impl
            body.append(f"{indent}{fn_name}({ins})")
            checked = False
        else:
            namespace[fn_name] = functools.partial(impl, **eqn.params) if eqn.params else impl
            if eqn.primitive.multiple_results and len(eqn.outputs) == 1:
                outs += ","
            body.append(f"{indent}{outs} = {fn_name}({ins})")
        if debug and checked:
            namespace[f"e{index}"] = eqn
            namespace["check_values"] = check_values
            body.append(f"{indent}check_values(e{index}, {outs})")

    def scalar_run(run):
        inside = set(run)
        made_in = {equations[i].outputs[0]: i for i in run}
        inputs = list(dict.fromkeys(a for i in run for a in equations[i].inputs
                                    if type(a) is not Literal and a not in made_in))
        for var in inputs:
            if var not in float_names:
                float_names[var] = f"s{next(floats)}"
                body.append(f"    {float_names[var]} = to_float({names[var]})")
        for var in made_in:
            float_names[var] = f"s{next(floats)}"
        used_later = {v: None for v in made_in
                      if v in outputs or any(j not in inside for j, _ in uses.get(v, ()))}
        sinks = []
        body.append("    try:")
        for index in run:
            eqn, op = equations[index], scalar[index]
            operands = [float_names[a] if type(a) is not Literal else constant(_literal_float(a))
                        for a in eqn.inputs]
            function = ""
            if op.function is not None:
                function = f"m{index}"
                namespace[function] = op.function
            out = eqn.outputs[0]
            body.append(f"        {float_names[out]} = "
                        + op.template.format(*operands, f=function))
            for position, atom in enumerate(eqn.inputs):
                if (type(atom) is not Literal and atom in made_in
                        and position not in op.monotone and scalar[made_in[atom]].tracked):
                    sinks.append(atom)
            if op.tracked and (out in used_later or out not in uses):
                sinks.append(out)
        # Python's arithmetic overflows or makes nan silently where numpy warns; inf and nan
        # survive the arithmetic in between, so a check of the values that leave it suffices.
        sinks = [float_names[v] for v in dict.fromkeys(sinks)]
        for start in range(0, len(sinks), 32):
            body.append(f"        if not isfinite({' + '.join(sinks[start:start + 32])}):")
            body.append("            raise NonFiniteScalar")
        # numpy recomputes the run after the handler, so that its errors (np.errstate) do not
        # appear raised while handling ours
        body.extend(["    except ScalarFallback:", "        fallback = True",
                     "    else:", "        fallback = False", "    if fallback:"])
        as_numpy(inputs, "        ", on_every_path=False)
        for index in run:
            numpy_statement(index, "        ")
        for var in used_later:
            body.append(f"        {float_names[var]} = to_float({names[var]})")

    for item, dead in zip(sequence, deaths):
        if type(item) is list:
            scalar_run(item)
        else:
            as_numpy(_item_inputs(graph, item, indexing), "    ")
            numpy_statement(item, "    ")
            has_numpy.update(equations[item].outputs)
        # constants are globals of the module; only arguments and values are local
        dead = [names[v] for v in dead if v in has_numpy and names[v][0] in "va"]
        if dead:
            body.append(f"    del {', '.join(dead)}")
    as_numpy(graph.outputs, "    ")
    outs = ", ".join(name_of(a) for a in graph.outputs)
    body.append(f"    return [{outs}]")
    source = f"def xform_graph({', '.join(args)}):\n" + "\n".join(body) + "\n"
    return source, namespace


def compile_graph(graph: Graph) -> CompiledGraph:
    """Compile `graph` once into a Python function.

    >>> compile_graph(make_graph(np.sin)(1.0))(0.0)
    [0.0]
    """
    from xform.config import config
    source, namespace = graph_source(graph, config.debug)
    filename = f"<xform-generated-{next(_counter)}>"
    exec(compile(source, filename, "exec"), namespace)
    compiled = CompiledGraph(graph, source, namespace["xform_graph"])
    # Registered so that tracebacks through generated code show its lines, for as long as
    # the code lives (linecache never drops entries without a file by itself).
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    weakref.finalize(compiled, linecache.cache.pop, filename, None)
    return compiled

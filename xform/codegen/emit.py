"""The emitter: a graph becomes the source of one Python function (`graph_source`), compiled
once (`compile_graph`, `CompiledGraph`).

One statement per equation; primitive impls, constants and literals are bound as globals of
the generated module under generated names (one per distinct impl or literal), so no user
text reaches the source. A value is deleted right after its last use (an unused one right
after it is made), so large intermediates are freed as early as possible; arguments (the
caller holds them) and 0-d values that are surely no view (made by a ufunc) are not.

Three things make the code faster (debug mode does none of them, so that it checks every
equation's values as they are made):
- 0-d float64 values made by several scalar operations are held as Python floats and computed
  with the operations `xform.codegen.scalar` admits: under the default "exact" policy only
  correctly rounded ones, so results stay numpy's bit for bit on any machine; under "fast"
  also `math` functions, each within a few ulp of numpy. A value read once is written into
  its reader's expression. A run of them that raises, or may have hidden one of numpy's
  floating-point warnings, is recomputed with numpy statements, which are generated and
  compiled only when a run first needs them (`_NumpyRun`): most never do, and compiling them
  up front doubled the cost.
- `x[i]` (a `slice` of size 1, then `reshape` to ()) is plain indexing, giving a numpy scalar.
- An element-wise ufunc writes into the buffer of an input that dies with it, when that buffer
  was made by an element-wise ufunc of the same function (never a user's array, nor a view).

Source generation makes a few linear passes over the equations (large graphs have 10^4-10^5
of them); each pass over the graph's objects costs, so analyses share passes where they can.
The code of a large graph is cut into functions of about SEGMENT_LINES statements, compiled one
by one, since CPython compiles one huge function ever more slowly per statement (`_Segments`).
Which values run as Python floats is planned in xform.codegen.scalar_plan; the other analyses
are in xform.codegen.analyses.
"""
from __future__ import annotations

import bisect
import collections
import functools
import itertools
import linecache
import math
import operator
import re
import threading
import types
import weakref
from collections import Counter

import numpy as np

from xform.codegen.analyses import (buffer_reuse, item_inputs, plain_indexing, value_deaths,
                                    writes_in_place)
from xform.codegen.scalar import EXACT, SCALAR_FALLBACK, NonFiniteScalar, bits
from xform.codegen.scalar_plan import literal_float, scalar_equations, schedule
from xform.ir.core import Graph, Literal
from xform.ir.registry import derived, hooks_named, rule_for, scalar_math_rules

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


# numpy's operators on numpy values compute exactly these ufuncs
_NUMPY_OPERATORS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide}


@derived
def _infix_operators() -> dict:
    """primitive -> operator, for the primitives whose scalar_math template is `{0} op {1}`
    and whose impl is the ufunc numpy's `op` calls: on numpy values `a op b` computes the
    impl without the ufunc call overhead."""
    infix = {}
    for prim, (impl, trait) in scalar_math_rules().items():
        template = trait.template or ""
        operator_ = template[4:-4] if template[:4] == "{0} " and template[-4:] == " {1}" else ""
        if _NUMPY_OPERATORS.get(operator_) is impl:
            infix[prim] = operator_
    return infix


_inputs_of = operator.attrgetter("inputs")


def _is_numpy_valued(atom) -> bool:
    """Whether the value is surely a numpy array or scalar at run time, never a Python
    scalar: Python scalars only arrive as weak inputs/literals, or as bools."""
    aval = atom.aval
    return bool(aval.shape) or (not aval.weak_type and aval.dtype.kind != "b")


# -- the source ---------------------------------------------------------------------------------

def _value_key(value):
    """A key that two values share only when either can stand for the other in generated
    code: the same type and the same bits (0.0 and -0.0, 1 and True, stay apart)."""
    kind = type(value)
    if kind is float:
        return kind, bits(value)
    if kind is int or kind is bool or kind is str:
        return kind, value
    if kind is tuple and all(type(v) is int for v in value):
        return kind, value
    if isinstance(value, np.generic):
        return kind, value.dtype.str, value.tobytes()
    return kind, id(value)            # the namespace keeps the value, so the id stays its own


# Inlined expressions nest at most this deep, far below the parser's limits.
_MAX_INLINE_DEPTH = 12


def graph_source(graph: Graph, debug: bool = False, scalar_math: str | None = EXACT,
                 bare: bool = False) -> tuple[str, dict]:
    """(source, globals) of the function computing `graph`; with `debug`, every equation's
    outputs are checked against their abstract values as they are computed. `scalar_math` is
    the policy for 0-d float64 work as Python floats (xform.codegen.scalar); with None no
    value is held as a Python float. The function returns the list of the outputs, or with
    `bare` the one output of a one-output graph as it is.

    Names: `a*` arguments, `c*` constants, `k*` literals, `f*` impls, `m*` `math` functions,
    `v*` values, `s*` values held as Python floats, `numpy*` the numpy code of a run of them,
    `e*` equations (debug only), `xform_sources` (STATEMENT_SOURCES); and the helpers `to_float`, `to_f64`, `isfinite`,
    `ScalarFallback`, `NonFiniteScalar` (and the local `fallback`). A literal, an impl without
    params and a `math` function get one name however many equations use them. Code in
    segments adds `xform_graph_<k>` (the segments) and `env` (the values they pass on).

    Three steps: the analyses of the whole graph (`_Analysis`), then, item by item of its
    schedule, the plan of each statement (`_numpy_form`, `_run_plan`), which `_Printer`
    writes out, naming values and globals as it goes.
    """
    analysis = _Analysis(graph, debug, scalar_math)
    printer = _Printer(graph, analysis, debug)
    deaths, segmented = analysis.deaths, analysis.segment_lines is not None
    for position, item in enumerate(analysis.sequence):
        if type(item) is list:
            printer.scalar_run(item)
        else:
            printer.numpy_item(item)
        if segmented or position in deaths:
            printer.deaths_after(position)
    return printer.finish(bare)


class _Analysis:
    """What graph_source decides about the whole graph before it writes anything: the reads of
    each atom, the graph's outputs, the equations written as plain indexing (`indexing`), run
    as Python floats (`scalar`), writing into an input's buffer (`reuse`) or updating one in
    place (`updates`, each with its in-place impl in `impls`), the order of the items
    (`sequence`: an equation's index, or a list, a run of scalar equations), and where each
    value dies (`deaths`: item position -> the values deleted after it)."""

    def __init__(self, graph: Graph, debug: bool, scalar_math: str | None):
        equations = graph.equations
        # how many input positions read each atom (literals too, harmlessly)
        self.reads = Counter(itertools.chain.from_iterable(map(_inputs_of, equations)))
        self.outputs = outputs = {a for a in graph.outputs if type(a) is not Literal}
        if debug:
            indexing, scalar, reuse = {}, {}, {}
        else:
            indexing = plain_indexing(graph, self.reads, outputs)
            scalar = scalar_equations(graph, outputs, scalar_math) if scalar_math else {}
            reuse = buffer_reuse(graph, outputs)
        self.indexing, self.scalar, self.reuse = indexing, scalar, reuse
        absorbed = {producer for producer, _ in indexing.values()}
        sequence = schedule(graph, scalar, absorbed)
        # the code of a large graph in segments (see SEGMENT_LINES); none for smaller ones
        self.segment_lines = SEGMENT_LINES if len(equations) > SEGMENTED_ABOVE else None
        if self.segment_lines:
            sequence = _short_runs(sequence, self.segment_lines)
        self.sequence = sequence
        self.infix = _infix_operators()
        in_place = {} if debug else hooks_named("in_place")
        # primitive -> (eqn -> the numpy index of an update in place written as `x[i] = v`,
        # or None): what skips even the in-place impl's call
        self.statement_index = hooks_named("in_place_index") if in_place else {}
        self.updates = updates = (writes_in_place(graph, sequence, indexing, outputs, in_place)
                                  if in_place else ())
        # Primitives whose impl computes the same from a Python float as from an np.float64
        # at a 0-d float64 operand (hook "takes_floats"): their operands held as Python floats
        # are passed as they are, without a to_f64 each (a loop's pad_sum reads hundreds).
        self.takes_floats = hooks_named("takes_floats") if scalar else {}
        # A value is deleted after its last use so that its memory goes as early as possible;
        # not arguments (the caller holds them anyway), and not 0-d values that are surely no
        # view of an array (made by a ufunc or by indexing): nothing to free, and each line
        # costs compile time.
        self.impls = impls = {}
        deletable = set()
        for item in sequence:
            if type(item) is list:
                continue
            eqn = equations[item]
            impls[item] = impl = (in_place[eqn.primitive] if item in updates
                                  else rule_for(eqn, "impl"))
            keeps_nothing = item in indexing or type(impl) is np.ufunc
            for var in eqn.outputs:
                if var not in outputs and (var.aval.shape or not keeps_nothing):
                    deletable.add(var)
        self.deaths = (value_deaths(graph, sequence, indexing, deletable) if deletable
                       else {})


def _numpy_form(analysis: _Analysis, eqn, index: int) -> tuple:
    """How the numpy statement of equation `index` is written, `(form, detail)`:
    ("index", (the slice's equation, i)) `x[i]`; ("item", i) an update in place as item
    assignment `u[i] = v` (a loop's `u[t] = ...`); ("reuse", position) the impl writing into
    the buffer of its input at `position`; ("infix", operator) numpy's own operator; ("effect",
    None) a call with no outputs; ("call", None) a call."""
    if index in analysis.indexing:        # (never in debug mode)
        slice_index, where = analysis.indexing[index]
        return "index", (slice_index, where)
    statement_index = analysis.statement_index
    where = (statement_index[eqn.primitive](eqn)
             if index in analysis.updates and eqn.primitive in statement_index else None)
    if where is not None:
        return "item", where
    if index in analysis.reuse:
        return "reuse", analysis.reuse[index]
    operator_ = analysis.infix.get(eqn.primitive)
    if operator_ is not None and any(_is_numpy_valued(a) for a in eqn.inputs):
        # numpy's own scalar and array operators compute exactly what the ufunc does,
        # without the ufunc call overhead (which dominates on scalars).
        return "infix", operator_
    if not eqn.outputs:
        return "effect", None
    return "call", None


class _RunPlan:
    """What a run of scalar equations reads and which of its values need a name (see
    `_run_plan`)."""

    __slots__ = ("conversions", "inputs", "reads_inside", "named", "sinks")

    def __init__(self):
        self.conversions = []       # values read from numpy, converted to floats first
        self.inputs = {}            # values read from outside the run, in order
        self.reads_inside = {}      # value made in the run -> its reads there
        self.named = set()          # values that need a name: checked, read twice
        self.sinks = []             # values whose finiteness is checked


def _run_plan(analysis: _Analysis, equations, run: list, float_names) -> _RunPlan:
    """The plan of the scalar `run`: which values it reads from outside (those not yet held
    as floats, in `float_names`, are converted on entry), how often it reads its own values,
    and which values are checked. Python's arithmetic overflows or makes nan silently where
    numpy warns; inf and nan survive the arithmetic in between, so a check of the values
    that leave the run suffices."""
    plan = _RunPlan()
    made_in = {}                  # value made in the run -> the ScalarOp making it
    converted = set()
    for index in run:
        eqn, op = equations[index], analysis.scalar[index]
        for position, atom in enumerate(eqn.inputs):
            if type(atom) is Literal:
                continue
            maker = made_in.get(atom)
            if maker is None:
                if atom not in float_names and atom not in converted:
                    converted.add(atom)
                    plan.conversions.append(atom)
                plan.inputs[atom] = None
                continue
            plan.reads_inside[atom] = plan.reads_inside.get(atom, 0) + 1
            if maker.tracked and position in op.watched:
                plan.sinks.append(atom)
                plan.named.add(atom)
            if op.repeats:
                plan.named.add(atom)
        made_in[eqn.outputs[0]] = op
    return plan


class _Printer:
    """Writes the statements of graph_source's plan into the function's body, naming values
    and globals as it goes.

    A large graph's function is cut into segments (see SEGMENT_LINES, `_Segments`): each
    name bound goes into `bound`, and each name read that is not there goes through `used`,
    which notes those of earlier segments (the segment takes them from `env`). The checks
    are written out where names are read most (each call costs).
    """

    def __init__(self, graph: Graph, analysis: _Analysis, debug: bool):
        self.graph, self.equations, self.analysis, self.debug = (
            graph, graph.equations, analysis, debug)
        self.names: dict = {}
        self.sources: dict = {}     # value name -> the user's line (warnings read it)
        self.namespace: dict = {STATEMENT_SOURCES: self.sources}
        args = []
        for i, var in enumerate(graph.inputs):
            self.names[var] = f"a{i}"
            args.append(self.names[var])
        for i, (var, value) in enumerate(graph.consts):
            self.names[var] = f"c{i}"
            self.namespace[self.names[var]] = value
        self.literal_names: dict = {}
        self.function_names: dict = {}
        self.functions, self.math_functions = itertools.count(), itertools.count()
        # where each value is bound on every path: its numpy name, its Python float name
        self.has_numpy = set(graph.inputs) | {var for var, _ in graph.consts}
        self.float_names: dict = {}
        self.floats = itertools.count()
        self.body = []
        self.prologue = []
        if analysis.scalar:
            self.namespace.update(to_float=float, to_f64=np.float64, isfinite=math.isfinite,
                                  ScalarFallback=SCALAR_FALLBACK,
                                  NonFiniteScalar=NonFiniteScalar)
            self.prologue.append("    fallback = False")
        self.runs = itertools.count()
        self.values = itertools.count()       # values are named as they are bound
        self.segments = _Segments(args, self.values, self.floats)
        self.bound, self.foreign = self.segments.bound, self.segments.foreign
        self.templates: dict = {}             # primitive -> its ScalarOp's template, filled in
        self.float_literals: dict = {}

    # -- names ---------------------------------------------------------------------------

    def literal(self, value):
        key = _value_key(value)
        name = self.literal_names.get(key)
        if name is None:
            name = self.literal_names[key] = f"k{len(self.literal_names)}"
            self.namespace[name] = value
        return name

    def function(self, impl, params=None, prefix="f"):
        """The name of `impl` (with `params` bound): shared unless params are bound, since
        params that compare equal may still differ (0.0 and -0.0)."""
        if not params:
            name = self.function_names.get(id(impl))
            if name is None:
                number = next(self.functions if prefix == "f" else self.math_functions)
                name = self.function_names[id(impl)] = f"{prefix}{number}"
                self.namespace[name] = impl
            return name
        name = f"f{next(self.functions)}"
        self.namespace[name] = functools.partial(impl, **params)
        return name

    def used(self, name):
        if name not in self.bound and name[0] != "c":        # consts are globals
            self.foreign[name] = None
        return name

    def operand_name(self, atom):
        name = self.names[atom] if atom in self.has_numpy else self.float_names[atom]
        if name not in self.bound:
            self.used(name)
        return name

    def float_literal(self, atom):
        value = literal_float(atom)
        name = self.float_literals.get(value) if value else None    # 0.0 == -0.0: by bits
        if name is None:
            name = self.literal(value)
            if value:
                self.float_literals[value] = name
        return name

    def scalar_template(self, op):
        if op.function is None:
            return op.template
        return op.template.replace("{f}", self.function(op.function, prefix="m"))

    # -- statements ----------------------------------------------------------------------

    def as_numpy(self, atoms):
        for atom in atoms:
            if type(atom) is not Literal and atom not in self.has_numpy:
                self.names[atom] = name = f"v{next(self.values)}"
                self.bound.add(name)
                self.body.append(f"    {name} = to_f64({self.used(self.float_names[atom])})")
                self.has_numpy.add(atom)

    def numpy_item(self, index):
        analysis = self.analysis
        if analysis.scalar and self.equations[index].primitive not in analysis.takes_floats:
            self.as_numpy(item_inputs(self.graph, index, analysis.indexing))
        self.numpy_statement(index)
        self.has_numpy.update(self.equations[index].outputs)

    def numpy_statement(self, index):
        eqn = self.equations[index]
        body, names = self.body, self.names
        outs = []
        for var in eqn.outputs:
            names[var] = name = f"v{next(self.values)}"
            outs.append(name)
        self.bound.update(outs)
        if outs and eqn.source is not None:
            self.sources[outs[0]] = eqn.source
        outs = ", ".join(outs)
        form, detail = _numpy_form(self.analysis, eqn, index)
        if form == "index":
            slice_index, where = detail
            (source,) = self.equations[slice_index].inputs
            body.append(f"    {outs} = {self.used(names[source])}[{self.literal(where)}]")
            return
        impl = self.analysis.impls[index]
        in_names = [self.literal(a.value) if type(a) is Literal else self.operand_name(a)
                    for a in eqn.inputs]
        ins = ", ".join(in_names)
        if form == "item":
            body.append(f"    {outs} = {in_names[0]}")
            body.append(f"    {outs}[{self.literal(detail)}] = {in_names[1]}")
        elif form == "reuse":
            body.append(f"    {outs} = {self.function(impl)}({ins}, out={in_names[detail]})")
        elif form == "infix":
            body.append(f"    {outs} = {in_names[0]} {detail} {in_names[1]}")
        elif form == "effect":
            body.append(f"    {self.function(impl, eqn.params)}({ins})")
        else:
            if eqn.primitive.multiple_results and len(eqn.outputs) == 1:
                outs += ","
            body.append(f"    {outs} = {self.function(impl, eqn.params)}({ins})")
        if self.debug and form != "effect":
            self.namespace[f"e{index}"] = eqn
            self.namespace["check_values"] = check_values
            body.append(f"    check_values(e{index}, {outs})")

    def scalar_run(self, run):
        equations, body, float_names = self.equations, self.body, self.float_names
        scalar, reads, outputs = self.analysis.scalar, self.analysis.reads, self.analysis.outputs
        plan = _run_plan(self.analysis, equations, run, float_names)
        for atom in plan.conversions:
            float_names[atom] = name = f"s{next(self.floats)}"
            self.bound.add(name)
            body.append(f"    {name} = to_float({self.used(self.names[atom])})")
        sinks = plan.sinks
        leaving = []                  # values made in the run and read after it
        # A value read once, by the same run, is written into its reader's expression: fewer
        # lines to compile, fewer stores and loads to run, the same operations on the same
        # operands.
        inlined = {}                  # var -> (expression, depth, whether a call)
        body.append("    try:")
        for index in run:
            eqn = equations[index]
            template = self.templates.get(eqn.primitive)
            if template is None:
                template = self.templates[eqn.primitive] = self.scalar_template(scalar[index])
            is_call = template[0] == "m"
            operands = []
            depth = 0
            for atom in eqn.inputs:
                if type(atom) is Literal:
                    operands.append(self.float_literal(atom))
                    continue
                name = float_names.get(atom)
                if name is None:
                    expression, inner, inner_is_call = inlined.pop(atom)
                    name = expression if is_call or inner_is_call else f"({expression})"
                    depth = max(depth, inner)
                elif name not in self.bound:
                    self.used(name)
                operands.append(name)
            expression = template.format(*operands)
            out = eqn.outputs[0]
            read = reads.get(out, 0)
            leaves = read > plan.reads_inside.get(out, 0) or out in outputs
            if leaves:
                leaving.append(out)
            if scalar[index].tracked and (leaves or not read):
                sinks.append(out)
            elif (read == 1 and not leaves and depth < _MAX_INLINE_DEPTH
                  and out not in plan.named):
                inlined[out] = (expression, depth + 1, is_call)
                continue
            float_names[out] = name = f"s{next(self.floats)}"
            self.bound.add(name)
            body.append(f"        {name} = {expression}")
        sinks = [float_names[v] for v in dict.fromkeys(sinks)]
        for start in range(0, len(sinks), 32):
            body.append(f"        if not isfinite({' + '.join(sinks[start:start + 32])}):")
            body.append("            raise NonFiniteScalar")
        # numpy recomputes the run after the handler, so that its errors (np.errstate) do not
        # appear raised while handling ours
        recompute = f"numpy{next(self.runs)}"
        self.namespace[recompute] = _NumpyRun(self.graph, run, list(plan.inputs), leaving)
        arguments = [self.used(self.names[v]) if v in self.has_numpy
                     else f"to_f64({self.used(float_names[v])})" for v in plan.inputs]
        call = f"{recompute}({', '.join(arguments)})"
        if leaving:
            call = f"{', '.join(float_names[v] for v in leaving)}, = map(to_float, {call})"
        body.extend(["    except ScalarFallback:", "        fallback = True", "    if fallback:",
                     f"        {call}", "        fallback = False"])
        self.segments.has_runs = True

    def deaths_after(self, position):
        """The `del` of the values that die after the item at `position`; and the cut of a
        segment there, once it is long enough."""
        body, segments = self.body, self.segments
        dead = self.analysis.deaths.get(position)
        if dead:
            dead = [self.names[v] for v in dead]
            body.append(f"    del {', '.join(dead)}")
            if not self.bound.issuperset(dead):
                for name in dead:
                    self.used(name)
                cleared = segments.cleared(dead)
                if cleared:
                    body.append(cleared)
        segment_lines = self.analysis.segment_lines
        if segment_lines and len(body) - segments.start >= segment_lines:
            segments.close(len(body))
            self.bound, self.foreign = segments.bound, segments.foreign

    def finish(self, bare):
        """(source, namespace): the return of the outputs closes the function."""
        graph, body = self.graph, self.body
        if self.analysis.scalar:
            self.as_numpy(graph.outputs)
        outs = ", ".join(self.literal(a.value) if type(a) is Literal else self.used(self.names[a])
                         for a in graph.outputs)
        body.append(f"    return {outs}" if bare else f"    return [{outs}]")
        if self.segments.closed:
            self.segments.close(len(body))
            return self.segments.source(body, self.prologue), self.namespace
        source = (f"def xform_graph({', '.join(self.segments.args)}):\n"
                  + "\n".join(self.prologue + body) + "\n")
        return source, self.namespace


STATEMENT_SOURCES = "xform_sources"
"""The generated module's global mapping the first name a numpy statement binds to the source
of its equation: what a warning numpy raises in that statement names (`statement_source`).
Filled while the source is generated, read only when a warning is shown, so a call pays
nothing for it."""

_BOUND_NAME = re.compile(r"\s*(v\d+)")


def statement_source(frame):
    """The SourceInfo of the equation whose statement `frame` (running generated code) is at;
    None for a frame of other code, or a statement of no equation with a source."""
    sources = frame.f_globals.get(STATEMENT_SOURCES)
    if sources is None:
        return None
    bound = _BOUND_NAME.match(linecache.getline(frame.f_code.co_filename, frame.f_lineno))
    return sources.get(bound.group(1)) if bound else None


# -- large graphs: the function in segments ------------------------------------------------------

SEGMENT_LINES = 2000
"""Statements per function of the generated code of a graph of over SEGMENTED_ABOVE equations,
about. CPython compiles a function in time that grows faster than its size once its tables
of names and constants outgrow the caches: here 1.7x per statement from 2,000 to 375,000
statements (bench/STAGING_SCALE.md), already 1.2x from 2,000 to 3,000 on Python floats'
code; so the code of a large graph is cut into functions of about this many statements,
each compiled on its own (`_define`), which keeps compile() at the small-function rate."""

SEGMENTED_ABOVE = 5000
"""Equations of the largest graph whose code stays one function. Values that one segment
makes and a later one reads pass through a list (about 25 ns each per call: a store, a load,
a clear), where one function reads its locals for free: a gradient's residuals all cross
from the forward segments to the backward ones, which costs up to a tenth of a call of
scalar code. Below this size compile() costs little more per statement than in segments,
and every call would pay."""


def _short_runs(sequence: list, most: int) -> list:
    """`sequence` with every run of scalar equations longer than `most` cut into consecutive
    runs of at most that many, so that no segment holds one huge run (a run is one `try`
    statement). Each piece is a run as any other: it converts its inputs, checks the values
    that leave it, and falls back to numpy on its own; floats pass between pieces as they
    pass between any two runs."""
    if not any(type(item) is list and len(item) > most for item in sequence):
        return sequence
    cut = []
    for item in sequence:
        if type(item) is list and len(item) > most:
            cut.extend(item[start:start + most] for start in range(0, len(item), most))
        else:
            cut.append(item)
    return cut


class _Segments:
    """The cut of a large graph's function into functions `xform_graph_<k>(env)` of about
    SEGMENT_LINES lines each, between items, called in order by `xform_graph`; the emitter
    reports the names each statement binds (`bound`) and reads (`foreign` collects those bound
    in an earlier segment) and closes a segment where an item ends.

    A value that a later segment reads lives in the list `env` (one per call) from the end of
    the segment that binds it: a segment takes what it reads from `env` on entry, and the slot
    is cleared where the value is deleted, so every value is freed where the single function
    would free it. The first segment takes the arguments. One statement per value and step:
    a store, a load or a clear costs 7-9 ns so, where packing them into one tuple assignment
    (or an itemgetter) costs 20-30 ns a value.
    """

    def __init__(self, args: list, values, floats):
        self.args = args
        self._counters = (values, floats)
        self.bound = set(args)       # the names bound in the current segment
        self.foreign = {}            # the names it reads from earlier ones, in order
        self.start = 0               # its first line in the body
        self.has_runs = False        # whether it holds scalar runs (the local `fallback`)
        self.closed = []             # (first line, end line, foreign names, has_runs)
        self._first = ([0], [0])     # per segment: its first value and float name numbers
        self.slots = {}              # a name some segment reads from an earlier one -> slot

    def close(self, stop: int) -> None:
        """End the current segment at body line `stop`; the next one starts there. Its names
        are numbered on from a number skipped here, which marks where they start."""
        self.closed.append((self.start, stop, self.foreign, self.has_runs))
        for first, counter in zip(self._first, self._counters):
            first.append(next(counter))
        self.bound, self.foreign, self.start, self.has_runs = set(), {}, stop, False

    def _slot(self, name: str) -> int:
        slot = self.slots.get(name)
        if slot is None:
            slot = self.slots[name] = len(self.slots)
        return slot

    def cleared(self, dead: list) -> str | None:
        """The statement clearing the slots of `dead` names the current segment took from
        `env`, after their `del` (None when there are none)."""
        slots = [f"env[{self._slot(name)}]" for name in dead if name in self.foreign]
        return f"    {' = '.join(slots)} = None" if slots else None

    def _home(self, name: str) -> int:
        """The segment binding `name` (arguments: the first)."""
        if name[0] == "a":
            return 0
        first = self._first[1] if name[0] == "s" else self._first[0]
        return bisect.bisect_right(first, int(name[1:])) - 1

    def source(self, body: list, prologue: list) -> str:
        """The functions' source."""
        for _, _, foreign, _ in self.closed:
            for name in foreign:
                self._slot(name)
        stores: dict = {}
        for name in self.slots:
            stores.setdefault(self._home(name), []).append(name)
        parts = []
        for k, (start, stop, foreign, has_runs) in enumerate(self.closed):
            params = ", ".join(["env"] + (self.args if k == 0 else []))
            text = [f"def xform_graph_{k}({params}):"]
            if has_runs:
                text.extend(prologue)
            text.extend(f"    {name} = env[{self.slots[name]}]" for name in foreign)
            text.extend(body[start:stop])
            text.extend(f"    env[{self.slots[name]}] = {name}" for name in stores.get(k, ()))
            parts.append("\n".join(text))
        last = len(self.closed) - 1
        driver = [f"def xform_graph({', '.join(self.args)}):",
                  f"    env = [None] * {len(self.slots)}",
                  f"    xform_graph_0({', '.join(['env'] + self.args)})"]
        driver.extend(f"    xform_graph_{k}(env)" for k in range(1, last))
        driver.append(f"    return xform_graph_{last}(env)")
        return "\n".join(parts) + "\n" + "\n".join(driver) + "\n"


# Files of generated code that has died. Their lines leave linecache at the next definition,
# not in the finalizer: a finalizer runs whenever the collector does, which can be inside
# linecache.checkcache's loop over its keys (pdb and doctest call it), and a key removed there
# raises KeyError in that loop.
_dead_files: collections.deque = collections.deque()


def _forget_lines(filename: str) -> None:
    _dead_files.append(filename)


def _define(source: str, namespace: dict):
    """Compile and run `source` in `namespace`; returns its `xform_graph` and the file name
    under which linecache shows its lines (dropped after the code dies: `_forget_lines`)."""
    while _dead_files:
        linecache.cache.pop(_dead_files.popleft(), None)
    filename = f"<xform-generated-{next(_counter)}>"
    for code in _compiled_functions(source, filename):
        exec(code, namespace)
    # Registered so that tracebacks through generated code show its lines, for as long as
    # the code lives (linecache never drops entries without a file by itself).
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return namespace["xform_graph"], filename


def _compiled_functions(source: str, filename: str) -> list:
    """The code of `source` (top-level `def`s only) as one module code per function, each
    compiled on its own (see SEGMENT_LINES) with its line numbers those of `source`."""
    pieces = source.split("\ndef ")
    if len(pieces) == 1:
        return [compile(source, filename, "exec")]
    codes, line = [], 0
    for i, piece in enumerate(pieces):
        text = piece if i == 0 else "def " + piece
        code = compile(text, filename, "exec")
        if line:
            code = code.replace(co_consts=tuple(
                c.replace(co_firstlineno=c.co_firstlineno + line)
                if isinstance(c, types.CodeType) else c for c in code.co_consts))
        codes.append(code)
        line += text.count("\n") + 1
    return codes


class _NumpyRun:
    """A run of scalar equations as numpy statements, which the fast function calls when the
    run falls back: the run's inputs in, its values read after it out. Generated and compiled
    on first need only (most runs never need it, and it would double the source to compile),
    then kept.

    Notes: it holds the run's equations, not the graph: compiled code is cached under its graph
    in weak dictionaries, and must not keep its key alive.
    """

    __slots__ = ("_graph", "_fn", "_lock", "__weakref__")

    def __init__(self, graph: Graph, run: list, inputs, outputs):
        equations = graph.equations
        self._graph = Graph(inputs, (), [equations[i] for i in run], outputs)
        self._fn = None
        self._lock = threading.Lock()

    def __call__(self, *args):
        fn = self._fn
        if fn is None:
            with self._lock:
                if self._fn is None:
                    source, namespace = graph_source(self._graph, scalar_math=None)
                    fn, filename = _define(source, namespace)
                    weakref.finalize(self, _forget_lines, filename)
                    self._fn, self._graph = fn, None
                fn = self._fn
        return fn(*args)


def compile_graph(graph: Graph, debug: bool = False, scalar_math: str | None = EXACT,
                  bare: bool = False) -> CompiledGraph:
    """Compile `graph` once into a Python function (`debug`, `scalar_math`, `bare`: as for
    `graph_source`; callers pass xform.config's).

    >>> from xform.codegen import compile_graph
    >>> compile_graph(xform.make_graph(np.sin)(1.0))(0.0)
    [np.float64(0.0)]
    >>> compile_graph(xform.make_graph(np.sin)(1.0), bare=True)(0.0)
    np.float64(0.0)
    """
    assert not bare or len(graph.outputs) == 1
    source, namespace = graph_source(graph, debug, scalar_math, bare)
    fn, filename = _define(source, namespace)
    compiled = CompiledGraph(graph, source, fn)
    weakref.finalize(compiled, _forget_lines, filename)
    return compiled

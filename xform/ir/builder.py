"""Staging: the GraphBuilder, the current-builder context, and `bind`.

`bind(prim, *args)` emits an equation into the current builder, or evaluates the primitive
eagerly when no builder is active or every argument is concrete (constant folding for free).
A tracer of an enclosing builder is lifted into the current one as a captured input, which is
how closures over outer traced values work without perturbation confusion.
"""
from __future__ import annotations

import dis
import sys
from contextvars import ContextVar

import numpy as np

from xform.errors import (ConcretizationError, ShapeError, TypeCheckError, XformError,
                          out_of_memory_error, recursion_error)
from xform.ir.avals import SCALAR_AVALS, ShapedArray, aval_of, float0
from xform.ir.core import Equation, Graph, Literal, Params, Var, install_bind
from xform.ir.execute import runtime, unwatched
from xform.ir.hooks import user_code_scope
from xform.source_info import is_users_code, user_frame_info
from xform.ir.tracer import Tracer
from xform.ir.registry import RULES, effectful_primitives, missing_rule
from xform.ir.concrete import concretization, derivative_cut, library_error
from xform.ir.values import (NO_VALUE, GuardKey, compute_values, guard_p, keep_values,
                             note_decision, outcome_of)
from xform.tree import LEAF, tree_flatten, tree_unflatten

_current_builder: ContextVar["GraphBuilder | None"] = ContextVar("xform_builder", default=None)
# While a transform re-emits an equation, the equations it makes keep that equation's user line
# and say which rule made them: (source, origin), one variable so a scope costs one set.
_rewriting: ContextVar = ContextVar("xform_rewriting", default=(None, None))


# source_scope's work without its object, for a loop entering one per equation:
# `token = enter_source_scope((source, origin))`, then `leave_source_scope(token)`
enter_source_scope, leave_source_scope = _rewriting.set, _rewriting.reset


def rewritten_source():
    """The user line of the equation a transform is rewriting now, or None."""
    return _rewriting.get()[0]


# The builder staging now, or None: the ContextVar's own bound `get`, one call on hot paths
# (the cached call path asks on every call).
current_builder = _current_builder.get


class using_builder:
    """`with using_builder(b):` makes `b` the current builder (None: none) inside. (A class,
    not a generator context manager: transforms enter one per staging.)"""

    __slots__ = ("builder", "_token")

    def __init__(self, builder: "GraphBuilder | None"):
        self.builder = builder

    def __enter__(self):
        self._token = _current_builder.set(self.builder)
        return self.builder

    def __exit__(self, *exc_info):
        _current_builder.reset(self._token)


class GraphBuilder:
    """Collects equations while a Python function runs on tracers.

    >>> from xform.ir.builder import GraphBuilder, using_builder
    >>> b = GraphBuilder(); x = b.new_input(xform.ShapedArray((), np.float64))
    >>> with using_builder(b): y = np.sin(x)
    >>> print(b.build([y]))
    { lambda a:f64[] . let
        b:f64[] = sin a
      in (b) }
    """

    def __init__(self, parent: "GraphBuilder | None" = None):
        self.parent = parent
        self.inputs: list[Var] = []
        self.equations: list[Equation] = []
        self._consts: dict[int, tuple[Var, np.ndarray]] = {}
        self._captures: dict[int, tuple[Var, Tracer]] = {}
        self._adopted: set[Var] = set()  # Vars shared with adopted graphs (see `adopt`)
        # The frame that called the numpy protocol entry now staging into this builder
        # (xform.ir.tracer), where the search for the user's line starts.
        self.entry_caller = None
        # Staging with values (xform.ir.values): var -> its value for this call, or None
        # when the builder stages abstract values only; `dependent` holds the vars whose
        # value depends on the inputs (a question Python asks of them is guarded),
        # `perturbed` those a derivative flows through (float() of them would cut it).
        self.values: dict | None = None
        self.dependent: set = set()
        self.perturbed: set = set()
        # user line -> guards recorded at it so far, counted across the nested stagings of
        # one call (a checkpointed or custom function called twice asks its line twice)
        self.guard_sites: dict = {} if parent is None else parent.guard_sites
        # (tracer, text or None where unknown, user line): texts of values that depend on
        # the inputs, shown unguarded (`f"{loss:.3f}"`), which a string among the results
        # may hold
        self.shown_texts: list = []
        self.generator_copies: dict = {}   # id(generator) -> the copy staging draws from

    def new_input(self, aval: ShapedArray, value=NO_VALUE, perturbed=False) -> Tracer:
        var = Var(aval)
        self.inputs.append(var)
        if value is not NO_VALUE:
            self.values[var] = value
            self.dependent.add(var)
            if perturbed:
                self.perturbed.add(var)
        return Tracer(self, var)

    def adopt_inputs(self, graph: Graph) -> list[Tracer]:
        """New inputs that are `graph`'s own input Vars, so that `eval_graph(graph, *those)`
        can take `graph`'s equations as they are instead of re-emitting each one."""
        self.inputs.extend(graph.inputs)
        self._adopted.update(graph.inputs)
        return [Tracer(self, var) for var in graph.inputs]

    def adopt(self, graph: Graph) -> bool:
        """Take `graph`'s equations and consts as they are, when its inputs are inputs of this
        builder made by `adopt_inputs` (its Vars are then already ours); returns whether it
        did. Equations are immutable and Vars compare by identity, so sharing them between
        graphs is safe, and costs nothing per equation."""
        if not graph.inputs or any(var not in self._adopted for var in graph.inputs):
            return False
        for var, value in graph.consts:
            self._consts[("adopted", var)] = (var, value)
        self.equations.extend(graph.equations)
        self._adopted.update(var for eqn in graph.equations for var in eqn.outputs)
        return True

    def atom(self, value):
        """The graph atom standing for `value` in this builder."""
        kind = type(value)
        if kind is Tracer:
            if value.builder is self:
                return value.graph_var
            return self._lift(value)
        scalar_aval = SCALAR_AVALS.get(kind)   # (a Python or numpy scalar: most literals)
        if scalar_aval is not None:
            return Literal(value, scalar_aval)
        if isinstance(value, np.ndarray) and value.ndim > 0:
            if type(value) is not np.ndarray:   # xform.numpy.captured's views of constants
                value = getattr(value, "staged_constant", value)
            entry = self._consts.get(id(value))
            if entry is None:
                entry = (Var(ShapedArray(value.shape, value.dtype)), value)
                self._consts[id(value)] = entry
                if self.values is not None:
                    self.values[entry[0]] = value
            return entry[0]
        if isinstance(value, (bool, int, float, complex, np.generic, np.ndarray)):
            aval = aval_of(value)
            if aval.dtype.kind not in "biufc" and aval.dtype != float0:
                raise TypeCheckError(f"cannot stage a value of dtype {aval.dtype}",
                                     user_frame_info())
            return Literal(value, aval)
        if hasattr(type(value), "__dask_graph__") and hasattr(value, "dtype"):
            # A dask array is a constant data source (threaded_map runs it on dask), never
            # read here: reading it would compute it.
            entry = self._consts.get(id(value))
            if entry is None:
                entry = (Var(ShapedArray(value.shape, value.dtype)), value)
                self._consts[id(value)] = entry
            return entry[0]
        raise TypeCheckError(f"cannot stage a value of type {type(value).__name__}; "
                             "expected an array, a numpy or Python scalar", user_frame_info(),
                             "a transformed function's results, has_aux's auxiliary output "
                             "too, hold arrays, numbers, strings and None: keep other "
                             "objects out of them")

    def _lift(self, tracer: Tracer) -> Var:
        entry = self._captures.get(id(tracer))
        if entry is not None:
            return entry[0]
        ancestor = self.parent
        while ancestor is not None and ancestor is not tracer.builder:
            ancestor = ancestor.parent
        if ancestor is None:
            raise XformError("a traced value escaped the function that staged it (it was "
                             "stored outside, e.g. in a global or a list, and used later)",
                             user_frame_info(),
                             "return values from staged functions instead of storing them")
        var = Var(tracer.aval)
        self._captures[id(tracer)] = (var, tracer)
        if self.values is not None:
            # what the enclosing staging knows of it, this one knows
            outer = tracer.builder
            value = NO_VALUE if outer.values is None else outer.values.get(tracer.graph_var,
                                                                            NO_VALUE)
            if value is not NO_VALUE:
                self.values[var] = value
            if outer.values is None or tracer.graph_var in outer.dependent:
                self.dependent.add(var)
            if tracer.graph_var in outer.perturbed:
                self.perturbed.add(var)
        return var

    def decide(self, tracer: Tracer, kind: str, what: str | None = None, site=None):
        """`bool(tracer)` (kind "bool"), `int`, `operator.index` ("index"), `float`,
        `complex`, `hash`: what eager numpy answers for this call's value, guarded when the value
        depends on the inputs (xform.ir.values), at the user's line `site` (default: the line
        asking). Raises the ConcretizationError of `what` (default: `kind`) when there is no
        value, or when float() or complex() would cut a derivative."""
        var = tracer.graph_var
        value = NO_VALUE if self.values is None else self.values.get(var, NO_VALUE)
        if value is NO_VALUE or kind not in ("bool", "hash") and \
                _numpy_writes_it(sys._getframe(2)):
            raise concretization(what or kind)
        outcome = outcome_of(kind, value)
        if var not in self.dependent:
            return outcome      # a constant's answer never changes
        if kind in ("float", "complex") and _formats_it(sys._getframe(2)):
            # `"%.3f" % loss`: shown, as print shows it (Tracer._shown); its text unknown here
            self.shown_texts.append((tracer, None, user_frame_info()))
            return outcome
        if kind in ("float", "complex") and var in self.perturbed:
            raise derivative_cut(kind)
        site = site or user_frame_info()
        key = GuardKey(site, self.guard_sites.get(site, -1) + 1)
        self.guard_sites[site] = key.nth
        bind(guard_p, tracer, key=key, kind=kind, expected=outcome)
        note_decision(key, outcome)
        return outcome

    def is_live(self) -> bool:
        """Whether this staging is in progress: the current builder, or one enclosing it."""
        builder = _current_builder.get()
        while builder is not None:
            if builder is self:
                return True
            builder = builder.parent
        return False

    def constant_value(self, tracer: Tracer):
        """The value of `tracer` when it depends on no input (an array made from constants
        while staging), else None."""
        if tracer.graph_var in self.dependent:
            return None
        value = self.known_value(tracer)
        return None if value is None else np.asarray(value)

    def known_value(self, tracer: Tracer):
        """This call's value of `tracer` where the staging computed it, else None."""
        if self.values is None:
            return None
        value = self.values.get(tracer.graph_var, NO_VALUE)
        return None if value is NO_VALUE else value

    @property
    def captured_values(self) -> list[Tracer]:
        if not self._captures:      # (most stagings)
            return []
        return [tracer for _, tracer in self._captures.values()]

    def build(self, outputs) -> Graph:
        """Close the builder: inputs are the explicit inputs, then the captured values."""
        out_atoms = []
        for out in outputs:
            out_atoms.append(out.graph_var if type(out) is Tracer and out.builder is self
                             else self.atom(out))
        inputs = self.inputs
        if self._captures:
            inputs = inputs + [var for var, _ in self._captures.values()]
        return Graph(inputs, tuple(self._consts.values()), self.equations, out_atoms)


def _numpy_writes_it(caller) -> bool:
    """Whether the user's line asking (`caller`, the frame that called the tracer's method)
    is numpy's own write into a concrete array, `y[i] = x`: the value would be frozen into
    `y`, which numpy writes itself (an array made in the function by np.zeros stages it)."""
    code = caller.f_code
    if not is_users_code(code.co_filename):
        return False
    return code.co_code[caller.f_lasti] == _STORE_SUBSCR


_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]


def _formats_it(caller) -> bool:
    """Whether the line asking (`caller`) runs `text % values`, printf-style formatting (a
    `%` of numbers would stage, not ask): `print("loss %.3f" % loss)`, or logging's."""
    code = caller.f_code.co_code
    return code[caller.f_lasti] == _BINARY_OP and code[caller.f_lasti + 1] in _REMAINDERS


_BINARY_OP = dis.opmap["BINARY_OP"]
_REMAINDERS = frozenset(i for i, (_, symbol) in enumerate(dis._nb_ops) if symbol in ("%", "%="))


class KnownValues:
    """What a staging knows of its argument leaves: `values` (NO_VALUE where unknown), and
    `perturbed`, the positions a derivative flows through (float() of them is refused).

    >>> from xform.ir.builder import KnownValues
    >>> KnownValues.of([np.ones(2), 3.0], perturbed=(0,)).perturbed
    frozenset({0})
    """

    __slots__ = ("values", "perturbed")

    def __init__(self, values, perturbed=frozenset()):
        self.values = values
        self.perturbed = perturbed

    @classmethod
    def of(cls, leaves, perturbed=()):
        """The leaves of a call: concrete ones are their own values; a tracer's value is
        its staging's, and it is perturbed when a derivative flows through it there."""
        values = []
        flows = set(perturbed)
        for i, leaf in enumerate(leaves):
            if type(leaf) is Tracer:
                builder = leaf.builder
                values.append(NO_VALUE if builder.values is None
                              else builder.values.get(leaf.graph_var, NO_VALUE))
                if leaf.graph_var in builder.perturbed:
                    flows.add(i)
            else:
                values.append(leaf)
        return cls(values, frozenset(flows))

    def perturbing(self, positions) -> "KnownValues":
        """The same values with a derivative flowing through `positions` too."""
        return KnownValues(self.values, self.perturbed | frozenset(positions))

    def taking(self, positions) -> "KnownValues":
        """The values at `positions` only, in that order."""
        index = {p: i for i, p in enumerate(positions)}
        return KnownValues([self.values[p] for p in positions],
                           frozenset(index[p] for p in self.perturbed if p in index))


def known_values(leaves):
    """The KnownValues of a call's leaves inside an enclosing staging, or None when that
    staging knows none of them (it stages abstract values)."""
    known = KnownValues.of(leaves)
    return known if any(v is not NO_VALUE for v in known.values) else None


class source_scope:
    """Equations emitted inside carry `source` (the user line of the equation being rewritten)
    and `origin` (the rule emitting them, e.g. "jvp of sin").

    (A class, not a generator context manager: transforms enter one per equation.)
    """

    __slots__ = ("_scope", "_token")

    def __init__(self, source, origin=None):
        self._scope = (source, origin)

    def __enter__(self):
        self._token = _rewriting.set(self._scope)

    def __exit__(self, *exc_info):
        _rewriting.reset(self._token)


def bind(prim, *args, **params):
    """Apply `prim` to `args`: emit an equation when staging, else evaluate its impl."""
    builder = _current_builder.get()
    if builder is not None:
        for a in args:
            if type(a) is Tracer:
                break
        else:
            # An effect (a random draw) is staged even on constants: each call must run it.
            if prim not in effectful_primitives():
                builder = None
        if builder is not None:
            stage = _stage_equation if sys.getprofile() is None else _stage_unwatched
            return stage(builder, prim, args, params, sys._getframe(1))
    for a in args:
        if type(a) is Tracer:
            raise XformError("a traced value escaped the function that staged it",
                             user_frame_info(),
                             "return values from staged functions instead of storing them")
    rules = RULES.get(prim)
    if rules is None or rules.impl is None:
        raise missing_rule(prim, "impl", user_frame_info())
    return rules.impl(*args, **params)


def call_back(function, *args, **kwargs):
    """`function(*args, **kwargs)`, the user's function that an implementation of a numpy
    function calls (np.piecewise's functions): the lines of the equations it stages are
    searched for from its own frames, not from the numpy call's (`entry_caller`)."""
    builder = _current_builder.get()
    if builder is None:
        return function(*args, **kwargs)
    outer, builder.entry_caller = builder.entry_caller, None
    try:
        return function(*args, **kwargs)
    finally:
        builder.entry_caller = outer


_NO_PARAMS = Params()   # shared by the equations without parameters (Params are immutable)


def _stage_equation(builder, prim, args, params, caller):
    """Stage `prim` on `args`; `caller` is the frame that called `bind`, where the search
    for the user's line starts (the frames below it are xform's)."""
    source, origin = _rewriting.get()
    if source is None:
        # From the entry's caller when one is known: the frames between it and `caller` are
        # xform's, and each step of the search makes a frame object.
        source = user_frame_info(builder.entry_caller or caller)
    rules = RULES.get(prim)
    if rules is None or rules.abstract_eval is None:
        raise missing_rule(prim, "abstract_eval", source)
    in_atoms, in_avals = [], []
    for a in args:
        atom = a.graph_var if type(a) is Tracer and a.builder is builder else builder.atom(a)
        in_atoms.append(atom)
        in_avals.append(atom.aval)
    try:
        out_avals = rules.abstract_eval(*in_avals, **params)
    except XformError as err:
        if err.source is None:
            raise type(err)(err.cause, source, err.hint) from None
        raise
    except (ValueError, TypeError, IndexError) as err:
        raise ShapeError(f"{prim.name}: {err}", source,
                         "make the operands' shapes fit (numpy's broadcasting rules): "
                         "reshape, transpose or broadcast explicitly") from None
    if prim.multiple_results:
        outs = [Var(aval) for aval in out_avals]
        eqn = Equation(prim, in_atoms, outs, Params(params) if params else _NO_PARAMS,
                       source, origin)
        builder.equations.append(eqn)
        if builder.values is not None and outs:
            compute_values(builder, eqn, rules)
        return [Tracer(builder, var) for var in outs]
    out = Var(out_avals)
    eqn = Equation(prim, in_atoms, (out,), Params(params) if params else _NO_PARAMS, source,
                   origin)
    builder.equations.append(eqn)
    if builder.values is not None:
        compute_values(builder, eqn, rules)
    return Tracer(builder, out)


# _stage_equation with the watcher's profile hook paused, for `bind` when a profile function is
# installed (a rule's bind below the tracer's entry points finds it paused already)
_stage_unwatched = unwatched(_stage_equation)

install_bind(bind)    # Primitive.bind is `bind` from now on


def _user_code_error(err):
    """What to raise, from None, for `err` raised by the staged user code; None to re-raise
    `err` as it is."""
    if isinstance(err, (ValueError, TypeError, AttributeError)):
        # `array[i] = tracer`: numpy replaces Tracer.__float__'s error by its own
        if isinstance(err.__cause__, XformError):
            return err.__cause__
        return library_error(err)
    if isinstance(err, XformError):
        return err
    # a RecursionError, or a MemoryError (a huge constant made while staging)
    return recursion_error(err) if isinstance(err, RecursionError) else out_of_memory_error(err)


def _guard_shown_texts(builder, out) -> None:
    """Guard the values whose text a string among the results `out` holds (`"loss " +
    str(loss)`): a cached path would return the first call's text on every call. (Text only
    shown, by print or logging, stays unguarded: a path per value of a logged loss.)"""
    strings = [leaf for leaf in tree_flatten(out)[0] if isinstance(leaf, str)]
    for tracer, text, site in builder.shown_texts if strings else ():
        if text is not None and not any(text in string for string in strings):
            continue
        if tracer.size != 1:
            raise ConcretizationError(
                "the text of a traced array in a string among the results: the string would "
                "be the first call's on every later call", site, "return the array itself "
                "(with has_aux), and make its text after the call")
        builder.decide(tracer, "hash", site=site)


def stage_function(fun, in_tree, avals, known=None):
    """Stage `fun(*args)` on tracers of `avals` laid out as `in_tree`; with `known` (a
    KnownValues), tracers that carry this call's values (xform.ir.values).

    Returns (graph, captured, out_tree): the graph's inputs are the argument leaves, then the
    traced values of enclosing stagings that `fun` closes over (`captured`, in order).
    """
    while True:
        builder = GraphBuilder(parent=current_builder())
        if known is None:
            inputs = [builder.new_input(aval) for aval in avals]
        else:
            builder.values = {}
            perturbed = known.perturbed
            inputs = []
            for i, (aval, value) in enumerate(zip(avals, known.values)):
                inputs.append(builder.new_input(aval, value, i in perturbed))
        # (using_builder's work without its object: a first call stages once)
        token = _current_builder.set(builder)
        try:
            args = tree_unflatten(in_tree, inputs)
            installed = None
            try:
                try:
                    # (the scope installs the stand-ins that arrived before it)
                    scope = user_code_scope()
                    with scope as installed:
                        out = scope.call(fun, args)
                        if builder.shown_texts:
                            _guard_shown_texts(builder, out)
                except (ValueError, TypeError, AttributeError, RecursionError,
                        MemoryError) as err:
                    raised = _user_code_error(err)
                    if raised is None:
                        raise
                    raise raised from None
                break
            except Exception:
                # A SciPy module imported while `fun` ran: its stand-ins were not in place
                # for all of this run, and are now (`fun` runs again: a staging has no
                # effects).
                if installed is None or runtime().stand_ins_installed(True) == installed:
                    raise
        finally:
            _current_builder.reset(token)
    if type(out) is Tracer:     # (most often: no walk)
        out_leaves, out_tree = [out], LEAF
    else:
        out_leaves, out_tree = tree_flatten(out, texts_static=True)
    graph = builder.build(out_leaves)
    if builder.values is not None and builder.parent is None:
        keep_values(builder.values, builder.equations, builder.dependent)
    return graph, builder.captured_values, out_tree

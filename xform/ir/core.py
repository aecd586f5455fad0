"""The IR as data: Var, Literal, Equation, Graph, Params and Primitive.

Everything here is immutable and knows nothing about rules or transforms. Vars compare by
identity and carry no names: the printer names them.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from xform.ir.avals import ShapedArray
from xform.source_info import SourceInfo


def install_bind(bind) -> None:
    """Make `bind` (xform.ir.builder's) `Primitive.bind` itself, installed by the builder when
    it is imported: it imports this module, so this one cannot import it, and a method calling
    it would cost every staged equation and every eager rule operation a frame. (Every import
    of an xform module runs xform/__init__, which imports the builder.)"""
    bind.__doc__ = Primitive.bind.__doc__
    Primitive.bind = bind


@attrs.frozen(eq=False, repr=False)
class Primitive:
    """An operation the IR knows; its rules live in the registry.

    >>> square_p = xform.Primitive("square")
    >>> _ = square_p.def_impl(lambda x: x * x)    # each def_* returns its function
    >>> square_p.bind(3.0)    # eager: the impl runs
    9.0
    """

    name: str
    multiple_results: bool = False

    def __repr__(self) -> str:
        return self.name

    def bind(self, *args, **params):
        """Stage (under a builder) or evaluate (eagerly) this primitive on `args`."""
        raise NotImplementedError("xform.ir.builder installs Primitive.bind (install_bind)")

    # JAX-style registration, forwarded to the rule table (xform.ir.registry). Each returns
    # `fn`, so it also works as a decorator: `@p.def_impl`.
    def _define(self, kind, fn, symbolic_zeros=False):
        from xform.ir.registry import define_rule
        define_rule(self, kind, fn, symbolic_zeros)
        return fn

    def _rule(self, kind, fn, symbolic_zeros):
        if fn is None:    # `@p.def_jvp(symbolic_zeros=True)`
            return lambda fn: self._define(kind, fn, symbolic_zeros)
        return self._define(kind, fn, symbolic_zeros)

    def def_impl(self, fn):
        """`fn(*arrays, **params)` computes the primitive on numpy values.

        >>> p = xform.Primitive("scaled_sin")
        >>> _ = p.def_impl(lambda x, *, k: np.sin(k * x))
        >>> p.bind(np.pi / 4, k=2.0)
        np.float64(1.0)
        """
        return self._define("impl", fn)

    def def_abstract_eval(self, fn):
        """`fn(*avals, **params)` returns the output ShapedArray (a list when
        `multiple_results`); a ValueError/TypeError becomes a ShapeError at the user's line.

        >>> p = xform.Primitive("scaled_sin")
        >>> _ = p.def_abstract_eval(lambda x, *, k: xform.ShapedArray(x.shape, x.dtype))
        >>> print(xform.make_graph(lambda x: p.bind(x, k=2.0))(np.ones(3)))   # needs no impl
        { lambda a:f64[3] . let
            b:f64[3] = scaled_sin[k=2.0] a
          in (b) }
        """
        return self._define("abstract_eval", fn)

    def def_jvp(self, fn=None, *, symbolic_zeros=False):
        """`fn(primals, tangents, **params) -> (out, tangent_out)`. Zero tangents arrive as
        zero arrays, or with `symbolic_zeros=True` as `xform.extend.Zero(aval)` (skip their
        work; a Zero may be returned too). Reverse mode derives the vjp from it when the ops
        it emits on the tangents have transpose rules.

        >>> p = xform.Primitive("scaled_sin")
        >>> _ = p.def_impl(lambda x, *, k: np.sin(k * x))
        >>> _ = p.def_abstract_eval(lambda x, *, k: x)
        >>> _ = p.def_jvp(lambda primals, tangents, *, k:
        ...               (p.bind(*primals, k=k), k * np.cos(k * primals[0]) * tangents[0]))
        >>> xform.grad(lambda x: p.bind(x, k=2.0))(0.0)    # reverse mode, derived from the jvp
        np.float64(2.0)
        """
        return self._rule("jvp", fn, symbolic_zeros)

    def def_vjp(self, fn=None, *, symbolic_zeros=False):
        """`fn(primals, out, ct, **params) -> tuple` of one cotangent (or None) per input; a
        zero `ct` arrives as zeros, or with `symbolic_zeros=True` as a `Zero`.

        >>> p = xform.Primitive("scaled_sin")
        >>> _ = p.def_impl(lambda x, *, k: np.sin(k * x))
        >>> _ = p.def_abstract_eval(lambda x, *, k: x)
        >>> _ = p.def_vjp(lambda primals, out, ct, *, k: (k * np.cos(k * primals[0]) * ct,))
        >>> xform.grad(lambda x: p.bind(x, k=2.0))(0.0)
        np.float64(2.0)
        """
        return self._rule("vjp", fn, symbolic_zeros)

    def def_transpose(self, fn=None, *, symbolic_zeros=False):
        """`fn(ct, *inputs, **params) -> tuple` of cotangents for a primitive linear in
        some inputs; those arrive as `Undefined(aval)` (xform.extend.Undefined). A zero `ct`
        arrives as zeros, or with `symbolic_zeros=True` as a `Zero`.

        >>> p = xform.Primitive("scale")    # k * x: linear in x
        >>> _ = p.def_impl(lambda x, *, k: k * x); _ = p.def_abstract_eval(lambda x, *, k: x)
        >>> _ = p.def_jvp(lambda primals, tangents, *, k: (p.bind(*primals, k=k),
        ...                                                p.bind(*tangents, k=k)))
        >>> _ = p.def_transpose(lambda ct, x, *, k: (p.bind(ct, k=k),))
        >>> xform.grad(lambda x: p.bind(x, k=3.0))(1.0)    # the jvp's `scale`, transposed
        np.float64(3.0)
        """
        return self._rule("transpose", fn, symbolic_zeros)

    def def_batch(self, fn):
        """`fn(size, args, dims, **params) -> (out, out_dim)`; a dim is an int or None (not
        mapped). Without one, vmap loops in Python (and warns once).

        >>> p = xform.Primitive("scale")
        >>> _ = p.def_impl(lambda x, *, k: k * x); _ = p.def_abstract_eval(lambda x, *, k: x)
        >>> _ = p.def_batch(lambda size, args, dims, *, k: (p.bind(*args, k=k), dims[0]))
        >>> xform.vmap(lambda x: p.bind(x, k=3.0))(np.arange(3.0))    # one `scale`, no loop
        array([0., 3., 6.])
        """
        return self._define("batch", fn)


@attrs.frozen(eq=False, repr=False, init=False)
class Var:
    """A value defined once in a graph. Equality is identity; `hint` is for debugging only.

    >>> xform.Var(xform.ShapedArray((3,), np.float64))    # printed as `a:f64[3]` in a graph
    Var(f64[3])
    """

    aval: ShapedArray
    hint: str = ""

    def __init__(self, aval: ShapedArray, hint: str = ""):
        # (written out: staging makes one per equation, and attrs' frozen __init__ sets each
        # field through a bound object.__setattr__)
        _set_var_aval(self, aval)
        _set_var_hint(self, hint)

    def __repr__(self) -> str:
        return f"Var({self.aval.str_short()})"


@attrs.frozen(eq=False, repr=False, init=False)
class Literal:
    """A scalar constant written into the graph.

    >>> xform.make_graph(lambda x: x * 2.0)(np.ones(2)).equations[0].inputs[1]
    Literal(2.0)
    """

    value: Any
    aval: ShapedArray

    def __init__(self, value, aval: ShapedArray):
        # (written out, as Var's: staging makes one per scalar operand)
        _set_literal_value(self, value)
        _set_literal_aval(self, aval)

    def __repr__(self) -> str:
        return f"Literal({self.value!r})"


Atom = Var | Literal


_dict_init = dict.__init__


class Params(dict):
    """A frozen, hashable mapping of equation parameters. A dict underneath, so that
    `rule(*args, **eqn.params)` unpacks it at C speed (transforms do it for every equation);
    every method that would change it raises.

    >>> from xform.ir.core import Params
    >>> params = Params({"axes": (0,)})
    >>> params["axes"], hash(params) == hash(Params({"axes": (0,)}))
    ((0,), True)
    """

    __slots__ = ("_hash", "_subgraphs")

    def __init__(self, items: Mapping = ()):
        # (dict's __init__ called directly: staging makes one Params per equation)
        _dict_init(self, items)
        self._hash = None
        self._subgraphs = None  # whether a Graph is among the values (`holds_subgraphs`)

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(tuple(sorted((k, _hashable(v)) for k, v in self.items())))
        return self._hash

    def __eq__(self, other):
        if not isinstance(other, Params) or self.keys() != other.keys():
            return False
        return all(_hashable(v) == _hashable(other[k]) for k, v in self.items())

    def __ne__(self, other):
        return not self == other

    def __reduce__(self):
        return Params, (dict(self),)

    def _immutable(self, *args, **kwargs):
        raise TypeError("Params are immutable: make a new one, e.g. Params({**p, key: value})")

    __setitem__ = __delitem__ = __ior__ = _immutable
    clear = pop = popitem = setdefault = update = _immutable

    def __repr__(self):
        return f"Params({dict.__repr__(self)})"


def _hashable(value):
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.shape, value.dtype.str, value.tobytes())
    try:
        hash(value)
    except TypeError:
        return id(value)
    return value


@attrs.frozen(eq=False, repr=False, init=False)
class Equation:
    """`outputs = primitive(*inputs, **params)`, with the user line that made it.

    >>> def f(x):
    ...     return np.sin(x) * 2.0
    >>> eqn = xform.make_graph(f)(np.ones(2)).equations[0]
    >>> eqn.primitive, eqn.inputs, eqn.source.function    # source: the user line, in `f`
    (sin, (Var(f64[2]),), 'f')
    """

    primitive: Primitive
    inputs: tuple[Atom, ...]
    outputs: tuple[Var, ...]
    params: Params
    source: SourceInfo | None = None
    origin: str | None = None  # the rule that emitted it, e.g. "jvp of sin" (for debugging)

    def __init__(self, primitive, inputs, outputs, params=None, source=None, origin=None):
        # (written out, as Var's: converting only what is not a tuple or Params already)
        _set_eqn_primitive(self, primitive)
        _set_eqn_inputs(self, inputs if type(inputs) is tuple else tuple(inputs))
        _set_eqn_outputs(self, outputs if type(outputs) is tuple else tuple(outputs))
        _set_eqn_params(self, params if type(params) is Params else Params(params or ()))
        _set_eqn_source(self, source)
        _set_eqn_origin(self, origin)

    def __repr__(self) -> str:
        return f"Equation({self.primitive.name}, {len(self.inputs)} in, {len(self.outputs)} out)"


# The setters of the slots (a frozen class refuses setattr: its __init__ sets them so)
_set_var_aval, _set_var_hint = (getattr(Var, name).__set__ for name in ("aval", "hint"))
_set_literal_value, _set_literal_aval = (getattr(Literal, name).__set__
                                         for name in ("value", "aval"))
(_set_eqn_primitive, _set_eqn_inputs, _set_eqn_outputs, _set_eqn_params, _set_eqn_source,
 _set_eqn_origin) = (getattr(Equation, field.name).__set__ for field in attrs.fields(Equation))


@attrs.frozen
class GraphType:
    in_avals: tuple[ShapedArray, ...]
    out_avals: tuple[ShapedArray, ...]


@attrs.frozen(eq=False, repr=False)
class Graph:
    """A closed graph: `inputs`, array `consts`, `equations` in order, `outputs`.

    Hash and equality are identity, so graphs key caches. Sub-graphs live only in params.
    >>> print(xform.make_graph(np.sin)(1.0))
    { lambda a:~f64[] . let
        b:f64[] = sin a
      in (b) }
    """

    inputs: tuple[Var, ...] = attrs.field(converter=tuple)
    consts: tuple[tuple[Var, np.ndarray], ...] = attrs.field(converter=tuple)
    equations: tuple[Equation, ...] = attrs.field(converter=tuple)
    outputs: tuple[Atom, ...] = attrs.field(converter=tuple)

    # (set on first use, not a functools.cached_property: on a slotted attrs class that makes
    # attrs define __getattr__, which keeps CPython from specializing every read of a field)
    _type: GraphType | None = attrs.field(default=None, init=False)

    @property
    def type(self) -> GraphType:
        found = self._type
        if found is None:
            found = GraphType(tuple(v.aval for v in self.inputs),
                              tuple(v.aval for v in self.outputs))
            object.__setattr__(self, "_type", found)
        return found

    @property
    def in_avals(self):
        return self.type.in_avals

    @property
    def out_avals(self):
        return self.type.out_avals

    def __str__(self) -> str:
        from xform.ir.pprint import pprint_graph
        return pprint_graph(self)

    def __repr__(self) -> str:
        return self.__str__()

    def _repr_html_(self) -> str:
        from xform.ir.pprint import graph_html
        return graph_html(self)

    def check(self) -> "Graph":
        """Verify well-formedness (see xform.ir.check); returns self for chaining."""
        from xform.ir.check import check_graph
        check_graph(self)
        return self


def subgraphs(params: Mapping):
    """Every Graph held in `params`, directly or inside tuples."""
    for value in params.values():
        if isinstance(value, Graph):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, Graph):
                    yield item


def holds_subgraphs(params: Mapping) -> bool:
    """Whether `params` hold a Graph, directly or inside a tuple (`subgraphs` not empty),
    remembered by a Params: staging asks it of each equation, and the passes again."""
    remembered = type(params) is Params
    if remembered and params._subgraphs is not None:
        return params._subgraphs
    found = False
    for value in params.values():
        kind = type(value)
        if kind is Graph or kind is tuple and Graph in map(type, value):
            found = True
            break
    if remembered:
        params._subgraphs = found
    return found


def rewire(graph: Graph, inputs, outputs=None) -> Graph:
    """`graph` with new inputs and outputs. `inputs` holds, per new input, an existing input
    Var of `graph` or a ShapedArray for a fresh, unused input; `outputs` holds indices into
    `graph.outputs` (default: all)."""
    new_inputs = [item if isinstance(item, Var) else Var(item) for item in inputs]
    new_outputs = graph.outputs if outputs is None else [graph.outputs[i] for i in outputs]
    return Graph(new_inputs, graph.consts, graph.equations, new_outputs)

"""Algebraic simplification: a table of rewrites (data) and one small driver. A rule
matches an equation by its primitive's role or algebraic trait, reads its producers and known
values, and returns the equations or atoms standing for it. Each rule says whether it keeps
numpy's bits (`exact`) and, if not, whether it only changes rounding (`in_gradients`);
`simplify`'s `level` picks (xform.config.algebra, see `LEVELS`). Each rule is tested in
tests/passes/test_simplify.py."""
from __future__ import annotations

import itertools

import attrs
import numpy as np

from xform.ir.avals import ShapedArray
from xform.ir.core import Equation, Graph, Literal, Params, Var
from xform.ir.registry import (RULES as PRIMITIVE_RULES, UNKNOWN, derived, hooks_named,
                               on_rules_change, primitive_for, rule_for)
from xform.passes.dce import eliminate_dead_code
from xform.passes.fold import peepholes
from xform.passes.rewrite import GraphRewriter, literal_of


@attrs.frozen
class Trait:
    """A pattern's primitive given by an algebraic trait (a field of xform.ir.registry.Hooks):
    every primitive declaring it, a library author's included; with `named`, the primitives
    that some primitive names as its `name` (exp, named by log's `inverted_by`)."""

    name: str
    named: bool = False

    def primitives(self) -> frozenset:
        declared = hooks_named(self.name)
        return frozenset(declared.values() if self.named else declared)


@attrs.frozen
class Rewrite:
    """`rewrite(eqn, known) -> list of Equations | tuple of atoms | None`: the equations
    computing `eqn`'s outputs (the same Vars), the atoms standing for its outputs, or None
    when it does not match. `known.producer` maps a Var to the equation computing it,
    `known.value(atom)` is its value when known at pass time (a Literal or a constant), else
    UNKNOWN. `exact`: whether the rewrite gives numpy's bits on every input. `in_gradients`:
    whether an inexact rule only changes rounding (it reorders finite sums and products), so
    that it may run before differentiating a function whose value is not returned.

    The pattern a rule matches is its `primitive` (a role, as `register(..., role=)` gives
    it, or a `Trait`), and where given: `operand_of`, `(positions, makers)`: an operand at one
    of `positions` is made by one of `makers` (roles, or a Trait); `equal_operands`: its two
    operands are the same Var; `literal_operand`: some operand is a Literal; `array_result`:
    its result is not 0-d. The driver tests the pattern before calling `rewrite`, and skips a
    graph where no equation is of any rule's pattern, so a pattern must only say what
    `rewrite` requires: a rule whose pattern says less is tried more often, never less.
    `when`: see below."""

    name: str
    primitive: object
    rewrite: object
    exact: bool
    doc: str
    in_gradients: bool = True
    operand_of: tuple = ()
    equal_operands: bool = False
    literal_operand: bool = False
    array_result: bool = False
    when: object = None
    """None, or `when(graph) -> bool`: whether the rule can match in `graph` at all (a scan
    cheaper than the driver, which then skips graphs none of its rewrites can change)."""

    def matches(self, eqn, makers, producer) -> bool:
        """Whether `eqn` (of the rule's primitive: the driver's key) is of this rule's
        pattern; `makers` are the primitives `operand_of` names (None: no such condition),
        `producer` maps a Var to the equation computing it."""
        inputs = eqn.inputs
        if self.equal_operands and inputs[0] is not inputs[1]:
            return False
        if self.literal_operand and Literal not in map(type, inputs):
            return False
        if self.array_result and not eqn.outputs[0].aval.shape:
            return False
        if makers is None:
            return True
        for position in self.operand_of[0]:
            maker = producer.get(inputs[position])
            if maker is not None and maker.primitive in makers:
                return True
        return False


def _made_by(positions, *makers) -> tuple:
    """`operand_of`: an operand at `positions` (one or a tuple) made by one of `makers`."""
    positions = positions if type(positions) is tuple else (positions,)
    return positions, makers


def _primitives(key) -> frozenset:
    """The registered primitives a pattern's key (a role or a Trait) stands for."""
    if type(key) is Trait:
        return key.primitives()
    return frozenset((primitive_for(key),))


@attrs.define
class Known:
    """What a rule may read about the graph rewritten so far."""

    producer: dict
    consts: dict
    _computed: dict = attrs.field(factory=dict, init=False)
    _indexed: int = attrs.field(default=0, init=False)

    def computed(self, role: str, inputs, params=Params({})):
        """An equation emitted so far computing the primitive of `role` of `inputs` (Literals
        match by value) with `params`, else None."""
        fresh = len(self.producer) - self._indexed
        if fresh:   # index what was emitted since the last question
            for eqn in itertools.islice(reversed(self.producer.values()), fresh):
                key = _computation(eqn.primitive, eqn.inputs, eqn.params)
                self._computed.setdefault(key, eqn)
            self._indexed = len(self.producer)
        return self._computed.get(_computation(primitive_for(role), inputs, params))

    def value(self, atom):
        if type(atom) is Literal:
            return atom.value
        return self.consts.get(atom, UNKNOWN)

    def made_by(self, atom, role: str):
        """The equation computing `atom` when its primitive is the one of `role`, else None."""
        eqn = self.producer.get(atom) if type(atom) is Var else None
        return eqn if eqn is not None and eqn.primitive is primitive_for(role) else None


def _atom_key(atom):
    """A Var itself, a Literal as its value (Literals are equal when their values are)."""
    if type(atom) is Var:
        return atom
    return (type(atom.value), atom.aval, np.asarray(atom.value).tobytes())


def _computation(prim, inputs, params) -> tuple:
    return (prim, params) + tuple(_atom_key(a) for a in inputs)


def _full_sum(eqn) -> bool:
    """A sum over every axis of a floating array, in its own dtype."""
    x, out = eqn.inputs[0], eqn.outputs[0]
    return (type(x) is Var and len(eqn.params["axes"]) == x.aval.ndim
            and out.aval.dtype == x.aval.dtype and x.aval.dtype.kind == "f")


def _sum_of(x: Var, out: Var | None = None) -> Equation:
    out = out if out is not None else Var(ShapedArray((), x.aval.dtype))
    return Equation(primitive_for("sum"), [x], [out],
                    Params({"axes": tuple(range(x.aval.ndim)), "dtype": None}))


def _literal(value, dtype):
    return literal_of(value, ShapedArray((), dtype))


def _is_scalar(atom) -> bool:
    return atom.aval.shape == ()


def _all_equal(value, scalar) -> bool:
    if type(value) in (int, float):   # most literals: skip numpy's array machinery
        return value == scalar
    return value is not UNKNOWN and bool(np.all(np.asarray(value) == scalar))


# -- sums ------------------------------------------------------------------------------------

def _sum_of_view(view):
    """sum(view(x)) = sum(x) for a view (a role) that only rearranges x's elements."""
    def rewrite(eqn, known):
        inner = known.made_by(eqn.inputs[0], view)
        if inner is None or not _full_sum(eqn) or type(inner.inputs[0]) is not Var:
            return None
        return [_sum_of(inner.inputs[0], eqn.outputs[0])]
    return rewrite


def _sum_of_outer_product(eqn, known):
    inner = known.made_by(eqn.inputs[0], "multiply")
    if inner is None or not _full_sum(eqn):
        return None
    a, b = inner.inputs
    if type(a) is not Var or type(b) is not Var or a.aval.ndim != b.aval.ndim:
        return None
    if a.aval.dtype != b.aval.dtype or a.aval.dtype != eqn.outputs[0].aval.dtype:
        return None
    # Each axis spans at most one operand: the product's sum is the product of the sums.
    if any(m > 1 and n > 1 for m, n in zip(a.aval.shape, b.aval.shape)):
        return None
    sum_a, sum_b = _sum_of(a), _sum_of(b)
    product = Equation(inner.primitive, [sum_a.outputs[0], sum_b.outputs[0]],
                       [eqn.outputs[0]])
    return [sum_a, sum_b, product]


def _sum_of_broadcast(eqn, known):
    inner = known.made_by(eqn.inputs[0], "broadcast_to")
    if inner is None or not _full_sum(eqn) or type(inner.inputs[0]) is not Var:
        return None
    x = inner.inputs[0]
    if x.aval.dtype != eqn.outputs[0].aval.dtype:
        return None
    copies = eqn.inputs[0].aval.size // max(x.aval.size, 1)
    total = _sum_of(x)
    scale = Equation(primitive_for("multiply"),
                     [total.outputs[0], _literal(copies, x.aval.dtype)], [eqn.outputs[0]])
    return [total, scale]


def _extremum_of_broadcast(eqn, known):
    """max/min over every axis of broadcast_to(x) is max/min of x: the same elements."""
    inner = known.made_by(eqn.inputs[0], "broadcast_to")
    if (inner is None or type(inner.inputs[0]) is not Var
            or len(eqn.params["axes"]) != eqn.inputs[0].aval.ndim
            or eqn.inputs[0].aval.size == 0):
        return None
    x = inner.inputs[0]
    if x.aval.dtype != eqn.outputs[0].aval.dtype:
        return None
    params = Params({**eqn.params, "axes": tuple(range(x.aval.ndim))})
    return [attrs.evolve(eqn, inputs=[x], params=params)]


def _dot_with_ones(eqn, known):
    """x @ ones = sum(x, -1) and ones @ x = sum(x, -2) (or sum(x) for vectors)."""
    a, b = eqn.inputs
    out = eqn.outputs[0]
    if out.aval.dtype.kind != "f" or a.aval.dtype != out.aval.dtype \
            or b.aval.dtype != out.aval.dtype:
        return None
    for ones, x, axis in ((b, a, -1), (a, b, -2)):
        if ones.aval.ndim != 1 or x.aval.ndim < 1 or type(x) is not Var:
            continue
        if not _all_equal(known.value(ones), 1):
            continue
        axis = x.aval.ndim - 1 if x.aval.ndim == 1 else x.aval.ndim + axis
        return [Equation(primitive_for("sum"), [x], [out],
                         Params({"axes": (axis,), "dtype": None}))]
    return None


# -- products --------------------------------------------------------------------------------

def _scales(eqn, known):
    """(x, a, b) for (x * a) * b, any order of operands, with 0-d a and b and x of the result's
    type, or None."""
    out = eqn.outputs[0]
    if out.aval.dtype.kind not in "fc":
        return None
    for inner_pos in (0, 1):
        inner = known.made_by(eqn.inputs[inner_pos], "multiply")
        b = eqn.inputs[1 - inner_pos]
        if inner is None or not _is_scalar(b) or inner.outputs[0].aval != out.aval:
            continue
        for x_pos in (0, 1):
            x, a = inner.inputs[x_pos], inner.inputs[1 - x_pos]
            if _is_scalar(a) and x.aval == out.aval:
                return x, a, b
    return None


def _repeated_constant_scaling(eqn, known):
    """(x * a) * b = x * (a * b) for Literals a, b, whose product is computed now."""
    found = _scales(eqn, known)
    if found is None or type(found[1]) is not Literal or type(found[2]) is not Literal:
        return None
    x, a, b = found
    if a.aval.dtype != b.aval.dtype:
        return None
    dtype = a.aval.dtype
    with np.errstate(all="ignore"):
        value = np.asarray(a.value, dtype) * np.asarray(b.value, dtype)
    if not np.isfinite(value) or (value == 0 and a.value != 0 and b.value != 0):
        return None   # a * b overflows or underflows where (x * a) * b may not
    weak = a.aval.weak_type and b.aval.weak_type
    scale = literal_of(value, a.aval if weak else ShapedArray((), dtype))
    return [Equation(eqn.primitive, [x, scale], [eqn.outputs[0]])]


def _repeated_scaling(eqn, known):
    """(x * a) * b = x * (a * b) for 0-d values a, b: one pass over x instead of two."""
    found = _scales(eqn, known)
    if found is None or found[0].aval.size <= 1:
        return None   # a scalar x: still two multiplies
    x, a, b = found
    if type(a) is Literal and type(b) is Literal:
        return None   # the constants' rule, which checks their product
    ab = Var(ShapedArray((), np.result_type(a.aval.dtype, b.aval.dtype)))
    if ab.aval.dtype != eqn.outputs[0].aval.dtype:
        return None
    return [Equation(eqn.primitive, [a, b], [ab]),
            Equation(eqn.primitive, [x, ab], [eqn.outputs[0]])]


def _undone(eqn, known):
    """g(f(x)) = x for x >= 0 (f = log: log 0 = -inf, exp -inf = 0) and nan below, where f
    declares g its `inverted_by`: two cheap passes over x instead of two transcendental ones;
    `+ 0.0` turns -0.0 into +0.0 as exp(log(-0.0)) does. Changes rounding (exp(log x) is x only
    to within an ulp) and drops f's warning."""
    inner = known.producer.get(eqn.inputs[0])
    out = eqn.outputs[0]
    if (inner is None or PRIMITIVE_RULES[inner.primitive].hooks.inverted_by is not eqn.primitive
            or out.aval.dtype.kind != "f" or inner.inputs[0].aval != out.aval):
        return None
    x = inner.inputs[0]
    negative = Var(ShapedArray(out.aval.shape, np.dtype(bool)))
    kept = Var(out.aval)
    dtype = out.aval.dtype
    return [Equation(primitive_for("less"), [x, _literal(0, dtype)], [negative]),
            Equation(primitive_for("where"), [negative, _literal(np.nan, dtype), x], [kept]),
            Equation(primitive_for("add"), [kept, _literal(0, dtype)], [out])]


# -- negations ---------------------------------------------------------------------------------
# IEEE 754 rounds symmetrically: (-a) * b is -(a * b) and a sum of negated terms is the negated
# sum, bit for bit (only a nan's sign, which IEEE leaves unspecified, may differ). Reverse mode
# makes such pairs: the partial derivatives of x[:, None] - x[None, :] negate each other, and
# the same cotangent multiplies both.

def _real_float(atom) -> bool:
    return atom.aval.dtype.kind == "f"


def _scale_of(eqn, known, scale):
    """x for eqn = x * scale (either order) with x of the result's type, else None."""
    out = eqn.outputs[0]
    for x, factor in (eqn.inputs, eqn.inputs[::-1]):
        if (type(x) is Var and x.aval == out.aval and _is_scalar(factor)
                and _all_equal(known.value(factor), scale)):
            return x
    return None


def _negated(atom, known):
    """a when `atom` is negative(a) or a * -1 (a real float of atom's type), else None."""
    eqn = known.producer.get(atom) if type(atom) is Var else None
    if eqn is None or not _real_float(atom):
        return None
    if eqn.primitive is primitive_for("negative"):
        return eqn.inputs[0] if type(eqn.inputs[0]) is Var else None
    return _scale_of(eqn, known, -1) if eqn.primitive is primitive_for("multiply") else None


def _may_negate(graph) -> bool:
    """Whether the rewrites of negations may apply in `graph`: it holds a fused region (which
    may return a negation), a sum of a negation, or a product (-a) * b next to a * b."""
    fusion, negative, multiply = (primitive_for("fusion"), primitive_for("negative"),
                                  primitive_for("multiply"))
    for eqn in graph.equations:     # first, cheaply: is there any negation at all?
        prim = eqn.primitive
        if prim is fusion:
            return True
        if prim is negative or (prim is multiply and any(
                type(a) is Literal and a.value == -1 for a in eqn.inputs)):
            break
    else:
        return False
    negated, products, readers = {}, set(), []
    total = primitive_for("sum")
    for eqn in graph.equations:
        prim = eqn.primitive
        if prim is fusion or (prim is total and eqn.inputs[0] in negated):
            return True
        if prim is negative:
            negated[eqn.outputs[0]] = _atom_key(eqn.inputs[0])
        elif prim is multiply:
            keys = [_atom_key(a) for a in eqn.inputs]
            products.update((tuple(keys), tuple(keys[::-1])))
            for (a, b), (key_a, key_b) in zip((eqn.inputs, eqn.inputs[::-1]),
                                              (keys, keys[::-1])):
                if a in negated:
                    readers.append((negated[a], key_b))
                elif type(b) is Literal and b.value == -1:
                    negated[eqn.outputs[0]] = key_a
    return any(pair in products for pair in readers)


def _product_of_a_negation(eqn, known):
    """(-a) * b = -(a * b) when a * b is computed already: a negation where there was a
    product (a's own negation is left to DCE)."""
    out = eqn.outputs[0]
    for position in (0, 1):
        a = _negated(eqn.inputs[position], known)
        if a is None:
            continue
        b = eqn.inputs[1 - position]
        product = known.computed("multiply", (a, b)) or known.computed("multiply", (b, a))
        if product is not None and product.outputs[0].aval == out.aval:
            return [Equation(primitive_for("negative"), [product.outputs[0]], [out])]
    return None


def _makes_fresh_array(eqn) -> bool:
    """A one-output ufunc on arrays: its result is a new dense array, never a view."""
    impl = rule_for(eqn, "impl")
    return (isinstance(impl, np.ufunc) and impl.nout == 1 and not eqn.params
            and eqn.outputs[0].aval.shape != ())


def _sum_of_a_negation(eqn, known):
    """sum(-x) = 0 - sum(x) for x a ufunc's result (-x is then laid out as x is, so both sums
    add in the same order): numpy's sums start from +0.0, so a zero total is +0.0 either way,
    and 0 - s is -s otherwise."""
    out = eqn.outputs[0]
    x = _negated(eqn.inputs[0], known)
    if x is None or eqn.params["dtype"] is not None or not eqn.params["axes"]:
        return None
    maker = known.producer.get(x)
    if maker is None or not _makes_fresh_array(maker) or x.aval.dtype != out.aval.dtype:
        return None
    total = Var(out.aval)
    return [attrs.evolve(eqn, inputs=[x], outputs=[total]),
            Equation(primitive_for("subtract"), [_literal(0, out.aval.dtype), total], [out])]


def _step_source(atom, known):
    """v when `atom` is -v, v * -1 or v * 1, else None."""
    step = known.producer.get(atom) if type(atom) is Var else None
    if step is not None and step.primitive is primitive_for("multiply"):
        one = _scale_of(step, known, 1)
        if one is not None:
            return one
    return _negated(atom, known)


def _steps_out_of_a_region(eqn, known):
    """An `elementwise` region's outputs that negate (or multiply by 1) another of its outputs
    or one of its inputs, of the output's type, are computed after the region, where the
    rewrites above meet them: e.g. one partial derivative of x[:, None] - x[None, :] negates the
    other, and the partial of s * eye is eye * 1."""
    region = eqn.params["region"]
    inner = Known({v: e for e in region.equations for v in e.outputs}, dict(region.consts))
    outer = dict(zip(region.inputs, eqn.inputs))
    outer.update((v, var) for v, var in zip(region.outputs, eqn.outputs) if type(v) is Var)
    sources = {}
    for k, atom in enumerate(region.outputs):
        source = _step_source(atom, inner)
        if source in outer and outer[source].aval == eqn.outputs[k].aval:
            sources[k] = source
    # a source must stay an output of the region (or be one of its inputs)
    steps = {k: inner.producer[region.outputs[k]] for k, source in sources.items()
             if not any(region.outputs[j] is source for j in sources)}
    kept = [k for k in range(len(region.outputs)) if k not in steps]
    if not steps or not kept:
        return None
    body = eliminate_dead_code(Graph(region.inputs, region.consts, region.equations,
                                     [region.outputs[k] for k in kept]))
    fused = attrs.evolve(eqn, outputs=[eqn.outputs[k] for k in kept],
                         params=Params({**eqn.params, "region": body}))
    return [fused] + [attrs.evolve(step, inputs=[outer.get(a, a) for a in step.inputs],
                                   outputs=[eqn.outputs[k]]) for k, step in steps.items()]


# -- linear algebra ----------------------------------------------------------------------------

_CHOLESKY = ("cholesky", "cholesky_lapack")


def _real_floats(*atoms) -> bool:
    return all(a.aval.dtype in (np.float32, np.float64) for a in atoms)


def _cholesky_by_lapack(eqn, known):
    """cholesky as LAPACK potrf on its input's memory: numpy's factor, rounded differently
    (numpy copies the matrix and factors it from the other side), in a third of the time."""
    if not _real_floats(eqn.inputs[0], eqn.outputs[0]):
        return None
    return [attrs.evolve(eqn, primitive=primitive_for("cholesky_lapack"))]


def _triangle_of_factor(atom, known):
    """(factor, whether it is lower triangular, whether `atom` is its transpose) when `atom`
    is a Cholesky factor or the transpose of one (last two axes), else None."""
    transposed = False
    swap = known.made_by(atom, "transpose")
    if swap is not None:
        axes = swap.params["axes"]
        ndim = len(axes)
        if tuple(axes) != (*range(ndim - 2), ndim - 1, ndim - 2):
            return None
        atom, transposed = swap.inputs[0], True
    for role in _CHOLESKY:
        factor = known.made_by(atom, role)
        if factor is not None:
            return atom, not factor.params["upper"], transposed
    return None


def _solve_with_factor(eqn, known):
    """solve(L, b) = triangular_solve(L, b) for a Cholesky factor L (or its transpose), which
    is triangular with a positive diagonal: one O(n^2) substitution, not an LU factorization;
    the rounding of the solution changes."""
    a, b = eqn.inputs
    found = _triangle_of_factor(a, known)
    if found is None or not _real_floats(a, b, eqn.outputs[0]) or a.aval.dtype != b.aval.dtype:
        return None
    factor, lower, transposed = found
    return [attrs.evolve(eqn, primitive=primitive_for("triangular_solve"), inputs=[factor, b],
                         params=Params({"lower": lower, "trans": int(transposed),
                                        "unit_diagonal": False}))]


def _solve_knows_its_triangle(eqn, known):
    """solve(L, b) for a Cholesky factor L (or its transpose) with L's triangle as a param:
    the same LU solve (numpy's bits), whose derivatives solve by substitution
    (xform.rules.linalg reads the param, and so decides alike on values and on tracers)."""
    found = None if "triangle" in eqn.params else _triangle_of_factor(eqn.inputs[0], known)
    if found is None:
        return None
    _, lower, transposed = found
    triangle = "lower" if lower != transposed else "upper"
    return [attrs.evolve(eqn, params=Params({**eqn.params, "triangle": triangle}))]


# -- exact -----------------------------------------------------------------------------------

def _filled(out: Var, value) -> list | tuple:
    """The atoms or equations making `out` an array of `value`."""
    scalar = _literal(value, out.aval.dtype)
    if not out.aval.shape:
        return (scalar,)
    return [Equation(primitive_for("broadcast_to"), [scalar], [out],
                     Params({"shape": out.aval.shape}))]


def _equal_operands(eqn, known):
    """op(x, x) = c for integers x, for an op declaring `equal_operands=c` (x - x = 0). Not
    for floats, even reassociating: inf - inf is nan."""
    x, y = eqn.inputs
    out = eqn.outputs[0]
    if x is not y or type(x) is not Var or out.aval.dtype.kind not in "iu":
        return None
    return _filled(out, PRIMITIVE_RULES[eqn.primitive].hooks.equal_operands)


def _where_with_known_mask(eqn, known):
    """where(all True, x, y) = x, where(all False, x, y) = y, where(m, x, x) = x (broadcast
    to the result's shape when needed); numpy computes both sides, which DCE then drops."""
    mask, x, y = eqn.inputs
    out = eqn.outputs[0]
    value = known.value(mask)
    if x is y and type(x) is Var:
        chosen = x
    elif value is UNKNOWN or np.size(value) == 0:
        return None
    elif np.all(value):
        chosen = x
    elif not np.any(value):
        chosen = y
    else:
        return None
    if chosen.aval.dtype != out.aval.dtype:
        return None
    if chosen.aval.shape == out.aval.shape:
        return (chosen,)
    return [Equation(primitive_for("broadcast_to"), [chosen], [out],
                     Params({"shape": out.aval.shape}))]


REWRITES = (
    Rewrite("sum of a reshape", "sum", _sum_of_view("reshape"), exact=False,
            operand_of=_made_by(0, "reshape"),
            doc="sum(reshape(x)) = sum(x): numpy's pairwise order follows the shape"),
    Rewrite("sum of a transpose", "sum", _sum_of_view("transpose"), exact=False,
            operand_of=_made_by(0, "transpose"),
            doc="sum(transpose(x)) = sum(x): numpy's pairwise order follows the layout"),
    Rewrite("sum of an outer product", "sum", _sum_of_outer_product, exact=False,
            operand_of=_made_by(0, "multiply"),
            doc="sum(x * y) = sum(x) * sum(y) when no axis spans both (kron, outer): the "
                "product is never built; the rounding of one sum of products changes"),
    Rewrite("sum of a broadcast", "sum", _sum_of_broadcast, exact=False,
            operand_of=_made_by(0, "broadcast_to"),
            doc="sum(broadcast_to(x)) = sum(x) * copies: one multiply for repeated additions"),
    Rewrite("max of a broadcast", "reduce_max", _extremum_of_broadcast, exact=True,
            operand_of=_made_by(0, "broadcast_to"),
            doc="max(broadcast_to(x)) = max(x) over every axis: the same elements"),
    Rewrite("min of a broadcast", "reduce_min", _extremum_of_broadcast, exact=True,
            operand_of=_made_by(0, "broadcast_to"),
            doc="min(broadcast_to(x)) = min(x) over every axis: the same elements"),
    Rewrite("dot with ones", "matmul", _dot_with_ones, exact=False,
            doc="x @ ones = sum(x, -1), ones @ x = sum(x, -2): BLAS's order of additions "
                "becomes numpy's pairwise one; the gradient is a broadcast, not an outer product"),
    Rewrite("repeated scaling by constants", "multiply", _repeated_constant_scaling,
            exact=False, operand_of=_made_by((0, 1), "multiply"), literal_operand=True,
            doc="(x * a) * b = x * (a * b) for constants a, b: one rounding instead of two (not "
                "when a * b overflows or underflows)"),
    Rewrite("repeated scaling", "multiply", _repeated_scaling, exact=False, in_gradients=False,
            operand_of=_made_by((0, 1), "multiply"), array_result=True,
            doc="(x * a) * b = x * (a * b) for 0-d values a, b: one rounding instead of two; "
                "a * b may overflow where (x * a) * b does not"),
    Rewrite("exp of log", Trait("inverted_by", named=True), _undone, exact=False,
            in_gradients=False, operand_of=_made_by(0, Trait("inverted_by")),
            doc="exp(log x) = x where x >= 0, nan below (any f declaring `inverted_by=g`: "
                "g(f(x))): within an ulp (the rewrite is the more accurate), log's warning for "
                "x < 0 is gone and the derivative at x <= 0 is where's, not nan"),
    Rewrite("cholesky by LAPACK", "cholesky", _cholesky_by_lapack, exact=False,
            doc="cholesky(a) as LAPACK potrf on a's memory (no copies, a third of numpy's time "
                "at n = 128): the same factor, rounded differently"),
    Rewrite("solve with a Cholesky factor", "solve", _solve_with_factor, exact=False,
            operand_of=_made_by(0, "transpose", *_CHOLESKY),
            doc="solve(L, b) = triangular_solve(L, b) for L (or L^T) from cholesky: one "
                "substitution instead of an LU factorization; rounding changes"),
    Rewrite("solve knows a Cholesky factor's triangle", "solve", _solve_knows_its_triangle,
            exact=True, operand_of=_made_by(0, "transpose", *_CHOLESKY),
            doc="solve(L, b) for L (or L^T) from cholesky carries L's triangle: the same LU "
                "solve, whose derivatives solve by substitution (values keep numpy's bits)"),
    Rewrite("product of a negation", "multiply", _product_of_a_negation, exact=True,
            operand_of=_made_by((0, 1), "negative", "multiply"),
            doc="(-a) * b = -(a * b) when a * b is computed already (-a: negative(a) or "
                "a * -1): a negation instead of a product (IEEE rounds symmetrically; a nan's "
                "sign may differ)", when=_may_negate),
    Rewrite("sum of a negation", "sum", _sum_of_a_negation, exact=True,
            operand_of=_made_by(0, "negative", "multiply"),
            doc="sum(-x) = 0 - sum(x) for a ufunc's result x: a negation of the sum, not of each "
                "term (numpy's sums start from +0.0, so zeros keep their sign)", when=_may_negate),
    Rewrite("negations out of a fused region", "fusion", _steps_out_of_a_region,
            exact=True, doc="an elementwise region's output negating (or multiplying by 1) "
                            "another output or an input is computed after the region, where "
                            "the rewrites above meet it"),
    Rewrite("difference of a value with itself", Trait("equal_operands"), _equal_operands,
            exact=True, equal_operands=True,
            doc="x - x = 0 for integer x, or the `equal_operands` value another op declares "
                "(floats keep it: inf - inf and nan - nan are nan)"),
    Rewrite("where with a known mask", "where", _where_with_known_mask, exact=True,
            doc="where(True, x, y) = x, where(False, x, y) = y, where(m, x, x) = x"),
)


LEVELS = {
    # only rewrites giving numpy's bits: what xform.config.algebra "exact" runs on any graph
    "exact": lambda rule: rule.exact,
    # and those only changing rounding: under "exact", before differentiating a function
    # whose value is not returned (`grad`): numpy defines no bits for a derivative
    "gradient": lambda rule: rule.exact or rule.in_gradients,
    # every rule: xform.config.algebra "reassociate"
    "reassociate": lambda rule: True,
}


def simplify(graph: Graph, exact: bool = False, rewrites=REWRITES,
             level: str | None = None) -> Graph:
    """Apply the `rewrites` admitted at `level` (a key of LEVELS; default: "exact" with `exact`,
    else "reassociate") to each equation of `graph`, in order, until none matches, and the
    primitives' peephole hooks (exact) to what they emit; rewrites feed later matches
    (producers are the rewritten equations). Returns `graph` itself when
    nothing matched; dead producers stay for DCE.

    >>> from xform.passes.simplify import simplify
    >>> graph = xform.make_graph(lambda a, b: np.sum(np.kron(a, b)))(np.ones((2, 2)), np.ones(3))
    >>> [e.primitive.name for e in xform.passes.dce(simplify(graph)).equations]
    ['sum', 'sum', 'multiply']
    """
    table, conditions = _table(rewrites, level or ("exact" if exact else "reassociate"))
    refused = _refused(table, conditions, graph)
    if refused is None:
        return graph
    table = _without(table, refused)
    rewriter = GraphRewriter(graph)
    known = Known({}, dict(graph.consts))
    producer = known.producer

    # fold has run the peepholes on the graph's own equations: here they meet what the
    # rewrites emit (such as the products with one a region's rule moves out of it)
    table_of_peepholes = peepholes()

    def emit(eqn, depth=0):
        if depth < 8:
            for rule, makers in table.get(eqn.primitive, ()):
                if (rule.matches(eqn, makers, producer)
                        and stands_for(eqn, rule.rewrite(eqn, known), depth)):
                    return
            peephole = table_of_peepholes.get(eqn.primitive) if depth else None
            if peephole is not None:
                new = peephole(eqn, known.value, producer)
                if stands_for(eqn, [new] if type(new) is Equation else new, depth):
                    return
        rewriter.emit(eqn)
        producer.update((v, eqn) for v in eqn.outputs)

    def stands_for(eqn, new, depth) -> bool:
        """Put what a rewrite made (equations, atoms or None) in the place of `eqn`, if it
        made anything (and not an input returned where numpy returns a new array)."""
        if type(new) is tuple:
            if rewriter.returns_an_input(eqn.outputs, new):
                return False
            for var, atom in zip(eqn.outputs, new):
                rewriter.replace(var, atom)
            return True
        if new is None:
            return False
        for item in new:
            if item.source is None:     # computes the user's line it replaces
                item = attrs.evolve(item, source=eqn.source)
            emit(rewriter.substituted(item), depth + 1)
        return True

    try:
        for eqn in graph.equations:
            emit(rewriter.substituted(eqn))
    finally:
        # the two closures hold each other: unbound, they leave no cycle for the collector
        del emit, stands_for
    return rewriter.build()


def _table(rewrites, level) -> tuple:
    """(primitive -> [(rule, the primitives its `operand_of` names or None)] for the
    `rewrites` admitted at `level`, their distinct `when` tests), made once per rewrites and
    level and again when a registration changes the rule table (a trait declared): every
    gradient's first call simplifies."""
    key = (id(rewrites), level)
    made = _tables.get(key)
    if made is None or made[0] is not rewrites:
        admitted = LEVELS[level]
        table = {}
        for rule in rewrites:
            if not admitted(rule):
                continue
            makers = None
            if rule.operand_of:
                makers = frozenset().union(*map(_primitives, rule.operand_of[1]))
            for prim in _primitives(rule.primitive):
                table.setdefault(prim, []).append((rule, makers))
        conditions = tuple({rule.when: None for found in table.values() for rule, _ in found
                            if rule.when})
        made = _tables[key] = (rewrites, (table, conditions))
    return made[1]


def _refused(table, conditions, graph):
    """The `when` tests that fail on `graph`; None when no rule can change `graph` at all.
    A rule can only start the rewriting at an equation of the graph as it is that is of its
    pattern (and where its `when` holds): what rewrites emit is met only after some rule has
    matched. Notes: most graphs hold no equation of any pattern; this answers them in one
    look-up per equation, and most of the rest (a sum of an input) by the primitives present:
    a rule whose operand must be made by one of its `makers` cannot match without them."""
    producer = present = None
    passed = {}
    for eqn in graph.equations:
        found = table.get(eqn.primitive)
        if found is None:
            continue
        if present is None:
            present = {e.primitive for e in graph.equations}
        for rule, makers in found:
            if makers is not None and makers.isdisjoint(present):
                continue
            if producer is None:
                producer = {v: e for e in graph.equations for v in e.outputs}
            if not rule.matches(eqn, makers, producer):
                continue
            when = rule.when
            if when is not None:
                if when not in passed:
                    passed[when] = when(graph)
                if not passed[when]:
                    continue
            for other in conditions:
                if other not in passed:
                    passed[other] = other(graph)
            return frozenset(other for other in conditions if not passed[other])
    return None


def _without(table, refused) -> dict:
    """`table` without the rewrites whose `when` test is `refused` (made once per combination:
    graphs repeat them)."""
    if not refused:
        return table
    key = (id(table), refused)
    made = _filtered.get(key)
    if made is None or made[0] is not table:
        kept = {prim: [entry for entry in found if entry[0].when not in refused]
                for prim, found in table.items()}
        if len(_filtered) >= 4096:
            _filtered.clear()
        made = _filtered[key] = (table, {prim: found for prim, found in kept.items() if found})
    return made[1]


_filtered: dict = {}
_tables: dict = {}


def _forget_tables() -> None:
    _tables.clear()
    _filtered.clear()


on_rules_change(_forget_tables)   # a trait declared or a primitive registered


@derived
def _default_tables() -> tuple:
    """The default rewrites' tables at the levels first calls use by default (xform.config
    .algebra "exact", and "gradient" where only derivatives are returned): made with the
    other derived tables when xform is imported (xform.ir.registry.derive_all)."""
    return tuple(_table(REWRITES, level) for level in ("exact", "gradient"))


def simplify_exactly(graph: Graph) -> Graph:
    """`simplify` with only the rewrites that keep numpy's bits (xform.config.algebra "exact")."""
    return simplify(graph, exact=True)


__all__ = ["LEVELS", "REWRITES", "Known", "Rewrite", "Trait", "simplify", "simplify_exactly"]

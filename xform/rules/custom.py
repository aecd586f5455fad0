"""custom_jvp and custom_vjp: functions whose derivative the user defines. A staged call is one
`custom_jvp_call` / `custom_vjp_call` equation naming the function; its primal graph and its
rules are staged to graphs lazily, once per signature, and every transform applies the rules.

Notes: the rules are staged lazily (as `@xform.function` callees are) because a rule usually
calls the function itself (`f_jvp` returns `f(x)`): staging it eagerly would stage the rule of
that call again, and the rule of a call that is never differentiated is never needed. The
rules are emitted into the transform that asks for them (not called), so they are
differentiated, linearized, transposed and batched like any other code: grad(grad(f)) uses
the jvp rule of the `f` calls inside the jvp rule (JAX's semantics).

Inside a staging with values (xform.ir.values), a call whose function or rules ask Python
about a value (`if x > 0:`) has them staged on the call's values instead (ValuedCallee), and
its rules at the call where a derivative flows through it: their decisions are the path's.
"""
from __future__ import annotations

import functools
import inspect
import linecache
from contextvars import ContextVar

import numpy as np

from xform.errors import (ConcretizationError, MissingRuleError, ShapeError, TypeCheckError,
                          XformError)
from xform.ir.avals import ShapedArray, float0, is_differentiable, tangent_aval
from xform.ir.builder import (GraphBuilder, KnownValues, current_builder, known_values,
                               stage_function, using_builder)
from xform.ir.core import Primitive
from xform.ir.execute import compiled_optimized
from xform.ir.interpret import eval_graph
from xform.source_info import SourceInfo, user_frame_info
from xform.ir.tracer import Tracer
from xform.rules.call import FunctionRef
from xform.rules.subgraphs import describe_types, transpose_from_vjp
from xform.ir.ad import Undefined, aval, instantiate, zero_tangent, zeros
from xform.ir.registry import register
from xform.ir.values import NO_VALUE, has_guards
from xform.transforms.derived import batch_of, derived_graph
from xform.tree import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten


def _defined_at(fn) -> SourceInfo | None:
    """Where the user defined `fn` (for errors about what a user rule returned)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    lineno = code.co_firstlineno
    while linecache.getline(code.co_filename, lineno).lstrip().startswith("@"):
        lineno += 1  # the def line, not its decorators
    return SourceInfo(code.co_filename, lineno, code.co_name)


# == callees: the function and its rules, per nondiff values; batched variants ================

class _Callee:
    """What a custom call equation names. `batched(dims, size)` is memoized so that equal
    calls stay equal (CSE) and their batched graphs are built once."""

    name = ""

    def __init__(self):
        self._batched = {}

    def batched(self, dims, size) -> "BatchedCallee":
        key = (tuple(dims), size)
        if key not in self._batched:
            self._batched.setdefault(key, BatchedCallee(self, key[0], size))
        return self._batched[key]

    def __repr__(self) -> str:
        return self.name


def _n_nondiff(key) -> int:
    """How many leading inputs of a custom call are nondiff arguments passed as values."""
    return key[0].children[0].num_leaves


def _diff_mask(key):
    """Per input of a custom call: whether the rules differentiate with respect to it."""
    n_nondiff = _n_nondiff(key)
    return [False] * n_nondiff + [is_differentiable(a) for a in key[1][n_nondiff:]]


class CustomCallee(_Callee):
    """A custom function with its static nondiff arguments fixed: the primal, the jvp rule
    (custom_jvp) or fwd and bwd (custom_vjp), each a lazily staged FunctionRef.

    A call's inputs are the leaves of `(nondiff values, differentiable arguments)`, and its
    signature `key` is their `(in_tree, avals)`: nondiff arguments holding arrays (traced ones
    included) are values; the others are static (`static`, None where `traced`)."""

    def __init__(self, owner, nums, traced, static):
        super().__init__()
        self.owner = owner
        self.nums = nums
        self.traced = traced
        self.static = static
        self.name = owner.__name__
        self.primal = self._ref(owner.fun, self.name)
        self._rule = None
        self._fwd = None
        self._bwd = {}
        # (kind, key) of the functions whose staging asked for a value; key -> the kinds
        # staged without asking one (ValuedCallee)
        self.asks_values = set()
        self.value_free = {}

    def _ref(self, fun, name):
        ref = FunctionRef(_with_nondiff(fun, self.nums, self.traced, self.static))
        ref.name = name
        return ref

    def in_avals(self, key):
        return list(key[1])

    def out_avals(self, key):
        return list(self.primal.out_type(key)[0])

    def out_tree(self, key):
        return self.primal.out_type(key)[1]

    def primal_graph(self, key):
        return self._staged("primal", key)[0]

    def _missing(self, kind, define):
        return MissingRuleError(self.name, kind, user_frame_info(),
                                f"define it with {self.name}.{define}(...)")

    def rule_function(self, kind, key):
        """(function, its signature) of the function `kind` ("primal", "jvp", "fwd", "bwd")
        at a call's signature `key`, as staging takes them."""
        if kind == "primal":
            return self.primal.fun, key
        if kind == "jvp":
            return self._jvp_ref().fun, _jvp_rule_key(key)
        if kind == "fwd":
            return self._fwd_ref().fun, key
        fwd = self.fwd_graph(key)
        res_tree = self._staged("fwd", key)[1].children[1]
        return _bwd_rule(self, key, res_tree), self._bwd_key(key, fwd)

    def _jvp_ref(self):
        if self.owner.jvp is None:
            raise self._missing("jvp", "defjvp")
        if self._rule is None:
            self._rule = FunctionRef(_jvp_rule(self.owner.jvp, self.traced, self.static))
            self._rule.name = f"jvp_rule({self.name})"
        return self._rule

    def _fwd_ref(self):
        if self.owner.fwd is None:
            raise self._missing("vjp", "defvjp")
        if self._fwd is None:
            self._fwd = self._ref(self.owner.fwd, f"fwd({self.name})")
        return self._fwd

    def _bwd_key(self, key, fwd):
        """The signature of bwd: the nondiff values, the residuals `fwd` returns, the
        cotangents of the differentiable outputs, as one flat tuple."""
        out_avals = self.out_avals(key)
        inputs = (tuple(key[1][:_n_nondiff(key)]) + tuple(fwd.out_avals[len(out_avals):])
                  + tuple(tangent_aval(a) for a in out_avals if is_differentiable(a)))
        return tree_structure(tuple([0] * len(inputs))), inputs

    def _staged(self, kind, key):
        """(graph, out_tree) of the function `kind` at `key`, staged once per signature."""
        if kind == "primal":
            return self.primal.graph_and_tree(key)
        if kind == "jvp":
            return self._jvp_ref().graph_and_tree(_jvp_rule_key(key))
        if kind == "fwd":
            return self._fwd_ref().graph_and_tree(key)
        entry = self._bwd.get(key)
        if entry is None:
            function, bwd_key = self.rule_function(kind, key)
            ref = FunctionRef(function)
            ref.name = f"bwd({self.name})"
            entry = self._bwd.setdefault(key, (ref, bwd_key))
        ref, bwd_key = entry
        return ref.graph_and_tree(bwd_key)

    def jvp_graph(self, key):
        """(inputs, tangents of the differentiable inputs) -> (outs, tangents of outs)."""
        graph, out_tree = self._staged("jvp", key)
        primal_tree, primal_avals = self.out_tree(key), self.out_avals(key)
        where = _defined_at(self.owner.jvp)
        if (out_tree.kind not in (tuple, list) or len(out_tree.children) != 2
                or out_tree.children[0] != primal_tree or out_tree.children[1] != primal_tree):
            raise TypeCheckError(f"the jvp rule of '{self.name}' must return (out, tangent_out) "
                                 f"with the structure of {self.name}'s output {primal_tree}, "
                                 f"got {out_tree}", where)
        outs, tangents = graph.out_avals[:len(primal_avals)], graph.out_avals[len(primal_avals):]
        if ([(a.shape, a.dtype) for a in outs] != [(a.shape, a.dtype) for a in primal_avals]
                or [a.shape for a in tangents] != [a.shape for a in primal_avals]):
            raise ShapeError(f"the jvp rule of '{self.name}' returns {describe_types(outs)} and "
                             f"tangents {describe_types(tangents)}; {self.name} returns "
                             f"{describe_types(primal_avals)}", where)
        return graph

    def fwd_graph(self, key):
        """inputs -> (outs, residuals)."""
        graph, out_tree = self._staged("fwd", key)
        primal_tree, primal_avals = self.out_tree(key), self.out_avals(key)
        outs = graph.out_avals[:len(primal_avals)]
        if (out_tree.kind not in (tuple, list) or len(out_tree.children) != 2
                or out_tree.children[0] != primal_tree
                or [(a.shape, a.dtype) for a in outs]
                != [(a.shape, a.dtype) for a in primal_avals]):
            raise TypeCheckError(f"the fwd of '{self.name}' must return (out, residuals) with out "
                                 f"like {self.name}'s output {primal_tree} "
                                 f"{describe_types(primal_avals)}, got {out_tree}",
                                 _defined_at(self.owner.fwd))
        return graph

    def bwd_graph(self, key):
        """(nondiff inputs, residuals, cotangents of the differentiable outs) -> cotangents of
        the differentiable inputs."""
        return self._staged("bwd", key)[0]


def _jvp_rule_key(key):
    """The signature of a jvp rule at a call's signature `key`: (nondiff values, primals,
    tangents of the differentiable inputs)."""
    in_tree, avals = key
    tangents = [tangent_aval(a) for a, d in zip(avals, _diff_mask(key)) if d]
    nondiff, primals = tree_unflatten(in_tree, [0] * len(avals))
    return (tree_structure((nondiff, primals, [0] * len(tangents))),
            tuple(avals) + tuple(tangents))


_NONE = frozenset()

# custom function -> the ValuedCallee whose rules are being staged: a call of the function
# inside its own rule (`f(x)` in `f_fwd`) is that call where it has its values, and stages
# its rules only if a transform asks for them where not
_rules_staging: ContextVar = ContextVar("xform_custom_rules_staging", default={})


class ValuedCallee(CustomCallee):
    """One call of a custom function inside a staging that knows the call's values (`known`,
    a KnownValues of its leaves): each of its functions that asks Python a question about a
    value (`if x > 0:`, `int(n)`, `x[x > 0]`) is staged on those values, the answer guarded,
    as outside (xform.ir.values); the functions that ask nothing are the base callee's,
    staged once per signature. Where a derivative flows through the call, its rules are
    staged at the call (`_Custom._with_values`), so that their decisions are recorded with
    the path the staging takes."""

    def __init__(self, base, key, known):
        _Callee.__init__(self)
        self.base = base
        self.key = key
        self.owner, self.nums, self.traced, self.static = (base.owner, base.nums, base.traced,
                                                          base.static)
        self.name = base.name
        self.primal = base.primal
        self.known = known
        self._valued = {}   # kind -> (graph, out_tree) staged on the values
        # kind -> (values of the outputs, positions a derivative flows through), of primal
        # (for the call's own values: `staged_outputs`) and fwd (its residuals, for bwd)
        self._outputs = {}
        self._call_values = None    # the call's values, kept by `release` for staged_outputs
        self._guarded = False       # (has_guards)

    def out_avals(self, key):
        return list(self._staged("primal", key)[0].out_avals)

    def out_tree(self, key):
        return self._staged("primal", key)[1]

    def _jvp_ref(self):
        return self.base._jvp_ref()

    def _fwd_ref(self):
        return self.base._fwd_ref()

    def rule_function(self, kind, key):
        if kind == "bwd":
            self._staged_with_values("fwd", key)    # the residuals' values
        return super().rule_function(kind, key)

    def _staged(self, kind, key):
        staged = self._valued.get(kind)
        if staged is not None:
            return staged
        if self.known is None:  # (released: a rule no derivative at the call needed)
            return self.base._staged(kind, key)
        if (kind, key) not in self.base.asks_values and (kind != "bwd" or "fwd" not in
                                                         self._valued):
            try:
                staged = self.base._staged(kind, key)
            except ConcretizationError:
                self.base.asks_values.add((kind, key))
            else:
                self.base.value_free.setdefault(key, set()).add(kind)
                return staged
        return self._staged_with_values(kind, key)

    def _staged_with_values(self, kind, key):
        staged = self._valued.get(kind)
        if staged is not None:
            return staged
        function, (in_tree, avals) = self.rule_function(kind, key)
        known = self._known_of(kind, key, len(avals))
        if kind in ("primal", "fwd"):
            function = self._noting_outputs(function, kind)
        token = _rules_staging.set({**_rules_staging.get(), self.owner: self}) \
            if kind != "primal" else None
        try:
            graph, captured, out_tree = stage_function(function, in_tree, list(avals), known)
        finally:
            if token is not None:
                _rules_staging.reset(token)
        assert not captured     # (checked: the functions close over no traced value)
        # (fwd's graph may hold this very call: its answer so far)
        self._guarded = self._guarded or has_guards(graph)
        return self._valued.setdefault(kind, (graph, out_tree))

    def _noting_outputs(self, function, kind):
        """`function`, noting the values of what it returns (and which of them a derivative
        flows through) in `_outputs[kind]`."""
        def noting(*args):
            out = function(*args)
            builder = current_builder()
            values, perturbed = [], set()
            for i, leaf in enumerate(tree_leaves(out)):
                if type(leaf) is Tracer:
                    value = builder.known_value(leaf)
                    values.append(NO_VALUE if value is None else value)
                    if leaf.graph_var in builder.perturbed:
                        perturbed.add(i)
                else:
                    values.append(leaf)
            self._outputs[kind] = values, perturbed
            return out
        return noting

    def _known_of(self, kind, key, n_inputs):
        """The KnownValues of the inputs of the function `kind`: the call's values, and fwd's
        residuals for bwd; no value for a tangent or a cotangent."""
        known = self.known
        if kind in ("primal", "fwd"):
            return known
        if kind == "jvp":
            values = list(known.values)
            perturbed = known.perturbed
        else:
            n_nondiff, n_outs = _n_nondiff(key), len(self.out_avals(key))
            outputs, flowing = self._outputs["fwd"]
            values = list(known.values[:n_nondiff]) + outputs[n_outs:]
            perturbed = (frozenset(p for p in known.perturbed if p < n_nondiff)
                         | frozenset(n_nondiff + i - n_outs for i in flowing if i >= n_outs))
        return KnownValues(values + [NO_VALUE] * (n_inputs - len(values)), perturbed)

    def release(self) -> None:
        """Keep no value of the call's (a cached path holds its callee): what it may be asked
        for is staged. (The primal's outputs stay for `staged_outputs`, which drops them.)"""
        if self.known is not None:
            self._outputs.pop("fwd", None)
            self._call_values = self.known.values
            self.known = None

    def is_call(self, key, known) -> bool:
        """Whether a call of signature `key` with `known` values is this call (the values
        themselves: fwd's `f(x)`)."""
        return (key == self.key and self.known is not None
                and all(a is b for a, b in zip(known.values, self.known.values)))

    def staged_outputs(self, args):
        """The outputs the primal's staging on the call's values computed, for the call's
        equations to take when `args` are those values (xform.ir.values computes an
        equation's outputs while staging: the primal is not compiled for it), until the
        call's own (after `release`); else None."""
        if self.known is not None:
            noted, values = self._outputs.get("primal"), self.known.values
        else:
            noted, values = self._outputs.pop("primal", None), self._call_values
            self._call_values = None
        if noted is None or values is None or len(values) != len(args) \
                or any(a is not b for a, b in zip(args, values)) \
                or any(v is NO_VALUE for v in noted[0]):
            return None
        return noted[0]

    def asked(self) -> bool:
        """Whether some function of this call was staged on its values."""
        return bool(self._valued)

    def has_guards(self) -> bool:
        """Whether a function of this call staged on its values asked a question about
        them (xform.ir.values.has_guards)."""
        return self._guarded


class BatchedCallee(_Callee):
    """A callee mapped over a batch: every graph of `base`, batched (vmap of a custom_vjp
    function batches both fwd and bwd). Outputs are batched along axis 0."""

    def __init__(self, base, dims, size):
        super().__init__()
        self.base = base
        self.dims = dims
        self.size = size
        self.name = f"batch({base.name})"

    def in_avals(self, key):
        return [a if d is None else
                ShapedArray(a.shape[:d] + (self.size,) + a.shape[d:], a.dtype, a.weak_type)
                for a, d in zip(self.base.in_avals(key), self.dims)]

    def out_avals(self, key):
        return [ShapedArray((self.size,) + a.shape, a.dtype, a.weak_type)
                for a in self.base.out_avals(key)]

    def primal_graph(self, key):
        return batch_of(self.base.primal_graph(key), self.dims, self.size)

    def _diff_dims(self, key):
        return tuple(d for d, diff in zip(self.dims, _diff_mask(key)) if diff)

    def jvp_graph(self, key):
        # A tangent is laid out as its primal: same batch dim.
        return batch_of(self.base.jvp_graph(key), self.dims + self._diff_dims(key), self.size)

    def fwd_graph(self, key):
        return batch_of(self.base.fwd_graph(key), self.dims, self.size)

    def bwd_graph(self, key):
        graph = self.base.bwd_graph(key)
        n_nondiff = _n_nondiff(key)
        dims = self.dims[:n_nondiff] + (0,) * (len(graph.inputs) - n_nondiff)
        batched = batch_of(graph, dims, self.size)
        diff_dims = self._diff_dims(key)
        return derived_graph(batched, ("input layout", diff_dims),
                             lambda: _in_layout(batched, diff_dims))


def _in_layout(graph, dims):
    """`graph`, whose outputs are batched along axis 0, with each output laid out as the input
    it is the cotangent of: summed over the batch where that input is not mapped."""
    builder = GraphBuilder()
    with using_builder(builder):
        outs = eval_graph(graph, *[builder.new_input(v.aval) for v in graph.inputs])
        outs = [np.sum(x, axis=0) if d is None else np.moveaxis(x, 0, d) if d else x
                for x, d in zip(outs, dims)]
    return builder.build(outs)


# == the functions the rules are staged from =====================================================

def _nondiff_values(traced, static, values):
    """The nondiff arguments in order: the static ones, and `values` where `traced`."""
    values = iter(values)
    return [next(values) if t else s for t, s in zip(traced, static)]


def _with_nondiff(fun, nums, traced, static):
    """`fun` of `(nondiff values, differentiable arguments)`, the arguments put in place."""
    def with_nondiff(values, diff_args):
        fixed = dict(zip(nums, _nondiff_values(traced, static, values)))
        rest = iter(diff_args)
        return fun(*[fixed[i] if i in fixed else next(rest)
                     for i in range(len(nums) + len(diff_args))])
    return with_nondiff


def _jvp_rule(jvp, traced, static):
    def jvp_rule(values, primals, diff_tangents):
        # Integer primals get float0 zero tangents, as in JAX.
        leaves, tree = tree_flatten(primals)
        live = iter(diff_tangents)
        tangents = tree_unflatten(tree, [next(live) if is_differentiable(aval(x))
                                         else np.zeros(aval(x).shape, float0) for x in leaves])
        return jvp(*_nondiff_values(traced, static, values), primals, tangents)
    return jvp_rule


def _bwd_rule(callee, key, res_tree):
    bwd, name, traced, static = callee.owner.bwd, callee.name, callee.traced, callee.static
    (values_tree, diff_tree), in_avals = key[0].children, key[1]
    n_nondiff = values_tree.num_leaves
    out_tree, out_avals = callee.out_tree(key), callee.out_avals(key)

    def bwd_rule(*leaves):
        values = tree_unflatten(values_tree, leaves[:n_nondiff])
        leaves = leaves[n_nondiff:]
        residuals = tree_unflatten(res_tree, leaves[:res_tree.num_leaves])
        live = iter(leaves[res_tree.num_leaves:])
        cts = tree_unflatten(out_tree, [next(live) if is_differentiable(a)
                                        else np.zeros(a.shape, float0) for a in out_avals])
        result = bwd(*_nondiff_values(traced, static, values), residuals, cts)
        return _input_cotangents(result, name, bwd, diff_tree, in_avals[n_nondiff:])
    return bwd_rule


def _input_cotangents(result, name, bwd, in_tree, in_avals):
    """The flat cotangents of the differentiable inputs from what `bwd` returned: one entry
    per differentiable argument, each None (zero) or shaped like the argument."""
    where = _defined_at(bwd)
    arg_trees = in_tree.children
    if not isinstance(result, (tuple, list)) or len(result) != len(arg_trees):
        got = type(result).__name__
        if isinstance(result, (tuple, list)):
            got += f" of length {len(result)}"
        raise TypeCheckError(f"the bwd of '{name}' must return a tuple of {len(arg_trees)} "
                             f"cotangents (one per argument not in nondiff_argnums), got {got}",
                             where)
    avals = iter(in_avals)
    flat = []
    for index, (ct, tree) in enumerate(zip(result, arg_trees)):
        arg_avals = [next(avals) for _ in range(tree.num_leaves)]
        if ct is None:
            leaves = [None] * len(arg_avals)
        else:
            leaves, ct_tree = tree_flatten(ct)
            if ct_tree != tree:
                raise TypeCheckError(f"the bwd of '{name}' returned a cotangent of structure "
                                     f"{ct_tree} for argument {index} of structure {tree}", where)
        for leaf, arg_aval in zip(leaves, arg_avals):
            if not is_differentiable(arg_aval):
                continue
            if leaf is None:
                flat.append(np.zeros(arg_aval.shape, arg_aval.dtype))
                continue
            if aval(leaf).shape != arg_aval.shape:
                raise ShapeError(f"the bwd of '{name}' returned a cotangent of shape "
                                 f"{aval(leaf).shape} for argument {index} of shape "
                                 f"{arg_aval.shape}", where, "return one cotangent per "
                                 "argument, each of its argument's shape")
            if aval(leaf).dtype != arg_aval.dtype:
                leaf = (leaf.astype(arg_aval.dtype) if type(leaf) is Tracer
                        else np.asarray(leaf, arg_aval.dtype))
            flat.append(leaf)
    return flat


# == the primitives ===========================================================================

custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)
custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)


def _custom_impl(*args, callee, key):
    if type(callee) is ValuedCallee:
        outs = callee.staged_outputs(args)
        if outs is not None:
            return outs
    return compiled_optimized(callee.primal_graph(key))(*args)


def _custom_abstract_eval(*avals, callee, key):
    return callee.out_avals(key)


def _custom_batch(prim):
    def rule(size, args, dims, *, callee, key):
        outs = prim.bind(*args, callee=callee.batched(dims, size), key=key)
        return outs, [0] * len(outs)
    return rule


def _live_tangents(tangents, key):
    return [instantiate(t) for t, diff in zip(tangents, _diff_mask(key)) if diff]


def _custom_jvp_call_jvp(primals, tangents, *, callee, key):
    outs = eval_graph(callee.jvp_graph(key), *primals, *_live_tangents(tangents, key))
    n_out = len(outs) // 2
    return outs[:n_out], outs[n_out:]


def _custom_jvp_call_transpose(cts, *args, callee, key):
    """Used linearly (in a bwd that forward mode transposes): the jvp rule at zero for the
    undefined inputs, transposed in its tangents."""
    from xform.transforms.transpose import backward_pass
    primals = [zeros(x.aval) if type(x) is Undefined else x for x in args]
    linear = [d and type(x) is Undefined for d, x in zip(_diff_mask(key), args)]
    n_tangents = sum(_diff_mask(key))
    n_out = len(callee.out_avals(key))
    cts_linear = iter(backward_pass(callee.jvp_graph(key), primals + [None] * n_tangents,
                                    [False] * len(primals) + [True] * n_tangents,
                                    [None] * n_out + list(cts)))
    per_tangent = [next(cts_linear) if d else None for d in _diff_mask(key)]
    return [ct if is_linear else None for ct, is_linear in zip(per_tangent, linear)]


# No vjp rule: reverse mode linearizes the emitted jvp rule and transposes it (JAX's way).
register(custom_jvp_call_p, impl=_custom_impl, abstract_eval=_custom_abstract_eval,
         jvp=_custom_jvp_call_jvp, transpose=_custom_jvp_call_transpose,
         batch=_custom_batch(custom_jvp_call_p), symbolic_zeros=True,
         construct="an xform.custom_jvp function")


def _custom_vjp_call_jvp(primals, tangents, *, callee, key):
    # Forward mode transposes bwd, which is linear in the cotangents: J t = (J^T)^T t.
    from xform.transforms.transpose import backward_pass
    out_avals = callee.out_avals(key)
    results = eval_graph(callee.fwd_graph(key), *primals)
    outs, residuals = results[:len(out_avals)], results[len(out_avals):]
    diff_outs = [is_differentiable(a) for a in out_avals]
    linear = [t for t, diff in zip(tangents, _diff_mask(key)) if diff]
    known = [*primals[:_n_nondiff(key)], *residuals]
    n_cts = sum(diff_outs)
    try:
        t_live = iter(backward_pass(callee.bwd_graph(key), known + [None] * n_cts,
                                    [False] * len(known) + [True] * n_cts, linear))
    except MissingRuleError as err:
        raise MissingRuleError(err.primitive, err.rule_kind, err.source,
                               f"forward mode through the custom_vjp function '{callee.name}' "
                               "transposes its bwd, which must be linear in the cotangents; "
                               "define a custom_jvp for forward mode") from None
    return outs, [next(t_live) if d else zero_tangent(a) for d, a in zip(diff_outs, out_avals)]


def _custom_vjp_call_vjp(primals, outs, cts, *, callee, key):
    results = eval_graph(callee.fwd_graph(key), *primals)
    residuals = results[len(outs):]
    live = [instantiate(ct) for ct, o in zip(cts, outs) if is_differentiable(aval(o))]
    grads = iter(eval_graph(callee.bwd_graph(key), *primals[:_n_nondiff(key)], *residuals,
                            *live))
    return [next(grads) if diff else None for diff in _diff_mask(key)]


register(custom_vjp_call_p, impl=_custom_impl, abstract_eval=_custom_abstract_eval,
         jvp=_custom_vjp_call_jvp, vjp=_custom_vjp_call_vjp,
         transpose=transpose_from_vjp(_custom_vjp_call_vjp, _custom_abstract_eval),
         batch=_custom_batch(custom_vjp_call_p), symbolic_zeros=True,
         construct="an xform.custom_vjp function")


# == the decorators ===========================================================================

def _normalize_argnums(nums, n_args):
    result = []
    for i in nums:
        if not -n_args <= i < n_args:
            raise TypeCheckError(f"nondiff_argnums {tuple(nums)} out of range for {n_args} "
                                 "arguments", user_frame_info())
        result.append(i % n_args)
    return tuple(sorted(set(result)))


def _traced_closure(fn):
    """The name of a variable `fn` closes over that holds a traced value, or None."""
    code = getattr(fn, "__code__", None)
    for name, cell in zip(code.co_freevars if code else (), getattr(fn, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if any(type(leaf) is Tracer for leaf in tree_leaves(value)):
            return name
    return None


class _Custom:
    """Shared by CustomJVP and CustomVJP: argument handling and the callees per nondiff
    values."""

    kind = ""
    primitive = None
    rule_kinds = ("primal",)    # the functions a derivative through a call stages

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self._callees = {}

    def _functions(self):
        return (self.fun,)

    def __call__(self, *args, **kwargs):
        if kwargs:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
            if bound.kwargs:
                raise TypeCheckError(f"{self.kind} function '{self.__name__}' has keyword-only "
                                     "arguments, which rules cannot receive; make them "
                                     "positional", user_frame_info())
            args = bound.args
        nums = _normalize_argnums(self.nondiff_argnums, len(args))
        nondiff = [args[i] for i in nums]
        # Nondiff arguments holding arrays are passed as values, the others are static.
        traced = tuple(any(isinstance(leaf, (Tracer, np.ndarray, np.generic))
                           for leaf in tree_leaves(value)) for value in nondiff)
        static = tuple(None if t else value for value, t in zip(nondiff, traced))
        values = tuple(value for value, t in zip(nondiff, traced) if t)
        diff_args = tuple(a for i, a in enumerate(args) if i not in nums)
        leaves, in_tree = tree_flatten((values, diff_args))
        if current_builder() is None:
            return self.fun(*args)
        self._check_closures()
        if not any(type(x) is Tracer for x in leaves):
            return self.fun(*args)
        try:
            callee = self._callees.get((nums, traced, static))
        except TypeError:
            raise TypeCheckError(f"the nondiff_argnums arguments of '{self.__name__}' must be "
                                 "arrays or hashable values", user_frame_info()) from None
        if callee is None:
            callee = self._callees.setdefault((nums, traced, static),
                                              CustomCallee(self, nums, traced, static))
        key = (in_tree, tuple(aval(x) for x in leaves))
        if not callee.value_free.get(key, _NONE).issuperset(self.rule_kinds):
            known = known_values(leaves)    # (none of its functions known to ask nothing)
            if known is not None:
                callee = self._with_values(callee, key, known)
        outs = self.primitive.bind(*leaves, callee=callee, key=key)
        return tree_unflatten(callee.out_tree(key), outs)

    def _with_values(self, callee, key, known):
        """The callee of a call whose values the enclosing staging knows (`known`): a
        ValuedCallee where a function of it asked a value, or may later be asked to (a call
        inside this function's own rule, whose rules a higher derivative stages); else
        `callee`, shared by every call of the signature."""
        differentiated = bool(known.perturbed)
        outer = _rules_staging.get().get(self)
        if differentiated and outer is not None:
            if outer.is_call(key, known):
                return outer    # (its own call, in fwd or the jvp rule: staged once)
            return ValuedCallee(callee, key, known)
        kinds = self.rule_kinds if differentiated else ("primal",)
        if callee.value_free.get(key, _NONE).issuperset(kinds):
            return callee   # (known to ask nothing)
        valued = ValuedCallee(callee, key, known)
        for kind in kinds:
            try:
                valued._staged(kind, key)
            except Exception:
                if kind == "primal":
                    raise
                break       # raised again by the transform that asks for the rule
        else:
            valued.release()
        return valued if valued.asked() else callee

    def _check_closures(self):
        for fn in self._functions():
            name = _traced_closure(fn) if fn is not None else None
            if name is not None:
                raise XformError(f"'{getattr(fn, '__name__', fn)}' ({self.kind} function "
                                 f"'{self.__name__}' or its rule) closes over the traced value "
                                 f"'{name}'", user_frame_info(),
                                 f"pass '{name}' as an argument of '{self.__name__}' instead")


class CustomJVP(_Custom):
    """A function with a user-defined jvp rule; see `custom_jvp`."""

    kind = "custom_jvp"
    primitive = custom_jvp_call_p
    rule_kinds = ("primal", "jvp")

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None

    def _functions(self):
        return (self.fun, self.jvp)

    def defjvp(self, jvp):
        """Set the rule `jvp(*nondiff_args, primals, tangents) -> (out, tangent_out)`; returns
        `jvp`, so it works as a decorator.

        >>> f = xform.custom_jvp(np.sin)
        >>> @f.defjvp
        ... def f_jvp(primals, tangents):
        ...     (x,), (t,) = primals, tangents
        ...     return f(x), np.cos(x) * t
        >>> xform.grad(f)(0.0)
        np.float64(1.0)
        """
        self.jvp = jvp
        self._callees.clear()
        return jvp

    def defjvps(self, *jvps):
        """One rule per differentiable argument, as JAX's: `jvp_i(tangent_i, out, *primals)`
        is that argument's contribution to the output tangent (None: none); they are summed.

        >>> f = xform.custom_jvp(lambda x, y: x * y)
        >>> f.defjvps(lambda t, out, x, y: t * y, lambda t, out, x, y: x * t)
        >>> xform.grad(f, argnums=(0, 1))(2.0, 3.0)
        (np.float64(3.0), np.float64(2.0))
        """
        def jvp(primals, tangents):
            out = self(*primals)
            parts = [rule(t, out, *primals) for rule, t in zip(jvps, tangents)
                     if rule is not None]
            if not parts:
                return out, tree_map(np.zeros_like, out)
            return out, functools.reduce(lambda a, b: tree_map(np.add, a, b), parts)
        self.defjvp(jvp)


class CustomVJP(_Custom):
    """A function with a user-defined vjp (fwd and bwd); see `custom_vjp`."""

    kind = "custom_vjp"
    primitive = custom_vjp_call_p
    rule_kinds = ("primal", "fwd", "bwd")

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = None
        self.bwd = None

    def _functions(self):
        return (self.fun, self.fwd, self.bwd)

    def defvjp(self, fwd, bwd):
        """Set `fwd(*args) -> (out, residuals)` and `bwd(*nondiff_args, residuals, ct) ->`
        a tuple with one cotangent (or None) per argument not in nondiff_argnums.

        >>> f = xform.custom_vjp(np.sin)
        >>> f.defvjp(lambda x: (f(x), np.cos(x)), lambda cos_x, ct: (cos_x * ct,))
        >>> xform.grad(f)(0.0)
        np.float64(1.0)
        """
        self.fwd = fwd
        self.bwd = bwd
        self._callees.clear()


def custom_jvp(fun=None, *, nondiff_argnums=()):
    """Give `fun` its own jvp rule, as `jax.custom_jvp`: every transform uses the rule (reverse
    mode linearizes and transposes it; higher order differentiates it), vmap batches both.

    `nondiff_argnums` arguments are static (hashable) and come first in the rule's arguments.
    Eager calls run `fun`. The functions must not close over traced values (pass them as
    arguments).

    >>> log1pexp = xform.custom_jvp(lambda x: np.log1p(np.exp(x)))
    >>> @log1pexp.defjvp
    ... def log1pexp_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return log1pexp(x), t * (1 - 1 / (1 + np.exp(x)))
    >>> xform.grad(log1pexp)(0.0)
    np.float64(0.5)
    """
    if fun is None:
        return functools.partial(custom_jvp, nondiff_argnums=nondiff_argnums)
    return CustomJVP(fun, nondiff_argnums)


def custom_vjp(fun=None, *, nondiff_argnums=()):
    """Give `fun` its own vjp, as `jax.custom_vjp`: `f.defvjp(fwd, bwd)` with
    `fwd(*args) -> (out, residuals)` and `bwd(*nondiff_args, residuals, ct) -> tuple` of one
    cotangent (or None) per differentiable argument.

    Reverse mode runs fwd then bwd (higher order differentiates them); vmap batches fwd and
    bwd; forward mode transposes bwd (so bwd must be linear in `ct`, which it is unless it
    deliberately is not, e.g. gradient clipping).

    >>> clip_gradient = xform.custom_vjp(lambda x: x)
    >>> clip_gradient.defvjp(lambda x: (x, None), lambda _, ct: (np.clip(ct, -1.0, 1.0),))
    >>> xform.grad(lambda x: 5.0 * clip_gradient(x))(2.0)    # the cotangent 5.0, clipped
    np.float64(1.0)
    """
    if fun is None:
        return functools.partial(custom_vjp, nondiff_argnums=nondiff_argnums)
    return CustomVJP(fun, nondiff_argnums)


__all__ = ["BatchedCallee", "CustomCallee", "CustomJVP", "CustomVJP", "custom_jvp",
           "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p"]

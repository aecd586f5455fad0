"""Calls: `@xform.function` stages a call boundary as one `call` equation. The callee's graph
and every transformed graph of it are built lazily, the first time they are needed.

Notes: building eagerly would never terminate for recursive functions (the callee's graph
contains a call to itself, whose jvp contains a call to the jvp of itself, ...), and would
stage branches that never run. So a `call` equation refers to a `FunctionRef` and a
signature; output types of transformed callees are derived from the callee's types without
building their graphs (Mooncake's LazyDerivedRule has the same reason to exist).
"""
from __future__ import annotations

import functools

from xform.errors import TypeCheckError
from xform.ir.avals import ShapedArray, is_differentiable, tangent_aval
from xform.ir.builder import stage_function, using_builder
from xform.ir.core import Primitive
from xform.ir.execute import compiled_optimized, runtime
from xform.source_info import user_frame_info
from xform.ir.ad import Zero, aval, instantiate
from xform.ir.registry import Hooks, register
from xform.rules.subgraphs import transpose_from_vjp
from xform.transforms.derived import batch_of, jvp_of, vjp_of
from xform.tree import tree_flatten, tree_unflatten


class PendingRecursion(Exception):
    """Raised while a recursive callee's output types are still unknown; `cond`/`switch`
    staging catches it, stages the other branches first and retries with their types."""

    def __init__(self, ref, key):
        super().__init__(f"recursive call of {ref} before its output type is known")
        self.ref = ref
        self.key = key


class FunctionRef:
    """A callee: a Python function with its staged graph per signature `(in_tree, avals)`."""

    def __init__(self, fun):
        self.fun = fun
        self.name = getattr(fun, "__name__", "function")
        self._in_progress = {}
        self._provisional = {}
        self._derived = {}
        self.stage_count = 0

    def __repr__(self):
        return self.name

    def in_avals(self, key):
        return list(key[1])

    def out_type(self, key):
        """(out_avals, out_tree) of the callee at signature `key`."""
        entry = runtime().lookup_staging(self.fun, ("callee", key))
        if entry is not None:
            return entry[0].out_avals, entry[1]
        if key in self._in_progress:
            if key in self._provisional:
                return self._provisional[key]
            raise PendingRecursion(self, key)
        graph, out_tree = self.graph_and_tree(key)
        return graph.out_avals, out_tree

    def graph(self, key):
        return self.graph_and_tree(key)[0]

    def graph_and_tree(self, key):
        entry = runtime().lookup_staging(self.fun, ("callee", key))
        if entry is not None:
            return entry
        return runtime().build_staging(self.fun, ("callee", key), lambda: self._stage(key))

    def _stage(self, key):
        in_tree, avals = key
        self._in_progress[key] = True
        try:
            with using_builder(None):
                graph, captured, out_tree = stage_function(self.fun, in_tree, list(avals))
        finally:
            del self._in_progress[key]
            provisional = self._provisional.pop(key, None)
        self.stage_count += 1
        if provisional is not None and (
                [(a.shape, a.dtype) for a in provisional[0]]
                != [(a.shape, a.dtype) for a in graph.out_avals]
                or provisional[1] != out_tree):
            raise TypeCheckError(
                f"the recursive function {self.name} returns {graph.out_avals}, but its "
                f"recursive call was typed as {list(provisional[0])} from the other "
                "branch of its cond", user_frame_info(),
                "make the base case return the same type as the recursive case")
        return graph, out_tree

    def assume(self, key, out_avals, out_tree):
        """Type a pending recursive call provisionally (checked when staging finishes)."""
        self._provisional[key] = (list(out_avals), out_tree)

    def derived(self, transform):
        """The callee transformed by `transform` (a hashable description), cached so that
        recursion through transformed callees shows up as cycles of identical refs."""
        ref = self._derived.get(transform)
        if ref is None:
            ref = self._derived.setdefault(transform, DerivedRef(self, transform))
        return ref


class DerivedRef(FunctionRef):
    """A transformed callee: `("jvp", nonzeros)`, `("vjp",)` or `("batch", dims, size)`."""

    def __init__(self, base, transform):
        super().__init__(None)
        self.base = base
        self.transform = transform
        self.name = f"{transform[0]}({base.name})"

    def in_avals(self, key):
        base_in = self.base.in_avals(key)
        kind = self.transform[0]
        if kind == "jvp":
            return base_in + [tangent_aval(a) for a, nz in zip(base_in, self.transform[1])
                              if nz]
        if kind == "vjp":
            base_out = self.base.out_type(key)[0]
            return base_in + [tangent_aval(a) for a in base_out if is_differentiable(a)]
        dims, size = self.transform[1], self.transform[2]
        return [a if d is None else
                ShapedArray(a.shape[:d] + (size,) + a.shape[d:], a.dtype, a.weak_type)
                for a, d in zip(base_in, dims)]

    def out_type(self, key):
        """Output types follow from the base callee's types: no graph is built here."""
        base_avals, _ = self.base.out_type(key)
        kind = self.transform[0]
        if kind == "jvp":
            avals = list(base_avals) + [tangent_aval(a) for a in base_avals]
        elif kind == "vjp":
            avals = [tangent_aval(a) for a in self.base.in_avals(key) if is_differentiable(a)]
        else:
            size = self.transform[2]
            avals = [ShapedArray((size,) + a.shape, a.dtype, a.weak_type) for a in base_avals]
        return avals, None

    def graph_and_tree(self, key):
        # Derived from the base graph: rebuilt whenever the base callee is restaged.
        base = self.base.graph(key)
        kind = self.transform[0]
        if kind == "jvp":
            return jvp_of(base, self.transform[1]), None
        if kind == "vjp":
            return vjp_of(base), None
        return batch_of(base, self.transform[1], self.transform[2]), None


call_p = Primitive("call", multiple_results=True)


def _call_impl(*args, callee, key):
    return compiled_optimized(callee.graph(key))(*args)


def _call_abstract_eval(*avals, callee, key):
    return callee.out_type(key)[0]


def _call_jvp(primals, tangents, *, callee, key):
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    live = [t for t in tangents if type(t) is not Zero]
    outs = call_p.bind(*primals, *live, callee=callee.derived(("jvp", nonzeros)), key=key)
    n_out = len(outs) // 2
    return outs[:n_out], outs[n_out:]


def _call_vjp(primals, outs, cts, *, callee, key):
    live = [instantiate(ct) for ct, o in zip(cts, outs) if is_differentiable(aval(o))]
    grads = iter(call_p.bind(*primals, *live, callee=callee.derived(("vjp",)), key=key))
    return [next(grads) if is_differentiable(aval(x)) else None for x in primals]


def _call_batch(size, args, dims, *, callee, key):
    outs = call_p.bind(*args, callee=callee.derived(("batch", tuple(dims), size)), key=key)
    return outs, [0] * len(outs)


def _call_inline(eqn):
    return eqn.params["callee"].graph(eqn.params["key"])


register(call_p, impl=_call_impl, abstract_eval=_call_abstract_eval, jvp=_call_jvp,
         vjp=_call_vjp, transpose=transpose_from_vjp(_call_vjp, _call_abstract_eval),
         batch=_call_batch, hooks=Hooks(inline=_call_inline), symbolic_zeros=True,
         construct="an @xform.function call")


def function(fun=None):
    """Mark `fun` as a call boundary: under staging each call is one `call` equation, and
    the callee is staged once per signature, lazily; recursion (ending through `cond`) works.

    >>> @xform.function
    ... def f(x, n):
    ...     return xform.cond(n > 0, lambda: 2.0 * f(x, n - 1), lambda: x)
    >>> xform.jit(f)(1.0, 3), xform.grad(f)(1.0, 3)    # x * 2**n and its derivative 2**n
    (np.float64(8.0), np.float64(8.0))
    """
    if fun is None:
        return function
    ref = FunctionRef(fun)

    @functools.wraps(fun)
    def call(*args):
        leaves, in_tree = tree_flatten(args)
        key = (in_tree, tuple(aval(x) for x in leaves))
        outs = call_p.bind(*leaves, callee=ref, key=key)
        return tree_unflatten(ref.out_type(key)[1], outs)
    call.ref = ref
    return call


__all__ = ["DerivedRef", "FunctionRef", "PendingRecursion", "call_p", "function"]

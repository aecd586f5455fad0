"""GraphRewriter: the walk every substituting pass shares (fold, cse, inline). It re-emits
equations in order with their inputs substituted, splices closed sub-graphs in place of an
equation, and rebuilds the graph, returning the input graph itself when nothing changed."""
from __future__ import annotations

import operator

import attrs
import numpy as np

from xform.ir.core import Graph, Literal, Var
from xform.ir.nx import with_equations


def literal_of(value, aval) -> Literal:
    """A Literal holding `value` as `aval` says: a Python scalar when weakly typed (so that
    numpy's own promotion at run time keeps treating it as weak), else a numpy scalar."""
    value = np.asarray(value, dtype=aval.dtype)[()]
    return Literal(value.item() if aval.weak_type else value, aval)


class GraphRewriter:
    """Rebuilds `graph` equation by equation.

    >>> from xform.passes.rewrite import GraphRewriter
    >>> graph = xform.make_graph(lambda x: np.sin(x) * 2.0)(1.0)
    >>> rewriter = GraphRewriter(graph)
    >>> for eqn in graph.equations: rewriter.emit(rewriter.substituted(eqn))
    >>> rewriter.build() is graph    # nothing changed: the graph itself
    True
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self.equations = []
        self.consts = list(graph.consts)
        self._env = {}  # Var -> the Atom now standing for it
        self._boundary = None   # (the Vars the graph returns, its inputs), on first need
        self.emit = self.equations.append   # emit(eqn): one call per equation, kept cheap

    def read(self, atom):
        if type(atom) is Literal:
            return atom
        return self._env.get(atom, atom)

    def substituted(self, eqn):
        """`eqn` with its inputs read through the substitutions made so far."""
        env = self._env
        if not env or env.keys().isdisjoint(eqn.inputs):
            return eqn
        # Literals are never keys (atoms hash and compare by identity), so `get` passes them.
        inputs = tuple([env.get(a, a) for a in eqn.inputs])
        if inputs == eqn.inputs:   # identity per element: atoms define no __eq__
            return eqn
        return attrs.evolve(eqn, inputs=inputs)

    def replace(self, var: Var, atom) -> None:
        """From now on `atom` stands for `var` (a Literal is re-typed to `var`'s aval)."""
        atom = self.read(atom)
        if type(atom) is Literal and atom.aval != var.aval:
            atom = literal_of(atom.value, var.aval)
        self._env[var] = atom

    def returns_an_input(self, outputs, atoms) -> bool:
        """Whether standing `atoms` for `outputs` would return one of the graph's inputs as
        an output: numpy returns a new array, and callers writing into it must not change
        their own argument (fold and simplify refuse such rewrites)."""
        returned, inputs = self._returned_and_inputs()
        return any(var in returned and self.read(atom) in inputs
                   for var, atom in zip(outputs, atoms))

    def _returned_and_inputs(self):
        if self._boundary is None:
            self._boundary = ({a for a in self.graph.outputs if type(a) is Var},
                              set(self.graph.inputs))
        return self._boundary

    def add_const(self, var: Var, value) -> None:
        self.consts.append((var, value))

    def splice(self, body: Graph, atoms, outputs) -> list:
        """The equations of closed `body` applied to `atoms`, renamed into this graph, with
        `body`'s outputs standing for `outputs` (Vars of this graph). They are returned, not
        emitted, so the caller can rewrite them in turn.

        An output computed by an equation of `body` is bound to the outer Var directly; one that
        is an input, a constant or a Literal of `body` becomes a substitution.
        """
        rename = dict(zip(body.inputs, (self.read(a) for a in atoms)))
        for var, value in body.consts:
            rename[var] = Var(var.aval, var.hint)
            self.add_const(rename[var], value)
        computed = {v for eqn in body.equations for v in eqn.outputs}
        bound = set()
        for inner, outer in zip(body.outputs, outputs):
            if type(inner) is Var and inner in computed and inner not in rename:
                rename[inner] = outer
                bound.add(outer)
        equations = []
        for eqn in body.equations:
            inputs = [a if type(a) is Literal else rename[a] for a in eqn.inputs]
            outs = []
            for var in eqn.outputs:
                if var not in rename:
                    rename[var] = Var(var.aval, var.hint)
                outs.append(rename[var])
            equations.append(attrs.evolve(eqn, inputs=inputs, outputs=outs))
        for inner, outer in zip(body.outputs, outputs):
            if outer not in bound:
                self.replace(outer, inner if type(inner) is Literal else rename[inner])
        return equations

    def build(self) -> Graph:
        """The rewritten graph; `graph` itself when every equation came back unchanged."""
        outputs = tuple(self._output(a) for a in self.graph.outputs)
        unchanged = (len(self.equations) == len(self.graph.equations)
                     and all(map(operator.is_, self.equations, self.graph.equations))
                     and all(map(operator.is_, outputs, self.graph.outputs))
                     and len(self.consts) == len(self.graph.consts))
        if unchanged:
            return self.graph
        return with_equations(self.graph, self.equations, outputs, self.consts)

    def _output(self, atom):
        new = self.read(atom)
        if new is not atom and type(new) is Literal and new.aval.weak_type:
            # A folded graph output goes back to the caller: give it the numpy type the impl
            # returned, not the Python scalar that keeps a weak Literal weak inside the graph.
            return Literal(np.asarray(new.value, new.aval.dtype)[()], new.aval)
        return new

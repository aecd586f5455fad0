"""Text and HTML forms of a graph. Names are given here, at print time, never stored."""
from __future__ import annotations

import html
import re
import string

import numpy as np

from xform.ir.core import Graph, Literal, Var


class Names:
    """Print-time names: `a`, `b`, ..., `z`, `aa`, ... in order of first appearance."""

    def __init__(self):
        self.names = {}

    def __call__(self, var) -> str:
        name = self.names.get(var)
        if name is None:
            name = _name(len(self.names))
            self.names[var] = name
        return name


def _name(i: int) -> str:
    letters = string.ascii_lowercase
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = letters[r] + out
    return out


def _atom(atom, names) -> str:
    if type(atom) is Literal:
        value = atom.value
        if isinstance(value, np.ndarray):
            value = value.item() if value.ndim == 0 else value
        return repr(value.item() if isinstance(value, np.generic) else value)
    if type(atom) is not Var:   # a malformed graph (check_graph reports it); still printable
        return f"<{type(atom).__name__}>"
    return names(atom)


def _binder(var, names, used=None) -> str:
    if used is not None and var not in used:
        return "_"
    return f"{names(var)}:{var.aval.str_short()}"


def _param(value, names, indent) -> str:
    if isinstance(value, Graph):
        return "\n" + _pprint(value, names, indent + 4)
    if isinstance(value, tuple) and any(isinstance(v, Graph) for v in value):
        return "(" + ",".join(_param(v, names, indent) for v in value) + ")"
    if isinstance(value, np.dtype):
        return str(value)
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return repr(value)


def _equation(eqn, names, used, pad) -> str:
    outs = " ".join(_binder(v, names, used) for v in eqn.outputs) or "()"
    params = ""
    if eqn.params:
        params = "[" + ", ".join(f"{k}={_param(v, names, len(pad) + 4)}"
                                 for k, v in eqn.params.items()) + "]"
    args = " ".join(_atom(a, names) for a in eqn.inputs)
    return f"{pad}    {outs} = {eqn.primitive.name}{params} {args}".rstrip()


def listing(graph: Graph, names: Names | None = None, indent: int = 0):
    """`(head, [one text per equation], tail)`: the pieces of the listing, so a caller can
    point at one equation (xform.ir.check does). A text may span lines (sub-graphs)."""
    names = Names() if names is None else names
    pad = " " * indent
    used = {a for eqn in graph.equations for a in eqn.inputs if type(a) is Var}
    used.update(a for a in graph.outputs if type(a) is Var)
    ins = " ".join(_binder(v, names) for v in graph.inputs)
    consts = " ".join(_binder(v, names) for v, _ in graph.consts)
    head = f"{pad}{{ lambda {ins}" + (f" ; {consts}" if consts else "") + " . let"
    equations = [_equation(eqn, names, used, pad) for eqn in graph.equations]
    outs = ", ".join(_atom(a, names) for a in graph.outputs)
    return head, equations, f"{pad}  in ({outs}) }}"


def _pprint(graph: Graph, names: Names, indent: int = 0) -> str:
    head, equations, tail = listing(graph, names, indent)
    return "\n".join([head, *equations, tail])


def pprint_graph(graph: Graph) -> str:
    """The jaxpr-like listing, one equation a line, every binder with its type:

    { lambda a:f64[3] . let
        b:f64[3] = sin a
      in (b) }
    """
    return _pprint(graph, Names())


# The primitive name of an equation line: the first word after the first " = ".
_EQUATION_HEAD = re.compile(r"^(\s+[^=\n]*? = )([^\s\[]+)", re.MULTILINE)


def graph_html(graph: Graph) -> str:
    """The listing for notebooks, with primitive names highlighted."""
    text = html.escape(pprint_graph(graph), quote=False)
    text = _EQUATION_HEAD.sub(r"\1<b style='color:#1f5fa8'>\2</b>", text)
    return f"<pre style='font-size:12px;line-height:1.3'>{text}</pre>"

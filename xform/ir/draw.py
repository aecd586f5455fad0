"""A picture of a graph's dataflow, drawn with matplotlib (the optional `notebooks` extra) on
the layered layout of xform.ir.nx; names match the printed listing."""
from __future__ import annotations

from xform.ir.core import Graph, Literal
from xform.ir.nx import layout
from xform.ir.pprint import Names, listing

_COLORS = {"input": "#d9f2d9", "const": "#e8e8e8", "equation": "#dce8f7",
           "output": "#fde4c8"}


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        # Not an XformError: the environment lacks an optional dependency.
        raise ImportError("xform.ir.draw needs matplotlib: pip install 'xform[notebooks]'"
                          ) from err
    return plt


def _atom(atom, names) -> str:
    if type(atom) is Literal:
        return repr(atom.value.item() if hasattr(atom.value, "item") else atom.value)
    return names.get(atom, "_")


def _label(kind, item, names) -> str:
    if kind == "equation":
        outs = " ".join(_atom(v, names) for v in item.outputs) or "()"
        args = " ".join(_atom(a, names) for a in item.inputs)
        types = " ".join(v.aval.str_short() for v in item.outputs)
        return f"{outs} = {item.primitive.name} {args}".rstrip() + f"\n{types}"
    text = _atom(item, names)
    if kind == "output":
        return f"out: {text}"
    return f"{text}: {item.aval.str_short()}" + (" (const)" if kind == "const" else "")


def draw_graph(graph: Graph, ax=None):
    """Draw `graph`'s dataflow: inputs (green) on top, equations (blue) as `c = sin b`
    with their output types, outputs (orange) at the bottom; returns the matplotlib Axes.

    >>> import matplotlib.pyplot as plt
    >>> from xform.ir.draw import draw_graph
    >>> ax = draw_graph(xform.make_graph(lambda x: np.sin(x) * 2.0)(np.ones(3)))
    >>> print(ax.texts[1].get_text())    # the box of the first equation
    b = sin a
    f64[3]
    >>> plt.close(ax.figure)
    """
    plt = _pyplot()
    dag = layout(graph)
    names = Names()
    listing(graph, names)  # names in the listing's order, so the picture matches print(graph)
    pos = dict(dag.nodes(data="pos"))
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    if ax is None:
        width = min(max(4.0, 2.2 * (max(xs) - min(xs) + 1)), 30.0)
        height = min(max(2.0, 0.85 * (max(ys) - min(ys) + 1)), 60.0)
        _, ax = plt.subplots(figsize=(width, height))
    boxes = {}
    for node, data in dag.nodes(data=True):
        boxes[node] = ax.text(
            *data["pos"], _label(data["kind"], data["item"], names.names),
            ha="center", va="center", fontsize=8, family="monospace", zorder=2,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": _COLORS[data["kind"]],
                  "edgecolor": "#555555"})
    for source, target in dag.edges:
        # Arrows run from the bottom of the producer's box to the top of the reader's box.
        ax.annotate("", xy=(0.5, 1.0), xycoords=boxes[target], xytext=(0.5, 0.0),
                    textcoords=boxes[source], zorder=1,
                    arrowprops={"arrowstyle": "-|>", "color": "#777777", "lw": 0.8,
                                "shrinkA": 0, "shrinkB": 0})
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    ax.set_axis_off()
    return ax


__all__ = ["draw_graph"]

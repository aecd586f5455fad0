"""Every notebook in notebooks/ runs top to bottom without an error and is committed with its
outputs; the notebooks page's example runs; the dataflow picture (xform.ir.draw, xform.ir.nx.layout).

`python tests/test_notebooks.py [name.ipynb ...]` re-executes notebooks and saves them with
their outputs (all of them when no name is given).
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import xform

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
TIMEOUT = 60  # seconds per cell


def execute(path: pathlib.Path):
    """Run the notebook at `path` in a fresh python3 kernel; raises CellExecutionError."""
    import nbclient
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return notebook


PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(PATHS) >= 3


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_notebook_runs(path):
    pytest.importorskip("nbclient")
    pytest.importorskip("matplotlib")
    execute(path)


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_notebook_is_committed_with_outputs(path):
    nbformat = pytest.importorskip("nbformat")
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, f"{path.name} has no code cells"
    # Executed in order, top to bottom: counts 1, 2, 3, ...
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), (
        f"{path.name} is not saved executed: run python tests/test_notebooks.py {path.name}")
    assert not [o for cell in code for o in cell.outputs if o.output_type == "error"]


def test_notebooks_readme_example_runs():
    # The python block of notebooks/README.md (the site's notebooks page); the README's own
    # code runs in tests/test_docs_site.py.
    text = (NOTEBOOKS / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1
    namespace = {}
    exec(compile(blocks[0], "notebooks/README.md", "exec"), namespace)   # noqa: S102
    assert "def xform_graph(" in namespace["source"]


# -- the dataflow picture ----------------------------------------------------------------------

def _loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2) / x.shape[0]


def _grad_graph():
    return xform.make_graph(xform.grad(_loss))(np.ones((3, 2)), np.ones((4, 3)))


def test_layout_places_inputs_on_top_outputs_at_the_bottom_and_edges_downwards():
    from xform.ir.nx import layout
    graph = _grad_graph()
    dag = layout(graph)
    kinds = dict(dag.nodes(data="kind"))
    pos = dict(dag.nodes(data="pos"))
    assert sorted(k for k in kinds.values() if k != "equation") == (
        ["const"] * len(graph.consts) + ["input"] * 2 + ["output"])
    assert sum(k == "equation" for k in kinds.values()) == len(graph.equations)
    assert all(pos[u][1] > pos[v][1] for u, v in dag.edges)
    assert {pos[n][1] for n, k in kinds.items() if k == "input"} == {0.0}
    bottom = min(p[1] for p in pos.values())
    assert all(pos[n][1] == bottom for n, k in kinds.items() if k == "output")
    # no two nodes share a place
    assert len(set(pos.values())) == len(pos)


def test_layout_orders_a_layer_to_avoid_crossings():
    from xform.ir.nx import layout

    def crossed(x, y):
        # b (from y) and a (from x) swap columns under the ops reading them
        return np.cos(y) + 1.0, np.sin(x) * 2.0
    dag = layout(xform.make_graph(crossed)(1.0, 2.0))
    pos = dict(dag.nodes(data="pos"))
    edges = [(pos[u][0], pos[v][0], pos[u][1]) for u, v in dag.edges]
    crossings = sum(1 for a in edges for b in edges
                    if a[2] == b[2] and (a[0] - b[0]) * (a[1] - b[1]) < 0)
    assert crossings == 0


def test_layout_edges_carry_the_vars_and_literal_outputs_are_nodes():
    from xform.ir.nx import layout
    graph = xform.make_graph(lambda x: (np.sin(x), 3.0))(1.0)
    dag = layout(graph)
    (edge,) = [e for e in dag.edges(data="var") if e[1] == 0]
    assert edge[2] is graph.inputs[0]
    assert dag.in_degree(("output", 1)) == 0
    assert dag.nodes[("output", 1)]["item"] is graph.outputs[1]


def test_draw_graph_labels_match_the_printed_names():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.text import Annotation
    from xform.ir.draw import draw_graph
    graph = xform.make_graph(lambda x: np.sin(x) * 2.0)(np.ones(3))
    ax = draw_graph(graph)
    arrows = [t for t in ax.texts if isinstance(t, Annotation)]
    labels = sorted(t.get_text() for t in ax.texts if not isinstance(t, Annotation))
    assert labels == ["a: f64[3]", "b = sin a\nf64[3]", "c = multiply b 2.0\nf64[3]",
                      "out: c"]
    assert len(arrows) == 3
    plt.close(ax.figure)


def test_draw_graph_uses_a_given_axes_and_draws_constants_and_dropped_outputs():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from xform.ir.draw import draw_graph
    figure, ax = plt.subplots()
    graph = _grad_graph()
    assert draw_graph(graph, ax=ax) is ax
    labels = [text.get_text() for text in ax.texts]
    assert any(label.endswith("(const)") for label in labels)
    assert any(label.startswith("_ = ") for label in labels)   # outputs nothing reads
    figure.canvas.draw()   # arrows anchored on the boxes resolve at draw time
    plt.close(figure)


def test_draw_graph_without_matplotlib_says_how_to_install_it(monkeypatch):
    from xform.ir import draw
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"xform\[notebooks\]"):
        draw.draw_graph(xform.make_graph(np.sin)(1.0))


if __name__ == "__main__":
    import nbformat
    for name in sys.argv[1:] or [p.name for p in PATHS]:
        nbformat.write(execute(NOTEBOOKS / name), NOTEBOOKS / name)
        print("executed and saved", name)

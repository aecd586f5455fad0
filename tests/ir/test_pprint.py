"""The listing: one equation a line with typed binders, names given at print time, params,
literals, consts, sub-graphs indented, `_` for unused outputs; and `_repr_html_`."""
import re
import textwrap

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.ir.avals import ShapedArray
from xform.ir.core import Equation, Graph, Primitive, Var
from xform.ir.pprint import listing, pprint_graph
from xform.rules.unary import cos_p, sin_p

F64 = ShapedArray((), np.float64)


def dedent(text):
    return textwrap.dedent(text).strip("\n")


def test_listing_of_a_staged_function():
    w = np.ones(3)
    graph = xform.make_graph(
        lambda x, y: (np.sinh(x) * w + np.sin(y), x.sum(axis=0), x.astype(np.float32) < 1.0))(
        np.ones(3), 2.0)
    assert str(graph) == dedent("""
        { lambda a:f64[3] b:~f64[] ; c:f64[3] . let
            d:f64[3] = sinh a
            e:f64[3] = multiply d c
            f:f64[] = sin b
            g:f64[3] = add e f
            h:f64[] = sum[axes=(0,), dtype=None] a
            i:f32[3] = convert[dtype=float32] a
            j:bool[3] = less i 1.0
          in (g, h, j) }
    """)


@given(st.integers(1, 12))
def test_one_equation_a_line(n):
    def chain(x):
        for _ in range(n):
            x = np.sin(x)
        return x
    lines = str(xform.make_graph(chain)(np.ones(2))).splitlines()
    assert len(lines) == n + 2
    body = lines[1:-1]
    assert all(re.fullmatch(r"    [a-z]+:f64\[2\] = sin [a-z]+", line) for line in body)
    names = [line.split(":")[0].strip() for line in body]
    assert len(set(names)) == n                    # every value its own name


def test_names_are_assigned_at_print_time_and_restart():
    graph = xform.make_graph(lambda x: np.cos(np.sin(x)))(1.0)
    assert str(graph) == str(graph)
    assert pprint_graph(graph).startswith("{ lambda a:~f64[] . let")


def test_names_go_past_z():
    vars_ = [Var(F64) for _ in range(28)]
    graph = Graph(vars_, [], [], [vars_[-1]])
    head = str(graph).splitlines()[0]
    assert head.split()[2:4] == ["a:f64[]", "b:f64[]"]
    assert "z:f64[] aa:f64[] ab:f64[]" in head
    assert str(graph).endswith("in (ab) }")


def test_unused_outputs_print_as_underscore():
    pair_p = Primitive("pair", multiple_results=True)
    x, y, z = Var(F64), Var(F64), Var(F64)
    graph = Graph([x], [], [Equation(pair_p, [x], [y, z])], [z])
    assert str(graph).splitlines()[1] == "    _ b:f64[] = pair a"


def test_literals_and_params():
    graph = xform.make_graph(lambda x: (x * 2, x + 0.5, x.reshape(1, 3)))(np.ones(3, np.int32))
    lines = str(graph).splitlines()
    assert lines[1] == "    b:i32[3] = multiply a 2"
    assert lines[2] == "    c:f64[3] = add a 0.5"
    assert lines[3] == "    d:i32[1,3] = reshape[shape=(1, 3)] a"


def test_outputs_that_are_literals_or_inputs():
    graph = xform.make_graph(lambda x: (x, 1.5))(np.ones(2))
    assert str(graph) == "{ lambda a:f64[2] . let\n  in (a, 1.5) }"


def test_sub_graphs_are_indented_with_shared_names():
    call_p = Primitive("call")
    inner_x, inner_y = Var(F64), Var(F64)
    body = Graph([inner_x], [], [Equation(cos_p, [inner_x], [inner_y])], [inner_y])
    x, y, z = Var(F64), Var(F64), Var(F64)
    graph = Graph([x], [], [Equation(sin_p, [x], [y]),
                            Equation(call_p, [y], [z], {"body": body, "n": 2})], [z])
    assert str(graph) == dedent("""
        { lambda a:f64[] . let
            b:f64[] = sin a
            c:f64[] = call[body=
                { lambda d:f64[] . let
                    e:f64[] = cos d
                  in (e) }, n=2] b
          in (c) }
    """)


def test_listing_pieces_match_the_equations():
    graph = xform.make_graph(lambda x: np.cos(np.sin(x)) * 2.0)(1.0)
    head, equations, tail = listing(graph)
    assert len(equations) == len(graph.equations)
    assert "\n".join([head, *equations, tail]) == str(graph)
    assert equations[1].split(" = ")[1].startswith("cos")


def test_repr_html_escapes_and_highlights_each_primitive():
    graph = xform.make_graph(lambda x: np.sin(x) * (x < 1.0) + np.sinh(x))(np.ones(2))
    html = graph._repr_html_()
    assert html.startswith("<pre") and html.endswith("</pre>")
    highlighted = re.findall(r"<b style='color:#1f5fa8'>(\w+)</b>", html)
    assert highlighted == [eqn.primitive.name for eqn in graph.equations]
    assert "<b style='color:#1f5fa8'>sin</b>h" not in html     # sinh is one name
    text = re.sub(r"<[^>]+>", "", html)
    assert text.replace("&lt;", "<").replace("&gt;", ">") == str(graph)


def test_repr_html_escapes_angle_brackets_in_params():
    odd_p = Primitive("odd")
    x, y = Var(F64), Var(F64)
    graph = Graph([x], [], [Equation(odd_p, [x], [y], {"tag": "<script>"})], [y])
    html = graph._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html

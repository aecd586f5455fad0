"""The graphs that run as compiled functions of their own without being params of an equation
(a recursive call's callee, a custom rule's primal) go through the passes too: what runs is
the optimized graph, with numpy's bits."""
import attrs
import numpy as np
import pytest

import xform
from xform.ir import execute



def _body(pass_name, x):
    """What `pass_name` removes: `* 1.0`, a repeated sin, dead code."""
    if pass_name == "fold":
        return np.sin(x) * 1.0
    if pass_name == "cse":
        return np.sin(x) + np.sin(x)
    c = np.cos(x)
    np.exp(c)  # dead
    return np.sin(c)


EFFECT = {"fold": "multiply", "cse": "sin", "dce": "exp"}


def _primitive_count(graph, name) -> int:
    return sum(eqn.primitive.name == name for eqn in graph.equations)


def _kinds(pass_name):
    @xform.function
    def countdown(x, n):     # recursive: its call is never inlined
        return xform.cond(n > 0, lambda v: countdown(v, n - 1),
                          lambda v: _body(pass_name, v), x)

    @xform.custom_jvp
    def custom(x):
        return _body(pass_name, x)
    custom.defjvp(lambda primals, tangents: (custom(primals[0]), tangents[0]))

    return {"recursive call": lambda x: countdown(x, 2), "custom_jvp": custom}


@pytest.mark.parametrize("pass_name", sorted(EFFECT))
@pytest.mark.parametrize("kind", ["recursive call", "custom_jvp"])
def test_what_runs_is_the_optimized_body(monkeypatch, kind, pass_name):
    ran = []
    real = execute.runtime()
    monkeypatch.setattr(execute, "_runtime", attrs.evolve(
        real, compiled=lambda graph: ran.append(graph) or real.compiled(graph)))
    fun = _kinds(pass_name)[kind]
    x = np.linspace(0.2, 0.9, 3)
    got = xform.jit(fun)(x)
    want = _body(pass_name, x)
    np.testing.assert_array_equal(got, want, strict=True)   # numpy's bits
    bodies = [g for g in ran if _primitive_count(g, "sin")]
    assert bodies, "the body never ran as a compiled graph of its own"
    name = EFFECT[pass_name]
    # the body ran with one sin, no `* 1.0`, no dead exp
    assert all(_primitive_count(g, name) == (1 if name == "sin" else 0) for g in bodies), \
        [str(g) for g in bodies]

"""Internal names never leak: when a transform meets a construct of xform's that does not
support it, the error names the construct and the transform, at the user's line, and never
asks the user to define a rule for an internal primitive. A composition that works must
give the finite-difference answer; one that does not must fail this way."""
import numpy as np
import pytest

import xform
from xform.errors import TRANSFORM_OF_RULE_KIND
from xform.ir.registry import RULES, missing_rule
from xform.testing import numerical_jvp

INTERNAL = [prim for prim, rules in RULES.items() if rules.construct is not None]


def assert_user_facing(err, construct_word):
    message = str(err)
    assert "define it with" not in message and "p.def_" not in message
    for prim in INTERNAL:
        assert f"'{prim.name}'" not in message
    assert construct_word in message
    assert err.source is not None and err.source.filename == __file__


def test_the_control_flow_and_custom_primitives_declare_their_construct():
    names = {prim.name for prim in INTERNAL}
    assert {"while_loop", "while_loop_grad", "cond", "scan", "call", "custom_jvp_call",
            "custom_vjp_call", "threaded_map"} <= names


@pytest.mark.parametrize("prim", INTERNAL, ids=[p.name for p in INTERNAL])
@pytest.mark.parametrize("kind", ["jvp", "transpose", "vjp", "batch"])
def test_every_missing_rule_of_an_internal_primitive_reads_as_a_construct(prim, kind):
    message = str(missing_rule(prim, kind))
    assert RULES[prim].construct in message
    assert TRANSFORM_OF_RULE_KIND[kind] in message
    assert f"'{prim.name}'" not in message and "p.def_" not in message


def test_a_library_authors_primitive_still_gets_the_define_hint():
    p = xform.Primitive("my_cube")
    p.def_impl(lambda x: x ** 3)
    p.def_abstract_eval(lambda x: x)
    with pytest.raises(xform.MissingRuleError, match="def_jvp") as info:
        xform.grad(p.bind)(2.0)
    assert "'my_cube'" in str(info.value)


def grow(x):
    return xform.while_loop(lambda x: x < 10.0, lambda x: x * 1.5, x)


@pytest.mark.parametrize("second_order", [
    lambda f: xform.grad(xform.grad(f)),
    lambda f: xform.jacfwd(xform.grad(f)),
    lambda f: xform.hessian(f),
])
def test_second_order_through_while_loop_works_or_names_the_construct(second_order):
    x = 1.3
    try:
        got = second_order(grow)(x)
    except xform.MissingRuleError as err:
        assert_user_facing(err, "xform.while_loop")
        assert "forward-mode" in str(err)
        return
    want = numerical_jvp(xform.grad(grow), (x,), (1.0,), 1e-6)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_forward_mode_through_a_custom_vjp_calling_a_custom_vjp():
    inner = xform.custom_vjp(np.sin)
    inner.defvjp(lambda x: (np.sin(x), np.cos(x)), lambda cos_x, ct: (cos_x * ct,))
    outer = xform.custom_vjp(lambda x: np.sin(x) * 2.0)
    outer.defvjp(lambda x: (np.sin(x) * 2.0, x), lambda x, ct: (inner(x + np.pi / 2) * 2.0
                                                                * ct,))
    try:
        _, tangent = xform.jvp(outer, (0.4,), (1.0,))
    except xform.MissingRuleError as err:
        assert_user_facing(err, "xform.custom_vjp")
        return
    assert tangent == pytest.approx(2.0 * np.cos(0.4))

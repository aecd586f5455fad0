"""The reverse pass a gradient's first call runs on concrete values (issue 30, part 5): the
shortcuts it takes give exactly the bits of the way they replace, and the first call of a
gradient still equals its compiled calls."""
import numpy as np
import pytest
import scipy.linalg

import xform
from xform.ir.ad import broadcast_scalar
from xform.ir.ad import Undefined, aval
from xform.ir.avals import tangent_aval
from xform.ir.core import Literal
from xform.ir.registry import RULES, rule_for
from xform.rules.linalg import solve_p
from xform.rules.signal import convolve_p
from xform.transforms.vjp import vjp_from_jvp

_RNG = np.random.default_rng(30)


def _normal(*shape, dtype=np.float64):
    values = _RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * _RNG.standard_normal(shape)
    return values.astype(dtype)


# (name, function of the operands, operands): one product equation each
PRODUCTS = [
    ("matmul", np.matmul, (_normal(5, 7), _normal(7, 3))),
    ("matmul", np.matmul, (_normal(7), _normal(7, 3))),
    ("matmul", np.matmul, (_normal(4, 5, 7), _normal(7))),
    ("matmul", np.matmul, (_normal(2, 5, 7), _normal(1, 7, 3, dtype=np.float32))),
    ("matmul", np.matmul, (_normal(5, 7, dtype=np.complex128), _normal(7, 3))),
    ("matmul", np.matmul, (np.arange(35).reshape(5, 7), _normal(7, 3))),
    ("dot", np.dot, (_normal(3, 4, 5), _normal(2, 5, 6))),
    ("einsum", lambda a, b, c: np.einsum("ij,jk,k->i", a, b, c),
     (_normal(4, 5), _normal(5, 6), _normal(6))),
    ("correlate", lambda x, k: np.convolve(x, k, mode="full"), (_normal(9), _normal(4))),
    ("convolve", lambda x, k: convolve_p.bind(x, k, mode="full", method="direct"),
     (_normal(9), _normal(4))),
    ("convolve", lambda x, k: convolve_p.bind(x, k, mode="valid", method="direct"),
     (_normal(9, 2), _normal(4, 2))),
    ("correlate", lambda a, v: np.correlate(a, v, mode="same"),
     (_normal(9, dtype=np.complex128), _normal(4, dtype=np.complex128))),
]


_LOWER = np.tril(_normal(4, 4)) + 4 * np.eye(4)

# (name, function, operands): one linear-algebra equation whose vjp is its own rule
LINALG = [
    ("inv", np.linalg.inv, (_normal(4, 4),)),
    ("inv", np.linalg.inv, (_normal(3, 4, 4, dtype=np.complex128),)),
    ("scipy_inv", lambda a: scipy.linalg.inv(a), (_normal(4, 4),)),
    ("det", np.linalg.det, (_normal(4, 4),)),
    ("det", np.linalg.det, (_normal(2, 4, 4, dtype=np.float32),)),
    ("solve", np.linalg.solve, (_normal(4, 4), _normal(4, 3))),
    ("solve", np.linalg.solve, (_normal(2, 4, 4), _normal(4, 3))),
    ("solve", np.linalg.solve, (_normal(4, 4, dtype=np.complex128), _normal(2, 4, 1))),
    ("solve", np.linalg.solve, (_normal(4, 4), np.arange(8).reshape(4, 2))),
    ("solve", lambda a, b: solve_p.bind(a, b, triangle="lower"), (_LOWER, _normal(4, 2))),
    ("solve", lambda a, b: solve_p.bind(a, b, triangle="upper"), (_LOWER.T, _normal(4, 2))),
]


@pytest.mark.parametrize("name, fun, operands", PRODUCTS + LINALG,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(PRODUCTS + LINALG)])
def test_a_direct_vjp_is_its_linearized_jvp_transposed_bit_for_bit(name, fun, operands):
    graph = xform.make_graph(fun)(*operands)
    (eqn,) = [e for e in graph.equations if e.primitive.name == name]
    ins = list(operands)
    out = rule_for(eqn, "impl")(*ins, **eqn.params)
    ct = _normal(*np.shape(out), dtype=np.result_type(out))
    expected = vjp_from_jvp(eqn, ins, ct)
    got = rule_for(eqn, "vjp")(ins, out, ct, **eqn.params)
    assert len(got) == len(expected)
    for got_ct, expected_ct, x in zip(got, expected, ins):
        if np.asarray(x).dtype.kind not in "fc":
            assert got_ct is None and expected_ct is None
            continue
        assert np.shape(got_ct) == np.shape(x)
        assert np.result_type(got_ct) == np.result_type(expected_ct)
        assert np.array_equal(got_ct, expected_ct)


_MASK = _RNG.standard_normal(6) > 0

# (name, function, operands): one equation of a primitive reverse mode transposes directly
LINEAR = [
    ("where", lambda x, y: np.where(_MASK, x, y), (_normal(6), _normal(6))),
    ("where", lambda x, y: np.where(_MASK, x, y), (_normal(6, dtype=np.float32), _normal(6))),
    ("where", lambda x, y: np.where(_MASK, x, y), (_normal(6), np.arange(6))),
    ("where", lambda x: np.where(_MASK, x, 2.0), (_normal(2, 6),)),
    ("where", lambda x, y: np.where(_MASK, x, y),
     (_normal(6, dtype=np.complex128), _normal(6, dtype=np.float32))),
    ("pad", lambda x: np.pad(x, (2, 3)), (_normal(4),)),
    ("pad", lambda x: np.pad(x, ((1, 0), (0, 2)), constant_values=1.5),
     (_normal(3, 2, dtype=np.float32),)),
]


@pytest.mark.parametrize("name, fun, operands", LINEAR,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(LINEAR)])
def test_a_linear_equations_transpose_is_its_linearized_jvp_transposed_bit_for_bit(
        name, fun, operands):
    graph = xform.make_graph(fun)(*operands)
    (eqn,) = [e for e in graph.equations if e.primitive.name == name]
    env = dict(zip(graph.inputs, operands))
    ins = [a.value if type(a) is Literal else env.get(a, np.asarray(_MASK)) for a in eqn.inputs]
    out = rule_for(eqn, "impl")(*ins, **eqn.params)
    ct = _normal(*np.shape(out), dtype=np.result_type(out))
    expected = vjp_from_jvp(eqn, ins, ct)
    linear_in = RULES[eqn.primitive].linear_in
    args = [Undefined(tangent_aval(aval(x))) if i in linear_in and aval(x).dtype.kind in "fc"
            else x for i, x in enumerate(ins)]
    got = rule_for(eqn, "transpose")(ct, *args, **eqn.params)
    for got_ct, expected_ct, x in zip(got, expected, args):
        if type(x) is not Undefined:
            continue
        assert np.result_type(got_ct) == np.result_type(expected_ct)
        assert np.array_equal(got_ct, expected_ct)


def _mlp_loss(w, xs, ys):
    hidden = np.tanh(xs @ w[:, :6])
    return np.sum((hidden @ w[:6, 6:7] - ys) ** 2) + np.sum(np.einsum("ij,ij->i", w, w))


@pytest.mark.parametrize("fun, args", [
    (lambda x: np.sum(x), (_normal(1000),)),
    (lambda x: np.sin(x) * x + 1.0, (0.7,)),
    (lambda x: np.sin(x) * x + 1.0, (np.float64(0.7),)),
    (lambda x, y: np.sum(x * y + x) * 2.0, (_normal(6), _normal(3, 6))),
    (_mlp_loss, (_normal(6, 7), _normal(8, 6), _normal(8, 1))),
    (lambda x, y: np.sum(np.where(_MASK, x, y) ** 2), (_normal(6, dtype=np.float32), _normal(6))),
    (lambda x: np.sum(np.pad(x, (2, 3), constant_values=0.5) * np.arange(9.0)), (_normal(4),)),
])
def test_a_first_gradient_call_computes_its_compiled_calls_bits(fun, args):
    grad = xform.grad(fun, argnums=tuple(range(len(args))))
    first = grad(*args)
    second = grad(*args)    # compiled
    third = grad(*args)
    for a, b, c in zip(first, second, third):
        assert np.result_type(a) == np.result_type(b) == np.result_type(c)
        assert np.array_equal(a, b) and np.array_equal(b, c)


def test_a_first_calls_gradient_is_an_array_the_caller_owns():
    x = _normal(50)
    grad = xform.grad(lambda x: np.sum(x))
    first, second = grad(x), grad(x)
    for g in (first, second):
        assert g.flags.writeable and not np.shares_memory(g, x)
    first[0] = 5.0      # writing one result changes no other element, no later result
    assert np.array_equal(first[1:], np.ones(49))
    assert np.array_equal(grad(x), np.ones(50))


@pytest.mark.parametrize("value", [np.float64(2.5), np.array(2.5), np.float32(2.5),
                                   np.array(3, np.int64), np.complex128(1 + 2j)])
def test_a_broadcast_scalar_is_a_read_only_view(value):
    view = broadcast_scalar(value, (4, 3))
    assert view.shape == (4, 3) and view.dtype == value.dtype and view.strides == (0, 0)
    assert np.array_equal(view, np.full((4, 3), value))
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0, 0] = 1


@pytest.mark.parametrize("fun, x", [
    (lambda x: x ** 3.0 + 2.0 * x, -1.5),         # the exponent's cotangent: log(x), x < 0
    (lambda x: np.sum(x ** np.array([2.0, 3.0])), np.array([-1.5, -0.5])),  # a data array's
])
def test_a_first_call_computes_no_cotangent_of_a_constant(fun, x):
    # The cotangent of a constant operand is dropped; computed, it warned ("invalid value in
    # log") where eager numpy and the compiled calls compute nothing of the kind.
    grad = xform.grad(fun)
    with np.errstate(all="raise"):
        first, second = grad(x), grad(x)
    assert np.array_equal(first, second)
    h = 1e-6
    for i in np.ndindex(np.shape(x)):
        step = np.zeros(np.shape(x))
        step[i] = h
        assert np.isclose(np.asarray(first)[i], (fun(x + step) - fun(x - step)) / (2 * h),
                          rtol=1e-6, atol=1e-6)

"""A solve with a Cholesky factor: the simplify pass states the factor's triangle in the
solve's params, and the rules differentiate by substitution from that param alone (never by
asking where the matrix came from), in every transform that keeps numpy's forward solve."""
import collections

import numpy as np
import pytest

import xform
from xform.passes.simplify import simplify
from xform.testing import check_grads
from xform.tree import tree_leaves
from tests.symmetric import symmetrized

FORMS = {"L": "lower", "L.T": "upper", "U": "upper", "U.T": "lower"}


def problem():
    rng = np.random.default_rng(3)
    m = rng.standard_normal((6, 6))
    return m @ m.T + 6 * np.eye(6), rng.standard_normal(6)


def solving_with(form):
    def f(k, b):
        factor = np.linalg.cholesky(k, upper=form.startswith("U"))
        factor = factor.T if form.endswith(".T") else factor
        return np.sum(np.sin(np.linalg.solve(factor, b)))
    return f


def solve_kinds(graph):
    graph = xform.passes.optimize(graph, xform.passes.EXACT_PIPELINE)
    names = collections.Counter(eqn.primitive.name for eqn in graph.equations)
    return names["solve"], names["triangular_solve"]


@pytest.mark.parametrize("form", FORMS)
def test_the_pass_states_the_triangle_of_the_matrix_solved_with(form):
    k, b = problem()
    graph = simplify(xform.make_graph(solving_with(form))(k, b), exact=True)
    solves = [eqn for eqn in graph.equations if eqn.primitive.name == "solve"]
    assert [eqn.params.get("triangle") for eqn in solves] == [FORMS[form]]
    assert xform.eval_graph(graph, k, b)[0] == solving_with(form)(k, b)    # numpy's LU


def test_a_solve_with_any_other_matrix_states_nothing():
    k, b = problem()
    graph = simplify(xform.make_graph(lambda k, b: np.sum(np.linalg.solve(np.tril(k), b)))(k, b),
                     exact=True)
    assert [dict(eqn.params) for eqn in graph.equations if eqn.primitive.name == "solve"] == [{}]


TRANSFORMS = {
    "value_and_grad": lambda f, k, b: xform.value_and_grad(f, (0, 1))(k, b),
    "vjp": lambda f, k, b: xform.vjp(f, k, b)[1](1.0),
    "jvp": lambda f, k, b: xform.jvp(f, (k, b), (np.eye(6), b)),
    "linearize": lambda f, k, b: xform.linearize(f, k, b)[1](np.eye(6), b),
}


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("form", FORMS)
def test_derivatives_of_a_solve_with_a_factor_solve_by_substitution(transform, form):
    """One LU solve (the value's, numpy's bits) and the derivatives' by substitution in the
    compiled graph; without the pass's param the derivatives would solve by LU too."""
    k, b = problem()
    f = solving_with(form)
    graph = xform.make_graph(lambda k, b: TRANSFORMS[transform](f, k, b))(k, b)
    solves, substitutions = solve_kinds(graph)
    assert solves == 1 and substitutions >= 1


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("form", ["L", "U.T"])
def test_first_and_later_calls_compute_the_same_bits(transform, form):
    k, b = problem()
    f = solving_with(form)
    calls = [tree_leaves(TRANSFORMS[transform](f, k, b)) for _ in range(3)]
    for later in calls[1:]:
        for x, y in zip(calls[0], later, strict=True):
            np.testing.assert_array_equal(x, y, strict=True)


@pytest.mark.parametrize("form", FORMS)
def test_derivatives_against_finite_differences(form):
    k, b = problem()
    check_grads(symmetrized(solving_with(form)), (k, b), order=2, rtol=1e-5, atol=1e-6)

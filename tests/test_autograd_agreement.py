"""Gradients agree with HIPS/autograd (an optional peer, installed by the test extra) to 1e-6
relative on a shared set of functions."""
import numpy as np
import pytest

import xform

autograd = pytest.importorskip("autograd")
anp = pytest.importorskip("autograd.numpy")


def make_cases(np_):
    return {
        "sum_sin": lambda x: np_.sum(np_.sin(x)),
        "poly": lambda x: np_.sum(x ** 3 - 2.0 * x ** 2 + x),
        "softplus": lambda x: np_.sum(np_.log1p(np_.exp(x))),
        "tanh_mlp": lambda x: np_.sum(np_.tanh(np_.tanh(x * 0.5) * 1.5 + 0.1)),
        "log_sum_exp": lambda x: np_.log(np_.sum(np_.exp(x))),
        "ratio": lambda x: np_.sum(x / (1.0 + x ** 2)),
        "hypot_like": lambda x: np_.sqrt(np_.sum(x * x) + 1.0),
        "max_abs": lambda x: np_.sum(np_.maximum(x, 0.1 * x) * np_.abs(x)),
        "mean_var": lambda x: np_.mean(x) * np_.sum((x - np_.mean(x)) ** 2),
        "reshape_transpose": lambda x: np_.sum(np_.reshape(x, (2, 3)).T ** 2 * np_.arange(2.0)),
        "where": lambda x: np_.sum(np_.where(x > 0, np_.sin(x), np_.cos(x))),
        "matmul": lambda x: np_.sum(np_.dot(np_.reshape(x, (2, 3)),
                                            np_.reshape(x, (3, 2))) ** 2),
    }


CASES = make_cases(np)
AUTOGRAD_CASES = make_cases(anp)
X = np.array([0.3, -1.2, 0.8, 1.5, -0.4, 0.05])


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_agrees_with_autograd(name):
    ours = xform.grad(CASES[name])(X)
    theirs = autograd.grad(AUTOGRAD_CASES[name])(X)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("name", ["sum_sin", "poly", "tanh_mlp", "ratio", "log_sum_exp"])
def test_hessian_agrees_with_autograd(name):
    ours = xform.hessian(CASES[name])(X)
    theirs = autograd.hessian(AUTOGRAD_CASES[name])(X)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-10)

"""One implicit gradient through scipy.optimize.minimize against finite differences' cost.

A bilevel problem: per-feature ridge strengths exp(h) (h in R^d) regularise an inner
`minimize` (L-BFGS-B with the user's gradient) of a least-squares fit; the outer loss is the
validation error of the inner argmin. `xform.grad` differentiates it by the implicit function
theorem: one inner solve, one Hessian and a d x d linear solve. Central finite differences
need 2 d inner solves (and their accuracy is limited by the inner solver's tolerance).
Medians of round-robin samples, same run; the error against the closed form is printed too.

`python -m bench.implicit_grad [d]`
"""
import sys

import numpy as np
from scipy.optimize import minimize

import xform
from bench.timing import compare, fmt, machine


def problem(d, seed=0):
    rng = np.random.default_rng(seed)
    A, w_true = rng.standard_normal((4 * d, d)), rng.standard_normal(d)
    y = A @ w_true + rng.standard_normal(4 * d)
    A_val = rng.standard_normal((4 * d, d))
    y_val = A_val @ w_true + rng.standard_normal(4 * d)

    def inner(w, h):
        return np.sum((A @ w - y) ** 2) + np.sum(np.exp(h) * w ** 2)

    def inner_gradient(w, h):
        return 2 * A.T @ (A @ w - y) + 2 * np.exp(h) * w

    def validation(h):
        w = minimize(inner, np.zeros(d), args=(h,), jac=inner_gradient, method="L-BFGS-B",
                     options={"gtol": 1e-10, "ftol": 1e-15}).x
        return np.sum((A_val @ w - y_val) ** 2)

    def exact(h):
        w = np.linalg.solve(A.T @ A + np.diag(np.exp(h)), A.T @ y)
        return np.sum((A_val @ w - y_val) ** 2)
    return validation, exact


def differences(f, h, step=1e-5):
    grad = np.empty_like(h)
    for i in range(len(h)):
        e = np.zeros_like(h)
        e[i] = step
        grad[i] = (f(h + e) - f(h - e)) / (2 * step)
    return grad


def main(d=20):
    validation, exact = problem(d)
    h = np.zeros(d)
    implicit = xform.grad(validation)
    want = xform.grad(exact)(h)
    print(machine())
    print(f"d = {d}: gradient error against the closed form (max abs): implicit "
          f"{np.max(np.abs(implicit(h) - want)):.1e}, finite differences "
          f"{np.max(np.abs(differences(validation, h) - want)):.1e}")
    times = compare({"primal (one inner solve)": lambda: validation(h),
                     "xform.grad (implicit)": lambda: implicit(h),
                     "central differences": lambda: differences(validation, h)},
                    samples=7, target=0.05)
    base = times["primal (one inner solve)"]
    for name, seconds in times.items():
        print(f"  {name:26s} {fmt(seconds)}  {seconds / base:6.2f} x primal")
    print(f"  finite differences / implicit gradient: "
          f"{times['central differences'] / times['xform.grad (implicit)']:.1f}")


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:]])

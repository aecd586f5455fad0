"""A tour of xform: `python -m xform.tour` stages a function, prints its graph, runs it, and
shows its gradient and a Hessian-vector product as graphs too."""
from __future__ import annotations

import numpy as np

import xform


def loss(w, x):
    """A tiny model in plain numpy: a tanh layer and a squared-error-like loss."""
    hidden = np.tanh(x @ w)
    return np.sum(hidden ** 2) / x.shape[0]


def _section(title: str) -> None:
    print(f"\n== {title}")


def main() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 2))
    x = rng.standard_normal((4, 3))

    _section("1. the function, staged from plain numpy to a graph")
    print(xform.make_graph(loss)(w, x))

    _section("2. run it: compiled code equals numpy")
    print("xform.jit(loss)(w, x) =", xform.jit(loss)(w, x))
    print("loss(w, x)            =", loss(w, x))

    _section("3. its gradient is another graph (reverse mode, dead code removed)")
    grad_loss = xform.grad(loss)
    print(xform.passes.optimize(xform.make_graph(grad_loss)(w, x)))
    print("grad(loss)(w, x) =\n", grad_loss(w, x))

    _section("4. a Hessian-vector product: jvp of grad (forward-over-reverse)")
    v = np.ones_like(w)

    def hvp(w, v):
        return xform.jvp(lambda w_: grad_loss(w_, x), (w,), (v,))[1]
    print(xform.passes.optimize(xform.make_graph(hvp)(w, v)))
    print("hvp(w, v) =\n", hvp(w, v))

    _section("5. per-example gradients: vmap of grad")
    per_example = xform.vmap(grad_loss, in_axes=(None, 0))(w, x[:, None, :])
    print("shape", per_example.shape, "mean equals full gradient:",
          np.allclose(per_example.mean(0), grad_loss(w, x)))


if __name__ == "__main__":
    main()

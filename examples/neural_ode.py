"""A neural ODE fitted to a damped oscillator's trajectory with `scipy.integrate.odeint`.

The vector field is a small tanh MLP whose weights are passed through `odeint`'s `args`;
xform differentiates the solve by the adjoint method (a reverse-time ODE solve), so memory
does not grow with the solver's steps. Training is plain gradient descent with momentum on
the squared error at the observation times.

At the real size (32 hidden units, 40 observations over three periods) the weights start
smaller and the steps are shorter than at the small size: with the small size's, the first
step throws the field into tanh's flat region, where the fit stalls and the solver labours.
"""
import numpy as np
from scipy.integrate import odeint

import xform


def field(state, t, W1, b1, W2):
    return np.tanh(state @ W1 + b1) @ W2


def loss(params, y0, times, observed):
    W1, b1, W2 = params
    trajectory = odeint(field, y0, times, args=(W1, b1, W2), rtol=1e-7, atol=1e-9)
    return np.mean((trajectory - observed) ** 2)


def oscillator(y, t):
    return np.array([y[1], -y[0] - 0.3 * y[1]])


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    rng = np.random.default_rng(0)
    hidden = 6 if small else 32
    times = np.linspace(0.0, 2.0 if small else 6.0, 6 if small else 40)
    y0 = np.array([1.0, 0.0])
    observed = odeint(oscillator, y0, times)
    scale = 0.5 if small else 0.2
    params = (scale * rng.normal(size=(2, hidden)), np.zeros(hidden),
              scale * rng.normal(size=(hidden, 2)))
    return loss, (params, y0, times, observed)


def main(small=True):
    _, (params, y0, times, observed) = problem(small)
    grad = xform.grad(loss)
    velocity = tuple(np.zeros_like(p) for p in params)
    start = loss(params, y0, times, observed)
    step = 0.1 if small else 0.02
    for _ in range(15 if small else 300):
        g = grad(params, y0, times, observed)
        velocity = tuple(0.8 * v - step * gi for v, gi in zip(velocity, g))
        params = tuple(p + v for p, v in zip(params, velocity))
    return {"start": start, "end": loss(params, y0, times, observed)}


if __name__ == "__main__":
    print(main(small=False))

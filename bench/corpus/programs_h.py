"""FEM assembly, in-place idioms, splits, 2-D grids, sparse-ish builds."""
import math
import numpy as np
import scipy.special
from bench.corpus.harness import prog


@prog([(np.array([1.0, 2.0, 0.5, 1.5]),), (np.array([0.3, 0.3, 1.2, 2.0]),)])
def fem_ix_assembly(k):
    n_el = len(k)
    K = np.zeros((n_el + 1, n_el + 1))
    for e in range(n_el):
        idx = [e, e + 1]
        ke = k[e] * np.array([[1.0, -1.0], [-1.0, 1.0]])
        K[np.ix_(idx, idx)] += ke
    K[0, :] = 0.0
    K[0, 0] = 1.0
    f = np.ones(n_el + 1)
    f[0] = 0.0
    u = np.linalg.solve(K, f)
    return u[-1]


@prog([(np.array([1.0, 2.0, 0.5, 1.5]),), (np.array([0.3, 0.3, 1.2, 2.0]),)])
def fem_add_at(k):
    n = len(k) + 1
    rows = np.array([[e, e, e + 1, e + 1] for e in range(len(k))]).ravel()
    cols = np.array([[e, e + 1, e, e + 1] for e in range(len(k))]).ravel()
    vals = (k[:, None] * np.array([1.0, -1.0, -1.0, 1.0])).ravel()
    K = np.zeros((n, n))
    np.add.at(K, (rows, cols), vals)
    np.fill_diagonal(K, K.diagonal() + 0.1)
    return np.linalg.slogdet(K)[1]


@prog([(np.array([0.5, 1.0, 1.5, 2.0, 2.5, 3.0]),), (np.array([1.0, -1.0, 0.2, 0.4, 0.6, 0.8]),)])
def split_and_flat(x):
    a, b = np.split(x, 2)
    c = np.array_split(x, 4)
    M = np.zeros((2, 3))
    M.flat[[0, 4]] = a[:2]
    M[np.diag_indices(2)] += b[:2]
    return np.sum(a * b) + sum(np.sum(ci ** 2) for ci in c) + np.sum(M ** 2)


@prog([(0.1,), (0.3,)])
def laplace_2d_meshgrid(s):
    n = 12
    x = np.linspace(0, 1, n)
    X, Y = np.meshgrid(x, x, indexing='ij')
    u = np.exp(-((X - 0.5) ** 2 + (Y - 0.5) ** 2) / s)
    for it in range(10):
        u[1:-1, 1:-1] = 0.25 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2])
    lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]
    return np.sum(lap ** 2)


@prog([(np.array([0.3, -1.2, 0.8, 2.0]),), (np.array([1.3, 0.2, -0.8, 0.5]),)])
def masked_update_copy(u):
    u_new = u.copy()
    mask = u_new < 0
    u_new[mask] = -0.5 * u_new[mask]
    u_new[~mask] **= 2
    total = np.sum(u_new, where=u_new > 0.1)
    return total + np.einsum('i,i->', u, u_new)


@prog([(np.array([0.3, 0.9, 1.5]),), (np.array([-0.4, 0.2, 2.2]),)])
def erf_loop(x):
    s = 0.0
    for v in x:
        s += scipy.special.erf(v) * v + math.erf(0.5)
    return s + np.sum(scipy.special.gammaln(np.abs(x) + 1))


@prog([(np.array([[2.0, 0.3], [0.1, 1.5]]),), (np.array([[1.0, 2.0], [0.5, -0.3]]),)], vmap=False)
def det_sign_branch(A):
    d = np.linalg.det(A)
    if d < 0:
        A = A.copy()
        A[:, 0] *= -1
    Ainv = np.linalg.inv(A)
    return np.log(abs(np.linalg.det(A))) + np.trace(Ainv)


@prog([(np.array([1.0, 2.0, 3.0]),), (np.array([0.5, 0.2, 0.9]),)])
def inf_norm_iteration(b):
    x = b.copy()
    for it in range(100):
        x_new = 0.5 * (x + b / (1 + x ** 2))
        if np.linalg.norm(x_new - x, ord=np.inf) < 1e-12:
            break
        x = x_new
    assert np.isfinite(x).all()
    return np.sum(x_new)


class Body:
    def __init__(self, m, x):
        self.m = m
        self.x = x


@prog([(np.array([1.0, 3.0, 2.0]),), (np.array([2.0, 0.5, 1.0]),)])
def sort_objects(m):
    bodies = [Body(mi, float(i)) for i, mi in enumerate(m)]
    bodies.sort(key=lambda b: b.m)
    heaviest = max(bodies, key=lambda b: b.m)
    com = sum(b.m * b.x for b in bodies) / sum(b.m for b in bodies)
    return com + heaviest.m * 0.1 + bodies[0].m


@prog([(np.array([0.2, 0.7, 0.4]),), (np.array([0.9, 0.1, 0.5]),)])
def ravel_multi_index(p):
    grid = np.zeros((4, 4))
    idx = np.ravel_multi_index(([0, 1, 3], [2, 2, 0]), grid.shape)
    grid.ravel()[idx] = p
    flat = grid.reshape(-1)
    flat[5] = p[0] * p[1]
    return np.sum(grid ** 2) + np.unravel_index(7, (4, 4))[0]

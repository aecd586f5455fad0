"""The convention for functions that read one triangle of a symmetric (Hermitian) matrix
(cholesky, eigh, eigvalsh, SciPy's counterparts): derivatives are those of the function of
the matrix's Hermitian part, as JAX's and autograd's (xform/rules/linalg.py). So derivatives
are checked against finite differences of the function composed with `hermitian_part`, which
agrees with xform's along every direction."""
import numpy as np

from xform.testing import check_grads, check_primitive


def hermitian_part(a):
    """(a + a^H) / 2 over the last two axes (real: the symmetric part)."""
    return (a + np.conjugate(np.swapaxes(a, -1, -2))) * 0.5


def symmetrized(fn, argnums=(0,)):
    """`fn` with the arguments at `argnums` replaced by their Hermitian parts."""
    def composed(*args):
        return fn(*[hermitian_part(a) if i in argnums else a for i, a in enumerate(args)])
    return composed


def fixed_signs(vectors):
    """Eigenvectors (columns) with each one's largest-magnitude entry made positive: LAPACK's
    signs may flip under a tiny change of the matrix, these do not (near distinct maxima)."""
    largest = np.argmax(np.abs(vectors), axis=-2)[..., None, :]
    return vectors * np.sign(np.take_along_axis(vectors, largest, axis=-2))


def check_symmetric_input_primitive(prim, *args, params=None, order=1, output=None):
    """check_primitive's battery for a primitive of one symmetric matrix: its non-derivative
    properties as they are, its derivatives through `hermitian_part` of its input (of
    `output(result)` when given)."""
    params = dict(params or {})
    check_primitive(prim, *args, params=params, order=0)
    if order > 0:
        def fn(a):
            result = prim.bind(a, **params)
            return result if output is None else output(result)
        check_grads(symmetrized(fn), args, order=order, modes=("fwd", "rev"),
                    subject=f"check_primitive({prim.name})")

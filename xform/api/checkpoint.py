"""`checkpoint` (alias `remat`): JAX's rematerialisation decorator over the `checkpoint`
primitive (xform.rules.checkpoint), with its policies and `checkpoint_name`."""
from __future__ import annotations

import functools

from xform.api.dispatch import normalize_argnums
from xform.errors import TypeCheckError
from xform.rules.checkpoint import checkpoint_call, checkpoint_name, checkpoint_policies
from xform.source_info import user_frame_info


def checkpoint(fun=None, *, prevent_cse=True, policy=None, static_argnums=()):
    """`fun`, whose intermediates reverse mode recomputes in the backward pass instead of
    storing them (as `jax.checkpoint`): only the inputs, and what `policy` saves, are kept.

    `policy(primitive, *avals, **params) -> bool` says which equations' outputs may be
    saved (see `xform.checkpoint_policies`; None saves nothing). It composes with every
    transform and inside loop bodies: `scan(checkpoint(step), ...)` keeps one carry per
    iteration. `prevent_cse` is accepted for JAX's signature: the recomputation is always
    one opaque equation that no pass merges with the forward pass. Arguments at
    `static_argnums` are Python values fixed when the call is staged.

    >>> f = xform.checkpoint(lambda x: np.sin(np.sin(x)))
    >>> float(xform.grad(f)(0.5)) == float(np.cos(np.sin(0.5)) * np.cos(0.5))
    True
    >>> dots = xform.checkpoint_policies.dots_saveable    # keep w @ x, recompute tanh
    >>> g = xform.checkpoint(lambda w, x: np.tanh(w @ x), policy=dots)
    >>> xform.grad(lambda w: np.sum(g(w, np.ones(2))))(np.eye(2))
    array([[0.41997434, 0.41997434],
           [0.41997434, 0.41997434]])
    """
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)
    if not callable(fun):
        raise TypeCheckError(f"checkpoint needs a function, got {type(fun).__name__}",
                             user_frame_info())
    if policy is not None and not callable(policy):
        raise TypeCheckError(f"checkpoint policy must be None or a function, got "
                             f"{type(policy).__name__}", user_frame_info(),
                             "use one of xform.checkpoint_policies")
    static_argnums = ((static_argnums,) if isinstance(static_argnums, int)
                      else tuple(static_argnums))

    @functools.wraps(fun)
    def checkpointed(*args):
        if not static_argnums:
            return checkpoint_call(fun, args, policy)
        nums = normalize_argnums(static_argnums, len(args))
        static = {i: args[i] for i in nums}
        dynamic = [a for i, a in enumerate(args) if i not in static]

        def with_static(*dyn):
            rest = iter(dyn)
            return fun(*[static[i] if i in static else next(rest) for i in range(len(args))])
        return checkpoint_call(with_static, dynamic, policy)
    return checkpointed


remat = checkpoint
"""`checkpoint` under JAX's other name."""

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat"]

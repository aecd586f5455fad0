"""Global switches: `debug` (run-time checks of every value against its abstract value, and of
every rule's output), `checks` (check_graph after every pass), `fusion` (element-wise regions
fused before reverse mode) and `scalar_math` (what 0-d float64 work in generated code may use:
"exact", the default, keeps results numpy's bit for bit; "fast" adds Python's `math`
functions, each within a few ulp of numpy; see xform.codegen.scalar) and `algebra` (which
rewrites of xform.passes.simplify run: "exact", the default, only those keeping numpy's bits
on whatever a function returns (a `grad`, which numpy does not define, may also reassociate);
"reassociate" also those that change rounding, as sum(kron(a, b)) -> sum(a) * sum(b), as XLA
does) and `tier` (how a transform's first call of a signature runs: "auto", the default,
interprets the transformed graph on the first call and compiles it, fully optimized, on the
second; "interpret" never compiles the top-level graph; "compile" compiles on the first call;
see xform.runtime.tiers) and `backend` (what runs compiled graphs: "numpy", the default, as
generated Python + numpy code; "xla", XLA through jax, see xform.codegen.xla). A leaf: whatever depends on an option (the cache of compiled
code) registers with `on_change`.
"""
from __future__ import annotations

import contextlib


class Config:
    """Settings read by staging, transforms and codegen; change them with `update`.

    >>> xform.config.update("scalar_math", "fast")    # math functions on 0-d float64 values
    >>> xform.config.scalar_math
    'fast'
    >>> xform.config.update("scalar_math", "exact")
    >>> with xform.config.debug_mode():               # every value checked as it is computed
    ...     xform.jit(np.sin)(0.0)
    np.float64(0.0)
    """

    _SWITCHES = ("debug", "checks", "fusion")
    _CHOICES = {"scalar_math": ("exact", "fast"), "algebra": ("exact", "reassociate"),
                "tier": ("auto", "interpret", "compile"), "backend": ("numpy", "xla")}

    def __init__(self):
        self.debug = False
        self.checks = False
        self.fusion = True
        self.scalar_math = "exact"
        # bit for bit by default, as scalar_math: reassociating is the user's choice
        self.algebra = "exact"
        # a first call interpreted: passes, codegen and compile() pay off from the second
        self.tier = "auto"
        # numpy's bits by default; XLA (through jax) is the user's choice
        self.backend = "numpy"
        self._observers = []

    def on_change(self, callback) -> None:
        """Call `callback()` after any option changes value."""
        self._observers.append(callback)

    def update(self, name: str, value) -> None:
        if name in self._CHOICES:
            if value not in self._CHOICES[name]:
                raise ValueError(f"xform option {name!r} takes one of "
                                 f"{', '.join(map(repr, self._CHOICES[name]))}, not {value!r}")
        elif name in self._SWITCHES:
            value = bool(value)
        else:
            options = ", ".join((*self._SWITCHES, *self._CHOICES))
            raise KeyError(f"unknown xform option {name!r}; options: {options}")
        if getattr(self, name) != value:
            setattr(self, name, value)
            for callback in self._observers:
                callback()

    @contextlib.contextmanager
    def debug_mode(self, enabled: bool = True):
        previous = self.debug
        self.update("debug", enabled)
        try:
            yield self
        finally:
            self.update("debug", previous)


config = Config()
"""The settings (`xform.config`): `algebra`, `backend`, `checks`, `debug`, `fusion`,
`scalar_math`, `tier`."""

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
see xform.runtime.tiers); `backend` (what runs compiled graphs: "numpy", the default, as
generated Python + numpy code; "xla", XLA through jax, see xform.codegen.xla) and
`xla_placement` (what goes to XLA under it, when no jax array is passed in: "auto", the
default, the parts where a cost model estimated from the graph says a call into XLA pays, the
rest staying numpy code; "always", every equation XLA can run; jax arrays passed in always
go to XLA); the paths of
functions that decide on data (xform.runtime.paths): `max_paths` (8: paths kept per signature), `path_limit` ("warn", the default, warns once
and stages each call past the bound anew; "raise" raises PathLimitError) and `explain_paths`
(log every new path with the decision that needed it); and `traceback_filtering` ("on", the
default: tracebacks of errors raised for the user's code hide xform's own frames; "off"
shows every frame; the environment variable XFORM_TRACEBACK_FILTERING sets the starting
value; see xform.tracebacks). A leaf: whatever depends on an option (the cache of compiled
code) registers with `on_change`.
"""
from __future__ import annotations

import contextlib
import os


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

    _SWITCHES = ("debug", "checks", "fusion", "explain_paths")
    _CHOICES = {"scalar_math": ("exact", "fast"), "algebra": ("exact", "reassociate"),
                "tier": ("auto", "interpret", "compile"), "path_limit": ("warn", "raise"),
                "backend": ("numpy", "xla"), "xla_placement": ("auto", "always"),
                "traceback_filtering": ("on", "off")}
    _COUNTS = ("max_paths",)
    # how errors are shown, not what is computed: the cache of compiled code keeps
    _UNOBSERVED = ("traceback_filtering",)

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
        # XLA where it pays: a call into it costs more than a small graph's numpy code
        self.xla_placement = "auto"
        # torch.compile's recompile limit is 8 too: past it, a warning, never silence
        self.max_paths = 8
        self.path_limit = "warn"
        self.explain_paths = False
        self.traceback_filtering = os.environ.get("XFORM_TRACEBACK_FILTERING", "on").lower()
        if self.traceback_filtering not in self._CHOICES["traceback_filtering"]:
            raise ValueError(f"XFORM_TRACEBACK_FILTERING takes 'on' or 'off', not "
                             f"{self.traceback_filtering!r}")
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
        elif name in self._COUNTS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"xform option {name!r} takes a positive int, not {value!r}")
        else:
            options = ", ".join((*self._SWITCHES, *self._CHOICES, *self._COUNTS))
            raise KeyError(f"unknown xform option {name!r}; options: {options}")
        if getattr(self, name) != value:
            setattr(self, name, value)
            if name in self._UNOBSERVED:
                return
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
"""The settings (`xform.config`): `algebra`, `backend`, `checks`, `debug`, `explain_paths`,
`fusion`, `max_paths`, `path_limit`, `scalar_math`, `tier`, `traceback_filtering`,
`xla_placement`."""

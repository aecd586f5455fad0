"""Global switches: `debug` (run-time checks of every value against its abstract value, and of
every rule's output) and `checks` (check_graph after every pass). Both off by default.

>>> xform.config.update("debug", True)
>>> with xform.config.debug_mode(): ...
"""
from __future__ import annotations

import contextlib


class Config:
    """Settings read by staging, transforms and codegen; change them with `update`.

    >>> xform.config.update("debug", True)      # every value checked as it is computed
    >>> with xform.config.debug_mode(False): ...
    """

    def __init__(self):
        self.debug = False
        self.checks = False
        self.fusion = True

    def update(self, name: str, value) -> None:
        if name not in ("debug", "checks", "fusion"):
            raise KeyError(f"unknown xform option {name!r}; options: debug, checks, fusion")
        if getattr(self, name) != bool(value):
            setattr(self, name, bool(value))
            # Compiled code differs with and without run-time checks.
            from xform.cache import clear_cache
            clear_cache()

    @contextlib.contextmanager
    def debug_mode(self, enabled: bool = True):
        previous = self.debug
        self.update("debug", enabled)
        try:
            yield self
        finally:
            self.update("debug", previous)


config = Config()

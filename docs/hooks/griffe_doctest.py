"""A Griffe extension for the API reference: xform's docstrings carry bare doctest examples
(`>>> ...` lines, run by the test suite), which markdown would read as nested block quotes;
each such block becomes a fenced `pycon` code block."""
from __future__ import annotations

import re

import griffe

_PROMPT = re.compile(r"^(\s*)>>> ")


def fence_doctests(text: str) -> str:
    """Wrap each doctest block (from a `>>>` line to the next blank line) in a fence."""
    out, indent, lines = [], None, text.splitlines()
    for line in lines:
        if indent is None:
            match = _PROMPT.match(line)
            if match:
                indent = match.group(1)
                out.append(f"{indent}```pycon")
        elif not line.strip():
            out.append(f"{indent}```")
            indent = None
        out.append(line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)

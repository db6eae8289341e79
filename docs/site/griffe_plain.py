"""A griffe extension for the API reference: subscripts in docstrings stay text, not Markdown links (issue #19).

vLLM has no counterpart. minispec's docstrings are plain text that uses Python's notation, e.g.
`accept_probs[d][r]` or `kernel[grid](*args)`; mkdocstrings renders docstrings as Markdown, where `[d][r]` is
a reference link (autorefs then warns that it finds no target `r`) and `[grid](*args)` an inline link, and
`mkdocs build --strict` fails. This extension escapes every `[` that directly follows an identifier
character, `]` or `)`, which a Markdown link never does, and leaves alone code spans, fenced code blocks and
lines indented by four spaces or more (indented code blocks, where a backslash would show). Real links
(`see [the zoo](../zoo.md)`) keep working. mkdocs.yml loads it with the python handler's `extensions`.
"""

from __future__ import annotations

import re
from typing import Any

try:
    from griffe import Extension
except ImportError:  # the escaping below is tested without the docs extra installed
    Extension = object  # type: ignore[misc,assignment]

SUBSCRIPT = re.compile(r"(?<=[\w\])])\[")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
FENCE = re.compile(r"^\s*(```|~~~)")


def escape_subscripts_in_line(line: str) -> str:
    """Escape `name[` / `][` / `)[` outside the line's code spans."""
    out, last = [], 0
    for span in CODE_SPAN.finditer(line):
        out += [SUBSCRIPT.sub(r"\\[", line[last : span.start()]), span.group(0)]
        last = span.end()
    out.append(SUBSCRIPT.sub(r"\\[", line[last:]))
    return "".join(out)


def escape_subscripts(text: str) -> str:
    """A docstring with its subscripts escaped for Markdown (see the module docstring for what is left alone)."""
    lines, in_fence = text.splitlines(keepends=True), False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and not line.startswith("    "):
            lines[i] = escape_subscripts_in_line(line)
    return "".join(lines)


class PlainSubscripts(Extension):  # type: ignore[misc]
    """Applies escape_subscripts to every docstring griffe loads."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if getattr(obj, "docstring", None) is not None:
            obj.docstring.value = escape_subscripts(obj.docstring.value)

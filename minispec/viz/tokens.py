"""Coloured tokens of one speculative step, as HTML (chapters 2 to 5, 8).

vLLM has no counterpart: it reports the same facts as counts (`vllm/v1/spec_decode/metrics.py`,
SpecDecodingStats). Here each token gets a colour by what happened to it: part of the prompt, a draft the
target accepted, a draft it rejected (struck through), the target's replacement for the first rejected draft
("recovered"), or the extra token the target adds when every draft was accepted ("bonus").
"""

from __future__ import annotations

import html
from collections.abc import Sequence

# status -> (background, text colour, extra CSS, legend text)
STATUS_STYLES: dict[str, tuple[str, str, str, str]] = {
    "prompt": ("#eeeeee", "#555555", "", "prompt / earlier output"),
    "accepted": ("#c8e6c9", "#1b5e20", "", "draft accepted"),
    "rejected": ("#ffcdd2", "#b71c1c", "text-decoration: line-through;", "draft rejected"),
    "recovered": ("#ffe0b2", "#e65100", "", "recovered (target's replacement)"),
    "bonus": ("#bbdefb", "#0d47a1", "", "bonus (all drafts accepted)"),
}


def _token_span(text: str, status: str, title: str) -> str:
    background, colour, extra, _ = STATUS_STYLES[status]
    # Make whitespace visible: a newline would otherwise vanish inside the inline box.
    shown = html.escape(text.replace("\n", "\u21b5"), quote=True)
    style = (
        f"background:{background}; color:{colour}; {extra} padding:1px 3px; margin:1px; "
        "border-radius:3px; white-space:pre; font-family:monospace;"
    )
    return f'<span class="minispec-token minispec-{status}" title="{title}" style="{style}">{shown}</span>'


def render_spec_step_html(tokens: Sequence[str], statuses: Sequence[str], legend: bool = True) -> str:
    """HTML string with one coloured, escaped span per token; statuses from STATUS_STYLES."""
    if len(tokens) != len(statuses):
        raise ValueError(
            f"tokens and statuses must have the same length, got {len(tokens)} and {len(statuses)}"
        )
    for i, status in enumerate(statuses):
        if status not in STATUS_STYLES:
            raise ValueError(f"statuses[{i}] must be one of {list(STATUS_STYLES)}, got {status!r}")
    spans = "".join(_token_span(str(t), s, s) for t, s in zip(tokens, statuses))
    parts = [f'<div class="minispec-spec-step" style="line-height:2;">{spans}</div>']
    if legend:
        used = [s for s in STATUS_STYLES if s in set(statuses)]
        keys = " ".join(_token_span(STATUS_STYLES[s][3], s, s) for s in used)
        parts.append(f'<div class="minispec-legend" style="font-size:85%; margin-top:4px;">{keys}</div>')
    return "\n".join(parts)


def spec_step_html(tokens: Sequence[str], statuses: Sequence[str], legend: bool = True):
    """The same as an IPython.display.HTML object, for the last line of a notebook cell."""
    from IPython.display import HTML

    return HTML(render_spec_step_html(tokens, statuses, legend))

"""Coloured tokens of speculative steps, as HTML (chapters 0 to 5, 8).

vLLM has no counterpart: it reports the same facts as counts (`vllm/v1/spec_decode/metrics.py`,
SpecDecodingStats). Here each token gets a colour by what happened to it: part of the prompt, a draft the
target accepted, a draft it rejected (struck through), the target's replacement for the first rejected draft
("recovered"), the extra token the target adds when every draft was accepted ("bonus"), or a token sampled
by a step that had no drafts. `spec_step_html` draws one step; `token_streams_html` draws whole runs side by
side, one row per step (one target forward), so two decoders of one prompt can be compared step by step.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

# status -> (background, text colour, extra CSS, legend text)
STATUS_STYLES: dict[str, tuple[str, str, str, str]] = {
    "prompt": ("#eeeeee", "#555555", "", "prompt / earlier output"),
    "sampled": ("#e1d5f0", "#4a148c", "", "sampled (a step without drafts)"),
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


def _check_streams(streams: Mapping[str, Sequence[Sequence[tuple[str, str]]]]) -> None:
    if not streams:
        raise ValueError("streams is empty; pass {name: steps}, each step a list of (token text, status)")
    for name, steps in streams.items():
        for i, step in enumerate(steps):
            for _text, status in step:
                if status not in STATUS_STYLES:
                    raise ValueError(
                        f"streams[{name!r}][{i}] has status {status!r}; allowed: {list(STATUS_STYLES)}"
                    )


def _kept(steps: Sequence[Sequence[tuple[str, str]]]) -> int:
    return sum(status != "rejected" for step in steps for _, status in step)


def _cell(content: str, header: bool = False) -> str:
    tag = "th" if header else "td"
    style = "text-align:left; vertical-align:top; padding:2px 8px; border-bottom:1px solid #eeeeee;"
    return f'<{tag} style="{style}">{content}</{tag}>'


def render_token_streams_html(streams: Mapping[str, Sequence[Sequence[tuple[str, str]]]]) -> str:
    """HTML table: one column per stream ({name: steps}, each step a list of (token text, status)), one row
    per step; a finished stream says so in the row after its last step. A legend of the statuses follows."""
    _check_streams(streams)
    names = list(streams)
    heads = [_cell("step", header=True)]
    for name in names:
        steps = streams[name]
        count = f"{_kept(steps)} tokens in {len(steps)} steps"
        heads.append(_cell(f"{html.escape(name)}<br><small>{count}</small>", header=True))
    rows = ["<tr>" + "".join(heads) + "</tr>"]
    longest = max(len(steps) for steps in streams.values())
    for i in range(longest + 1):
        cells = [_cell(str(i + 1) if i < longest else "")]
        for name in names:
            steps = streams[name]
            if i < len(steps):
                spans = "".join(_token_span(str(t), s, s) for t, s in steps[i])
                cells.append(_cell(spans or '<i style="color:#888888;">prompt chunk, no token</i>'))
            elif i == len(steps):
                cells.append(_cell(f'<i style="color:#888888;">done after {len(steps)} steps</i>'))
            else:
                cells.append(_cell(""))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    used = {s for steps in streams.values() for step in steps for _, s in step}
    keys = " ".join(_token_span(STATUS_STYLES[s][3], s, s) for s in STATUS_STYLES if s in used)
    table = '<table class="minispec-token-streams" style="border-collapse:collapse; line-height:1.9;">'
    legend = f'<div class="minispec-legend" style="font-size:85%; margin-top:4px;">{keys}</div>'
    return table + "".join(rows) + "</table>\n" + legend


def token_streams_html(streams: Mapping[str, Sequence[Sequence[tuple[str, str]]]]):
    """The same as an IPython.display.HTML object, for the last line of a notebook cell."""
    from IPython.display import HTML

    return HTML(render_token_streams_html(streams))

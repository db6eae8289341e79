"""minispec.viz: figure functions and widget wrappers for the notebooks (all chapters).

Every figure function returns a matplotlib Figure and takes plain arguments, so tests can check it;
notebooks wrap them with `interactive_or_static`. Names are resolved lazily: `import minispec.viz` does not
import matplotlib or torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "fast_mode": "minispec.viz.notebook",
    "check_answer": "minispec.viz.notebook",
    "env_flag": "minispec.viz.notebook",
    "has_frontend": "minispec.viz.widgets",
    "interactive_or_static": "minispec.viz.widgets",
    "env_report": "minispec.viz.env",
    "EnvReport": "minispec.viz.env",
    "render_spec_step_html": "minispec.viz.tokens",
    "spec_step_html": "minispec.viz.tokens",
    "plot_matmul_scaling": "minispec.viz.roofline",
    "plot_roofline": "minispec.viz.roofline",
    "plot_forward_times": "minispec.viz.roofline",
    "plot_decode_prediction": "minispec.viz.roofline",
    "accelerator_table_markdown": "minispec.viz.roofline",
    "roofline_points": "minispec.viz.roofline",
    "plot_rejection_histogram": "minispec.viz.speculation",
    "plot_expected_tokens": "minispec.viz.speculation",
    "plot_speedup": "minispec.viz.speculation",
    "plot_rejection_experiment": "minispec.viz.draft_verify",
    "plot_step_trace": "minispec.viz.draft_verify",
    "step_trace_html": "minispec.viz.draft_verify",
    "plot_tokens_vs_k": "minispec.viz.draft_verify",
    "plot_speedup_vs_k": "minispec.viz.draft_verify",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'minispec.viz' has no attribute {name!r}")

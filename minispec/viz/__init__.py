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
    "draw_tree": "minispec.viz.trees",
    "plot_tree_overview": "minispec.viz.trees",
    "plot_step": "minispec.viz.trees",
    "plot_kv_compaction": "minispec.viz.trees",
    "plot_expansion": "minispec.viz.trees",
    "plot_spec_decode_layout": "minispec.viz.draft_verify",
    "plot_per_position_acceptance": "minispec.viz.draft_verify",
    "plot_speedup_prediction": "minispec.viz.draft_verify",
    "plot_course_map": "minispec.viz.course_map",
    "chapter_table_markdown": "minispec.viz.course_map",
    "plot_v1_tree_map": "minispec.viz.components",
    "plot_v0_map": "minispec.viz.components",
    "concordance_table": "minispec.viz.components",
    "plot_scoring_times": "minispec.viz.components",
    "plot_call_tree": "minispec.viz.components",
    "plot_request_lifecycle": "minispec.viz.components",
    "plot_step_phases": "minispec.viz.engine_flow",
    "plot_token_budget": "minispec.viz.engine_flow",
    "plot_flat_batch": "minispec.viz.engine_flow",
    "plot_block_table": "minispec.viz.engine_flow",
    "plot_num_computed": "minispec.viz.engine_flow",
    "plot_engine_step": "minispec.viz.engine_flow",
    "plot_engine_flow": "minispec.viz.engine_flow",
    "plot_sampler_stages": "minispec.viz.sampler",
    "plot_sampler_pipeline": "minispec.viz.sampler",
    "plot_min_p_order": "minispec.viz.sampler",
    "plot_exponential_race": "minispec.viz.sampler",
    "plot_sampling_metadata": "minispec.viz.sampler",
    "plot_rejection_output": "minispec.viz.sampler",
    "plot_kernel_launches": "minispec.viz.sampler",
    "plot_kernel_timings": "minispec.viz.sampler",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'minispec.viz' has no attribute {name!r}")

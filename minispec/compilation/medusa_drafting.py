"""Compiled Medusa heads' drafting call as one graph per call, behind the seam `compiled_propose`.

No vLLM counterpart: vLLM v0.32.0 compiles the heads' forward only and takes each head's argmax eagerly. Here
the heads, their top-k, the mapping to target ids and the tree's order (`MedusaProposer.draft_token_ids`)
compile into one graph, so the host makes one call and one `tolist`. At batch 1 each product multiplies a
handful of rows and becomes Inductor's own loop, and on a CPU the graph is compiled ahead of time
(`minispec/compilation/aot.py`). It drafts what the eager call drafts.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from minispec.compilation.aot import AotCompiledCall
from minispec.compilation.decorators import compile_drafting_call, drafting_call_options


class MedusaInOneGraph:
    """`compiled_propose` of a MedusaProposer with compiled heads: [B, H] hidden states -> the drafts."""

    def __init__(self, proposer) -> None:
        self.proposer = proposer
        self.aot_compile = True  # at batch 1 on a CPU, the call compiled ahead of time
        # "ahead of time" (batch 1 on a CPU), "one row" (batch 1) or "batch" -> draft_token_ids compiled
        self.compiled: dict[str, Callable] = {}

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        aot = self.compiled.get("ahead of time")
        if aot is not None and self.aot_compile and aot.accepts(hidden):
            return aot(hidden)
        return self._compiled(hidden)(hidden)

    def _compiled(self, hidden: torch.Tensor) -> Callable:
        """draft_token_ids compiled for these hidden states, built at the first call of its kind."""
        p = self.proposer
        kind = "one row" if hidden.shape[0] == 1 else "batch"
        if kind == "one row" and self.aot_compile and hidden.device.type == "cpu":
            if "ahead of time" not in self.compiled:
                self.compiled["ahead of time"] = AotCompiledCall(
                    p.draft_token_ids,
                    p.heads,
                    (torch.zeros_like(hidden),),
                    drafting_call_options(p.heads, kind),
                )
            if self.compiled["ahead of time"].accepts(hidden):
                return self.compiled["ahead of time"]
        if kind not in self.compiled:
            self.compiled[kind] = compile_drafting_call(p.draft_token_ids, p.heads, kind)
        return self.compiled[kind]

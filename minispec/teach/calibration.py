"""EAGLE draft-score calibration: does the draft's confidence predict what the target accepts? (chapter 4)

vLLM has no counterpart. EAGLE-2 (Li et al. 2024) builds its dynamic tree on the observation that the draft's
confidence approximates the acceptance rate of its tokens, so the product of confidences along a path (the
cumulative score `DraftTree.scores`, in log space) estimates how likely the whole path is accepted. This
module measures that on recorded steps (`minispec.teach.traces.StepTrace`):

- kind="node": every node whose parent was reached (the root, or a node on the accepted path); its score is
  the draft's probability of its token given the parent, "accepted" means the target took it;
- kind="path": every node; its score is the product of the draft probabilities along its path, "accepted"
  means the accepted path went through it.

Only verified nodes are counted (EAGLE-2's pruned nodes never meet the target), and at temperature 0
"accepted" is "the target's greedy token after the parent".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_EDGES = tuple(i / 10 for i in range(11))


@dataclass
class Bucket:
    lo: float  # score range [lo, hi) ([lo, hi] for the last bucket)
    hi: float
    count: int  # nodes whose score fell in the range
    accepted: int  # of which the target accepted
    score_sum: float  # sum of their scores

    @property
    def mean_score(self) -> float:
        return self.score_sum / self.count if self.count else (self.lo + self.hi) / 2

    @property
    def acceptance(self) -> float:
        return self.accepted / self.count if self.count else math.nan


def scored_nodes(traces, kind: str = "node") -> list[tuple[float, bool]]:
    """(draft probability, accepted) for every node that counts under `kind` ("node" or "path")."""
    if kind not in ("node", "path"):
        raise ValueError(f"kind={kind!r} must be 'node' or 'path'")
    out = []
    for t in traces:
        if t.draft_logprobs is None:
            raise ValueError(
                f"step {t.step} of {t.method!r} has no draft scores (record it with traces.record_steps)"
            )
        logp = t.draft_logprobs if kind == "node" else t.cumulative_logprobs()
        on_path = set(t.accepted)
        reached = on_path | {0}
        for u in range(1, t.num_nodes + 1):
            if kind == "node" and t.parents[u] not in reached:
                continue  # its parent was rejected: the target never judged it
            out.append((math.exp(logp[u - 1]), u in on_path))
    return out


def calibration_table(traces, kind: str = "node", edges: Sequence[float] = DEFAULT_EDGES) -> list[Bucket]:
    """Buckets of draft probability with their node counts and accepted counts."""
    edges = [float(e) for e in edges]
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])) or edges[0] > 0 or edges[-1] < 1:
        raise ValueError(f"edges={edges} must increase strictly from <= 0 to >= 1")
    buckets = [Bucket(lo, hi, 0, 0, 0.0) for lo, hi in zip(edges, edges[1:])]
    for score, accepted in scored_nodes(traces, kind):
        i = next(j for j, b in enumerate(buckets) if score < b.hi or j == len(buckets) - 1)
        buckets[i].count += 1
        buckets[i].accepted += int(accepted)
        buckets[i].score_sum += score
    return buckets


__all__ = ["Bucket", "DEFAULT_EDGES", "calibration_table", "scored_nodes"]

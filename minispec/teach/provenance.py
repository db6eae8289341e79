"""Per-token provenance of a generation: where every output token came from (chapter 5).

vLLM v0.32.0 has no counterpart: it only counts (`vllm/v1/spec_decode/metrics.py`, SpecDecodingStats). Here
each output token gets one of SOURCES, read from the engine's step recorder (`engine.step_records`: per step,
the drafts each request verified and the tokens it emitted) and, for token trees, from the model runner's
`verification_log` (which nodes formed the accepted path, so whether the last token was a bonus):

- "prefill": sampled by the forward that finished the prompt (or recomputed it after a preemption);
- "accepted": a draft the target accepted, at `depth` 1, 2, ... on the accepted path (`rank`: its rank among
  its siblings in a tree, 0 = the drafter's first choice);
- "recovered": the target's own token at the first rejected position;
- "bonus": the target's extra token after a path whose every draft was accepted (the tree's leaf);
- "plain": a decode step that verified no drafts (an n-gram miss, or a batch over disable_by_batch_size).
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

SOURCES = ("prefill", "accepted", "recovered", "bonus", "plain")


@dataclass(frozen=True)
class TokenSource:
    token_id: int
    source: str  # one of SOURCES
    step: int  # StepRecord.step of the step that emitted it
    depth: int = 0  # accepted drafts: position on the accepted path (1 = the first draft)
    rank: int = 0  # accepted tree drafts: rank among siblings (0 = the drafter's first choice)
    num_drafts: int = 0  # drafts (nodes) the step verified for this request


@dataclass
class Provenance:
    request_id: str
    prompt_token_ids: list[int]
    tokens: list[TokenSource] = field(default_factory=list)

    @property
    def token_ids(self) -> list[int]:
        return [t.token_id for t in self.tokens]

    def counts(self) -> dict[str, int]:
        c = Counter(t.source for t in self.tokens)
        return {s: c.get(s, 0) for s in SOURCES}

    def shares(self) -> dict[str, float]:
        total = max(1, len(self.tokens))
        return {s: n / total for s, n in self.counts().items()}

    def accepted_depths(self) -> dict[int, int]:
        """Accepted drafts per depth on the accepted path."""
        return dict(sorted(Counter(t.depth for t in self.tokens if t.source == "accepted").items()))

    @property
    def num_target_forwards(self) -> int:
        return len({t.step for t in self.tokens})


def _sibling_ranks(parents: Sequence[int]) -> list[int]:
    """[n + 1] rank of every node among the children of its parent, in node order (root: 0)."""
    seen: dict[int, int] = defaultdict(int)
    ranks = [0]
    for p in parents[1:]:
        ranks.append(seen[p])
        seen[p] += 1
    return ranks


def build_provenance(
    request_id: str,
    prompt_token_ids: Sequence[int],
    output_token_ids: Sequence[int],
    step_records: Sequence,
    verification_log: Sequence | None = None,
) -> Provenance:
    """The provenance of one request's output from the steps that produced it.

    `verification_log` is needed for token trees (a tree's last token is a bonus only after a leaf); without
    it a step is read as a chain (bonus when every draft was accepted).
    """
    if not step_records:
        raise ValueError("step_records is empty: set engine.step_records = [] before generating")
    pending = defaultdict(deque)
    for v in verification_log or ():
        pending[v.request_id].append(v)
    prompt_len = len(prompt_token_ids)
    tokens: list[TokenSource] = []
    for rec in step_records:
        emitted = rec.sampled_token_ids.get(request_id) or []
        if not emitted:
            continue
        drafts = rec.scheduled_spec_decode_tokens.get(request_id, [])
        before = rec.num_computed_before.get(request_id, 0)
        n_out = len(tokens)
        if n_out == 0 or before < prompt_len + n_out - 1:
            tokens.append(TokenSource(emitted[0], "prefill", rec.step))
            continue
        if not drafts:
            tokens.append(TokenSource(emitted[0], "plain", rec.step))
            continue
        record = None
        queue = pending.get(request_id)
        while queue:
            candidate = queue.popleft()
            if list(candidate.node_tokens) == list(drafts):
                record = candidate
                break
        parents = list(record.parents) if record is not None else list(range(-1, len(drafts)))
        path = list(record.accepted) if record is not None else list(range(1, len(emitted)))
        if len(path) != len(emitted) - 1:
            raise ValueError(
                f"step {rec.step}: the verification record accepts {len(path)} drafts but "
                f"{len(emitted)} tokens were emitted"
            )
        ranks = _sibling_ranks(parents)
        for depth, (token, node) in enumerate(zip(emitted, path), start=1):
            tokens.append(TokenSource(token, "accepted", rec.step, depth, ranks[node], len(drafts)))
        last = path[-1] if path else 0
        leaf = last not in parents[1:]  # no node has `last` as its parent
        tokens.append(
            TokenSource(emitted[-1], "bonus" if leaf else "recovered", rec.step, num_drafts=len(drafts))
        )
    tokens = tokens[: len(output_token_ids)]  # the last step can emit past max_tokens or a stop
    if [t.token_id for t in tokens] != list(output_token_ids):
        raise ValueError(f"the step records of {request_id!r} do not reproduce its output tokens")
    return Provenance(request_id, list(prompt_token_ids), tokens)


def generate_with_provenance(llm, prompts: Sequence[Sequence[int]], sampling_params) -> list[Provenance]:
    """Generate `prompts` (token id lists) with the step recorder and verification log on, and return each
    output's provenance. Both hooks are switched off again afterwards."""
    engine = llm.llm_engine
    runner = engine.model_runner
    engine.step_records, runner.verification_log = [], []
    try:
        outputs = llm.generate(
            [{"prompt_token_ids": list(p)} for p in prompts], sampling_params, use_tqdm=False
        )
        records, log = engine.step_records, runner.verification_log
    finally:
        engine.step_records, runner.verification_log = None, None
    return [
        build_provenance(o.request_id, o.prompt_token_ids, o.outputs[0].token_ids, records, log)
        for o in outputs
    ]

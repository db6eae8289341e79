"""Verification steps recorded as data: what a Medusa or EAGLE drafter proposed and what the target made of it.

Chapters 3 and 4. vLLM has no counterpart (v0.32.0 keeps no per-step record); the data come from two hooks
of minispec's engine, both off by default:

- `ModelRunner.verification_log` (a list of `VerificationRecord`, `minispec/worker/tree_verification.py`):
  parents, node tokens, the target's raw logits at the root and every node, the accepted path, the final
  token and the KV slots the compaction moved;
- the drafter's side: `EagleProposer.tree_log` (every step's `DraftTree`: cumulative draft log-probs and,
  for EAGLE-2, the whole expansion) and, for Medusa, a forward hook on the heads that keeps their logits.

`record_steps` runs one request through a real engine (the zoo models, float32 for exactness demos), one
engine step at a time, so that each verification is paired with the proposal it verified: the drafts of
step s are verified in step s + 1. A `StepTrace` holds one verification; a chain is the tree whose node i
has parent i - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.teach.stats import Interval, mean_interval, proportion_interval
from minispec.trees.eagle_tree import DraftTree, TreeExpansion
from minispec.trees.spec_tree import SpecTree
from minispec.worker.tree_verification import VerificationRecord
from minispec.zoo.trees import DEFAULT_TREE

# speculative configs the chapters trace (the bench modules measure the same ones)
MEDUSA_TREE = DEFAULT_TREE
EAGLE_STATIC_TREE = [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 0, 1), (0, 0, 0, 0)]
CONFIGS: dict[str, dict] = {
    "medusa chain": {"method": "medusa", "model": "zoo:medusa", "num_speculative_tokens": 4},
    "medusa tree": {"method": "medusa", "model": "zoo:medusa", "speculative_token_tree": MEDUSA_TREE},
    "eagle chain": {"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 4},
    "eagle static tree": {
        "method": "eagle",
        "model": "zoo:eagle",
        "speculative_token_tree": EAGLE_STATIC_TREE,
    },
    "eagle2": {"method": "eagle", "model": "zoo:eagle", "total_tokens": 16, "depth": 6, "top_k": 2},
    "eagle2 fr-spec": {
        "method": "eagle",
        "model": "zoo:eagle",
        "total_tokens": 16,
        "depth": 6,
        "top_k": 2,
        "draft_vocab_size": 1024,
    },
    "eagle3 chain": {"method": "eagle3", "model": "zoo:eagle3", "num_speculative_tokens": 4},
    "eagle3": {"method": "eagle3", "model": "zoo:eagle3", "total_tokens": 16, "depth": 6, "top_k": 2},
}


@dataclass
class StepTrace:
    """One verification of one request: the drafted nodes, the target's view of them, the outcome."""

    method: str  # "medusa", "eagle" or "eagle3"
    step: int  # index of this verification in the request (0 = the first step that carried drafts)
    context: list[int]  # every token before the drafts; the last one is the root (sampled last step)
    parents: list[int]  # [N + 1] -1 for the root
    node_tokens: list[int]  # [N] drafted tokens of nodes 1..N
    draft_logprobs: list[float] | None  # [N] the drafter's log-prob of each node's token given its parent
    logits: torch.Tensor  # [N + 1, V] the target's raw logits at the root and at every node
    accepted: list[int]  # accepted nodes (a root path, root excluded)
    final_token: int  # bonus (a whole leaf path accepted) or recovered token
    kv_moved: list[tuple[int, int]]  # (source slot, destination slot) of the KV compaction
    expansion: TreeExpansion | None = None  # EAGLE-2: every generated node before pruning
    draft_run_entries: int | None = None  # EAGLE: draft-cache entries beyond the committed ones per proposal
    num_appended: int | None = (
        None  # tokens the engine appended: fewer than verified when max_tokens cut them
    )

    # ---- shape ----------------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return len(self.node_tokens)

    @property
    def root_token(self) -> int:
        return self.context[-1]

    @property
    def context_len(self) -> int:
        """Tokens already in the target's KV cache when the step ran (the root is computed in the step)."""
        return len(self.context) - 1

    def spec_tree(self) -> SpecTree:
        return SpecTree(list(self.parents))

    @property
    def is_chain(self) -> bool:
        return self.parents == list(range(-1, self.num_nodes))

    @property
    def verified(self) -> list[int]:
        """The tokens verification produced: the accepted drafts, then the final token."""
        return [self.node_tokens[u - 1] for u in self.accepted] + [self.final_token]

    @property
    def emitted(self) -> list[int]:
        """The tokens this step appended to the output: `verified`, cut where the request reached max_tokens
        (the engine verifies drafts past max_tokens and drops them, as vLLM does)."""
        return self.verified if self.num_appended is None else self.verified[: self.num_appended]

    # ---- the target's view ------------------------------------------------------------------------------
    @property
    def target_argmax(self) -> list[int]:
        """[N + 1] the target's greedy token after each node (the root first)."""
        return self.logits.argmax(dim=-1).tolist()

    def target_probs(self, temperature: float = 1.0) -> list[float]:
        """[N] p_target(node token | its parent's path) at `temperature`: the probability rejection sampling
        would accept a one-hot draft with."""
        if not temperature > 0:
            raise ValueError(f"temperature={temperature!r} must be > 0 (at 0 the target is one-hot)")
        probs = (self.logits.double() / temperature).softmax(dim=-1)  # [N + 1, V]
        return [float(probs[self.parents[u], self.node_tokens[u - 1]]) for u in range(1, self.num_nodes + 1)]

    def cumulative_logprobs(self) -> list[float] | None:
        """[N] the drafter's log-probability of each node's whole path (EAGLE-2's score)."""
        if self.draft_logprobs is None:
            return None
        out = [0.0] * (self.num_nodes + 1)
        for u in range(1, self.num_nodes + 1):
            out[u] = out[self.parents[u]] + self.draft_logprobs[u - 1]
        return out[1:]

    def sibling_ranks(self) -> list[int]:
        """[N] each node's rank among its siblings (0 = the drafter's first choice)."""
        seen: dict[int, int] = {}
        ranks = []
        for p in self.parents[1:]:
            ranks.append(seen.get(p, 0))
            seen[p] = ranks[-1] + 1
        return ranks


# ---- recording ----------------------------------------------------------------------------------------
def make_llm(
    config: str | dict, target: str = "zoo:target", dtype: str = "float32", num_kv_blocks: int = 256
):
    """An LLM with the speculative config `config` (a name in CONFIGS, or a dict)."""
    from minispec import LLM

    spec = CONFIGS[config] if isinstance(config, str) and config in CONFIGS else config
    if not isinstance(spec, dict):
        raise ValueError(f"config={config!r} must be a speculative_config dict or one of {sorted(CONFIGS)}")
    return LLM(
        model=target, dtype=dtype, device="cpu", speculative_config=dict(spec), num_kv_blocks=num_kv_blocks
    )


class _MedusaLogits:
    """Wraps the Medusa heads' `draft_logits` (what the proposer's call of the heads runs, eager): the
    log-probabilities of each call, [num_heads, V] for row 0, on the target's vocabulary (-inf off a truncated
    one's token_map)."""

    def __init__(self, heads: torch.nn.Module):
        self.calls: list[torch.Tensor] = []
        self.heads, self.draft_logits = heads, heads.draft_logits
        heads.draft_logits = self._keep  # an instance attribute over the method, until remove()

    def _keep(self, *args, **kwargs) -> torch.Tensor:
        logits = self.draft_logits(*args, **kwargs)  # [num_heads, N, draft_vocab]
        full = self.heads.logits_on_target_vocab(logits[:, 0])  # [num_heads, V]
        self.calls.append(full.float().log_softmax(dim=-1).cpu())
        return logits

    def remove(self) -> None:
        del self.heads.draft_logits


def _medusa_logprobs(logp: torch.Tensor, record: VerificationRecord) -> list[float]:
    """Node u of depth d came from head d - 1: its log-prob there."""
    tree = SpecTree(list(record.parents))
    return [float(logp[tree.depths[u] - 1, t]) for u, t in enumerate(record.node_tokens, start=1)]


def _eagle_logprobs(tree: DraftTree, record: VerificationRecord) -> list[float]:
    cumulative = [0.0] + list(tree.scores[: len(record.node_tokens)])
    return [cumulative[u] - cumulative[record.parents[u]] for u in range(1, len(record.node_tokens) + 1)]


def record_steps(llm, prompt_token_ids: list[int], params=None) -> list[StepTrace]:
    """Run one request on `llm` (Medusa or EAGLE speculation) to the end and return its verifications.
    `params` defaults to greedy decoding of 32 tokens. The hooks are switched off again afterwards."""
    from minispec import SamplingParams

    engine = llm.llm_engine
    runner = engine.model_runner
    drafter = runner.drafter
    method = engine.speculative_config.method if engine.speculative_config is not None else None
    if method not in ("medusa", "eagle", "eagle3"):
        raise ValueError(f"record_steps needs Medusa or EAGLE speculation; the LLM has method={method!r}")
    if engine.has_unfinished_requests():
        raise ValueError("the LLM has unfinished requests; record_steps traces one request on an idle engine")
    params = params if params is not None else SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
    runner.verification_log = []
    hook = _MedusaLogits(drafter.heads) if method == "medusa" else None
    if hook is None:
        drafter.tree_log = []
    traces: list[StepTrace] = []
    try:
        engine.add_request(None, list(prompt_token_ids), params)
        request = engine.scheduler.waiting[-1]
        pending = None  # the previous step's proposal: Medusa head log-probs, or EAGLE's DraftTree
        while engine.has_unfinished_requests():
            context = list(request.all_token_ids)  # the root (last step's token) is the last one
            num_records, num_calls = len(runner.verification_log), _num_proposals(hook, drafter)
            engine.step()
            for record in runner.verification_log[num_records:]:
                run_entries = getattr(drafter, "max_nodes_run", None) if hook is None else None
                traces.append(_trace(method, len(traces), context, record, pending, run_entries))
                traces[-1].num_appended = len(request.all_token_ids) - len(context)
            pending = _latest_proposal(hook, drafter, num_calls)
    finally:
        runner.verification_log = None
        if hook is not None:
            hook.remove()
        else:
            drafter.tree_log = None
    return traces


def _num_proposals(hook, drafter) -> int:
    return len(hook.calls) if hook is not None else len(drafter.tree_log)


def _latest_proposal(hook, drafter, num_before: int):
    if hook is not None:
        return hook.calls[-1] if len(hook.calls) > num_before else None
    return drafter.tree_log[-1][1] if len(drafter.tree_log) > num_before else None


def _trace(method, step, context, record, pending, run_entries) -> StepTrace:
    logprobs, expansion = None, None
    if isinstance(pending, torch.Tensor):
        logprobs = _medusa_logprobs(pending, record)
    elif isinstance(pending, DraftTree):
        logprobs, expansion = _eagle_logprobs(pending, record), pending.expansion
    return StepTrace(
        method,
        step,
        list(context),
        list(record.parents),
        list(record.node_tokens),
        logprobs,
        record.logits,
        list(record.accepted),
        int(record.final_token),
        list(record.kv_moved),
        expansion,
        run_entries,
    )


def record_traces(
    config: str | dict,
    prompts: list[list[int]],
    max_tokens: int = 32,
    temperature: float = 0.0,
    seed: int | None = None,
    llm=None,
) -> list[StepTrace]:
    """Every verification of every prompt (run one at a time), for the config name or dict `config`."""
    from minispec import SamplingParams

    llm = llm if llm is not None else make_llm(config)
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, ignore_eos=True, seed=seed)
    out = []
    for ids in prompts:
        out.extend(record_steps(llm, ids, params))
    return out


def pick_step(traces: list[StepTrace], min_accepted: int = 1) -> StepTrace:
    """A step worth drawing: at least `min_accepted` nodes accepted and, where there is one, an accepted path
    that left the drafter's first choice somewhere (a runner-up was right: the tree paid off); the longest such
    path, the earliest on ties."""
    if not traces:
        raise ValueError("traces is empty: no verification was recorded")
    ok = [t for t in traces if len(t.accepted) >= min_accepted] or list(traces)
    runner_up = [t for t in ok if any(t.sibling_ranks()[u - 1] > 0 for u in t.accepted)] or ok
    return max(runner_up, key=lambda t: (len(t.accepted), -t.step))


# ---- many steps at once ---------------------------------------------------------------------------------
@dataclass
class Measurement:
    """Greedy acceptance of one config on a set of prompts: one entry per verification."""

    name: str
    accepted: list[int]  # accepted drafts of every verification (all requests, in order)
    nodes: list[int]  # drafts (tree nodes) verified by each verification
    outputs: list[list[int]]  # generated token ids per prompt
    stats: object  # the engine's SpecDecodingStats

    @property
    def num_steps(self) -> int:
        return len(self.accepted)

    @property
    def tokens_per_forward(self) -> float:
        """Mean acceptance length: tokens emitted per target forward that carried drafts."""
        return 1.0 + sum(self.accepted) / len(self.accepted) if self.accepted else 1.0

    @property
    def stderr(self) -> float:
        """Standard error of tokens_per_forward over verifications."""
        n = len(self.accepted)
        if n < 2:
            return float("nan")
        mean = sum(self.accepted) / n
        return (sum((a - mean) ** 2 for a in self.accepted) / (n - 1) / n) ** 0.5

    @property
    def nodes_per_step(self) -> float:
        return sum(self.nodes) / len(self.nodes) if self.nodes else 0.0

    def interval(self) -> Interval:
        """tokens_per_forward with its 95% interval (Student t over the verifications, n = verifications)."""
        if len(self.accepted) < 2:
            raise ValueError(
                f"{self.name}: {len(self.accepted)} verification(s); an interval needs at least 2"
            )
        return mean_interval([1 + a for a in self.accepted])

    def depth_intervals(self, depth: int | None = None) -> list[Interval]:
        """Per depth d = 1..depth: the share of verifications whose accepted path reached d (Wilson 95%).
        `depth` defaults to the deepest accepted path."""
        if not self.accepted:
            raise ValueError(f"{self.name}: no verification recorded")
        depth = max(1, max(self.accepted)) if depth is None else depth
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth={depth!r} must be an int >= 1")
        return [
            proportion_interval(sum(a >= d for a in self.accepted), self.num_steps)
            for d in range(1, depth + 1)
        ]


def measure(
    config: str | dict, prompts: list[list[int]], max_tokens: int, name: str | None = None, llm=None
) -> Measurement:
    """Greedy decoding of every prompt (one batch) with speculation `config`, counting each verification."""
    from minispec import SamplingParams

    llm = llm if llm is not None else make_llm(config)
    runner = llm.llm_engine.model_runner
    runner.verification_log = []
    try:
        params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
        out = llm.generate([{"prompt_token_ids": list(p)} for p in prompts], params, use_tqdm=False)
        records = runner.verification_log
    finally:
        runner.verification_log = None
    return Measurement(
        name or (config if isinstance(config, str) else str(config)),
        [len(r.accepted) for r in records],
        [len(r.node_tokens) for r in records],
        [list(o.outputs[0].token_ids) for o in out],
        llm.get_spec_decoding_stats(),
    )


def sample_walks(
    trace: StepTrace, temperature: float, num_samples: int, seed: int = 0, rule: str = "walk"
) -> list[tuple[int, ...]]:
    """What the step emits, drawn `num_samples` times from its recorded target logits at `temperature`:
    rule "walk" is Medusa's (`walk_tree`: draw t from p at the node, move to the child holding t) and
    "siblings" EAGLE's (`sample_tree_path`: each child accepted with p(x), p renormalised without it).
    Both are lossless for distinct deterministic drafts: the emitted tokens follow the target's distribution."""
    import numpy as np

    from minispec.sample.tree_sampler import sample_tree_path
    from minispec.trees.spec_tree import walk_tree

    if rule not in ("walk", "siblings"):
        raise ValueError(f"rule={rule!r} must be 'walk' or 'siblings'")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature!r} must be > 0 (at 0 the walk is the greedy one)")
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples={num_samples!r} must be an int >= 1")
    probs = (trace.logits.double() / temperature).softmax(dim=-1)  # [N + 1, V]
    out = []
    if rule == "walk":
        cdf = probs.cumsum(dim=-1).numpy()
        rng = np.random.default_rng(seed)
        tree = trace.spec_tree()

        def draw(node: int) -> int:
            return int(
                min(np.searchsorted(cdf[node], rng.random() * cdf[node, -1], side="right"), cdf.shape[1] - 1)
            )

        for _ in range(num_samples):
            path, final = walk_tree(tree, trace.node_tokens, draw)
            out.append(tuple(trace.node_tokens[u - 1] for u in path) + (final,))
        return out
    generator = torch.Generator().manual_seed(seed)
    for _ in range(num_samples):
        path, final = sample_tree_path(trace.parents, trace.node_tokens, probs.__getitem__, generator)
        out.append(tuple(trace.node_tokens[u - 1] for u in path) + (final,))
    return out


def typical_walks(
    trace: StepTrace,
    temperature: float,
    num_samples: int,
    seed: int = 0,
    posterior_threshold: float = 0.09,
    posterior_alpha: float = 0.3,
) -> list[tuple[int, ...]]:
    """What the step emits under typical acceptance (Medusa's rule, not lossless), drawn `num_samples` times
    through the engine's own tree path (`TreeVerificationMixin._typical_tree_path`) on the recorded logits at
    `temperature`: the deepest node whose whole path passes wins, then the target's argmax (or, at a leaf, a
    sampled bonus token)."""
    from types import SimpleNamespace

    from minispec.sample.typical_acceptance import TypicalAcceptanceSampler
    from minispec.worker.tree_verification import TreeVerificationMixin

    if not temperature > 0:
        raise ValueError(f"temperature={temperature!r} must be > 0")
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples={num_samples!r} must be an int >= 1")
    runner = SimpleNamespace(
        typical_acceptance_sampler=TypicalAcceptanceSampler(posterior_threshold, posterior_alpha)
    )
    node_logits = trace.logits.float() / temperature  # [N + 1, V] processed as the sampler would
    tree, generator = trace.spec_tree(), torch.Generator().manual_seed(seed)
    out = []
    for _ in range(num_samples):
        path, final = TreeVerificationMixin._typical_tree_path(
            runner, tree, trace.node_tokens, node_logits, False, generator
        )
        out.append(tuple(trace.node_tokens[u - 1] for u in path) + (int(final),))
    return out


def pick_sampling_step(traces: list[StepTrace], temperature: float = 1.0) -> StepTrace:
    """The step whose root children hold closest to half of the target's probability at `temperature`, so that
    a sampled walk both accepts and rejects often (the first such step on ties)."""
    if not traces:
        raise ValueError("traces is empty: no verification was recorded")

    def mass(t: StepTrace) -> float:
        return sum(p for p, parent in zip(t.target_probs(temperature), t.parents[1:]) if parent == 0)

    return min(traces, key=lambda t: (abs(mass(t) - 0.5), t.step))


def emitted_prefix_test(
    trace: StepTrace, samples: list[tuple[int, ...]], temperature: float, top: int = 12
) -> tuple[float, int, float]:
    """Pearson's chi-square test that the first two emitted tokens of `samples` (from `sample_walks`) follow
    the target: P(x1, x2) = p_root(x1) p_c(x2) when x1 is the token of a root child c (the walk went on from
    c), P(x1) = p_root(x1) when the step stopped at x1. The `top` likeliest outcomes of each kind get a bin,
    the rest is pooled. Returns (statistic, degrees of freedom, p-value)."""
    import numpy as np

    from minispec.teach.theory import chi_square_test

    probs = (trace.logits.double() / temperature).softmax(dim=-1)  # [N + 1, V]
    child = {trace.node_tokens[c - 1]: c for c in trace.spec_tree().children(0)}
    bins: dict[tuple, float] = {}
    for x1 in probs[0].topk(top).indices.tolist():
        if x1 not in child:
            bins[(x1,)] = float(probs[0, x1])
    for x1, c in child.items():
        for x2 in probs[c].topk(top).indices.tolist():
            bins[(x1, x2)] = float(probs[0, x1] * probs[c, x2])
    counts = dict.fromkeys(bins, 0)
    other = 0
    for sample in samples:
        key = sample[:2] if sample[0] in child else sample[:1]
        if key in counts:
            counts[key] += 1
        else:
            other += 1
    keys = list(bins)
    observed = np.array([counts[k] for k in keys] + [other], dtype=np.float64)
    expected = np.array([bins[k] for k in keys] + [max(0.0, 1.0 - sum(bins.values()))])
    return chi_square_test(observed, expected)


@torch.inference_mode()
def eagle_first_pass(llm, tokens: list[int]) -> list[int]:
    """[n - 1] the EAGLE head's greedy prediction at each entry p = 0 .. n - 2 of `tokens` (entry p reads
    x_{p+1} and the target's feature f_p and predicts x_{p+2}; the last entry predicts the first draft), from
    one causal pass of minispec's target and draft, as the proposer's first pass runs it."""
    from minispec.attention.paged_attention import causal_metadata
    from minispec.core.kv_cache_utils import allocate_kv_caches
    from minispec.teach.medusa_accuracy import causal_forward
    from minispec.worker.spec_decode_model_runner_mixin import target_features

    if len(tokens) < 2:
        raise ValueError(f"tokens has {len(tokens)} entries; EAGLE's first pass needs at least 2")
    engine = llm.llm_engine
    draft = getattr(engine.model_runner.drafter, "draft", None)
    if draft is None:
        raise ValueError("eagle_first_pass needs an LLM with EAGLE speculation")
    layers = draft.aux_hidden_layers
    hidden, aux = causal_forward(engine.model, torch.tensor([tokens]), tuple(sorted(set(layers))))
    feats = target_features(hidden[0], [a[0] for a in aux] or None, layers)[:-1]  # f_0 .. f_{n-2}
    feats = draft.combine_hidden_states(feats)  # [n - 1, H]
    n, block = len(tokens) - 1, 16
    cfg = draft.config
    num_blocks = -(-n // block)
    kv = allocate_kv_caches(
        1, cfg.num_key_value_heads, cfg.head_dim, num_blocks, block, feats.dtype, feats.device
    )
    meta = causal_metadata(np.arange(num_blocks)[None], [0], [n], block, feats.device)
    out, _ = draft(torch.tensor(tokens[1:]), meta.slot_positions, feats, kv, meta)
    return draft.draft_to_target(draft.compute_logits(out).argmax(dim=-1)).tolist()


__all__ = [
    "CONFIGS",
    "Measurement",
    "StepTrace",
    "eagle_first_pass",
    "emitted_prefix_test",
    "make_llm",
    "measure",
    "pick_sampling_step",
    "pick_step",
    "record_steps",
    "record_traces",
    "sample_walks",
    "typical_walks",
]

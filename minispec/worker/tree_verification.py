"""Tree verification for the model runner: masks and depths in, the longest accepted path and KV compaction out.

Chapters 3 and 4. Beyond vLLM v0.32.0, which verifies chains only: vLLM's tree verification (the tree branch of
`vllm/v1/worker/gpu_model_runner.py` with `vllm/v1/attention/backends/tree_attn.py`) was last released in v0.20.2.
The references are Medusa's `tree_decoding` / `evaluate_posterior` (FasterDecoding/Medusa) and EAGLE's
`evaluate_posterior`. Kept apart from `model_runner.py` so the chain path reads on its own; `ModelRunner`
inherits these methods.

A request's drafts are the nodes of its tree (a static `SpecTree`, or the drafter's own EAGLE-2 tree; the tree
proposers are in `minispec/trees/`), verified in one forward with the tree mask and RoPE positions context + depth
and counted per depth (`TreeDecodingStats`). The accepted path's keys and values are then copied onto consecutive
slots, so the scheduler's rollback (num_computed = context + 1 + accepted) leaves the cache plain decoding holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.core.sched.output import SchedulerOutput
from minispec.sample.logprobs import compute_logprobs, gather_logprobs
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.topk_topp_sampler import random_sample
from minispec.sample.sampler import Sampler
from minispec.sample.tree_sampler import sample_tree_path
from minispec.sampling_params import _SAMPLING_EPS
from minispec.trees.spec_tree import SpecTree, compact_kv_cache, greedy_tree_walk, walk_tree
from minispec.worker.gpu.sample.gumbel import keyed_draw


@dataclass
class VerificationRecord:
    """One request's verification in one step, kept when `ModelRunner.verification_log` is a list (notebooks
    and traces; off by default, so it costs nothing). A chain is the tree whose node i has parent i - 1."""

    request_id: str
    parents: list[int]  # [n + 1] -1 for the root (the last token before the drafts)
    node_tokens: list[int]  # [n] drafted tokens of nodes 1..n
    logits: torch.Tensor  # [n + 1, V] the target's raw logits at the root and at every node
    accepted: list[int]  # accepted nodes, root excluded (a root-to-node path)
    final_token: int  # the bonus (every node on a leaf path accepted) or recovered token
    kv_moved: list[tuple[int, int]]  # (source slot, destination slot) of the compaction


class TreeVerificationMixin:
    """Methods of ModelRunner that only tree drafts (MedusaTreeProposer's, EagleTreeProposer's) use."""

    @property
    def _uses_trees(self) -> bool:
        return self.spec_tree is not None or getattr(self.drafter, "is_tree", False)

    def _tree_for(self, request_id: str, num_nodes: int) -> SpecTree:
        """The tree a request's drafts form: the drafter's own (`EagleTreeProposer.spec_tree_for`: EAGLE-2 trees
        differ per request and step), or the configured static tree; cut to the nodes the scheduler kept."""
        tree_for = getattr(self.drafter, "spec_tree_for", None)
        tree = tree_for(request_id) if tree_for is not None else None
        if tree is None:  # a request without drafts this step: its tree is the root alone
            tree = self.spec_tree if self.spec_tree is not None else SpecTree([-1])
        return tree.truncate(num_nodes)

    def _tree_inputs(self, so: SchedulerOutput):
        """Tree mask and depth offsets for every request that carries tree drafts (root + n nodes)."""
        if not self._uses_trees or not so.scheduled_spec_decode_tokens:
            return None, None
        masks, offsets = {}, {}
        for b, r in enumerate(so.scheduled_requests):
            n = len(so.scheduled_spec_decode_tokens.get(r.request_id, ()))
            if n:
                assert so.num_scheduled_tokens[r.request_id] == n + 1, "a tree row is its root + nodes"
                tree = self._tree_for(r.request_id, n)
                masks[b], offsets[b] = tree.attention_mask(), tree.position_ids().numpy()
        return masks, offsets

    def _verify_tree(self, so, batch, hidden_states, reqs, block_table, sampling_metadata):
        """Accept the longest path of each request's tree, compact its KV, return the tokens, the flat
        index of the last accepted node (whose hidden state the next proposal reads), the accepted nodes
        and, when asked for, the logprobs of the emitted tokens."""
        rows = batch.sampling_rows
        ends = batch.query_start_loc[1:][rows]  # [B_s] one past each request's last new token
        drafts = [so.scheduled_spec_decode_tokens.get(r.request_id, []) for r in reqs]
        starts = ends - 1 - np.array([len(d) for d in drafts])  # [B_s] the root's flat index
        index = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)])
        if self.step_record is not None:
            self.step_record.logits_indices = index
        logits = self.model.compute_logits(hidden_states[torch.from_numpy(index).to(self.device)])  # [N, V]
        trees = [self._tree_for(r.request_id, len(d)) for r, d in zip(reqs, drafts)]
        # every node judged by the distribution plain sampling would use after its root path
        md = sampling_metadata
        if md.all_greedy and md.no_penalties and md.logit_bias is None:  # nothing to process: the raw argmax
            node_logits_all = logits.float()
        else:
            node_logits_all = Sampler.process_logits(logits, _node_metadata(md, trees, drafts))
        greedy = _greedy_rows(sampling_metadata, len(reqs))
        choice = node_logits_all.argmax(dim=-1)  # [sum(n_j + 1)]
        if md.seeds is not None and self.typical_acceptance_sampler is None:
            choice, greedy = _keyed_choices(choice, node_logits_all, md, reqs, trees, greedy)
        greedy_best, greedy_next = _greedy_walks(trees, drafts, choice)
        token_ids, last_index, paths, logprobs, src, dst = [], [], [], [], [], []
        offset = 0
        for j, (r, d, tree) in enumerate(zip(reqs, drafts, trees)):
            node_logits = node_logits_all[offset : offset + len(d) + 1]  # [n + 1, V]
            generator = sampling_metadata.generators.get(j)
            if self.typical_acceptance_sampler is not None and d:
                path, final = self._typical_tree_path(tree, d, node_logits, greedy[j], generator)
            elif greedy[j]:
                path, final = tree.ancestors(greedy_best[j])[1:], greedy_next[j][greedy_best[j]]
            elif getattr(self.drafter, "sibling_verification", False):  # EAGLE: siblings verified in turn
                probs = node_logits.softmax(dim=-1)  # [n + 1, V]
                path, final = sample_tree_path(tree.parents, d, probs.__getitem__, generator)
            else:
                path, final = walk_tree(tree, d, _sampling_draw(node_logits, generator))
            tokens = [d[node - 1] for node in path] + [final]
            token_ids.append(tokens)
            paths.append(path)
            if sampling_metadata.max_num_logprobs is not None:
                # the token emitted at depth i came from the logits at the path's node i - 1 (the root first)
                rows_used = torch.tensor([offset + node for node in [0, *path]], device=logits.device)
                logprobs.append(
                    gather_logprobs(
                        compute_logprobs(logits[rows_used]),
                        sampling_metadata.max_num_logprobs,
                        torch.tensor(tokens, device=logits.device),
                    )
                )
            offset += len(d) + 1
            self._record_accepted(r.request_id, path)
            last_index.append(starts[j] + (path[-1] if path else 0))
            if d:
                self.spec_decoding_stats.observe_tree(tree.nodes_per_depth(), len(path))
            moved = [(node, depth) for depth, node in enumerate(path, start=1) if node != depth]
            slots_moved: list[tuple[int, int]] = []
            if moved:  # the accepted nodes' keys and values go onto the next consecutive slots
                context = r.num_computed_tokens - len(d) - 1
                table = np.asarray(block_table[rows[j]])
                node_pos, depth_pos = context + np.array(moved).T  # [2, m] cache positions
                src.append(table[node_pos // self.block_size] * self.block_size + node_pos % self.block_size)
                dst.append(
                    table[depth_pos // self.block_size] * self.block_size + depth_pos % self.block_size
                )
                slots_moved = list(zip(src[-1].tolist(), dst[-1].tolist()))
            if self.verification_log is not None:
                self.verification_log.append(
                    VerificationRecord(
                        r.request_id,
                        list(tree.parents),
                        list(d),
                        logits[offset - len(d) - 1 : offset].cpu(),
                        list(path),
                        int(final),
                        slots_moved,
                    )
                )
        if src:
            compact_kv_cache(self.kv_caches, np.concatenate(src).tolist(), np.concatenate(dst).tolist())
        return token_ids, np.array(last_index), paths, (logprobs or None)

    def _typical_tree_path(self, tree, d, node_logits, greedy: bool, generator):
        """Typical acceptance on a tree: the deepest node whose whole path passes wins; then the target
        argmax, or the bonus token (a draw) when that node is a leaf."""
        best = self.typical_acceptance_sampler.accept_tree(tree, d, node_logits, greedy)
        if tree.children(best) or greedy:
            final = int(node_logits[best].argmax())
        else:
            final = _sampling_draw(node_logits, generator)(best)
        return tree.ancestors(best)[1:], final


def _greedy_rows(md: SamplingMetadata, num_rows: int) -> list[bool]:
    if md.all_greedy:
        return [True] * num_rows
    return (md.temperature < _SAMPLING_EPS).tolist()


def _keyed_choices(choice, node_logits, md: SamplingMetadata, reqs, trees, greedy: list[bool]):
    """Seeded random rows: each node's position-keyed draw (minispec/worker/gpu/sample/gumbel.py) replaces its
    argmax and the row is walked as a greedy one, which accepts the child whose token is the draw. That is
    sibling-by-sibling rejection of one-hot drafts against a one-hot target: the output is the target's own
    draw at every position, as plain decoding of the seeded request gives."""
    seeds, positions, greedy = [], [], list(greedy)
    for j, (r, tree) in enumerate(zip(reqs, trees)):
        keyed = int(md.seeds[j]) >= 0 and not greedy[j]
        seeds += [int(md.seeds[j]) if keyed else -1] * len(tree.parents)
        positions += [r.num_tokens + depth for depth in tree.depths]  # the node's token goes at n + depth
        greedy[j] = greedy[j] or keyed
    seeds, positions = torch.tensor(seeds), torch.tensor(positions)  # [sum(n_j + 1)] each
    rows = (seeds >= 0).nonzero()[:, 0]
    choice = choice.clone()
    choice[rows] = keyed_draw(node_logits[rows], seeds[rows], positions[rows]).to(choice.dtype)
    return choice, greedy


def _greedy_walks(trees: list[SpecTree], drafts: list[list[int]], node_argmax: torch.Tensor):
    """For every request at once: the deepest node its target accepts greedily, and the target's greedy token
    after each node. `node_argmax` [sum(n_j + 1)] holds the processed argmax at every node, request by request.
    Built on the host: the accepted tokens go there anyway."""
    width = 1 + max(len(d) for d in drafts)
    num_reqs = len(trees)
    parents = np.zeros((num_reqs, width), dtype=np.int64)  # padding nodes hang off the root ...
    tokens = np.full((num_reqs, width), -1, dtype=np.int64)  # ... and never match (token -1)
    depths = np.zeros((num_reqs, width), dtype=np.int64)
    target_next = np.zeros((num_reqs, width), dtype=np.int64)
    argmax, offset = node_argmax.cpu().numpy(), 0
    for j, (tree, d) in enumerate(zip(trees, drafts)):
        size = len(d) + 1
        parents[j, :size], tokens[j, 1:size], depths[j, :size] = tree.parents, d, tree.depths
        target_next[j, :size] = argmax[offset : offset + size]
        offset += size
    best = greedy_tree_walk(parents, tokens, depths, target_next)
    return best.tolist(), target_next.tolist()


def _node_metadata(md: SamplingMetadata, trees: list[SpecTree], drafts: list[list[int]]) -> SamplingMetadata:
    """One row per tree node (root included), request by request; with penalties, a node's output history
    is the request's output followed by the tokens on its root path (root excluded)."""
    rows = [j for j, d in enumerate(drafts) for _ in range(len(d) + 1)]
    histories = None
    if not md.no_penalties:
        histories = []
        for j, (tree, d) in enumerate(zip(trees, drafts)):
            out = list(md.output_token_ids[j])
            histories.extend(out + [d[u - 1] for u in tree.ancestors(node)[1:]] for node in range(len(d) + 1))
    return md.select_rows(rows, output_token_ids=histories)


def _sampling_draw(node_logits: torch.Tensor, generator: torch.Generator | None):
    """draw(node): one token from the softmax of a node's processed logits, from the request's generator."""

    def draw(node: int) -> int:
        probs = node_logits[node : node + 1].softmax(dim=-1)  # [1, V]
        return int(random_sample(probs, {0: generator} if generator is not None else {})[0])

    return draw

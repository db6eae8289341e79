"""MedusaProposer: a chain drafted by Medusa heads over the target's last hidden state.

Chapter 3. vLLM v0.32.0 counterpart: `vllm/v1/spec_decode/medusa.py` (head i's argmax), as here. Token trees go
beyond v0.32.0: `MedusaTreeProposer` (`minispec/trees/medusa_tree_proposer.py`). Beyond vLLM too: speculative_config
`draft_vocab_size` (FR-Spec, `frequent_tokens`). Compiled heads draft in one graph per call through the seam
`compiled_propose` (minispec/compilation/).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from minispec.core.request import Request
from minispec.model_executor.models.medusa import Medusa
from minispec.sample.metadata import SamplingMetadata


class MedusaProposer:
    """Drafts every position at once from the Medusa heads.

    The target's forward at the request's last accepted token t gave the hidden state h_t (after the final
    norm); the target's lm_head turned it into token t + 1, which was just sampled. Head i turns the same h_t
    into a guess for token t + 2 + i, so one cheap call on h_t drafts every position at once (the heads never
    see each other's guesses): draft i = argmax of head i, for i < num_speculative_tokens.

    Drafts are deterministic (the heads' argmax), so the rejection sampler treats them as one-hot and
    sampling stays lossless; typical acceptance (`minispec/sample/typical_acceptance.py`) is the Medusa
    paper's alternative.
    """

    needs_target_hidden_states = True  # the model runner passes the hidden state at each last valid token

    def __init__(self, heads: Medusa, num_speculative_tokens: int):
        if num_speculative_tokens > heads.num_heads:
            raise ValueError(
                f"num_speculative_tokens={num_speculative_tokens} needs {num_speculative_tokens} Medusa heads; "
                f"the checkpoint has {heads.num_heads}"
            )
        self.heads = heads
        self.num_heads = num_speculative_tokens  # head i drafts position i
        # the seam: compiled heads draft through one graph per call (minispec/compilation/), None when eager
        self.compiled_propose: Callable[[torch.Tensor], torch.Tensor] | None = None

    @classmethod
    def from_config(cls, spec, target_runner, **kwargs) -> MedusaProposer:
        """As v0.32.0's `MedusaProposer(vllm_config, device)` with its `load_model`: heads trained on this target.
        `kwargs`: a subclass's own."""
        from minispec.model_executor.model_loader import SPEC_MODEL, check_kind, resolve_model_path
        from minispec.model_executor.model_loader.medusa_loader import load_medusa

        path = resolve_model_path(spec.model, SPEC_MODEL)
        check_kind(path, "medusa", SPEC_MODEL, spec.model)
        target = target_runner.model
        try:
            heads = load_medusa(path, target.model.embed_tokens.weight.dtype, target_runner.device)
        except ValueError as e:
            raise ValueError(f"speculative_config model={spec.model!r}: {e}") from e
        arch = target.config
        if (heads.config.hidden_size, heads.config.vocab_size) != (arch.hidden_size, arch.vocab_size):
            raise ValueError(
                f"speculative_config model={spec.model!r} has hidden_size={heads.config.hidden_size}, "
                f"vocab_size={heads.config.vocab_size}; the target has hidden_size={arch.hidden_size}, "
                f"vocab_size={arch.vocab_size}: Medusa heads must be trained on this target"
            )
        if spec.draft_vocab_size is not None:  # FR-Spec: the heads score only the most frequent tokens
            token_map = cls.frequent_tokens(spec, path, heads)
            if token_map.numel() < heads.config.vocab_size:  # the whole vocabulary needs no map
                heads.set_token_map(token_map)
        return cls(heads, spec.num_speculative_tokens, **kwargs)

    @staticmethod
    def frequent_tokens(spec, path, heads: Medusa) -> torch.Tensor:
        """FR-Spec's draft vocabulary for speculative_config draft_vocab_size: the most frequent tokens of the
        head folder's token_counts.json, for heads whose one shared projection can be cut.

        The heads then score only those n tokens: vLLM's truncated vocabulary (`truncated_vocab_size` and
        `token_map`), chosen when the engine loads (`Medusa.set_token_map`) instead of in the checkpoint."""
        from minispec.model_executor.model_loader.draft_vocab import draft_vocab_of

        where = f"speculative_config model={spec.model!r} with draft_vocab_size={spec.draft_vocab_size}"
        if not heads.config.original_lm_head:
            raise ValueError(
                f"{where}: a draft vocabulary cuts the projection every head shares "
                f"(original_lm_head: true); these heads have one projection each"
            )
        if heads.config.is_truncated:
            raise ValueError(
                f"{where}: the checkpoint already truncates the vocabulary to "
                f"{heads.config.draft_vocab_size} tokens (truncated_vocab_size)"
            )
        try:
            return draft_vocab_of(path, heads.config.vocab_size, spec.draft_vocab_size)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from e

    @torch.inference_mode()
    def propose(
        self,
        requests: list[Request],
        new_token_ids: list[list[int]],
        sampling_metadata: SamplingMetadata,
        target_hidden_states: torch.Tensor,  # [B, H] at each request's last valid token
    ) -> list[list[int]]:
        if self.compiled_propose is not None:
            return self.compiled_propose(target_hidden_states).tolist()
        return self.draft_token_ids(target_hidden_states).tolist()

    def draft_token_ids(self, target_hidden_states: torch.Tensor) -> torch.Tensor:
        """[B, H] -> the drafts as target ids, [B, k]: head i's argmax. Calls the heads' own forward, so that a
        compiled proposer compiles this whole function as one graph."""
        return self.heads.draft_to_target(self.head_logits(target_hidden_states).argmax(dim=-1)).T  # [B, k]

    def head_logits(self, target_hidden_states: torch.Tensor) -> torch.Tensor:
        """[num_heads, B, draft vocab]: ranks over the draft vocabulary, mapped to target ids afterwards, draft
        what ranking vLLM's -inf-filled full-vocabulary logits drafts, without building them."""
        hidden = target_hidden_states.to(self.heads.dtype)
        return type(self.heads).forward(self.heads, hidden, self.num_heads, on_target_vocab=False)

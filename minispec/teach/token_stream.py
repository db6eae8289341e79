"""Plain and speculative decoding of one prompt, step by step: what each target forward emitted (chapter 0).

vLLM has no counterpart; it reports the same facts as counts (`vllm/v1/spec_decode/metrics.py`). The fates
come from the engine's own step records (`minispec/worker/step_record.py`), not from a second derivation.
A step that verified d drafts and emitted a + 1 tokens kept the first a drafts ("accepted"). Its last token
is the target's own: "bonus" when a == d, else "recovered", with drafts[a] the first "rejected" draft. A
step without drafts (a prefill, or plain decoding) emits one "sampled" token. Greedy decoding only: then
both streams must hold the same tokens, and `stream_fates` checks that they do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

FATES = ("sampled", "accepted", "rejected", "recovered", "bonus")

Step = list[tuple[str, str]]  # (token text, fate), in the order the step produced them


@dataclass(frozen=True)
class TokenStream:
    """One decoding run: per engine step (one target forward each), its tokens and their fates."""

    name: str
    steps: list[Step]
    token_ids: list[int]  # the output's tokens, as the engine returned them

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @property
    def text(self) -> str:
        """The output text: every token but the rejected drafts."""
        return "".join(text for step in self.steps for text, fate in step if fate != "rejected")


def step_fates(drafts: Sequence[int], emitted: Sequence[int]) -> list[tuple[int, str]]:
    """(token id, fate) for one step that verified `drafts` and emitted `emitted` (accepted + 1 token)."""
    if len(emitted) > len(drafts) + 1:
        raise ValueError(
            f"emitted holds {len(emitted)} tokens; a step with {len(drafts)} drafts emits at most "
            f"{len(drafts) + 1}"
        )
    if not drafts:
        return [(int(t), "sampled") for t in emitted]
    if not emitted:
        raise ValueError("emitted is empty, but a step that verifies drafts emits at least one token")
    accepted = len(emitted) - 1
    if list(emitted[:accepted]) != list(drafts[:accepted]):
        raise ValueError(f"emitted={list(emitted)} must start with the accepted drafts {list(drafts)}")
    fates = [(int(t), "accepted") for t in emitted[:accepted]]
    if accepted == len(drafts):
        return [*fates, (int(emitted[-1]), "bonus")]
    return [*fates, (int(drafts[accepted]), "rejected"), (int(emitted[-1]), "recovered")]


def kept_steps(steps: Sequence[list[tuple[int, str]]], num_tokens: int) -> list[list[tuple[int, str]]]:
    """The steps cut after the `num_tokens`-th kept token: the stop checks drop what a step emitted past it."""
    out, kept = [], 0
    for step in steps:
        cut: list[tuple[int, str]] = []
        for token, fate in step:
            if kept == num_tokens:
                break
            cut.append((token, fate))
            kept += fate != "rejected"
        if cut or kept < num_tokens:
            out.append(cut)
    return out


def record_steps(llm: Any, prompt: str, params: Any) -> tuple[list[list[tuple[int, str]]], Any]:
    """Generate `prompt` with the engine's step recorder on; (per step (token id, fate), the RequestOutput)."""
    engine = llm.llm_engine
    before, engine.step_records = engine.step_records, []
    try:
        output = llm.generate([prompt], params, use_tqdm=False)[0]
        records = engine.step_records
    finally:
        engine.step_records = before
    rid = output.request_id
    steps = [
        step_fates(r.scheduled_spec_decode_tokens.get(rid, []), r.sampled_token_ids.get(rid, []))
        for r in records
        if rid in r.num_scheduled_tokens
    ]
    token_ids = list(output.outputs[0].token_ids)
    steps = kept_steps(steps, len(token_ids))
    kept = [t for step in steps for t, fate in step if fate != "rejected"]
    if kept != token_ids:
        raise RuntimeError(f"the step records hold {kept}, but the output is {token_ids}")
    return steps, output


def piece_decoder(tokenizer: Any, prompt_ids: Sequence[int]) -> Callable[[Sequence[int], int], str]:
    """piece(before, token): the text `token` adds after prompt + before (spaces and newlines kept)."""

    def piece(before: Sequence[int], token: int) -> str:
        context = [*prompt_ids, *before]
        return tokenizer.decode([*context, token])[len(tokenizer.decode(context)) :]

    return piece


def _with_text(name: str, steps: list[list[tuple[int, str]]], output: Any, tokenizer: Any) -> TokenStream:
    piece = piece_decoder(tokenizer, output.prompt_token_ids)
    done: list[int] = []
    texts: list[Step] = []
    for step in steps:
        row = []
        for token, fate in step:
            row.append((piece(done, token), fate))
            if fate != "rejected":
                done.append(token)
        texts.append(row)
    return TokenStream(name, texts, list(output.outputs[0].token_ids))


def stream_fates(llm_plain: Any, llm_spec: Any, prompt: str, params: Any) -> tuple[TokenStream, TokenStream]:
    """Decode `prompt` with both LLMs, recording each step: (plain stream, speculative stream).

    `llm_plain` has no speculative_config, `llm_spec` has one; `params` must be greedy (temperature 0).
    """
    if getattr(params, "temperature", None) != 0:
        raise ValueError(
            f"params.temperature={getattr(params, 'temperature', None)!r}; only greedy decoding "
            "(temperature 0) gives both streams the same text"
        )
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt={prompt!r} must be a non-empty str")
    if llm_plain.llm_engine.speculative_config is not None:
        raise ValueError("llm_plain has a speculative_config; it must decode without drafts")
    if llm_spec.llm_engine.speculative_config is None:
        raise ValueError("llm_spec has no speculative_config; it must propose drafts")
    streams = []
    for name, llm in (("plain decoding", llm_plain), ("speculative decoding", llm_spec)):
        steps, output = record_steps(llm, prompt, params)
        streams.append(_with_text(name, steps, output, llm.get_tokenizer()))
    plain, spec = streams
    if plain.token_ids != spec.token_ids:
        raise RuntimeError("greedy speculative decoding emitted other tokens than plain decoding")
    return plain, spec

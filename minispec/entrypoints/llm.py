"""`LLM`: the offline entry point, shaped like vLLM's.

Chapter 8. vLLM counterpart: `vllm/entrypoints/llm.py`.

    llm = LLM(model="zoo:target")
    outputs = llm.generate(["def fib(n):"], SamplingParams(temperature=0, max_tokens=32))
    print(outputs[0].outputs[0].text)

`generate` is all or nothing: it checks every prompt and every SamplingParams before it queues any request,
and if anything fails while they run (an error, or Ctrl-C) it aborts the requests of that call, so the
engine is left empty with every KV block free and the next call behaves like a fresh engine's.
"""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm

from minispec.config import SpeculativeConfig
from minispec.engine.llm_engine import LLMEngine
from minispec.metrics.reader import Metric
from minispec.outputs import RequestOutput
from minispec.sampling_params import SamplingParams

PromptType = (
    str | dict[str, Any]
)  # text, {"prompt_token_ids": [...]} (and optional "prompt"), {"prompt": text}
PROMPT_KEYS = ("prompt", "prompt_token_ids")
ENGINE_KWARGS = (
    "max_num_batched_tokens",
    "block_size",
    "num_kv_blocks",
    "enforce_eager",
    "compilation_config",
)


class LLM:
    def __init__(
        self,
        model: str,
        tokenizer: str | None = None,
        dtype: str = "auto",
        max_model_len: int | None = None,
        max_num_seqs: int = 64,
        seed: int = 0,
        speculative_config: SpeculativeConfig | dict[str, Any] | None = None,
        device: str = "auto",
        **engine_kwargs: Any,
    ):
        unknown = sorted(set(engine_kwargs) - set(ENGINE_KWARGS))
        if unknown:
            raise TypeError(
                f"LLM() got unknown arguments {unknown}; the engine also takes {list(ENGINE_KWARGS)}"
            )
        self.llm_engine = LLMEngine(
            model,
            tokenizer=tokenizer,
            dtype=dtype,
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            device=device,
            speculative_config=SpeculativeConfig.from_dict(speculative_config),
            seed=seed,
            **engine_kwargs,
        )

    def get_spec_decoding_stats(self):
        """SpecDecodingStats over everything generated so far (None without speculative decoding)."""
        return self.llm_engine.get_spec_decoding_stats()

    def get_metrics(self) -> list[Metric]:
        """A snapshot of this LLM's Prometheus metrics (vLLM's LLM.get_metrics): Counter, Vector, Gauge and
        Histogram objects (minispec/metrics/reader.py) named as vLLM's, e.g. "vllm:spec_decode_num_drafts"."""
        return self.llm_engine.get_metrics()

    def get_tokenizer(self):
        return self.llm_engine.tokenizer

    def generate(
        self,
        prompts: PromptType | list[PromptType],
        sampling_params: SamplingParams | list[SamplingParams] | None = None,
        use_tqdm: bool = True,
    ) -> list[RequestOutput]:
        many = isinstance(prompts, (list, tuple))
        prompt_list = list(prompts) if many else [prompts]
        if not prompt_list:
            raise ValueError(
                "prompts is empty: pass a str, a {'prompt_token_ids': [...]} dict, or a list of them"
            )
        if not isinstance(use_tqdm, bool):
            raise TypeError(f"use_tqdm={use_tqdm!r} must be a bool")
        params_list = self._params_per_prompt(sampling_params, len(prompt_list))
        engine = self.llm_engine
        checked = []  # everything is validated before the first request is queued
        for i, (prompt, params) in enumerate(zip(prompt_list, params_list)):
            try:
                text, token_ids = self._parse_prompt(prompt)
                checked.append((text, engine.check_request(token_ids, params), params))
            except (TypeError, ValueError) as e:
                if not many:
                    raise
                raise (TypeError if isinstance(e, TypeError) else ValueError)(f"prompts[{i}]: {e}") from e

        order: dict[str, int] = {}  # request id -> its prompt's index
        results: list[RequestOutput | None] = [None] * len(checked)
        with engine.lock:  # a generate from another thread waits until this one is done
            try:
                for i, (text, token_ids, params) in enumerate(checked):
                    order[engine.add_request(text, token_ids, params)] = i
                with tqdm(total=len(results), desc="Processed prompts", disable=not use_tqdm) as bar:
                    while any(r is None for r in results):
                        for output in engine.step():
                            if output.request_id in order:  # requests queued on the engine directly: not ours
                                results[order[output.request_id]] = output
                                bar.update(1)
            except BaseException:
                engine.abort_request(list(order))
                raise
        return results  # type: ignore[return-value]

    def _parse_prompt(self, prompt: PromptType) -> tuple[str | None, Any]:
        """(text, token ids) of one prompt; the ids are checked by the engine."""
        if isinstance(prompt, str):
            return prompt, self._encode(prompt)
        if not isinstance(prompt, dict):
            raise TypeError(
                f"a prompt must be a str or a dict ({{'prompt_token_ids': [...]}} or {{'prompt': text}}); "
                f"got {prompt!r:.60} (a {type(prompt).__name__})"
            )
        unknown = sorted(map(str, set(prompt) - set(PROMPT_KEYS)))
        if unknown:
            raise ValueError(f"prompt dict has unknown keys {unknown}; known keys: {list(PROMPT_KEYS)}")
        text = prompt.get("prompt")
        if text is not None and not isinstance(text, str):
            raise TypeError(f"prompt['prompt']={text!r:.60} must be a str; got a {type(text).__name__}")
        if "prompt_token_ids" in prompt:
            return text, prompt["prompt_token_ids"]
        if text is None:
            raise ValueError("prompt dict needs 'prompt_token_ids' (a list of ints) or 'prompt' (a str)")
        return text, self._encode(text)

    def _encode(self, text: str) -> list[int]:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate, e.g. "\ud800": no tokenizer can encode it
            raise ValueError(
                f"prompt {text!r:.60} cannot be encoded as UTF-8 ({e.reason} at index {e.start}); "
                "pass valid Unicode text"
            ) from None
        return self.llm_engine.tokenizer.encode(text)

    @staticmethod
    def _params_per_prompt(
        params: SamplingParams | list[SamplingParams] | None, n: int
    ) -> list[SamplingParams]:
        if params is None:
            return [SamplingParams() for _ in range(n)]
        if isinstance(params, SamplingParams):
            return [params] * n
        if not isinstance(params, (list, tuple)):
            raise TypeError(
                f"sampling_params must be None, a SamplingParams or a list of them; got a {type(params).__name__}"
            )
        if len(params) != n:
            raise ValueError(
                f"sampling_params has {len(params)} entries for {n} prompts; pass one, or one per prompt"
            )
        for i, p in enumerate(params):
            if not isinstance(p, SamplingParams):
                raise TypeError(f"sampling_params[{i}] must be a SamplingParams; got a {type(p).__name__}")
        return list(params)

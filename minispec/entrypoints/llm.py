"""`LLM`: the offline entry point, shaped like vLLM's.

Chapter 8. vLLM counterpart: `vllm/entrypoints/llm.py`.

    llm = LLM(model="zoo:target")
    outputs = llm.generate(["def fib(n):"], SamplingParams(temperature=0, max_tokens=32))
    print(outputs[0].outputs[0].text)
"""

from __future__ import annotations

from typing import Any

import torch
from tqdm.auto import tqdm

from minispec.config import SpeculativeConfig
from minispec.engine.llm_engine import LLMEngine
from minispec.outputs import RequestOutput
from minispec.sampling_params import SamplingParams

PromptType = str | dict[str, Any]


class LLM:
    def __init__(
        self,
        model: str,
        tokenizer: str | None = None,
        dtype: str = "float32",
        max_model_len: int | None = None,
        max_num_seqs: int = 64,
        seed: int = 0,
        speculative_config: SpeculativeConfig | dict[str, Any] | None = None,
        device: str = "auto",
        **engine_kwargs: Any,
    ):
        torch.manual_seed(seed)  # the generator of unseeded requests, as vLLM's seed does
        self.llm_engine = LLMEngine(
            model,
            tokenizer=tokenizer,
            dtype=dtype,
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            device=device,
            speculative_config=SpeculativeConfig.from_dict(speculative_config),
            **engine_kwargs,
        )

    def get_spec_decoding_stats(self):
        """SpecDecodingStats over everything generated so far (None without speculative decoding)."""
        return self.llm_engine.get_spec_decoding_stats()

    def get_tokenizer(self):
        return self.llm_engine.tokenizer

    def generate(
        self,
        prompts: PromptType | list[PromptType],
        sampling_params: SamplingParams | list[SamplingParams] | None = None,
        use_tqdm: bool = True,
    ) -> list[RequestOutput]:
        prompt_list = prompts if isinstance(prompts, list) else [prompts]
        if not prompt_list:
            raise ValueError(
                "prompts is empty: pass a str, a {'prompt_token_ids': [...]} dict, or a list of them"
            )
        params_list = self._params_per_prompt(sampling_params, len(prompt_list))
        order: dict[str, int] = {}
        for i, (prompt, params) in enumerate(zip(prompt_list, params_list)):
            text, token_ids = self._tokenize(prompt)
            order[self.llm_engine.add_request(text, token_ids, params)] = i

        results: list[RequestOutput | None] = [None] * len(prompt_list)
        with tqdm(total=len(prompt_list), desc="Processed prompts", disable=not use_tqdm) as bar:
            while self.llm_engine.has_unfinished_requests():
                for output in self.llm_engine.step():
                    results[order[output.request_id]] = output
                    bar.update(1)
        return results  # type: ignore[return-value]

    def _tokenize(self, prompt: PromptType) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            return prompt, self.llm_engine.tokenizer.encode(prompt)
        if isinstance(prompt, dict) and "prompt_token_ids" in prompt:
            return prompt.get("prompt"), [int(t) for t in prompt["prompt_token_ids"]]
        raise ValueError(f"prompt {prompt!r:.60} is neither a str nor a dict with 'prompt_token_ids'")

    @staticmethod
    def _params_per_prompt(
        params: SamplingParams | list[SamplingParams] | None, n: int
    ) -> list[SamplingParams]:
        if params is None:
            return [SamplingParams() for _ in range(n)]
        if isinstance(params, SamplingParams):
            return [params] * n
        if len(params) != n:
            raise ValueError(
                f"sampling_params has {len(params)} entries for {n} prompts; pass one, or one per prompt"
            )
        return list(params)

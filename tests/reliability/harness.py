"""What every reliability test checks after an error: the engine holds no request, every KV block (the
target's and the drafter's) is back in its pool, the drafter keeps no per-request state, and the next good
`generate` returns what a fresh engine of the same config returns."""

from __future__ import annotations

from minispec import LLM, SamplingParams

ENGINE_KWARGS = {
    "device": "cpu",
    "max_model_len": 64,
    "num_kv_blocks": 15,
    "block_size": 4,
}  # 60 tokens of KV
GOOD_PROMPTS = [{"prompt_token_ids": [1, 5, 6, 7, 5, 6, 7]}, {"prompt_token_ids": [1, 9, 10, 11, 9, 10]}]
GOOD_PARAMS = [
    SamplingParams(temperature=0, max_tokens=6, ignore_eos=True),
    SamplingParams(temperature=0.8, seed=7, max_tokens=6, ignore_eos=True),
]


def token_ids(outputs) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in outputs]


def good_generate(llm: LLM) -> list[list[int]]:
    return token_ids(llm.generate(GOOD_PROMPTS, GOOD_PARAMS, use_tqdm=False))


def assert_clean(llm: LLM) -> None:
    """No request queued or running, every block free, no drafter state left."""
    engine = llm.llm_engine
    assert not engine.scheduler.waiting and not engine.scheduler.running, "requests left in the scheduler"
    manager = engine.kv_cache_manager
    assert manager.num_free_blocks == manager.block_pool.num_blocks, "target KV blocks not returned"
    assert not manager.req_to_blocks, "target block table not empty"
    drafter = engine.model_runner.drafter
    draft_manager = getattr(drafter, "kv_cache_manager", None)
    if draft_manager is not None:
        assert draft_manager.num_free_blocks == draft_manager.block_pool.num_blocks, (
            "drafter KV blocks not returned"
        )
        assert not draft_manager.req_to_blocks, "drafter block table not empty"
    for name in ("states", "draft_probs", "last_trees"):
        assert not getattr(drafter, name, None), f"drafter.{name} not empty"


def assert_invariant(llm: LLM, reference: list[list[int]]) -> None:
    assert_clean(llm)
    assert good_generate(llm) == reference, "the next good generate differs from a fresh engine's"
    assert_clean(llm)


class Engines:
    """One shared engine per speculative config (the one errors are thrown at) and the output of a fresh
    engine of that config on the good prompts, each built once."""

    def __init__(self, models: dict[str, str], configs: dict[str, dict | None]):
        self.models, self.configs = models, configs
        self._built: dict[str, tuple[LLM, list[list[int]]]] = {}

    def build(self, name: str) -> LLM:
        return LLM(
            model=self.models["target"],
            speculative_config=self.configs[name],
            **ENGINE_KWARGS,
            dtype="float32",
        )

    def __getitem__(self, name: str) -> tuple[LLM, list[list[int]]]:
        if name not in self._built:
            reference = good_generate(self.build(name))
            self._built[name] = (self.build(name), reference)
        return self._built[name]


def fail_on_call(n: int, error: BaseException):
    def wrap(fn):
        calls = [0]

        def wrapper(*args, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                raise error
            return fn(*args, **kwargs)

        return wrapper

    return wrap

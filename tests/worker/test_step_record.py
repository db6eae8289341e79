"""engine.step_records: every step written down (chapter 8); off by default, and the output is unchanged."""

import torch

from minispec import LLM, SamplingParams


def _llm(**kw):
    torch.set_num_threads(1)
    return LLM(
        model="zoo:target",
        dtype="float32",
        device="cpu",
        max_num_batched_tokens=24,
        num_kv_blocks=12,
        block_size=8,
        **kw,
    )


def test_records_a_chunked_prefill_and_speculative_steps():
    spec = {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3}
    prompts = [{"prompt_token_ids": list(range(5, 45))}, {"prompt_token_ids": list(range(50, 60))}]
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    plain = _llm(speculative_config=spec).generate(prompts, params, use_tqdm=False)
    llm = _llm(speculative_config=spec)
    engine = llm.llm_engine
    engine.step_records = []
    out = llm.generate(prompts, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in out] == [o.outputs[0].token_ids for o in plain]
    records = engine.step_records
    assert records[0].step == 0 and records[0].total_num_scheduled_tokens <= 24
    assert records[0].chunked_prefills  # a 40-token prompt does not fit a 24-token budget
    spec_steps = [r for r in records if r.scheduled_spec_decode_tokens]
    assert spec_steps and all(r.spec_decode_metadata is not None for r in spec_steps)
    for r in records:
        assert set(r.timings) >= {"schedule", "prepare_inputs", "forward", "update"}
        assert len(r.input_ids) == r.total_num_scheduled_tokens == r.query_start_loc[-1]
        for req, n in r.num_scheduled_tokens.items():
            assert r.num_computed_scheduled[req] == r.num_computed_before[req] + n
            drafts = r.scheduled_spec_decode_tokens.get(req)
            if drafts and req not in r.finished:  # rollback: only the accepted drafts keep their KV
                assert r.num_computed_after[req] == r.num_computed_scheduled[req] - (
                    len(drafts) - r.num_accepted[req]
                )
    emitted = {}
    for r in records:
        for req, toks in r.sampled_token_ids.items():
            emitted.setdefault(req, []).extend(toks)
    assert sorted(len(v) >= 12 for v in emitted.values()) == [True, True]


def test_off_by_default():
    llm = _llm()
    assert llm.llm_engine.step_records is None
    llm.generate("x = 1", SamplingParams(max_tokens=3), use_tqdm=False)
    assert llm.llm_engine.model_runner.step_record is None

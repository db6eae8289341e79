"""Line numbers of vLLM v0.32.0 functions that chapters show beside minispec's code (chapters 2-8).

Written by `python -m minispec.viz.source --add REF`; checked against a source tree by
tests/viz/test_source.py. vLLM has no counterpart."""

VLLM_LINES: dict[str, tuple[int, int]] = {
    "vllm/v1/core/sched/scheduler.py::Scheduler.schedule": (591, 1556),
    "vllm/v1/core/sched/scheduler.py::Scheduler.update_from_output": (2026, 2424),
    "vllm/v1/engine/core.py::EngineCore.step": (657, 687),
    "vllm/v1/engine/llm_engine.py::LLMEngine.step": (319, 366),
    "vllm/v1/sample/ops/topk_topp_sampler.py::random_sample": (555, 577),
    "vllm/v1/sample/rejection_sampler.py::RejectionSampler.forward": (106, 216),
    "vllm/v1/sample/rejection_sampler.py::rejection_greedy_sample_kernel": (725, 780),
    "vllm/v1/sample/rejection_sampler.py::rejection_random_sample_kernel": (828, 900),
    "vllm/v1/sample/rejection_sampler.py::rejection_sample": (410, 519),
    "vllm/v1/sample/rejection_sampler.py::sample_recovered_tokens": (678, 721),
    "vllm/v1/sample/rejection_sampler.py::sample_recovered_tokens_kernel": (1003, 1084),
    "vllm/v1/sample/sampler.py::Sampler.apply_logits_processors": (375, 421),
    "vllm/v1/sample/sampler.py::Sampler.forward": (73, 150),
    "vllm/v1/sample/sampler.py::Sampler.sample": (247, 305),
    "vllm/v1/spec_decode/dynamic/utils.py::build_dynamic_sd_schedule_lookup": (77, 148),
    "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.propose": (512, 774),
    "vllm/v1/spec_decode/medusa.py::MedusaProposer.propose": (38, 56),
    "vllm/v1/spec_decode/ngram_proposer.py::_find_longest_matched_ngram_and_propose_tokens": (209, 295),
    "vllm/v1/spec_decode/suffix_decoding.py::SuffixDecodingProposer.propose": (34, 98),
    "vllm/v1/worker/gpu/sample/gumbel.py::gumbel_noised_argmax": (164, 205),
    "vllm/v1/worker/gpu/sample/gumbel.py::gumbel_sample": (336, 409),
    "vllm/v1/worker/gpu/sample/gumbel.py::murmur3_hash32": (97, 109),
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py::_rejection_kernel": (487, 695),
    "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner._calc_spec_decode_metadata": (2625, 2698),
}

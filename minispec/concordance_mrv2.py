"""The concordance's Model Runner V2 side: what each mirrored module is in `vllm/v1/worker/gpu/` (chapter 7).

minispec mirrors vLLM v0.32.0's Model Runner V1. On a GPU, v0.32.0 runs Model Runner V2 instead wherever Triton
is usable and the configuration is supported (`VllmConfig.use_v2_model_runner`), and v0.34.0 deletes V1. This
module holds, as data that minispec/concordance.py renders into docs/concordance.md:

- `MRV2_ROWS`: per minispec module, its MRv2 counterpart in v0.32.0 ("path::symbol" refs, checked against the
  source like the rest of the concordance), or why it has none: the code is shared by both runners, or the
  feature runs on MRv1 only. A mirrored row that names no runner code (`RUNNER_PREFIXES`) and has no entry is
  shared by rule (`mrv2_for`).
- `MRV2_FUNCTIONS`: the same for each function pair of `concordance.FUNCTIONS`, keyed by its vLLM "path::symbol".
- `V034_REMOVED`: the v0.32.0 paths the concordance names that v0.34.0 no longer ships, derived once from the
  v0.34.0 sdist's file list (`python -m minispec.concordance --derive-v034 FILE_LIST` prints it again), and
  `V034_MRV2_MOVED`: the files of `vllm/v1/worker/gpu/` that v0.34.0 removed or moved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from minispec.concordance_refs import VllmRef

if TYPE_CHECKING:
    from minispec.concordance import Row

MRV2_ROOT = "vllm/v1/worker/gpu/"
V034_VERSION = "v0.34.0"
# Folders whose code belongs to one runner; a row that names none of them runs the same code under both.
RUNNER_PREFIXES = ("vllm/v1/worker/", "vllm/v1/sample/", "vllm/v1/spec_decode/")

COUNTERPART, SHARED, NO_COUNTERPART = "counterpart", "shared", "none"


@dataclass(frozen=True)
class Mrv2:
    """A module's (or function's) Model Runner V2 side in v0.32.0."""

    refs: tuple[VllmRef, ...]  # MRv2 code (for a shared entry: the MRv2 code that calls the shared code)
    note: str  # what differs that matters; for a "none" entry, why there is none
    shared: bool = False  # the same vLLM code runs under both runners

    @property
    def kind(self) -> str:
        if self.shared:
            return SHARED
        return COUNTERPART if self.refs else NO_COUNTERPART


def M(refs: str, note: str, shared: bool = False) -> Mrv2:
    """One entry; `refs` is space-separated "path::symbol" of v0.32.0 ("" when there is none)."""
    return Mrv2(tuple(VllmRef.parse(p) for p in refs.split()), note, shared)


# Where v0.32.0 picks the runner (linked from the concordance's introduction).
RUNNER_CHOICE: tuple[VllmRef, ...] = (
    VllmRef.parse("vllm/config/vllm.py::VllmConfig.use_v2_model_runner"),
    VllmRef.parse("vllm/config/vllm.py::VllmConfig._get_v2_model_runner_unsupported_features"),
)

_G = MRV2_ROOT
_SD = f"{_G}spec_decode/"
_SA = f"{_G}sample/"

# fmt: off
MRV2_ROWS: dict[str, Mrv2] = {
    "minispec/__init__.py": M("", "The package's front door, whichever runner runs", shared=True),
    "minispec/entrypoints/llm.py": M("", "`LLM` drives the engine the same way under both runners", shared=True),
    "minispec/outputs.py": M("", "Request outputs are built by the engine, not the runner", shared=True),
    "minispec/sampling_params.py": M(f"{_SA}states.py::SamplingStates.add_request", "The same class and checks (`_validate_spec_decode` refuses min_p and logit_bias under speculation in both runners); MRv2 copies each request's parameters once into persistent GPU state", shared=True),
    "minispec/utils.py": M("", "Config and parameter validation is not runner code", shared=True),
    "minispec/config/speculative.py": M("", "The same SpeculativeConfig; `rejection_sample_method=\"block\"` is implemented only in MRv2's rejection sampler", shared=True),
    "minispec/config/vllm.py": M("", "The same configs; vLLM's `VllmConfig.use_v2_model_runner` picks the runner (minispec's VllmConfig has no such property)", shared=True),
    "minispec/engine/llm_engine.py": M(f"{_G}model_runner.py::GPUModelRunner.execute_model {_G}model_runner.py::GPUModelRunner.sample_tokens", "The engine core calls the worker's execute_model then sample_tokens with either runner", shared=True),
    "minispec/engine/input_processor.py": M("", "Input processing happens in the engine, before any runner", shared=True),
    "minispec/core/request.py": M(f"{_G}states.py::RequestState", "The scheduler's Request is shared; MRv2 also keeps each request's tokens, num_computed_tokens, last sampled and draft tokens in a persistent GPU table", shared=True),
    "minispec/core/block_pool.py": M("", "KV cache management is the scheduler's, not the runner's", shared=True),
    "minispec/core/kv_cache_manager.py": M("", "KV cache management is the scheduler's, not the runner's", shared=True),
    "minispec/core/sched/scheduler.py": M(f"{_G}input_batch.py::post_update", "The same Scheduler (drafts, rollback of rejected tokens); MRv2 applies the same rollback to its own GPU copy of num_computed_tokens in `post_update`", shared=True),
    "minispec/core/sched/output.py": M(f"{_G}model_runner.py::GPUModelRunner.add_requests {_G}model_runner.py::GPUModelRunner.update_requests", "The same SchedulerOutput; MRv2 turns its new / cached request diffs into persistent GPU state", shared=True),
    "minispec/worker/model_runner.py": M(f"{_G}model_runner.py::GPUModelRunner.prepare_inputs {_G}model_runner.py::GPUModelRunner.execute_model {_G}model_runner.py::GPUModelRunner.sample {_G}model_runner.py::GPUModelRunner.sample_tokens {_G}model_runner.py::GPUModelRunner.postprocess_sampled", "Requests' state persists on the GPU (`RequestState`) and each step's inputs are gathered by Triton kernels instead of rebuilt on the host; drafts stay on the GPU and are written into the next step's input ids (`combine_sampled_and_draft_tokens`); drafting runs in `sample_tokens` through one speculator object (`init_speculator`) instead of `propose_draft_token_ids` dispatching by method"),
    "minispec/worker/spec_decode_model_runner_mixin.py": M(f"{_G}model_runner.py::GPUModelRunner.sample_tokens {_SD}speculator.py::BaseSpeculator.propose {_G}input_batch.py::combine_sampled_and_draft_tokens", "One speculator object (`init_speculator`) drafts inside `sample_tokens` instead of a dispatch by method; logits rows are InputBatch fields computed on the GPU, not a SpecDecodeMetadata built on the host"),
    "minispec/compilation/decorators.py": M("", "`support_torch_compile` is shared; the CPU platform and its oneDNN GEMM dispatch run only under MRv1, since a CPU build has no Triton", shared=True),
    "minispec/core/kv_cache_utils.py": M(f"{_G}model_runner.py::GPUModelRunner.initialize_kv_cache {_G}attn_utils.py::init_kv_cache", "Sizing (`vllm/v1/core/kv_cache_utils.py`) is shared; MRv2 allocates and binds the caches in its own `init_kv_cache`"),
    "minispec/worker/tree_verification.py": M("", "Neither runner verifies token trees in v0.32.0"),
    "minispec/attention/decode_steps.py": M(f"{_SD}speculator.py::DraftModelSpeculator._update_draft_decode_metadata {_SD}speculator.py::DraftModelSpeculator._build_uniform_attn_metadata", "MRv2 updates the decode metadata on the GPU between drafting steps (a CUDA graph per step) instead of slicing one host-built table"),
    "minispec/attention/paged_attention.py": M(f"{_G}attn_utils.py::build_attn_metadata {_G}block_table.py::BlockTables.compute_slot_mappings", "The attention backends are shared; MRv2 builds their metadata and slot mappings with its own code (slot mappings by a Triton kernel). The CPU backend runs only under MRv1", shared=True),
    "minispec/model_executor/layers/utils.py": M("", "Layer code is shared; this CPU GEMM dispatch runs only where MRv1 runs (a CPU build has no Triton)", shared=True),
    "minispec/model_executor/models/llama_eagle.py": M(f"{_SD}eagle/utils.py::load_eagle_model", "The same model class; MRv2 loads it and shares the target's embedding and lm_head in `load_eagle_model`", shared=True),
    "minispec/model_executor/models/llama_eagle3.py": M(f"{_SD}eagle/eagle3_utils.py::set_eagle3_aux_hidden_state_layers", "The same model class; MRv2 sets which target layers feed EAGLE-3's auxiliary hidden states", shared=True),
    "minispec/model_executor/models/medusa.py": M("", "Medusa runs on MRv1 only (`_get_v2_model_runner_unsupported_features`); v0.33 removes Medusa and v0.34.0 this file"),
    "minispec/model_executor/model_loader/medusa_loader.py": M("", "Medusa runs on MRv1 only (`_get_v2_model_runner_unsupported_features`); v0.33 removes Medusa"),
    "minispec/sample/sampler.py": M(f"{_SA}sampler.py::Sampler {_SA}gumbel.py::gumbel_sample {_SA}output.py::SamplerOutput", "Gumbel-max sampling whose noise is a murmur3 hash of (seed, position, token): stateless, so a request's draws depend on neither the batch nor earlier draws (MRv1: an exponential race on torch generators); greedy is the same kernel at temperature 0; per-request parameters and penalties' counts persist on the GPU; one SamplerOutput with num_sampled / num_rejected for plain and speculative steps"),
    "minispec/sample/metadata.py": M(f"{_SA}states.py::SamplingStates {_G}input_batch.py::InputBatch", "No SamplingMetadata: parameters persist per request in GPU tables, indexed each step through `idx_mapping` (per request) and `expanded_idx_mapping` (per logits row)"),
    "minispec/sample/logprobs.py": M(f"{_SA}logprob.py::compute_topk_scores {_SA}logprob.py::compute_token_logprobs", "Top-k log-softmax and ranks as Triton kernels"),
    "minispec/sample/ops/topk_topp_sampler.py": M(f"{_SA}states.py::SamplingStates.apply_top_k_top_p {_SA}gumbel.py::gumbel_sample", "`apply_top_k_top_p` is the same function (MRv2 imports `vllm/v1/sample/ops/topk_topp_sampler.py`, which v0.34.0 keeps); `random_sample`'s exponential race becomes Gumbel-max"),
    "minispec/sample/logits_processor.py": M(f"{_SA}logits_processor/interface.py::LogitsProcessor {_SA}logits_processor/interface.py::LogitsContext {_SA}logits_processor/loader.py::build_custom_logits_processors", "MRv2's own interface: per-request state set once in `add_request` (slots recycled), `apply` on each step's logits with a LogitsContext; no BatchUpdate; every custom processor runs after the built-in ones and before temperature (MRv1 splits argmax-invariant ones from the rest)"),
    "minispec/worker/gpu/spec_decode/rejection_sampler.py": M(f"{_SD}rejection_sampler.py::RejectionSampler {_SD}rejection_sampler_utils.py::rejection_sample", "This is MRv2's own file: block verification, as a PyTorch reference of its kernels (MRv1 has no counterpart)"),
    "kernels/block_verification.py": M(f"{_SD}rejection_sampler_utils.py::_rejection_kernel {_SD}rejection_sampler_utils.py::_compute_local_residual_mass_kernel", "MRv2's block-verification kernels, one program per request instead of per-vocabulary-block partials"),
    "minispec/spec_decode/dynamic/utils.py": M("vllm/v1/worker/gpu/cudagraph_utils.py", "The same helpers under both runners: the scheduler builds the lookup; MRv2 also sizes its CUDA-graph tiers from it. v0.34.0 keeps the file", shared=True),
    "minispec/worker/gpu/sample/gumbel.py": M(f"{_SA}gumbel.py::gumbel_sample {_SA}gumbel.py::murmur3_hash32", "This is MRv2's own file: minispec's PyTorch reference of its noise, used for seeded requests (MRv1 has no counterpart)"),
    "minispec/sample/ops/bad_words.py": M(f"{_SA}bad_words.py::BadWordsState {_SA}bad_words.py::apply_bad_words", "A Triton kernel over per-request bad-word tables kept on the GPU"),
    "minispec/sample/ops/logprobs.py": M(f"{_SA}logprob.py::compute_topk_scores {_SA}logprob.py::_ranks_kernel", "Ranks counted by a Triton kernel, nothing compiled by torch.compile"),
    "minispec/sample/ops/penalties.py": M(f"{_SA}penalties.py::PenaltiesState {_SA}penalties.py::apply_penalties", "Output-token counts persist on the GPU, updated after each step (`post_update`), instead of recounted from token lists"),
    "minispec/sample/ops/builtin.py": M(f"{_SA}min_p.py::apply_min_p {_SA}logit_bias.py::LogitBiasState", "min-p is a sampling state (a Triton kernel), logit bias one of the logits-processor states (with allowed tokens and min_tokens), not MRv1's batch-update processors"),
    "minispec/sample/rejection_sampler.py": M(f"{_SD}rejection_sampler.py::RejectionSampler {_SD}rejection_sampler_utils.py::rejection_sample", "Target rows go through the sampler's `apply_sampling_params` (penalties, logit bias, bad words, temperature, min-p, top-k / top-p) before verification, as minispec's; the accept test's uniform is `tl_rand32(seed, position)` and recovered tokens are Gumbel-max draws from the residual, so nothing is drawn ahead; chunked over requests and vocabulary blocks; `rejection_sample_method` standard, synthetic and block (block only here)"),
    "kernels/rejection_sampler.py": M(f"{_SD}rejection_sampler_utils.py::_rejection_kernel {_SD}rejection_sampler_utils.py::_resample_kernel", "One rejection kernel for greedy and random requests (temperature per request) over per-block statistics of the logits (global logsumexp, residual mass), with a block-verification flag; a resample kernel for recovered and bonus tokens"),
    "minispec/spec_decode/metadata.py": M(f"{_G}input_batch.py::InputBatch {_G}input_batch.py::combine_sampled_and_draft_tokens {_G}input_batch.py::expand_idx_mapping", "No SpecDecodeMetadata: `cu_num_logits`, `logits_indices`, `expanded_idx_mapping` and `expanded_local_pos` are InputBatch fields, logits_indices computed on the GPU while the drafts are written into the input ids"),
    "minispec/spec_decode/utils.py": M(f"{_SD}rejection_sampler.py::RejectionSampler", "The same function: MRv2's RejectionSampler imports it from `vllm/v1/spec_decode/utils.py` for its synthetic rates (a file v0.34.0 no longer ships)", shared=True),
    "minispec/spec_decode/metrics.py": M("", "Counted by the scheduler from the runner's output in both runners; v0.34.0 keeps `vllm/v1/spec_decode/metrics.py` unchanged", shared=True),
    "minispec/spec_decode/ngram_proposer.py": M(f"{_SD}ngram/speculator.py::NgramGPUSpeculator", "Triton scan kernels on the GPU for both `ngram` and `ngram_gpu`: the longest n-gram at its rightmost match (MRv1's numba scan takes the earliest), and always k drafts, slots without a match filled with the last sampled token and verified as usual (MRv1 proposes fewer or none)"),
    "minispec/spec_decode/suffix_decoding.py": M("", "Suffix decoding runs on MRv1 only (`_get_v2_model_runner_unsupported_features`); v0.34.0 rewrites it natively in `vllm/v1/worker/gpu/spec_decode/suffix/` (no Arctic Inference) and removes this file"),
    "minispec/spec_decode/llm_base_proposer.py": M(f"{_SD}speculator.py::DraftModelSpeculator {_SD}standalone_ar/speculator.py::StandaloneARSpeculator.propose {_SD}target_dependent_ar/speculator.py::TargetDependentARSpeculator.propose", "SpecDecodeBaseProposer splits into DraftModelSpeculator and two autoregressive speculators, standalone (a separate draft model) and target-dependent (EAGLE, MTP); first-pass inputs built by Triton kernels, one CUDA graph per drafting step; v0.34.0 gives both a common base, `autoregressive/speculator.py`"),
    "minispec/spec_decode/draft_model.py": M(f"{_SD}standalone_ar/speculator.py::StandaloneARSpeculator", "The first drafting pass writes accepted tokens, the correction token and slots for the rejected ones in one expanded buffer; a draft with its own vocabulary (heterogeneous vocabularies) falls back to MRv1"),
    "minispec/spec_decode/medusa.py": M("", "Medusa runs on MRv1 only (`_get_v2_model_runner_unsupported_features`); v0.33 removes Medusa, and v0.34.0 `vllm/v1/spec_decode/medusa.py` with it"),
    "minispec/spec_decode/eagle.py": M(f"{_SD}eagle/speculator.py::EagleSpeculator {_SD}target_dependent_ar/speculator.py::TargetDependentARSpeculator", "EAGLE, EAGLE-3 and MTP drafting in TargetDependentARSpeculator, fed by the target's hidden states; parallel drafting (P-EAGLE) falls back to MRv1"),
}

_SHARED_SCHEDULER = M("", "The scheduler is shared by both runners", shared=True)
MRV2_FUNCTIONS: dict[str, Mrv2] = {
    "vllm/v1/sample/rejection_sampler.py::RejectionSampler.forward": M(f"{_SD}rejection_sampler.py::RejectionSampler.__call__", "takes the InputBatch and the drafter's logits, returns a SamplerOutput"),
    "vllm/v1/sample/rejection_sampler.py::RejectionSampler.parse_output": M("", "The sampled matrix and num_sampled stay on the GPU and are copied to the host asynchronously (`AsyncOutput`)"),
    "vllm/v1/sample/rejection_sampler.py::RejectionSampler.apply_logits_processors": M(f"{_SA}sampler.py::Sampler.apply_sampling_params", "the sampler's whole pipeline, on every target row"),
    "vllm/v1/sample/rejection_sampler.py::rejection_sample": M(f"{_SD}rejection_sampler_utils.py::rejection_sample", "standard, synthetic and block verification"),
    "vllm/v1/sample/rejection_sampler.py::apply_sampling_constraints": M(f"{_SA}sampler.py::Sampler.apply_sampling_params", "temperature, min-p and top-k / top-p among the rest"),
    "vllm/v1/sample/rejection_sampler.py::expand_batch_to_tokens": M(f"{_G}input_batch.py::expand_idx_mapping", "maps each logits row to its request once per step"),
    "vllm/v1/sample/rejection_sampler.py::generate_uniform_probs": M(f"{_SA}gumbel.py::tl_rand32", "drawn inside the kernel from (seed, position): nothing generated ahead"),
    "vllm/v1/sample/rejection_sampler.py::sample_recovered_tokens": M(f"{_SD}rejection_sampler_utils.py::_resample_kernel", "Gumbel-max over the residual"),
    "vllm/v1/sample/rejection_sampler.py::rejection_greedy_sample_kernel": M(f"{_SD}rejection_sampler_utils.py::_rejection_kernel", "one kernel for greedy and random requests"),
    "vllm/v1/sample/rejection_sampler.py::rejection_random_sample_kernel": M(f"{_SD}rejection_sampler_utils.py::_rejection_kernel", "one kernel for greedy and random requests"),
    "vllm/v1/sample/rejection_sampler.py::sample_recovered_tokens_kernel": M(f"{_SD}rejection_sampler_utils.py::_resample_kernel", ""),
    "vllm/v1/sample/sampler.py::Sampler.forward": M(f"{_SA}sampler.py::Sampler.__call__", ""),
    "vllm/v1/sample/sampler.py::Sampler.apply_temperature": M(f"{_SA}states.py::SamplingStates.apply_temperature {_SA}gumbel.py::apply_temperature", "a Triton kernel"),
    "vllm/v1/sample/sampler.py::Sampler.greedy_sample": M(f"{_SA}gumbel.py::gumbel_sample", "the Gumbel-max kernel at temperature 0 is a plain argmax"),
    "vllm/v1/sample/sampler.py::Sampler.sample": M(f"{_SA}sampler.py::Sampler.sample {_SA}gumbel.py::gumbel_sample", "Gumbel-max, noise hashed from (seed, position, token)"),
    "vllm/v1/sample/sampler.py::Sampler.compute_logprobs": M(f"{_SA}logprob.py::compute_token_logprobs", ""),
    "vllm/v1/sample/sampler.py::Sampler.gather_logprobs": M(f"{_SA}logprob.py::compute_topk_scores", ""),
    "vllm/v1/sample/sampler.py::Sampler.apply_logits_processors": M(f"{_SA}sampler.py::Sampler.apply_sampling_params", "penalties, logit bias and bad words as persistent states"),
    "vllm/v1/sample/sampler.py::Sampler.apply_penalties": M(f"{_SA}penalties.py::apply_penalties", ""),
    "vllm/v1/sample/ops/topk_topp_sampler.py::apply_top_k_top_p": M(f"{_SA}states.py::SamplingStates.apply_top_k_top_p", "calls this very function", shared=True),
    "vllm/v1/sample/ops/topk_topp_sampler.py::random_sample": M(f"{_SA}gumbel.py::gumbel_sample", "Gumbel-max instead of the exponential race"),
    "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.propose": M(f"{_SD}standalone_ar/speculator.py::StandaloneARSpeculator.propose {_SD}target_dependent_ar/speculator.py::TargetDependentARSpeculator.propose", ""),
    "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.set_inputs_first_pass": M(f"{_SD}standalone_ar/speculator.py::prepare_prefill_inputs {_SD}target_dependent_ar/speculator.py::prepare_prefill_inputs", "Triton kernels"),
    "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer._sample_draft_tokens": M(f"{_SD}speculator.py::DraftModelSpeculator.sample_draft", "argmax, or Gumbel-max keeping the draft logits when drafts are probabilistic"),
    "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer._update_positions_dependent_metadata": M(f"{_SD}speculator.py::DraftModelSpeculator._update_draft_decode_metadata", ""),
    "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.load_model": M(f"{_SD}speculator.py::DraftModelSpeculator.load_model", ""),
    "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.prepare_inputs": M(f"{_SD}target_dependent_ar/speculator.py::TargetDependentARSpeculator._prefill {_SD}standalone_ar/speculator.py::StandaloneARSpeculator._prefill", "the first pass reads num_rejected on the GPU"),
    "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.dummy_run": M(f"{_SD}speculator.py::BaseSpeculator.capture", "CUDA graph capture; profiling runs call `propose(dummy_run=True)`"),
    "vllm/v1/spec_decode/eagle.py::EagleProposer": M(f"{_SD}eagle/speculator.py::EagleSpeculator", ""),
    "vllm/v1/spec_decode/medusa.py::MedusaProposer.propose": M("", "MRv1 only: Medusa runs on MRv1 (`_get_v2_model_runner_unsupported_features`)"),
    "vllm/v1/spec_decode/draft_model.py::DraftModelProposer": M(f"{_SD}standalone_ar/speculator.py::StandaloneARSpeculator", ""),
    "vllm/v1/spec_decode/suffix_decoding.py::SuffixDecodingProposer.propose": M("", "MRv1 only: suffix decoding falls back to MRv1"),
    "vllm/v1/spec_decode/ngram_proposer.py::NgramProposer.batch_propose": M(f"{_SD}ngram/speculator.py::NgramGPUSpeculator.propose", ""),
    "vllm/v1/spec_decode/ngram_proposer.py::batch_propose_numba": M(f"{_SD}ngram/speculator.py::_ngram_scan_kernel", "one program per request and block of positions"),
    "vllm/v1/spec_decode/ngram_proposer.py::_find_longest_matched_ngram_and_propose_tokens": M(f"{_SD}ngram/speculator.py::_ngram_scan_kernel {_SD}ngram/speculator.py::_ngram_finalize_kernel", "longest n at the rightmost match; always k drafts"),
    "vllm/v1/core/sched/scheduler.py::Scheduler.schedule": _SHARED_SCHEDULER,
    "vllm/v1/core/sched/scheduler.py::Scheduler.update_from_output": _SHARED_SCHEDULER,
    "vllm/v1/core/sched/scheduler.py::Scheduler._preempt_request": _SHARED_SCHEDULER,
    "vllm/v1/core/sched/scheduler.py::Scheduler.add_request": _SHARED_SCHEDULER,
    "vllm/v1/core/sched/scheduler.py::Scheduler.finish_requests": _SHARED_SCHEDULER,
    "vllm/v1/core/sched/scheduler.py::Scheduler._free_request": _SHARED_SCHEDULER,
    "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner._prepare_inputs": M(f"{_G}model_runner.py::GPUModelRunner.prepare_inputs", ""),
    "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner._calc_spec_decode_metadata": M(f"{_G}model_runner.py::GPUModelRunner.prepare_inputs {_G}input_batch.py::combine_sampled_and_draft_tokens", "cu_num_logits on the host, logits_indices on the GPU"),
    "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.execute_model": M(f"{_G}model_runner.py::GPUModelRunner.execute_model {_G}model_runner.py::GPUModelRunner.sample_tokens", ""),
    "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.propose_draft_token_ids": M(f"{_G}model_runner.py::GPUModelRunner.sample_tokens {_SD}speculator.py::BaseSpeculator.propose", "the speculator drafts inside sample_tokens"),
    "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.initialize_kv_cache": M(f"{_G}model_runner.py::GPUModelRunner.initialize_kv_cache {_G}attn_utils.py::init_kv_cache", ""),
}
# fmt: on

# The v0.32.0 paths named anywhere in the concordance (ROWS, FUNCTIONS, KNOWN_DIFFERENCES, V0_LAYOUT's V1 homes,
# the MRv2 data) that v0.34.0 no longer ships (`derive_v034_removed`).
V034_REMOVED: frozenset[str] = frozenset(
    {
        "vllm/model_executor/models/medusa.py",
        "vllm/v1/sample/logits_processor/builtin.py",
        "vllm/v1/sample/logits_processor/interface.py",
        "vllm/v1/sample/logits_processor/state.py",
        "vllm/v1/sample/metadata.py",
        "vllm/v1/sample/ops/bad_words.py",
        "vllm/v1/sample/ops/logprobs.py",
        "vllm/v1/sample/ops/penalties.py",
        "vllm/v1/sample/rejection_sampler.py",
        "vllm/v1/sample/sampler.py",
        "vllm/v1/spec_decode/draft_model.py",
        "vllm/v1/spec_decode/eagle.py",
        "vllm/v1/spec_decode/llm_base_proposer.py",
        "vllm/v1/spec_decode/medusa.py",
        "vllm/v1/spec_decode/metadata.py",
        "vllm/v1/spec_decode/ngram_proposer.py",
        "vllm/v1/spec_decode/suffix_decoding.py",
        "vllm/v1/spec_decode/utils.py",
        "vllm/v1/worker/gpu_input_batch.py",
        "vllm/v1/worker/gpu_model_runner.py",
    }
)

# Files of vllm/v1/worker/gpu/ in v0.32.0 that v0.34.0 removed ("") or moved (to the path given). None of them
# is named above: every MRv2 file this concordance names still exists in v0.34.0.
V034_MRV2_MOVED: dict[str, str] = {
    "vllm/v1/worker/gpu/README.md": "",
    "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/cudagraph_utils.py": "vllm/v1/worker/gpu/spec_decode/autoregressive/cudagraph_utils.py",
}


# ---- lookups --------------------------------------------------------------------------------------------------
def names_runner_code(row: Row) -> bool:
    """Whether a row names a file that belongs to one runner (MRv1's worker, sampler or proposers)."""
    return any(ref.path.startswith(RUNNER_PREFIXES) for ref in row.vllm)


SHARED_BY_RULE = M("", "Names no runner code: the same vLLM code runs under both runners", shared=True)


def mrv2_for(row: Row) -> Mrv2 | None:
    """A mirrored row's MRv2 entry: its own, or shared by rule when it names no runner code.

    None for a row without a v0.32.0 counterpart, and for a row naming runner code that lacks an entry (which
    tests/test_concordance.py reports).
    """
    if not row.vllm:
        return None
    if row.minispec in MRV2_ROWS:
        return MRV2_ROWS[row.minispec]
    return None if names_runner_code(row) else SHARED_BY_RULE


def all_mrv2_refs() -> list[VllmRef]:
    """Every v0.32.0 ref of the MRv2 data (entries and RUNNER_CHOICE)."""
    return [*RUNNER_CHOICE, *(ref for e in [*MRV2_ROWS.values(), *MRV2_FUNCTIONS.values()] for ref in e.refs)]


def derive_v034_removed(v034_files: Iterable[str], named: Iterable[str]) -> frozenset[str]:
    """The `named` paths (`concordance.named_v032_paths()`) absent from v0.34.0's file list (one path a line,
    as the sdist lists them under vllm/)."""
    present = {line.strip() for line in v034_files}
    return frozenset(p for p in named if p not in present)


def summary(rows: Iterable[Row]) -> dict[str, int]:
    """How many mirrored rows have an MRv2 counterpart, run shared code, or have none."""
    counts = {COUNTERPART: 0, SHARED: 0, NO_COUNTERPART: 0}
    for row in rows:
        entry = mrv2_for(row)
        if entry is not None:
            counts[entry.kind] += 1
    return counts

"""The concordance as data: every minispec module beside the vLLM v0.32.0 file it mirrors (chapter 7).

vLLM has no counterpart: this is the map a reader uses to go from a minispec file to vLLM's. `ROWS` holds one
`Row` per module; `docs/concordance.md` is generated from it and must not be edited by hand:

    python -m minispec.concordance --write docs/concordance.md   # regenerate
    python -m minispec.concordance --check docs/concordance.md   # exit 1 when the file is stale
    python -m minispec.concordance --missing                     # modules without a row, as skeleton rows

Adding a module is one line in `ROWS`: `R(minispec_path, vllm_paths, simplifies, beyond=..., v0=..., ref=...)`.
`vllm_paths` is a space-separated string of paths of the v0.32.0 release ("" when there is no counterpart);
a path may name a symbol after `::` (`vllm/v1/worker/gpu_model_runner.py::_calc_spec_decode_metadata`,
`vllm/v1/sample/sampler.py::Sampler.gather_logprobs`), which tests/test_concordance.py looks up in the source.
`v0` names files of vLLM v0.9.2, the last release that had V0's `vllm/spec_decode/` (removed by PR #21152;
v0.10.0 is the first release without it); `ref` names anything else (Medusa, EAGLE, papers).

Which modules need a row (`modules_needing_rows`): every `.py` file under minispec/ and kernels/, except an
`__init__.py` that holds no logic, i.e. whose top-level statements are only a docstring, imports, plain
assignments (`__all__`, a `_LAZY` name table), an `if TYPE_CHECKING:` block and a module `__getattr__`
(the lazy re-export hook).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from minispec.concordance_refs import V0_VERSION, VLLM_VERSION, VllmRef, permalink

if TYPE_CHECKING:
    from minispec.concordance_mrv2 import Mrv2

REPO_ROOT = Path(__file__).resolve().parents[1]
DOC_PATH = REPO_ROOT / "docs" / "concordance.md"


@dataclass(frozen=True)
class Row:
    minispec: str  # repository-relative path of one minispec module
    vllm: tuple[VllmRef, ...]  # its v0.32.0 counterparts; empty when vLLM has none
    simplifies: str  # what minispec leaves out or does more simply; for no-counterpart rows, what it is for
    beyond: str = ""  # what minispec does that vLLM v0.32.0 does not
    v0: tuple[VllmRef, ...] = ()  # V0 files (vLLM v0.9.2) it also follows
    ref: str = ""  # other references: Medusa, EAGLE, transformers, papers

    @property
    def has_counterpart(self) -> bool:
        return bool(self.vllm)

    def search_text(self) -> str:
        refs = " ".join(r.path + " " + r.symbol for r in self.vllm + self.v0)
        return f"{self.minispec} {refs} {self.simplifies} {self.beyond} {self.ref}".lower()


def R(minispec: str, vllm: str, simplifies: str, beyond: str = "", v0: str = "", ref: str = "") -> Row:
    """One row; `vllm` and `v0` are space-separated paths (each may end in `::symbol`)."""
    return Row(
        minispec,
        tuple(VllmRef.parse(p) for p in vllm.split()),
        simplifies,
        beyond,
        tuple(VllmRef.parse(p, V0_VERSION) for p in v0.split()),
        ref,
    )


NONE = ""  # no vLLM counterpart

# fmt: off
ROWS: list[Row] = [
    # ---- entry point, outputs, parameters, configuration ------------------------------------------------
    R("minispec/__init__.py", "vllm/__init__.py", "Five lazily imported names (LLM, SamplingParams, SpeculativeConfig, RequestOutput, CompletionOutput)"),
    R("minispec/entrypoints/llm.py", "vllm/entrypoints/llm.py::LLM", "`LLM.generate` only (no chat, encode, beam search); prompts as str or `{\"prompt_token_ids\": ...}`; the step loop runs in the caller's thread"),
    R("minispec/outputs.py", "vllm/outputs.py::RequestOutput vllm/logprobs.py::Logprob", "One completion per request (n = 1); logprobs as plain dicts of `Logprob`"),
    R("minispec/sampling_params.py", "vllm/sampling_params.py::SamplingParams", "Only the fields the V1 sampler uses (no n, best_of, stop strings, structured output, min_tokens); a @dataclass checked in `__post_init__`, every bad value a ValueError naming field, value and range"),
    R("minispec/utils.py", "vllm/config/utils.py vllm/sampling_params.py::SamplingParams._verify_args", "Argument checks by hand (is_int, check_int, check_real, check_path), where vLLM validates its configs with pydantic and SamplingParams in `_verify_args`: a wrong type raises TypeError, a value out of range ValueError, each naming the parameter, the value and what is allowed"),
    R("minispec/config/model.py", "vllm/config/model.py::ModelConfig", "The five fields the engine reads (model, tokenizer, dtype, max_model_len, seed); local folders and `zoo:` names only, nothing from the Hub; `max_model_len=None` resolved by the engine from the checkpoint, as vLLM's ModelConfig resolves it; wrong types raise TypeError (vLLM raises pydantic errors)"),
    R("minispec/config/cache.py", "vllm/config/cache.py::CacheConfig", "block_size, num_blocks (vLLM's `num_gpu_blocks_override`) and kv_cache_memory_bytes: the KV cache sized from a byte budget, not by profiling GPU memory; no prefix caching, no cache dtype"),
    R("minispec/config/scheduler.py", "vllm/config/scheduler.py::SchedulerConfig", "max_num_seqs, max_num_batched_tokens and max_model_len (a field here, an InitVar in vLLM); no chunked-prefill thresholds, policies or async scheduling"),
    R("minispec/config/compilation.py", "vllm/config/compilation.py::CompilationConfig", "`compilation_config` reads only `inductor_compile_config` (other keys and vLLM's integer mode raise ValueError; option names and types checked against torch._inductor.config); `enforce_eager` alone picks eager or compiled"),
    R("minispec/config/speculative.py", "vllm/config/speculative.py::SpeculativeConfig", "`speculative_config` keys, n-gram defaults (5 and 5, a missing bound copies the other), suffix decoding's keys, `draft_sample_method`, `rejection_sample_method` with the synthetic keys, `enforce_eager` (the drafter's override of the engine's) and the one limit of 128 drafts as vLLM's; `method` is required and wrong types raise TypeError (vLLM infers draft_model and raises pydantic errors); the tree and head keys are checked in speculative_tree.py", beyond="V0's `disable_by_batch_size` (last in v0.9.2), and `enforce_eager=False` compiling the drafter under an eager target (vLLM's field only turns the drafter's CUDA graphs off)"),
    R("minispec/config/speculative_tree.py", NONE, "SpeculativeConfig's checks of the keys Medusa and EAGLE heads take (a mixin it inherits): token trees as rank paths, from vLLM's string of tuples or Medusa's `medusa_choices`, with `num_speculative_tokens` derived from the tree; EAGLE-2's `DynamicTreeConfig`; typical acceptance's keys; FR-Spec's `draft_vocab_size`", beyond="`acceptance_method=\"typical_acceptance_sampler\"` (V0's option, with `posterior_threshold` / `posterior_alpha`), token trees (`speculative_token_tree`, last in vLLM v0.20.2; `num_speculative_tokens` derived from the tree), EAGLE-2 knobs (`total_tokens`, `depth`, `top_k`), FR-Spec's `draft_vocab_size` (methods eagle and medusa)", ref="FasterDecoding/Medusa `medusa/model/medusa_choices.py`"),
    R("minispec/config/vllm.py", "vllm/config/vllm.py::VllmConfig", "The five configs minispec has (model, cache, scheduler, speculative, compilation) in one object, the one argument of components built as vLLM builds them; no parallel, device, load or observability configs, no `use_v2_model_runner`"),
    # ---- engine, scheduler, KV cache --------------------------------------------------------------------
    R("minispec/engine/llm_engine.py", "vllm/v1/engine/llm_engine.py::LLMEngine vllm/v1/engine/core.py::EngineCore.step vllm/v1/engine/input_processor.py vllm/v1/engine/output_processor.py", "One process: input processing, the engine core's step and output processing in one class; detokenises once, when a request finishes; `dtype=\"auto\"` as vLLM resolves it", beyond="`engine.step_records` writes every step down (chapter 8); any failure in a step aborts its requests, so the engine stays usable"),
    R("minispec/engine/input_processor.py", "vllm/v1/engine/input_processor.py::InputProcessor.process_inputs", "Checks only (LLM tokenizes): SamplingParams against the vocabulary, token ids as ints (no bools, floats or digit strings), prompt shorter than max_model_len, KV blocks for the longest request; no multimodal, LoRA or structured output", beyond="`LLM.generate` checks every prompt before queuing any, and aborts the call's requests when anything fails mid-run (vLLM aborts only the requests whose adding failed)"),
    R("minispec/worker/step_record.py", NONE, "One engine step written down when `engine.step_records` is a list (off by default): the scheduler's decisions, the flattened batch, logits_indices and SpecDecodeMetadata, num_computed_tokens before / after scheduling / after rollback, block tables, emitted tokens and drafts, seconds per phase (chapter 8)"),
    R("minispec/core/request.py", "vllm/v1/request.py::Request vllm/v1/request.py::RequestStatus", "No multimodal inputs, LoRA, structured output or priorities; six statuses (WAITING, RUNNING, PREEMPTED, FINISHED_STOPPED, FINISHED_LENGTH_CAPPED, FINISHED_ABORTED)"),
    R("minispec/core/block_pool.py", "vllm/v1/core/block_pool.py::BlockPool", "No prefix caching: a plain free-block queue"),
    R("minispec/core/kv_cache_manager.py", "vllm/v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots", "One KV cache group, no prefix-cache hits, no sliding window; rejected drafts need no bookkeeping"),
    R("minispec/core/sched/scheduler.py", "vllm/v1/core/sched/scheduler.py::Scheduler.schedule vllm/v1/core/sched/scheduler.py::Scheduler.update_from_output", "FCFS only; preemption by recompute of the newest request; drafts scheduled as vLLM's (never cut by max_tokens; tokens capped at max_model_len - num_computed_tokens - 1); rollback of rejected drafts by lowering `num_computed_tokens`; `finish_requests` for aborts"),
    R("minispec/core/sched/output.py", "vllm/v1/core/sched/output.py::SchedulerOutput", "Passes the Request objects themselves instead of new / cached per-step diffs (one process, no IPC)"),
    # ---- model runner, attention, models, loading -------------------------------------------------------
    R("minispec/worker/model_runner.py", "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner._prepare_inputs vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.execute_model", "No persistent InputBatch, CUDA graphs or async scheduling; the flattened batch is rebuilt every step; sampling and drafting happen inside `execute_model`; the speculative methods come from `spec_decode_model_runner_mixin.py`, the tree ones from `tree_verification.py`", beyond="logprobs under speculation for every emitted token"),
    R("minispec/worker/spec_decode_model_runner_mixin.py", "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner._calc_spec_decode_metadata vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.propose_draft_token_ids", "A mixin of ModelRunner (as vLLM's `lora_model_runner_mixin.py`): the drafter built from the speculative config as in GPUModelRunner.__init__, chain verification, `propose_draft_token_ids` dispatching by method; `calc_spec_decode_metadata` takes the draft ids directly instead of gathering them from input_ids, its index lists built per request in Python on the host (vLLM: numpy)", beyond="`verification_log` records every verification (chapters 3-4)"),
    R("minispec/compilation/aot.py", NONE, "A batch-1 drafting call exported (`torch.export`) and compiled by AOTInductor into a shared library: one call a step, without Dynamo's guards, AOTAutograd's and Inductor's Python wrappers, or the package's per-call spec parsing (minispec calls the loader's `boxed_run`); fixed input shapes, anything else takes `torch.compile`'s graph. Used for Medusa's heads and an EAGLE head's one-request drafting call (sizes within ranges, its KV cache written in place); vLLM replays a CUDA graph per drafting step on a GPU and has no counterpart on a CPU"),
    R("minispec/compilation/draft_model_steps.py", NONE, "A compiled draft model's greedy drafting call as one graph (`GreedyStepsInOneGraph`, installed as `compiled_propose`): the first forward and the one-token steps with their logits and argmax; at batch 1 the positions, slots and masks built inside the graph", beyond="vLLM v0.32.0 loops in Python and replays a CUDA graph per step"),
    R("minispec/compilation/eagle_drafting.py", NONE, "A compiled EAGLE head's drafting call as one graph (`EagleInOneGraph`, installed as `compiled_propose`): the first pass, every depth with its logits and top_k, and an EAGLE-2 tree's pruning as comparisons of every pair instead of sorts; for one request the metadata built in the graph, and on a CPU the graph compiled ahead of time", beyond="vLLM v0.32.0 replays a CUDA graph per drafting depth"),
    R("minispec/compilation/medusa_drafting.py", NONE, "Compiled Medusa heads' drafting call as one graph per call (`MedusaInOneGraph`, installed as `compiled_propose`): the heads, their top-k, the map to target ids and the tree's order; at batch 1 on a CPU compiled ahead of time", beyond="vLLM v0.32.0 compiles the heads' forward only"),
    R("minispec/compilation/decorators.py", "vllm/compilation/decorators.py::support_torch_compile vllm/compilation/wrapper.py vllm/platforms/cpu.py::CpuPlatform.check_and_update_config vllm/model_executor/layers/utils.py::dispatch_cpu_unquantized_gemm", "`torch.compile(dynamic=True)` on the model's forward only (compute_logits and EAGLE-3's combine_hidden_states stay eager on packed weights, as vLLM's LogitsProcessor runs outside the compiled model), with Dynamo's guards on the call's arguments and shapes only (`skip_module_and_global_guards` drops those on modules and globals; vLLM's wrapper.py drops every guard but the shape ones, since its graphs have no 0/1 variants); Inductor's freezing packs the linear weights (vLLM prepacks them for oneDNN at load); compilation_config's `inductor_compile_config` passed to torch.compile as its options (vLLM's CPU platform also sets dce, epilogue_fusion and cpp.dynamic_threads; minispec adds none to the forward's); no CUDA graphs, no compile cache, no piecewise split around attention; minispec's default is `enforce_eager=True` (vLLM's is False) because compiling each engine that a chapter or a test builds takes long on a small CPU", beyond="A private copy of the forward's code per model instance, so a call checks only its own model's graphs; `one_row_options` for a batch-1 drafting call compiled whole (a draft model's greedy steps, an EAGLE head's greedy chain): freezing off and Inductor's `decompose_mm_pass` on, so each one-row product becomes Inductor's own fused loop instead of a library call; `one_request_tree_options` for one request's EAGLE tree compiled whole: Inductor's C++ GEMMs (`max_autotune`) in float32, which vLLM's CPU defaults leave off; `int8_network_options` for a drafter with int8 layers: freezing off and `-ffp-contract=fast` (Inductor's default is off); every compiled call traced without duck sizing, and a draft model's one-request call with PyTorch's `backed_size_oblivious` (`traced_with`), so one graph serves a new prompt length, block count or batch size; a dispatched linear layer's forward traced as F.linear (`gemm_unless_traced`)"),
    R("minispec/compilation/seams.py", "vllm/compilation/decorators.py::support_torch_compile", "The one module the model runner imports from compilation/: compile a network's forward, install a compiled drafter's faster drafting call, and (`install_speed_paths`, at import) put the faster variants behind the mirror's hooks: `Int8Linear.linear_impl`, `PagedAttention.read_keys_values` and `attend`, `RotaryEmbedding.lookup`, `Medusa.residual_blocks`, the dispatched linear forward"),
    R("minispec/compilation/int8_kernels.py", NONE, "An int8 layer's product as it runs in the engine: PyTorch's int8 CPU kernel (`_weight_int8pack_mm`, bfloat16 activations and scales, input widths a multiple of 32; a custom op in a graph), and in a compiled graph with a fixed count of up to four rows, or an exported one, a multiply-and-sum in float32 that Inductor turns into loops reading the int8 weight (blocks of outputs for four sums to a loop; an exported symbolic row count padded to its bound); a symbolic count in a compiled graph takes the kernel, so the graph has no guard on it", beyond="vLLM v0.32.0 quantizes no linear layer with this shorthand"),
    R("minispec/compilation/attention_kernels.py", NONE, "Paged attention's faster variants: a view of the cache for one request whose keys are consecutive (eager; vLLM's CPU kernel reads the paged cache in place), and products and sums that Inductor runs in its own loops for a compiled graph with one or two queries per request (vLLM's CPU backend calls `cpu_attention_with_kv_cache`)"),
    R("minispec/compilation/rope_lookup.py", NONE, "RoPE's table lookup done once per eager `LlamaForCausalLM.forward` and shared by its layers (vLLM's `rotary_embedding` kernel reads its cache per layer)"),
    R("minispec/compilation/medusa_first_layers.py", NONE, "Medusa's heads in an eager engine: every head's first ResBlock layer as one Linear over their concatenated weights (vLLM runs one per head), bit for bit the head-by-head result on oneDNN's packed products"),
    R("minispec/core/kv_cache_utils.py", "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.initialize_kv_cache vllm/v1/core/kv_cache_utils.py", "The caches sized from a byte budget (no memory profiling), one [2, num_blocks * block_size, kv_heads, head_dim] tensor (keys, values) per layer, flat slots rather than vLLM's [num_blocks, block_size] split; a check that the machine has the memory"),
    R("minispec/worker/tree_verification.py", "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner", "A mixin of ModelRunner: the greedy walk of every request's tree as numpy array ops on the host (as vLLM builds attention metadata), sampled walks per request, and KV compaction by slot copies", beyond="Verifies token trees (Medusa and EAGLE trees, greedy or sampled); v0.32.0 has no tree verification (last in v0.20.2)", ref="Medusa `medusa/model/utils.py` (`tree_decoding`, `evaluate_posterior`)"),
    R("minispec/attention/decode_steps.py", "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer._update_positions_dependent_metadata vllm/v1/attention/backend.py::AttentionMetadataBuilder.build_for_drafting", "Every one-token drafting step's positions, cache slots and masks built at once on the host with numpy and copied to the device once, then sliced per step (`metadata`); vLLM advances them and rebuilds the metadata before each step"),
    R("minispec/attention/paged_attention.py", "vllm/v1/attention/backends/flash_attn.py::FlashAttentionImpl vllm/v1/attention/backends/cpu_attn.py vllm/_custom_ops.py::reshape_and_cache_flash", "Gathers each request's keys into a padded batch and calls `scaled_dot_product_attention` with a boolean mask (causal, or a tree mask among the new tokens), instead of a paged-attention kernel; the gathers and cache writes are `index_select` / `index_copy_` ; when every request has the same number of new tokens (`is_uniform_decode`, vLLM's notion of a uniform decode batch) the queries are a reshape, not a gather; the read and the product are hooks (`read_keys_values`, `attend`) behind which minispec/compilation/attention_kernels.py puts faster variants, where vLLM's CPU backend calls its one kernel, `cpu_attention_with_kv_cache`", beyond="Custom (tree) masks over a request's new tokens; v0.32.0 ships no tree attention backend. `causal_metadata(last_query_only=True)`: every new token writes its key and value, only each request's last token queries (an EAGLE head's first pass)"),
    R("minispec/model_executor/model_loader/__init__.py", "vllm/model_executor/model_loader/default_loader.py::DefaultModelLoader vllm/model_executor/model_loader/weight_utils.py::safetensors_weights_iterator", "Local folders only (and `zoo:` names), safetensors only (sharded or not); nothing is downloaded"),
    R("minispec/model_executor/model_loader/medusa_loader.py", "vllm/model_executor/model_loader/default_loader.py::DefaultModelLoader vllm/model_executor/model_loader/weight_utils.py::pt_weights_iterator vllm/model_executor/models/medusa.py::Medusa.load_weights", "One local Medusa-1 folder (`medusa_lm_head.safetensors` or the torch pickle `medusa_lm_head.pt`) read in one call, `load_medusa`; the number of heads is read from the weights (vLLM takes config.json's `medusa_num_heads`, which the published Vicuna configs understate); a malformed folder or `token_map` ends in a ValueError naming the folder", beyond="A truncated checkpoint loads (v0.32.0's loader refuses its own format unless `enable_weights_track` is off: `token_map` becomes a parameter it never reports loaded)", ref="FasterDecoding/Medusa `medusa/model/medusa_model.py`"),
    R("minispec/model_executor/layers/quantization/int8.py", "vllm/config/quantization.py vllm/model_executor/layers/quantization/online/int8.py::Int8OnlineMoEMethod._quantize_weights vllm/config/speculative.py::SpeculativeConfig", "speculative_config `quantization` takes one value, vLLM's online shorthand `int8_per_channel_weight_only`, with its per-row rule (scale = max |w| / 127, round, clamp to [-127, 127]); no quantized checkpoints, no other method, no activation quantization", beyond="vLLM v0.32.0 applies that shorthand to MoE experts only and leaves linear layers unquantized; minispec applies it to every linear layer of the drafter's own network (a draft model, an EAGLE head, Medusa's heads), never the target's. The product here is the plain formula, (x @ q^T) * scale + bias, behind a hook (`Int8Linear.linear_impl`); the engine's kernels are in minispec/compilation/int8_kernels.py"),
    R("minispec/model_executor/layers/utils.py", "vllm/model_executor/layers/utils.py::dispatch_cpu_unquantized_gemm vllm/model_executor/layers/utils.py::cpu_unquantized_gemm", "float32 and bfloat16 nn.Linear layers (bfloat16 where oneDNN has bfloat16 kernels: AVX-512, AMX or AVX-NE-CONVERT), through PyTorch's own oneDNN ops (`torch.ops.mkldnn._reorder_linear_weight`, `_linear_pointwise`) instead of vLLM's `_C` extension; no sgl-kernel path for small bfloat16 weights on AMX, no zentorch; in compiled engines only for the layers outside the compiled forward (inside, Inductor's freezing packs them)", beyond="The pack is built at a layer's first call and rebuilt when the weight is replaced or changed in place, and the original weight is kept; tests hold the packed rows bitwise independent of the batch; `min_rows` / `min_weight_numel` give the faster mix that bench.linear measures (and the engine does not use)"),
    R("minispec/model_executor/layers/rotary_embedding.py", "vllm/model_executor/layers/rotary_embedding/base.py::RotaryEmbedding", "Rotate-half RoPE without scaling variants; cos and sin as one full-width table (`cos_sin` [P, 2, 1, D]; vLLM's cos_sin_cache is half-width), looked up per layer through a hook (`lookup`) that minispec/compilation/rope_lookup.py shares within an eager forward"),
    R("minispec/model_executor/models/llama.py", "vllm/model_executor/models/llama.py::LlamaForCausalLM vllm/model_executor/models/qwen2.py vllm/model_executor/models/qwen3.py", "Plain nn.Linear (no tensor parallelism; no quantisation but a drafter's int8 layers, speculative_config `quantization`); a decoder layer can stop at some rows after its keys and values (`output_rows`, an EAGLE head's first pass); default RoPE only; Llama, Qwen2 and Qwen3 switched by the config; the MLP's SiLU-and-multiply as two PyTorch ops, the product in place outside autograd (vLLM: one `silu_and_mul` kernel, `vllm/model_executor/layers/activation.py::SiluAndMul`)"),
    R("minispec/model_executor/models/llama_eagle.py", "vllm/model_executor/models/llama_eagle.py::EagleLlamaForCausalLM", "One draft layer on minispec's paged attention; lm_head (and, unless the checkpoint has its own, embed_tokens) borrowed from the target; no tensor parallelism; no quantisation but int8 layers (speculative_config `quantization`)", beyond="`set_draft_vocab`: logits over a subset of the target's vocabulary (FR-Spec), with EAGLE-3's `d2t` convention, never saved with the head", ref="SafeAILab/EAGLE `eagle/model/cnets1.py`"),
    R("minispec/model_executor/models/llama_eagle3.py", "vllm/model_executor/models/llama_eagle3.py::Eagle3LlamaForCausalLM", "One `midlayer`; logits stay in the draft vocabulary and ids go through `d2t` (vLLM scatters logits to the full vocabulary); no parallel drafting", ref="SafeAILab/EAGLE `eagle/model/cnets.py`"),
    R("minispec/model_executor/models/medusa.py", "vllm/model_executor/models/medusa.py::Medusa", "Heads only (ResBlocks + a vocabulary projection per head, or one shared by every head under `original_lm_head`, as vLLM); vLLM's truncated vocabulary (`truncated_vocab_size`, `token_map`, -inf off the map); no tensor parallelism; saves Medusa-1 folders (`save_pretrained`; model_loader/medusa_loader.py loads them)", beyond="Under original_lm_head the heads project in one matmul, reading the shared weight once (vLLM calls it once per head); the heads' ResBlocks behind a hook (`residual_blocks`, head by head as vLLM), which minispec/compilation/medusa_first_layers.py runs as one Linear for the first layers; `set_token_map` cuts loaded heads in place, for draft_vocab_size", ref="FasterDecoding/Medusa `medusa/model/medusa_model.py`"),
    # ---- sampler -----------------------------------------------------------------------------------------
    R("minispec/sample/sampler.py", "vllm/v1/sample/sampler.py::Sampler vllm/v1/outputs.py::SamplerOutput", "Same step order, with allowed token ids, bad words, logit bias, user logits processors and penalties; only logprobs_mode \"raw_logprobs\"; no min_tokens; works on a float32 copy of the caller's logits"),
    R("minispec/sample/metadata.py", "vllm/v1/sample/metadata.py::SamplingMetadata vllm/v1/worker/gpu_input_batch.py::InputBatch", "Rebuilt from the requests every step (`SamplingMetadata.from_requests`) instead of kept in a persistent InputBatch; min_p and logit_bias are plain fields instead of stateful processors; `select_rows` carries every field for any selection (repeats allowed) and takes per-row output histories"),
    R("minispec/sample/logprobs.py", "vllm/v1/outputs.py::LogprobsTensors vllm/v1/sample/sampler.py::Sampler.gather_logprobs", "Token ids kept int64; no prompt logprobs; `batched_count_greater_than` lives in sample/ops/logprobs.py, as vLLM's"),
    R("minispec/sample/ops/topk_topp_sampler.py", "vllm/v1/sample/ops/topk_topp_sampler.py::apply_top_k_top_p vllm/v1/sample/ops/topk_topp_sampler.py::random_sample", "PyTorch path only (no FlashInfer, Triton or aiter kernels); a stable descending sort, so ties rank by token id"),
    R("minispec/sample/ops/logprobs.py", "vllm/v1/sample/ops/logprobs.py::batched_count_greater_than", "The same function, compiled with the \"eager\" backend instead of the platform's"),
    R("minispec/sample/ops/bad_words.py", "vllm/v1/sample/ops/bad_words.py::apply_bad_words vllm/v1/sample/ops/bad_words.py::apply_bad_words_with_drafts", "The same functions: a word's last token is banned where the tokens before it were just produced"),
    R("minispec/sample/logits_processor.py", "vllm/v1/sample/logits_processor/interface.py::LogitsProcessor vllm/v1/sample/logits_processor/interface.py::BatchUpdate vllm/v1/sample/logits_processor/state.py::LogitsProcessors", "A minimal container carried by SamplingMetadata; the engine loads no processors, and BatchUpdate holds plain tuples"),
    R("minispec/sample/ops/penalties.py", "vllm/v1/sample/ops/penalties.py::apply_all_penalties vllm/model_executor/layers/utils.py::apply_penalties vllm/model_executor/layers/utils.py::get_token_bin_counts_and_mask", "The bin-count helpers live in the same file; out of place"),
    R("minispec/sample/ops/builtin.py", "vllm/v1/sample/logits_processor/builtin.py::MinPLogitsProcessor vllm/v1/sample/logits_processor/builtin.py::LogitBiasLogitsProcessor", "min-p and logit bias as two functions over the step's metadata, not stateful processors tracking batch updates; no min_tokens"),
    R("minispec/worker/gpu/sample/gumbel.py", "vllm/v1/worker/gpu/sample/gumbel.py::murmur3_hash32 vllm/v1/worker/gpu/sample/gumbel.py::murmur3_uniform32 vllm/v1/worker/gpu/sample/gumbel.py::gumbel_sample", "Model Runner V2's position-keyed Gumbel-max sampling as a PyTorch reference (vLLM: Triton kernels): the same murmur3 hash of (seed, position, token id), the same float32 uniform; whole-vocabulary argmax instead of per-block maxima"),
    R("minispec/metrics/loggers.py", "vllm/v1/metrics/loggers.py::PrometheusStatLogger", "Token and speculative-decoding counters only, in a CollectorRegistry per engine (vLLM: the process-wide REGISTRY); `record_step` takes the step's requests and the runner's running totals"),
    R("minispec/metrics/reader.py", "vllm/v1/metrics/reader.py::get_metrics_snapshot", "vLLM's reader: Counter, Vector, Gauge and Histogram snapshots, of a given registry"),
    # ---- speculative decoding: verification ----------------------------------------------------------------
    R("minispec/sample/rejection_sampler.py", "vllm/v1/sample/rejection_sampler.py::RejectionSampler vllm/v1/sample/rejection_sampler.py::rejection_sample vllm/v1/sample/rejection_sampler.py::expand_batch_to_tokens vllm/v1/sample/rejection_sampler.py::generate_uniform_probs", "vLLM's forward signature (bonus sampled inside, logits at every logits_indices row, logprobs of every emitted token); the random draws are made first and handed to pure functions (`*_ref`; the greedy one is the kernel's per-request loop on host lists), which the Triton kernels match bit for bit; `backend=` picks PyTorch or Triton; synthetic mode as vLLM's MRv1 (`synthetic_conditional_rates`, the uniforms drawn before the greedy op), no bad words or allowed-token masks", beyond="`rejection_sample_method=\"block\"` hands random rows to block verification (minispec/worker/gpu/spec_decode/rejection_sampler.py), which v0.32.0 runs only in Model Runner V2. Target rows go through the sampler's whole pipeline (logit bias, penalties, min-p, top-k, top-p) before verification, so min_p and logit_bias work under speculation exactly", v0="vllm/model_executor/layers/rejection_sampler.py vllm/model_executor/layers/spec_decode_base_sampler.py"),
    R("kernels/rejection_sampler.py", "vllm/v1/sample/rejection_sampler.py::rejection_greedy_sample_kernel vllm/v1/sample/rejection_sampler.py::rejection_random_sample_kernel vllm/v1/sample/rejection_sampler.py::sample_recovered_tokens_kernel", "Compile-time flags with a dummy pointer instead of None pointers (the same code in the interpreter and compiled); correctly rounded division in the accept test; synthetic mode as vLLM's SYNTHETIC_MODE branches; no fp64 Gumbel option"),
    R("kernels/block_verification.py", "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py::_compute_cumulative_log_p_kernel vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py::_compute_local_residual_mass_kernel vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py::_rejection_kernel", "One program per request walks its drafts and streams the vocabulary in tiles for each residual mass (float64), instead of per-vocabulary-block partial kernels; the joint ratio in float32 probabilities, not log space; recovered tokens come from `sample_recovered_tokens_kernel` on the scaled target"),
    R("minispec/worker/gpu/spec_decode/rejection_sampler.py", "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py::RejectionSampler vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py::rejection_sample", "Block verification only (Model Runner V2's `use_block_verification`), as PyTorch references on MRv1's inputs (probabilities, one uniform per draft, an exponential race per request) rather than MRv2's logits and position-keyed draws; called from the MRv1 RejectionSampler", ref="Sun et al. 2024, Block Verification Accelerates Speculative Decoding (arXiv:2403.10444), Algorithm 2"),
    R("kernels/__init__.py", NONE, "Makes the top-level kernels/ folder importable as `minispec.kernels` without shadowing PyPI's unrelated `kernels` distribution"),
    R("minispec/sample/typical_acceptance.py", NONE, "Medusa's typical acceptance with RejectionSampler's output layout; a per-request Python loop; greedy rows use a one-hot target (exact greedy verification)", beyond="Typical acceptance (V0 only; no V1 counterpart), also over whole trees (`accept_tree`)", v0="vllm/model_executor/layers/typical_acceptance_sampler.py", ref="Medusa `medusa/model/utils.py` (`evaluate_posterior`)"),
    R("minispec/sample/tree_sampler.py", NONE, "Sibling-by-sibling rejection for one-hot tree drafts as a pure function over one node's probabilities, with a path walker; float64 on the host", beyond="Lossless sampled verification of token trees (EAGLE's rule); v0.32.0 has no tree verification", ref="SafeAILab/EAGLE `eagle/model/utils.py` (`evaluate_posterior`)"),
    R("minispec/spec_decode/metadata.py", "vllm/v1/spec_decode/metadata.py::SpecDecodeMetadata", "`from_draft_token_ids` (minispec's) lays out per-request draft lists as a verification step does; the builder is in the model runner's mixin", v0="vllm/spec_decode/interfaces.py"),
    R("minispec/spec_decode/utils.py", "vllm/v1/spec_decode/utils.py::unconditional_to_conditional_rates", "The one function synthetic mode needs (vLLM's file holds the proposers' helper kernels too)"),
    R("minispec/spec_decode/metrics.py", "vllm/v1/spec_decode/metrics.py::SpecDecodingStats vllm/v1/spec_decode/metrics.py::SpecDecodingLogging", "Counters, per-position draft counts and derived rates; `log_line` is SpecDecodingLogging's line (rates to 3 decimals); `prometheus_counters()` gives the values under vLLM's Prometheus names (no Prometheus client)", beyond="V0's `draft_acceptance_rate` and `system_efficiency` (token trees count per depth in a subclass: minispec/trees/metrics.py)", v0="vllm/spec_decode/metrics.py"),
    # ---- speculative decoding: proposers ---------------------------------------------------------------------
    R("minispec/spec_decode/ngram_proposer.py", "vllm/v1/spec_decode/ngram_proposer.py::NgramProposer", "vLLM's KMP-style scan over the reversed tokens, function for function (`batch_propose`, `batch_propose_numba`, `_find_longest_matched_ngram_and_propose_tokens`), in plain Python instead of numba: serial, no threads; `propose(num_speculative_tokens, sampled_token_ids, num_tokens_no_spec, token_ids_cpu)` as vLLM's, the arrays packed from the requests each step (`pack_token_ids`)", v0="vllm/spec_decode/ngram_worker.py"),
    R("minispec/spec_decode/suffix_decoding.py", "vllm/v1/spec_decode/suffix_decoding.py::SuffixDecodingProposer", "vLLM's `propose` step for step: a request's trees start when it first samples, grow by its sampled tokens, draft from its last max_tree_depth tokens (0 to num_speculative_tokens per step), and its prompt tree goes once it leaves the batch; `input_batch` is a `SuffixInputBatch` of the five InputBatch fields `propose` reads, built by the model runner each step with its rows in the persistent batch's order (`BatchRows`: holes, lowest-first refill, condense), since earlier rows' tokens reach the global tree first; the cache is minispec's Python mirror of Arctic Inference's, so no `arctic-inference` install (vLLM raises ImportError without it); the drafter also runs where vLLM's `_input_fits_in_drafter` would skip the whole batch (a request within num_speculative_tokens of max_model_len)", ref="Arctic Inference 0.1.1 (arctic_inference/suffix_decoding/cache.py); Oliaro et al., SuffixDecoding, arXiv 2411.04975"),
    R("minispec/arctic_inference/suffix_decoding.py", NONE, "Arctic Inference 0.1.1's SuffixTree (csrc/suffix_decoding/suffix_tree.cc) and SuffixDecodingCache (cache.py), which vLLM v0.32.0's suffix proposer imports: the same speculation rule (every match length of the context's end, greedy by child count, cut by min_token_prob and max_spec_factor, best score wins, prompt tree before global tree on a tie), float32 arithmetic and order of equal-count children, so the same drafts (tests/peer/test_suffix_vs_arctic.py); an uncompressed trie in Python (one node per token and depth: about 3 KB per stored token at depth 24, where Arctic's compressed chains take O(1)) with a child list per node where Arctic keeps count-ordered sibling groups in C++; path speculation only (no `use_tree_spec`)", ref="Arctic Inference 0.1.1 (csrc/suffix_decoding/suffix_tree.cc, arctic_inference/suffix_decoding/cache.py)"),
    R("minispec/spec_decode/llm_base_proposer.py", "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.propose vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.set_inputs_first_pass vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer._sample_draft_tokens", "The drafting loop of the draft model (and, next, EAGLE): one causal first pass over each request's uncached entries, then one-token steps whose positions, slots and masks are built once per call (`DecodeSteps`); requests arrive with their new tokens, not as the target's flattened batch; no padding, no CUDA graphs; a compiled drafter may install a faster call of the same drafts at one seam (`compiled_propose`)"),
    R("minispec/spec_decode/draft_model.py", "vllm/v1/spec_decode/draft_model.py::DraftModelProposer", "A thin subclass of SpecDecodeBaseProposer, as vLLM's; its own paged cache, rolled back by comparing cached and accepted tokens (vLLM's draft shares the target's block table); no heterogeneous vocabularies; `draft_sample_method` greedy (default) or probabilistic; drafts k whatever max_tokens says"),
    R("minispec/spec_decode/medusa.py", "vllm/v1/spec_decode/medusa.py::MedusaProposer", "Reads the hidden state at each request's last accepted token, handed over by the model runner; ranks over the draft vocabulary, then maps ids through `token_map` (vLLM ranks -inf-filled full-vocabulary logits)", beyond="Trees in a subclass (minispec/trees/medusa_tree_proposer.py); speculative_config `draft_vocab_size` (FR-Spec) on heads that share one projection; compiled heads draft in one graph per call (heads, argmax or a tree's top-k, id mapping: `draft_token_ids`), at batch 1 on a CPU compiled ahead of time by AOTInductor (vLLM compiles the heads' forward and takes each argmax eagerly)", v0="vllm/spec_decode/medusa_worker.py"),
    R("minispec/spec_decode/eagle.py", "vllm/v1/spec_decode/eagle.py::EagleProposer", "A thin subclass of SpecDecodeBaseProposer that passes hidden states to the model, as vLLM's; a chain runs the base's loop. The head keeps its own paged KV cache and commits entries as the target's features arrive; `draft_sample_method` as vLLM's", beyond="Trees in a subclass (minispec/trees/eagle_tree_proposer.py). The first pass runs past fc and the qkv product only at each request's last entry (`last_query_only`; vLLM runs every entry through the head and keeps the last rows)"),
    R("minispec/spec_decode/dynamic/utils.py", "vllm/v1/spec_decode/dynamic/utils.py::validate_and_normalize_dynamic_sd_schedule vllm/v1/spec_decode/dynamic/utils.py::build_dynamic_sd_schedule_lookup", "The same two functions and rules (messages name the key); the scheduler builds the dense lookup once and each step drafts lookup[batch size] tokens"),
    R("minispec/model_executor/model_loader/draft_vocab.py", NONE, "speculative_config `draft_vocab_size` for EAGLE-1 heads and Medusa heads with one shared projection: the most frequent tokens of the head folder's token_counts.json, ranked", beyond="FR-Spec's frequency-ranked draft vocabulary for heads that share the target's lm_head or a copy of it (v0.32.0 has a draft vocabulary only where the checkpoint fixes it: EAGLE-3's `d2t`, Medusa's `token_map`)", ref="thunlp/FR-Spec (Zhao et al., 2025)"),
    R("minispec/trees/eagle_tree.py", NONE, "What an EAGLE tree step is made of: the tree a step drafted (`DraftTree`, and EAGLE-2's expansion before pruning), one depth's batched forward over all requests with a tensor-built tree mask (`run_depth`), EAGLE-2's expansion (`grow_tree`; a compiled head's greedy chain grows as a tree of top_k 1) and its best nodes kept and renumbered on the host (`keep_best`)", beyond="EAGLE-2 dynamic trees (no vLLM release has them); static trees (vLLM's `propose_tree`, last in v0.20.2)", ref="SafeAILab/EAGLE `eagle/model/cnets.py` (`topK_genrate`)"),
    R("minispec/trees/eagle_tree_proposer.py", NONE, "EagleTreeProposer, a subclass of the chain EagleProposer (same head, cache and first pass): static trees from rank paths and EAGLE-2 dynamic trees (total_tokens, depth, top_k), every depth one batched forward; hands the model runner each request's tree (`spec_tree_for`); every step's tree can be kept for inspection (`tree_log`)", beyond="Token trees: v0.32.0's EagleProposer drafts chains only (static trees were last in v0.20.2; no vLLM release has EAGLE-2)", ref="SafeAILab/EAGLE `eagle/model/cnets.py` (`topK_genrate`)"),
    R("minispec/trees/medusa_tree_proposer.py", NONE, "MedusaTreeProposer, a subclass of the chain MedusaProposer: each node is its head's candidate of its rank (every head's top-k placed by `tree_indices`), the whole tree drafted in one call on the target's hidden state", beyond="Medusa's tree mode; v0.32.0's MedusaProposer drafts a chain (each head's argmax)", ref="FasterDecoding/Medusa `medusa/model/utils.py` (`generate_candidates`)"),
    R("minispec/trees/metrics.py", NONE, "TreeDecodingStats, a subclass of SpecDecodingStats (`vllm/v1/spec_decode/metrics.py`) that the model runner builds for token trees: nodes verified and accepted paths per depth, nodes per step, per-depth rates in the log line; vLLM's counters keep their meaning", beyond="Statistics of token trees (v0.32.0 counts chains only)"),
    R("minispec/trees/spec_tree.py", NONE, "A tree is a parent list; ancestor masks from the parents as bitsets (one integer operation per node), the greedy walk as numpy array ops on the host, one step per tree level; retrieve and tree indices; the accepted path's KV copied onto consecutive slots (`compact_kv_cache`)", beyond="Token trees (vLLM's string-of-tuples syntax is accepted); v0.32.0 has neither `speculative_token_tree` nor a tree attention backend", ref="FasterDecoding/Medusa `medusa/model/utils.py` (`generate_medusa_buffers`)"),
    # ---- teaching helpers (no counterpart) ----------------------------------------------------------------------
    R("minispec/concordance.py", NONE, "This table as data: rows, permalinks, the markdown generator and its staleness check (chapter 7)"),
    R("minispec/concordance_refs.py", NONE, "A vLLM reference (release path, optional symbol) and its GitHub permalink, shared by the concordance's two tables (chapter 7)"),
    R("minispec/concordance_mrv2.py", NONE, "The concordance's Model Runner V2 side as data: each mirrored module's and function's counterpart in `vllm/v1/worker/gpu/` (or why none), and the v0.32.0 files v0.34.0 removed (chapter 7)"),
    R("minispec/teach/theory.py", NONE, "Leviathan et al.'s E, E / (k c + 1) and E / (k c + v); acceptance rate and per-position acceptance from alpha; Wilson intervals; Pearson chi-square test", ref="Leviathan et al. 2023, section 3"),
    R("minispec/teach/toy.py", NONE, "One position of speculative sampling in numpy: draw from q, accept with min(1, p/q), else draw from norm(max(p - q, 0)); teaches what `rejection_random_sample_kernel` does per position"),
    R("minispec/teach/block_verification.py", NONE, "Standard vs block verification computed exactly by enumerating a small chain's draft blocks (E[accepted], thresholds, the first two emitted tokens), the two-token worked example, an interval for the mean acceptance length from the counters, the zoo measurement and a verdict decided from its intervals (chapter 2)", ref="Sun et al. 2024, Block Verification Accelerates Speculative Decoding (arXiv:2403.10444)"),
    R("minispec/teach/walkthrough.py", NONE, "One speculative step taken apart with plain Hugging Face forwards; the decision is the production `rejection_sample`, every intermediate kept for display (chapter 2)"),
    R("minispec/teach/sampler_stages.py", NONE, "The V1 sampler taken apart for one request: the distribution after each step of `Sampler`'s pipeline, from the production ops (chapter 6)"),
    R("minispec/teach/seeded_sampling.py", NONE, "Chapter 6's measured checks: MRv1's exponential race and MRv2's position-keyed Gumbel-max draw from the same distribution; verifying a one-hot draft against the request's own keyed draw accepts and resamples as the standard rule does; a seeded request's tokens alone, batched and under speculation (`seeded_runs`)"),
    R("minispec/teach/tree_theory.py", NONE, "Expected tokens per step of a token tree and the best tree of n nodes from per-depth, per-rank acceptance (Medusa's and Sequoia's model; chapters 3 and 4)"),
    R("minispec/teach/kernel_grid.py", NONE, "The rejection sampler's Triton launches as data (grids, programs, vocabulary tiles), recorded from the production path on meta tensors; the GPU reference run's timings as 95% intervals (chapter 6)"),
    R("minispec/teach/traces.py", NONE, "Medusa / EAGLE verification steps recorded as data from two engine hooks that are off by default: proposals, target logits, accepted paths (chapters 3 and 4)"),
    R("minispec/teach/batch_expansion.py", NONE, "V0's two ways to score k + 1 positions, through minispec's model on the paged cache: k + 1 single-token sequences sharing the context (`BatchExpansionTop1Scorer`) or one sequence with k + 1 queries (`MQAScorer`, V1's way); same logits, timed in turns with 95% intervals (chapter 7)", v0="vllm/spec_decode/batch_expansion.py vllm/spec_decode/mqa_scorer.py"),
    R("minispec/teach/call_trace.py", NONE, "A sys.setprofile tracer that records the call tree of minispec's own functions during a call, e.g. one engine step from `LLM.generate` to `Scheduler.update_from_output` (chapter 7)"),
    R("minispec/teach/lifecycle.py", NONE, "Drives an engine step by step and records every request's status (WAITING, RUNNING, PREEMPTED, FINISHED_*) from `llm.llm_engine.scheduler` (chapter 7)"),
    R("minispec/teach/exercises/__init__.py", NONE, "The exercise registry of all chapters: `check(key, answer)` in a notebook cell, solutions behind `show_solution(key)`"),
    R("minispec/teach/exercises/ch00.py", NONE, "Chapter 0's exercises: reading the SpecDecoding log line (the counters of `vllm/v1/spec_decode/metrics.py`)"),
    R("minispec/teach/exercises/ch01.py", NONE, "Chapter 1's exercises: ridge point, memory-bound tokens, KV bytes, from `minispec.teach.accelerators`"),
    R("minispec/teach/exercises/ch02.py", NONE, "Chapter 2's exercises: acceptance probability, tokens per step, ideal speedup, acceptance rate; write accept/residual for one position (checked against `minispec.teach.toy`); break losslessness by reporting a wrong q (chi-square)"),
    R("minispec/viz/sampler.py", NONE, "Chapter 6's figures: sampler stages as small multiples, min-p's order, the exponential race, SamplingMetadata as a table, the rejection sampler's output grid and parse_output, program grids and tiles, GPU timings against the memory floor"),
    R("minispec/viz/mrv2.py", NONE, "The chapters' Model Runner V2 boxes (a table per box generated from minispec/concordance_mrv2.py, checked against every notebook) and chapter 7's figure of MRv1's files beside their MRv2 counterparts, with the files v0.34.0 removed"),
    R("minispec/viz/verification_rules.py", NONE, "Figures of chapters 2 and 6: MRv1's race against MRv2's keyed Gumbel-max, the keyed against the standard verification rule, a seeded request's tokens across runs, block verification's worked example and its zoo measurement with intervals and n"),
    R("minispec/teach/medusa_accuracy.py", NONE, "Medusa head accuracy per head and rank on held-out zoo text, hidden states from minispec's own model (chapter 3)"),
    R("minispec/teach/calibration.py", NONE, "EAGLE draft-score calibration: buckets of draft probability against the share the target accepted, with counts (chapter 4)"),
    R("minispec/teach/provenance.py", NONE, "Per-token provenance of a generation (prefill, accepted at depth d, recovered, bonus, plain) from the step recorder and the verification log; vLLM only counts (`vllm/v1/spec_decode/metrics.py`)"),
    R("minispec/teach/exercises/ch03.py", NONE, "Chapter 3's exercises: a tree's parents, positions and retrieve indices; its expected acceptance length; the next greedy node"),
    R("minispec/teach/exercises/ch04.py", NONE, "Chapter 4's exercises: EAGLE-2's frontier and kept set from a score table; draft ids mapped through `d2t`"),
    R("minispec/teach/exercises/ch05.py", NONE, "Chapter 5's exercises: predict the winner on a copy-heavy prompt; a speedup from E, c and v; the batch size where speculation stops paying"),
    R("minispec/teach/exercises/ch06.py", NONE, "Chapter 6's exercises: top-k then top-p survivors, min-p's cut-off, the recovered-token kernel's grid, the greedy rejection rule checked against `rejection_greedy_sample_ref`"),
    R("minispec/teach/exercises/ch07.py", NONE, "Chapter 7's exercises: which minispec file and which vLLM file to edit for a change; batch expansion's sequence count"),
    R("minispec/teach/exercises/ch08.py", NONE, "Chapter 8's exercises: num_scheduled_tokens under a budget, num_computed_tokens after a rollback, slot_mapping, logits_indices, each computed by the engine's own code"),
    # ---- figures (no counterpart) -------------------------------------------------------------------------------
    R("minispec/viz/notebook.py", NONE, "The fast-mode switch (`MINISPEC_FAST=1`) and numeric answer checks every chapter uses"),
    R("minispec/viz/course_map.py", NONE, "Chapter 0's course map: chapters, the vLLM v0.32.0 files each walks through, one engine step drawn as boxes"),
    R("minispec/viz/widgets.py", NONE, "interactive_or_static: ipywidgets with a front-end, one static figure otherwise; MINISPEC_STATIC=1 forces static, MINISPEC_WIDGETS=1 forces widgets (also under MINISPEC_FAST), FAST alone or no kernel is static"),
    R("minispec/viz/engine_flow.py", NONE, "Chapter 8's figures from the step records: one step as a Gantt chart by phase, token-budget bars, the flattened batch as a strip (positions, slot_mapping, logits rows), the block table over steps, num_computed_tokens through rollback and preemption; `run_engine_flow` steps the demo by hand"),
    R("minispec/viz/env.py", NONE, "Chapter 0's report of versions, cores, accelerator and zoo models; a short cousin of `vllm/collect_env.py`"),
    R("minispec/viz/tokens.py", NONE, "Coloured tokens of one speculative step as HTML (accepted, rejected, recovered, bonus): what `vllm/v1/spec_decode/metrics.py` counts, drawn"),
    R("minispec/viz/roofline.py", NONE, "Chapter 1's figures (matmul scaling per dtype, roofline, forward time with memory floor, decode prediction with KV and capacity) and the sentences computed from the reader's measurements"),
    R("minispec/viz/speculation.py", NONE, "Chapter 2's idealised figures: the toy sampler's histogram and Leviathan's curves"),
    R("minispec/viz/draft_verify.py", NONE, "Chapter 2's traced-step HTML and bars, flattened-batch / SpecDecodeMetadata index figure, rejection experiment, per-position acceptance with 95% intervals; verification and draft costs, tokens per step and speedup against k with 95% intervals beside a reference run"),
    R("minispec/viz/trees.py", NONE, "Chapters 3 and 4's figures of token trees: the tree, its mask and buffers, KV compaction, EAGLE-2's expansion, per-depth acceptance"),
    R("minispec/viz/intervals.py", NONE, "Error bars and the n beside them, drawn the same way in every chapter for each plotted speed, ratio or rate"),
    R("minispec/viz/source.py", NONE, "`show_code`: a core algorithm's source as a cell output, linked to the matching vLLM v0.32.0 lines (chapters 2-8)"),
    R("minispec/viz/vllm_lines.py", NONE, "Line numbers of the v0.32.0 functions the chapters link, written from a source tree by `python -m minispec.viz.source --add` and checked against it by a test"),
    R("minispec/viz/crossover.py", NONE, "Chapter 5's crossover and suffix figures: tokens per second against batch size with 95% intervals and n beside the forward curve's flat part, schedule against always and never speculating, suffix against n-gram lookup on first and repeated tasks; the cost table"),
    R("minispec/viz/taxonomy.py", NONE, "Chapter 5's figures: tokens per forward against step cost with iso-speedup contours, speedup by category and batch size (measured and projected), per-depth acceptance, the provenance token strip"),
    R("minispec/viz/components.py", NONE, "Chapter 7's figures: minispec's tree beside vLLM V1's and V0's, the searchable concordance, scoring times, the call tree of one step, a request lifecycle"),
    # ---- benchmarks (no counterpart file, or vLLM's benchmark CLI) ------------------------------------------------
    R("minispec/bench/roofline.py", NONE, "Chapter 1's microbenchmarks: decode-like matmul t(M) per dtype, read and copy bandwidth, peak FLOP/s, arithmetic intensity, CPU bf16-instruction detection; every sample kept, candidates timed in turns, for 95% intervals"),
    R("minispec/teach/accelerators.py", NONE, "Datasheet roofs of four GPUs and Llama shapes; a decode step as max((weights + KV) / bandwidth, 2 params tokens / peak), KV bytes 2 x layers x kv_heads x head_dim x bytes x context x batch, capacity check at `gpu_memory_utilization`"),
    R("minispec/bench/model_forward.py", NONE, "Times one forward over M new tokens on a cached context through the model runner (chapter 1's curve), and splits the one-token forward into its matmuls alone, the rest alone and what they cost together"),
    R("minispec/bench/linear.py", NONE, "Times each linear-layer shape, and a whole forward, with F.linear, with every matmul on packed oneDNN weights (the engine's dispatch) and with the faster mix that packs only multi-row calls of larger weights"),
    R("minispec/bench/engine.py", "vllm/benchmarks/throughput.py", "Decode tokens/s against transformers' `generate` in the same process, as a ratio"),
    R("minispec/bench/cold_start.py", NONE, "The cold start that bench.spec_decode reports: a fresh engine's first generations on held-out prompts of new lengths, and the graphs Dynamo compiled after the warm-up"),
    R("minispec/bench/spec_decode.py", "vllm/benchmarks/throughput.py", "Every method (draft_model, ngram at k = 4 and k = 8, Medusa chain and tree, EAGLE chain, EAGLE-2 tree, EAGLE-3 chain and tree) at float32 and the default dtype, batch 1 and 16: E, tokens per decode step, the measured c and v from the step recorder, the decode steps' prediction and the run's (prefills included), speedup, efficiency (plain and speculative engines taking turns call by call) and greedy agreement with plain decoding; the CPU it ran on first"),
    R("minispec/bench/spec_sweep.py", "vllm/benchmarks/latency.py", "Greedy batch-1 sweep over k through the engine: acceptance counters, plain and speculative runs of the same prompt timed in turns (every pair kept), forward costs c and v(k) timed in turns, an output-equality check; `--reference` writes chapter 2's reference run (docs/data/spec_sweep_zoo_cpu.json)"),
    R("minispec/bench/draft_steps.py", NONE, "A compiled draft model's greedy steps as one compiled graph against the per-step loop, with its one-row products in Inductor's own loops (the default), as packed library calls (freezing on) and with `compilation_config` max_autotune (Inductor's C++ GEMMs); four engines in one process taking turns with plain decoding: speedup and the drafting call's time"),
    R("minispec/bench/medusa.py", NONE, "Mean acceptance length of Medusa chain vs tree (and typical acceptance) on held-out zoo prompts, greedy, plus a tree chosen from the heads' per-rank accuracies measured on the target's greedy continuations of held-out prompts (`measured_tree()`)"),
    R("minispec/bench/eagle_steps.py", NONE, "A compiled EAGLE head's drafting call compiled ahead of time (the default on a CPU), the same lean call (first pass past its keys and values at the last entry only, metadata built in the graph) through torch.compile, the metadata built on the host, and every first-pass entry through the whole layer; four engines in one process taking turns with plain decoding: speedup, the drafting call's time and c"),
    R("minispec/bench/medusa_steps.py", NONE, "Compiled Medusa heads' drafting call at batch 1 compiled ahead of time by AOTInductor (the default on a CPU) against the same call through torch.compile; two engines in one process taking turns with plain decoding: speedup, the drafting call's time and c"),
    R("minispec/bench/eagle.py", "vllm/benchmarks/throughput.py", "Batch-1 greedy mean acceptance length of EAGLE-1/2/3 next to the draft-model pair, with an output-equality check"),
    R("minispec/bench/eagle_tree.py", NONE, "Beyond vLLM (no token trees in v0.32.0): a grid of EAGLE-2 tree shapes (total_tokens, depth, top_k), each a row of bench.spec_decode (E, c, v, prediction, speedup against plain in the same process), eager or with the head's tree compiled (`--compiled`), best first; bench.spec_decode's EAGLE-2 shape comes from it"),
    R("minispec/bench/rejection_sampler_gpu.py", NONE, "The rejection sampler's kernels on a GPU: exactness against the reference, time against the reference and the memory floor, a CSV of means and a JSON of every sample (taken in turns) to docs/data"),
    R("minispec/bench/gpu_all.py", NONE, "One command for a lent GPU: kernel checks and timings, roofline, forward times, CUDA exactness of every speculative method"),
    R("minispec/bench/vs_vllm.py", NONE, "Runs minispec and real vLLM (CPU build in .venv-vllm, subprocess `peer/vllm_job.py --serve`) on the same prompts and speculative_config, both loaded side by side and taking turns call by call: tokens, every verification step, counters, log line, metric names, tok/s"),
    R("minispec/bench/taxonomy.py", "vllm/benchmarks/datasets/datasets.py", "A mini Spec-Bench (vLLM's `SpecBench` dataset class): every method on one API and one held-out prompt set in four task categories (code, copy-heavy edit, docstring to code, free text) at batch 1 and larger; E, tokens per forward, nodes, draft and verification cost, tok/s, speedup, what each method needs"),
    R("minispec/teach/taxonomy.py", NONE, "Chapter 5's methods (one speculative config each) and its workload: held-out prompts in four categories; bench.taxonomy runs them"),
    R("minispec/teach/spec_costs.py", NONE, "Chapter 2's costs with 95% intervals: the draft's cost c, the verification cost v(k), tokens per step E and the measured speedup, against Leviathan et al.'s E / (k c + v(k)); the chapter's verdicts decided from them"),
    R("minispec/teach/spec_timing.py", NONE, "Engines decoding the same prompts in turns at batch 1, every call's seconds and every step's phase seconds kept (chapters 3 and 4)"),
    R("minispec/teach/token_stream.py", NONE, "Plain and speculative decoding of one prompt side by side, each token's fate (accepted, rejected, recovered, bonus) read from the engine's step records (chapter 0)"),
    R("minispec/teach/tree_verdicts.py", NONE, "Chapters 3 and 4's verdict sentences (chain against tree, per depth, against the independence model, a forward at k tokens against one) decided from 95% intervals"),
    R("minispec/teach/stats.py", NONE, "95% intervals (Student t, the ratio estimator's delta method, Wilson) and verdicts decided from them; a timer that runs candidates in turns so load falls on all alike (every chapter's measured sentences)"),
    R("minispec/teach/crossover.py", NONE, "Where speculation stops paying on the reader's machine: engines taking turns step by step, tokens per second over decode steps with a 95% ratio-estimator interval, chapter 2's C and v per batch size, chapter 1's forward curve from the same steps; a `num_speculative_tokens_per_batch_size` schedule derived from the intervals (the smaller k where they overlap) and a verdict against always and never speculating; suffix decoding on tasks seen once and asked again (chapter 5)"),
    R("minispec/teach/projection.py", NONE, "Beyond vLLM: the measured acceptance per depth carried onto an H100 / H200 roofline for a 7B-class target at batch 1..256 (where speculation stops paying), drafters sized for it, every assumption printed; GPU measurements in docs/data replace it"),
    # ---- the model zoo (no counterpart: vLLM serves models trained elsewhere) --------------------------------------
    R("minispec/zoo/__init__.py", NONE, "`zoo.path(name)` and `zoo.resolve(\"zoo:target\")`: models shipped inside the package, so nothing downloads"),
    R("minispec/zoo/configs.py", NONE, "Two fixed Llama shapes (target and a much cheaper draft)", ref="transformers `models/llama/configuration_llama.py`"),
    R("minispec/zoo/trees.py", NONE, "The Medusa token trees used with the zoo's heads, in vLLM's string-of-tuples syntax", ref="FasterDecoding/Medusa `medusa/model/medusa_choices.py`"),
    R("minispec/zoo/corpus.py", NONE, "Training text is the interpreter's own standard library source; the held-out split fixed by sha256 of each file's path; deterministic code-completion prompts"),
    R("minispec/zoo/tokenizer.py", NONE, "One 4096-entry byte-level BPE shared by every zoo model, saved as a PreTrainedTokenizerFast"),
    R("minispec/zoo/train.py", NONE, "Time-boxed CPU training of the target and a draft distilled from it, with transformers' LlamaForCausalLM"),
    R("minispec/zoo/train_medusa.py", NONE, "Time-boxed CPU training of Medusa-1 heads on the frozen target; `--original-lm-head` trains the ResBlocks only, against the target's lm_head; `--self-distill N` trains on N windows continued by the target's own greedy tokens (Medusa-2's self-distillation; how zoo:medusa is trained)", ref="FasterDecoding/Medusa `medusa/train/train.py`"),
    R("minispec/zoo/token_counts.py", NONE, "Counts the zoo tokenizer's tokens over the training split into the EAGLE-1 and Medusa folders' token_counts.json (what draft_vocab_size ranks)"),
    R("minispec/zoo/train_eagle.py", NONE, "Time-boxed CPU training of EAGLE-1 / EAGLE-3 heads on the target's own hidden states", ref="SafeAILab/EAGLE `eagle/train/`, `eagle/traineagle3/`"),
    R("minispec/zoo/evaluate.py", NONE, "Offline greedy acceptance per position and held-out perplexity with transformers, no engine (vLLM counts acceptance online in `vllm/v1/spec_decode/metrics.py`)"),
]
# fmt: on


@dataclass(frozen=True)
class Difference:
    """A behaviour where minispec and vLLM v0.32.0 differ on purpose."""

    title: str
    detail: str
    minispec: tuple[str, ...] = ()
    vllm: tuple[VllmRef, ...] = field(default_factory=tuple)


def D(title: str, detail: str, minispec: str = "", vllm: str = "") -> Difference:
    return Difference(title, detail, tuple(minispec.split()), tuple(VllmRef.parse(p) for p in vllm.split()))


KNOWN_DIFFERENCES: list[Difference] = [
    D(
        "Seeded requests draw with position-keyed noise",
        "A request with a seed samples by Gumbel-max with noise hashed from (seed, position, token id), MRv2's "
        "noise, and its drafts are verified against that draw (accepted iff equal, else the draw is emitted): for "
        "one-hot drafts this is rejection sampling itself, and the tokens equal plain decoding's whatever the "
        "batch, the preemptions or the method. MRv1 draws a seeded request's numbers from its torch.Generator, a "
        "stream, so its tokens shift with the schedule. Unseeded requests follow MRv1 unchanged.",
        "minispec/worker/gpu/sample/gumbel.py minispec/sample/sampler.py minispec/sample/rejection_sampler.py "
        "minispec/worker/tree_verification.py",
        "vllm/v1/sample/sampler.py::Sampler.sample vllm/v1/worker/gpu/sample/gumbel.py::gumbel_sample",
    ),
    D(
        "A minimal VllmConfig",
        "It holds the five configs minispec has (model, cache, scheduler, speculative, compilation), no parallel or "
        "observability configs; components built from it (`NgramProposer(vllm_config)`) take it as vLLM's do.",
        "minispec/config/vllm.py",
        "vllm/config/vllm.py::VllmConfig",
    ),
    D(
        "Token arrays packed each step",
        "The model runner packs each request's tokens into vLLM's `token_ids_cpu` / `num_tokens_no_spec` arrays every "
        "step (`pack_token_ids`) where vLLM's InputBatch keeps them across steps; `num_tokens_threshold` and "
        "`num_numba_thread_available` exist and change nothing (plain Python, no numba threads).",
        "minispec/spec_decode/ngram_proposer.py",
        "vllm/v1/worker/gpu_input_batch.py::InputBatch vllm/v1/spec_decode/ngram_proposer.py::NgramProposer",
    ),
    D(
        "Prometheus registry per engine, fewer metrics",
        "Each engine counts in a CollectorRegistry of its own (a notebook or a test suite holds many LLMs); vLLM "
        "uses the process-wide REGISTRY and unregisters the previous engine's metrics. Only the token and "
        "speculative-decoding counters.",
        "minispec/metrics/loggers.py",
        "vllm/v1/metrics/loggers.py::PrometheusStatLogger",
    ),
    D(
        "Top-k and top-p on the PyTorch path, a stable sort",
        "`apply_top_k_top_p` always takes vLLM's PyTorch path (no FlashInfer or Triton top-k/top-p kernels); top-p "
        "sorts descending and stably, so ties rank by token id as argmax does (vLLM: an ascending, unstable sort); "
        "`random_sample` leaves `probs` unchanged (vLLM divides it in place).",
        "minispec/sample/ops/topk_topp_sampler.py",
        "vllm/v1/sample/ops/topk_topp_sampler.py::apply_top_k_top_p",
    ),
    D(
        "The sampler works on a float32 copy",
        "The caller's logits are never changed (vLLM's `.to(float32)` and the steps after it write in place); only "
        'logprobs_mode "raw_logprobs", no `logprob_token_ids`, thinking budget or min_tokens; at draft positions '
        "the rejection sampler applies no user logits processors (vLLM applies only min_tokens there).",
        "minispec/sample/sampler.py minispec/sample/rejection_sampler.py",
        "vllm/v1/sample/sampler.py::Sampler",
    ),
    D(
        "Bad-word ids checked against the vocabulary in verify",
        "Hugging Face tokenizers have no `max_token_id`, so the check of `update_from_tokenizer` moves to "
        "`SamplingParams.verify(vocab_size)`, which the engine calls for every request.",
        "minispec/sampling_params.py",
        "vllm/sampling_params.py::SamplingParams.update_from_tokenizer",
    ),
    D(
        "Triton or PyTorch per call, asserts for invariants",
        '`RejectionSampler(backend=...)` and `use_backend("triton")` pick the Triton kernels or their PyTorch '
        "references (vLLM always runs Triton); internal invariants are asserts as in vLLM, while user input still "
        "gets a ValueError naming the parameter.",
        "minispec/sample/rejection_sampler.py",
        "vllm/v1/sample/rejection_sampler.py::RejectionSampler",
    ),
    D(
        "disable_by_batch_size",
        "minispec keeps V0's switch (speculate while fewer requests than the threshold are scheduled); v0.32.0 has "
        "no such key (its nearest is num_speculative_tokens_per_batch_size) and refuses it.",
        "minispec/config/speculative.py minispec/worker/model_runner.py",
        "vllm/config/speculative.py::SpeculativeConfig",
    ),
    D(
        "Keys vLLM v0.32.0 has and minispec refuses",
        "A config without `method` (vLLM infers draft_model) and ngram with a `model` (vLLM ignores it): minispec "
        "raises a ValueError naming the key. `rejection_sample_method` and the synthetic keys are taken with "
        "vLLM's rules; minispec also refuses a non-standard method with token trees or typical acceptance.",
        "minispec/config/speculative.py",
        "vllm/config/speculative.py::SpeculativeConfig",
    ),
    D(
        "Block verification in the MRv1 path",
        'v0.32.0 implements `rejection_sample_method="block"` only in Model Runner V2 (its MRv1 rejection sampler '
        "ignores the value and verifies token by token, as the CPU build does); minispec's MRv1 RejectionSampler "
        "hands random rows to its block reference on MRv1's draws (a uniform per draft, one exponential race per "
        "request), so the accepted lengths and tokens differ draw for draw from MRv2's but follow the same law.",
        "minispec/sample/rejection_sampler.py minispec/worker/gpu/spec_decode/rejection_sampler.py",
        "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py::RejectionSampler",
    ),
    D(
        "Where the statistics are counted",
        "vLLM counts SpecDecodingStats in the scheduler's update_from_output; minispec counts the same numbers in "
        "the model runner, from the rejection sampler's output before the stop checks (equal counters, checked by "
        "tests/peer).",
        "minispec/worker/model_runner.py minispec/spec_decode/metrics.py",
        "vllm/v1/core/sched/scheduler.py::Scheduler.update_from_output",
    ),
    D(
        "min_p and logit_bias under speculation",
        "minispec applies them to every target row before verification, so speculative output follows the same "
        "distribution as plain sampling; vLLM refuses both when a speculative config is set.",
        "minispec/sample/rejection_sampler.py",
        "vllm/sampling_params.py::SamplingParams._validate_spec_decode",
    ),
    D(
        "Token trees",
        "minispec verifies Medusa trees and EAGLE static and EAGLE-2 dynamic trees, greedily or by EAGLE's "
        "sibling-by-sibling rejection sampling at temperature > 0; v0.32.0 has no tree speculation at all (no "
        "`speculative_token_tree`, no tree attention backend; Medusa and EAGLE draft chains).",
        "minispec/trees/spec_tree.py minispec/trees/eagle_tree.py minispec/trees/eagle_tree_proposer.py "
        "minispec/trees/medusa_tree_proposer.py minispec/sample/tree_sampler.py",
        "vllm/config/speculative.py::SpeculativeConfig",
    ),
    D(
        "Typical acceptance",
        'minispec keeps Medusa\'s typical acceptance (`acceptance_method="typical_acceptance_sampler"`), which V0 '
        "had (vLLM v0.9.2 `vllm/model_executor/layers/typical_acceptance_sampler.py`); V1 has only rejection "
        "sampling (plus synthetic and block verification).",
        "minispec/sample/typical_acceptance.py",
        "vllm/config/speculative.py::SpeculativeConfig",
    ),
    D(
        "Draft sampling at temperature > 0",
        "minispec's draft model and EAGLE chains sample random requests' drafts and hand their probabilities to "
        "the rejection sampler; vLLM drafts greedily by default and treats the drafts as one-hot "
        '(`draft_sample_method="greedy"`; "probabilistic" is opt-in).',
        "minispec/spec_decode/draft_model.py minispec/spec_decode/eagle.py",
        "vllm/config/speculative.py::SpeculativeConfig vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer",
    ),
    D(
        "Which model runner",
        "minispec mirrors the V1 model runner (`gpu_model_runner.py`, proposers in `vllm/v1/spec_decode/`, which "
        "the CPU runner subclasses). v0.32.0 also ships Model Runner V2 (`vllm/v1/worker/gpu/`, speculators in "
        "`vllm/v1/worker/gpu/spec_decode/`), chosen by default where Triton is present and the features are "
        "supported (`VllmConfig.use_v2_model_runner`).",
        "minispec/worker/model_runner.py",
        "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner vllm/v1/worker/gpu/model_runner.py vllm/config/vllm.py::VllmConfig.use_v2_model_runner",
    ),
]


# ---- vLLM V0's speculative decoding (v0.9.2) and where each job lives in V1 (v0.32.0) ---------------------------
@dataclass(frozen=True)
class V0File:
    path: str  # in vLLM v0.9.2
    held: str  # what it did
    v1_home: tuple[VllmRef, ...]  # where that job lives in v0.32.0 (empty: gone)
    v1_note: str
    minispec: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return permalink(self.path, V0_VERSION)


def V0(path: str, held: str, v1: str, note: str, minispec: str = "") -> V0File:
    return V0File(path, held, tuple(VllmRef.parse(p) for p in v1.split()), note, tuple(minispec.split()))


# fmt: off
V0_LAYOUT: list[V0File] = [
    V0("vllm/spec_decode/spec_decode_worker.py", "`SpecDecodeWorker`: each step propose, score, verify; `create_worker` picks proposer, scorer and sampler; `disable_by_batch_size`", "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.propose_draft_token_ids vllm/v1/core/sched/scheduler.py::Scheduler.schedule", "the runner builds the drafter from the config and drafts after sampling; the scheduler gives each request 1 + k tokens", "minispec/worker/model_runner.py minispec/engine/llm_engine.py"),
    V0("vllm/spec_decode/interfaces.py", "`SpeculativeProposals`, `SpeculativeScores` and the proposer / scorer interfaces", "vllm/v1/spec_decode/metadata.py::SpecDecodeMetadata", "where drafts and their logits rows sit in the flattened batch", "minispec/spec_decode/metadata.py"),
    V0("vllm/spec_decode/proposer_worker_base.py", "`ProposerWorkerBase`, `NonLLMProposerWorkerBase`", "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer", "proposers are plain objects owned by the runner, not workers", "minispec/spec_decode/draft_model.py"),
    V0("vllm/spec_decode/top1_proposer.py", "`Top1Proposer`: a proposal of length k or 0 per sequence (0 when it would pass the max length), merged into one batch", "vllm/v1/core/sched/scheduler.py::Scheduler.schedule", "drafts are ragged per request (zero allowed) and capped by the scheduler", "minispec/core/sched/scheduler.py"),
    V0("vllm/spec_decode/multi_step_worker.py", "`MultiStepWorker`: k autoregressive draft steps (draft model, EAGLE)", "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.propose vllm/v1/spec_decode/draft_model.py::DraftModelProposer vllm/v1/spec_decode/eagle.py::EagleProposer", "one base proposer for draft models and EAGLE", "minispec/spec_decode/draft_model.py minispec/spec_decode/eagle.py"),
    V0("vllm/spec_decode/draft_model_runner.py", "`TP1DraftModelRunner`: advances the draft several steps on the GPU without going back to the scheduler", "vllm/v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.propose", "the proposer runs its k forward passes inside one model-runner step", "minispec/spec_decode/draft_model.py"),
    V0("vllm/spec_decode/ngram_worker.py", "`NGramWorker`: prompt lookup", "vllm/v1/spec_decode/ngram_proposer.py::NgramProposer", "numba scan on the host (a GPU variant sits beside it)", "minispec/spec_decode/ngram_proposer.py"),
    V0("vllm/spec_decode/medusa_worker.py", "`MedusaWorker`: Medusa heads over the target's hidden states", "vllm/v1/spec_decode/medusa.py::MedusaProposer", "chain only: each head's argmax", "minispec/spec_decode/medusa.py"),
    V0("vllm/spec_decode/mlp_speculator_worker.py", "`MLPSpeculatorWorker`: IBM's MLP speculator", "", "no V1 drafter for it in v0.32.0's runner (the model file `vllm/model_executor/models/mlp_speculator.py` remains)"),
    V0("vllm/spec_decode/smaller_tp_proposer_worker.py", "runs the draft at a smaller tensor-parallel degree than the target", "vllm/config/speculative.py::SpeculativeConfig", "`draft_tensor_parallel_size` in the config"),
    V0("vllm/spec_decode/batch_expansion.py", "`BatchExpansionTop1Scorer`: each sequence expanded into k + 1 single-token sequences sharing its context, scored by a decode forward", "", "gone: V1 scores all k + 1 tokens of a request as one multi-query sequence", "minispec/teach/batch_expansion.py"),
    V0("vllm/spec_decode/mqa_scorer.py", "`MQAScorer`: all k + 1 tokens of a sequence scored as queries of one sequence (needed FlashAttention and eager mode)", "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner._calc_spec_decode_metadata", "the V1 way: one flattened varlen batch, logits only at `logits_indices`", "minispec/worker/model_runner.py minispec/teach/batch_expansion.py"),
    V0("vllm/spec_decode/target_model_runner.py", "`TargetModelRunner`: the target's runner, with logprobs switchable", "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner", "one runner for target and verification", "minispec/worker/model_runner.py"),
    V0("vllm/spec_decode/metrics.py", "`SpecDecodeWorkerMetrics`: `draft_acceptance_rate`, `system_efficiency`; `AsyncMetricsCollector`", "vllm/v1/spec_decode/metrics.py::SpecDecodingStats", "counters of accepted prefixes per position, logged and exported to Prometheus", "minispec/spec_decode/metrics.py"),
    V0("vllm/spec_decode/util.py", "`split_batch_by_proposal_len`, `sampler_output_to_torch`, `Timer`, `nvtx_range`", "vllm/v1/worker/gpu_model_runner.py::GPUModelRunner", "spread over the runner"),
    V0("vllm/model_executor/layers/spec_decode_base_sampler.py", "`SpecDecodeBaseSampler`: deterministic and stochastic verification samplers", "vllm/v1/sample/rejection_sampler.py::RejectionSampler", "one sampler module with Triton kernels", "minispec/sample/rejection_sampler.py"),
    V0("vllm/model_executor/layers/rejection_sampler.py", "V0's `RejectionSampler` (PyTorch)", "vllm/v1/sample/rejection_sampler.py::rejection_sample", "greedy and random kernels, one program per request", "minispec/sample/rejection_sampler.py kernels/rejection_sampler.py"),
    V0("vllm/model_executor/layers/typical_acceptance_sampler.py", "`TypicalAcceptanceSampler`: Medusa's entropy-based acceptance", "", "none in V1", "minispec/sample/typical_acceptance.py"),
]
# fmt: on

# The files of vLLM v0.32.0 in the folders chapter 7 walks through (no __init__.py; v1/worker's gpu/ and cpu/
# subfolders, Model Runner V2, left out). tests/test_concordance.py compares this with the real tree.
V1_TREE: dict[str, list[str]] = {
    "vllm/v1/spec_decode/": "custom_class_proposer.py dflash.py draft_model.py dynamic/utils.py eagle.py extract_hidden_states.py gemma4.py llm_base_proposer.py medusa.py metadata.py metrics.py ngram_proposer.py ngram_proposer_gpu.py step3p5.py suffix_decoding.py utils.py vocab_mapping.py".split(),  # noqa: E501
    "vllm/v1/sample/": "logits_processor/builtin.py logits_processor/interface.py logits_processor/state.py metadata.py ops/bad_words.py ops/logprobs.py ops/penalties.py ops/topk_topp_sampler.py ops/topk_topp_triton.py rejection_sampler.py sampler.py thinking_budget_state.py".split(),  # noqa: E501
    "vllm/v1/worker/": "block_table.py cp_utils.py cpu_model_runner.py cpu_worker.py dp_utils.py ec_connector_model_runner_mixin.py encoder_cudagraph.py encoder_cudagraph_defs.py gpu_input_batch.py gpu_model_runner.py gpu_ubatch_wrapper.py gpu_worker.py kv_connector_model_runner_mixin.py lora_model_runner_mixin.py mamba_utils.py mm_encoder_model_runner.py startup_plan.py ubatch_utils.py ubatching.py utils.py worker_base.py workspace.py xpu_model_runner.py xpu_worker.py".split(),  # noqa: E501
    "vllm/v1/core/": "block_pool.py encoder_cache_manager.py kv_cache_coordinator.py kv_cache_manager.py kv_cache_metrics.py kv_cache_utils.py sched/async_scheduler.py sched/diffusion_scheduler.py sched/interface.py sched/output.py sched/request_queue.py sched/scheduler.py sched/utils.py single_type_kv_cache_manager.py".split(),  # noqa: E501
}
V1_TREE_SKIPPED_SUBDIRS = {"vllm/v1/worker/": ("gpu", "cpu", "sentinel")}


# ---- lookups -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FunctionPair:
    """One vLLM v0.32.0 function beside minispec's (`minispec` "" when minispec has none, with the reason)."""

    vllm: VllmRef
    minispec: str  # "path::symbol", or "" for none
    note: str


def F(vllm: str, minispec: str, note: str = "") -> FunctionPair:
    return FunctionPair(VllmRef.parse(vllm), minispec, note)


_RS, _SM, _BP = (
    "vllm/v1/sample/rejection_sampler.py",
    "vllm/v1/sample/sampler.py",
    "vllm/v1/spec_decode/llm_base_proposer.py",
)
_SCH, _MR = "vllm/v1/core/sched/scheduler.py", "vllm/v1/worker/gpu_model_runner.py"
# The main pairs, function by function: a reader looks up vLLM's function and finds minispec's.
FUNCTIONS: list[FunctionPair] = [
    F(f"{_RS}::RejectionSampler.forward", "minispec/sample/rejection_sampler.py::RejectionSampler.forward"),
    F(
        f"{_RS}::RejectionSampler.parse_output",
        "minispec/sample/rejection_sampler.py::RejectionSampler.parse_output",
    ),
    F(
        f"{_RS}::RejectionSampler.apply_logits_processors",
        "minispec/sample/rejection_sampler.py::RejectionSampler.apply_logits_processors",
    ),
    F(f"{_RS}::rejection_sample", "minispec/sample/rejection_sampler.py::rejection_sample"),
    F(
        f"{_RS}::apply_sampling_constraints",
        "minispec/sample/rejection_sampler.py::apply_sampling_constraints",
    ),
    F(f"{_RS}::expand_batch_to_tokens", "minispec/sample/rejection_sampler.py::expand_batch_to_tokens"),
    F(f"{_RS}::generate_uniform_probs", "minispec/sample/rejection_sampler.py::generate_uniform_probs"),
    F(f"{_RS}::sample_recovered_tokens", "minispec/sample/rejection_sampler.py::sample_recovered_tokens"),
    F(
        f"{_RS}::rejection_greedy_sample_kernel",
        "kernels/rejection_sampler.py::rejection_greedy_sample_kernel",
        "Triton; PyTorch reference `rejection_greedy_sample_ref`",
    ),
    F(
        f"{_RS}::rejection_random_sample_kernel",
        "kernels/rejection_sampler.py::rejection_random_sample_kernel",
        "Triton; PyTorch reference `rejection_random_sample_ref`",
    ),
    F(
        f"{_RS}::sample_recovered_tokens_kernel",
        "kernels/rejection_sampler.py::sample_recovered_tokens_kernel",
        "Triton; PyTorch reference `sample_recovered_tokens_ref`",
    ),
    F(f"{_SM}::Sampler.forward", "minispec/sample/sampler.py::Sampler.forward"),
    F(f"{_SM}::Sampler.apply_temperature", "minispec/sample/sampler.py::Sampler.apply_temperature"),
    F(f"{_SM}::Sampler.greedy_sample", "minispec/sample/sampler.py::Sampler.greedy_sample"),
    F(f"{_SM}::Sampler.sample", "minispec/sample/sampler.py::Sampler.sample"),
    F(
        f"{_SM}::Sampler.compute_logprobs",
        "minispec/sample/logprobs.py::compute_logprobs",
        "a module function",
    ),
    F(
        f"{_SM}::Sampler.gather_logprobs",
        "minispec/sample/sampler.py::Sampler.gather_logprobs",
        "a static method calling `sample/logprobs.py::gather_logprobs`",
    ),
    F(
        f"{_SM}::Sampler.apply_logits_processors",
        "minispec/sample/sampler.py::Sampler.apply_logits_processors",
    ),
    F(f"{_SM}::Sampler.apply_penalties", "minispec/sample/ops/penalties.py::apply_all_penalties"),
    F(
        "vllm/v1/sample/ops/topk_topp_sampler.py::apply_top_k_top_p",
        "minispec/sample/ops/topk_topp_sampler.py::apply_top_k_top_p",
    ),
    F(
        "vllm/v1/sample/ops/topk_topp_sampler.py::random_sample",
        "minispec/sample/ops/topk_topp_sampler.py::random_sample",
    ),
    F(
        f"{_BP}::SpecDecodeBaseProposer.propose",
        "minispec/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.propose",
        "prepare_batch, then the drafting loop `_draft_chain`, then finish_batch",
    ),
    F(
        f"{_BP}::SpecDecodeBaseProposer.set_inputs_first_pass",
        "minispec/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.set_inputs_first_pass",
    ),
    F(
        f"{_BP}::SpecDecodeBaseProposer._sample_draft_tokens",
        "minispec/spec_decode/llm_base_proposer.py::sample_draft_token_ids",
        "a module function",
    ),
    F(
        f"{_BP}::SpecDecodeBaseProposer._update_positions_dependent_metadata",
        "minispec/attention/decode_steps.py::DecodeSteps.metadata",
        "every step's positions, slots and masks built once per call (`DecodeSteps.build`)",
    ),
    F(
        f"{_BP}::SpecDecodeBaseProposer.load_model",
        "minispec/spec_decode/eagle.py::EagleProposer.from_config",
        "each proposer loads its own network in `from_config`",
    ),
    F(
        f"{_BP}::SpecDecodeBaseProposer.prepare_inputs",
        "",
        "the drafter keeps its own cache and state: rejected entries are overwritten (`EagleProposer.prepare_batch`, `DraftState.rollback_to`)",
    ),
    F(f"{_BP}::SpecDecodeBaseProposer.dummy_run", "", "no CUDA graphs to capture"),
    F("vllm/v1/spec_decode/eagle.py::EagleProposer", "minispec/spec_decode/eagle.py::EagleProposer"),
    F(
        "vllm/v1/spec_decode/medusa.py::MedusaProposer.propose",
        "minispec/spec_decode/medusa.py::MedusaProposer.propose",
        "takes the hidden states at each request's last token; the heads' argmax in `draft_token_ids`",
    ),
    F(
        "vllm/v1/spec_decode/draft_model.py::DraftModelProposer",
        "minispec/spec_decode/draft_model.py::DraftModelProposer",
    ),
    F(
        "vllm/v1/spec_decode/ngram_proposer.py::NgramProposer.batch_propose",
        "minispec/spec_decode/ngram_proposer.py::NgramProposer.batch_propose",
    ),
    F(
        "vllm/v1/spec_decode/ngram_proposer.py::batch_propose_numba",
        "minispec/spec_decode/ngram_proposer.py::batch_propose_numba",
        "plain Python, no numba",
    ),
    F(
        "vllm/v1/spec_decode/ngram_proposer.py::_find_longest_matched_ngram_and_propose_tokens",
        "minispec/spec_decode/ngram_proposer.py::_find_longest_matched_ngram_and_propose_tokens",
    ),
    F(
        "vllm/v1/spec_decode/suffix_decoding.py::SuffixDecodingProposer.propose",
        "minispec/spec_decode/suffix_decoding.py::SuffixDecodingProposer.propose",
        "`input_batch` a SuffixInputBatch",
    ),
    F(f"{_SCH}::Scheduler.schedule", "minispec/core/sched/scheduler.py::Scheduler.schedule"),
    F(
        f"{_SCH}::Scheduler.update_from_output",
        "minispec/core/sched/scheduler.py::Scheduler.update_from_output",
    ),
    F(f"{_SCH}::Scheduler._preempt_request", "minispec/core/sched/scheduler.py::Scheduler._preempt"),
    F(f"{_SCH}::Scheduler.add_request", "minispec/core/sched/scheduler.py::Scheduler.add_request"),
    F(f"{_SCH}::Scheduler.finish_requests", "minispec/core/sched/scheduler.py::Scheduler.finish_requests"),
    F(f"{_SCH}::Scheduler._free_request", "minispec/core/sched/scheduler.py::Scheduler._free"),
    F(
        f"{_MR}::GPUModelRunner._prepare_inputs",
        "minispec/worker/model_runner.py::ModelRunner._prepare_inputs",
    ),
    F(
        f"{_MR}::GPUModelRunner._calc_spec_decode_metadata",
        "minispec/worker/spec_decode_model_runner_mixin.py::calc_spec_decode_metadata",
        "a module function",
    ),
    F(
        f"{_MR}::GPUModelRunner.execute_model",
        "minispec/worker/model_runner.py::ModelRunner.execute_model",
        "with `sample_tokens` folded in",
    ),
    F(
        f"{_MR}::GPUModelRunner.propose_draft_token_ids",
        "minispec/worker/spec_decode_model_runner_mixin.py::SpecDecodeModelRunnerMixin.propose_draft_token_ids",
    ),
    F(f"{_MR}::GPUModelRunner.initialize_kv_cache", "minispec/core/kv_cache_utils.py::allocate_for_model"),
]


def row_for(minispec_path: str) -> Row:
    for row in ROWS:
        if row.minispec == minispec_path:
            return row
    raise ValueError(f"minispec_path={minispec_path!r} has no concordance row; known: {len(ROWS)} rows")


def search(query: str, rows: list[Row] | None = None) -> list[Row]:
    """Rows whose text contains every word of `query` (case-insensitive); all rows for an empty query."""
    words = query.lower().split()
    return [r for r in (ROWS if rows is None else rows) if all(w in r.search_text() for w in words)]


def counterparts_of(vllm_path: str) -> list[Row]:
    """The rows that name a vLLM v0.32.0 file (a path without symbol)."""
    return [r for r in ROWS if any(ref.path == vllm_path for ref in r.vllm)]


# ---- which modules need a row ---------------------------------------------------------------------------------
def _only_reexports(source: str) -> bool:
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # docstring
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            continue
        return False
    return True


def modules_needing_rows(root: Path = REPO_ROOT) -> list[str]:
    """Every .py under minispec/ and kernels/ except logic-free __init__.py files (see the module docstring)."""
    found = []
    for top in ("minispec", "kernels"):
        for path in sorted((root / top).rglob("*.py")):
            if ".ipynb_checkpoints" in path.parts:
                continue
            if path.name == "__init__.py" and _only_reexports(path.read_text()):
                continue
            found.append(path.relative_to(root).as_posix())
    return found


# ---- the vLLM source tree, when there is one ------------------------------------------------------------------
def find_vllm_source(root: Path = REPO_ROOT) -> Path | None:
    """The folder holding a vLLM v0.32.0 `vllm/` package: the peer venv's, or /work/vllm-src; None otherwise."""
    candidates = sorted(root.glob(".venv-vllm/lib/python3*/site-packages")) + [Path("/work/vllm-src")]
    for base in candidates:
        version = base / "vllm" / "_version.py"
        if version.is_file() and "0.32.0" in version.read_text():
            return base
    return None


def symbol_defined(source: str, symbol: str) -> bool:
    """Every dotted part of `symbol` is a def, class or assignment target in `source`."""
    for part in symbol.split("."):
        pattern = rf"^\s*(?:(?:async\s+)?def|class)\s+{re.escape(part)}\b|^\s*{re.escape(part)}\s*[:=]"
        if not re.search(pattern, source, flags=re.MULTILINE):
            return False
    return True


def missing_vllm_refs(base: Path) -> list[str]:
    """Every v0.32.0 path or symbol named by ROWS, KNOWN_DIFFERENCES, V0_LAYOUT or the MRv2 data that `base` lacks."""
    from minispec.concordance_mrv2 import all_mrv2_refs

    refs = [ref for row in ROWS for ref in row.vllm]
    refs += [ref for d in KNOWN_DIFFERENCES for ref in d.vllm]
    refs += [ref for f in V0_LAYOUT for ref in f.v1_home]
    refs += [pair.vllm for pair in FUNCTIONS]
    refs += all_mrv2_refs()
    missing = []
    for ref in refs:
        path = base / ref.path
        if not path.exists():
            missing.append(ref.path)
        elif ref.symbol and not symbol_defined(path.read_text(), ref.symbol):
            missing.append(f"{ref.path}::{ref.symbol}")
    return sorted(set(missing))


def named_v032_paths() -> set[str]:
    """Every v0.32.0 file path the concordance names, both runners (V0 paths, of v0.9.2, left out)."""
    from minispec.concordance_mrv2 import all_mrv2_refs

    refs = [ref for row in ROWS for ref in row.vllm] + [pair.vllm for pair in FUNCTIONS]
    refs += [ref for d in KNOWN_DIFFERENCES for ref in d.vllm] + [ref for f in V0_LAYOUT for ref in f.v1_home]
    return {ref.path for ref in refs + all_mrv2_refs()}


def missing_minispec_functions(root: Path = REPO_ROOT) -> list[str]:
    """Every minispec "path::symbol" of FUNCTIONS that is not defined there."""
    missing = []
    for pair in FUNCTIONS:
        if pair.minispec:
            path, _, symbol = pair.minispec.partition("::")
            if not (root / path).is_file() or not symbol_defined((root / path).read_text(), symbol):
                missing.append(pair.minispec)
    return missing


# ---- markdown ------------------------------------------------------------------------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def refs_markdown(refs: tuple[VllmRef, ...]) -> str:
    """Links to each path once, its symbols after it: ``[`vllm/v1/request.py`](URL) (`Request`, `RequestStatus`)``."""
    from minispec.concordance_mrv2 import V034_REMOVED, V034_VERSION

    by_path: dict[str, list[VllmRef]] = {}
    for ref in refs:
        by_path.setdefault(ref.path, []).append(ref)
    parts = []
    for path, group in by_path.items():
        symbols = ", ".join(f"`{r.symbol}`" for r in group if r.symbol)
        gone = group[0].version == VLLM_VERSION and path in V034_REMOVED
        parts.append(
            f"[`{path}`]({group[0].url})"
            + (f" ({symbols})" if symbols else "")
            + (f" (removed in {V034_VERSION})" if gone else "")
        )
    return ", ".join(parts)


def _vllm_cell(row: Row) -> str:
    parts = [refs_markdown(row.vllm) if row.vllm else "none"]
    if row.v0:
        parts.append(f"V0 ({V0_VERSION}): " + refs_markdown(row.v0))
    if row.ref:
        parts.append(f"also: {row.ref}")
    return "; ".join(parts)


def _runners_intro() -> list[str]:
    from minispec.concordance_mrv2 import RUNNER_CHOICE, V034_VERSION

    return [
        "**Two model runners.** minispec mirrors Model Runner V1 (MRv1: `vllm/v1/worker/gpu_model_runner.py`,",
        "`vllm/v1/sample/`, the proposers of `vllm/v1/spec_decode/`). On a GPU, v0.32.0 runs Model Runner V2",
        "(MRv2, `vllm/v1/worker/gpu/`) wherever Triton is usable and the configuration is supported",
        f"({refs_markdown(RUNNER_CHOICE)}); MRv1 runs on CPUs (no Triton) and for suffix",
        "decoding, Medusa, MLPSpeculator, custom proposer classes, EAGLE parallel drafting and heterogeneous-vocabulary",
        f'drafts. {V034_VERSION} keeps only MRv2: a {VLLM_VERSION} path marked "(removed in {V034_VERSION})" is gone',
        "from that release. [Model Runner V2](#model-runner-v2) names each mirrored module's MRv2 counterpart.",
    ]


def _mrv2_parts(entry: Mrv2 | None) -> tuple[str, str]:
    """(kind and links, note) of an MRv2 entry; a missing entry reads "missing"."""
    if entry is None:
        return "missing", ""
    head = {"counterpart": "", "shared": "**shared**", "none": "**none**"}[entry.kind]
    return " ".join(p for p in (head, refs_markdown(entry.refs) if entry.refs else "") if p), entry.note


def _mrv2_cell(entry: Mrv2 | None) -> str:
    head, note = _mrv2_parts(entry)
    return f"{head}: {note}" if note else head


def _mrv2_of_function(pair: FunctionPair) -> Mrv2 | None:
    from minispec.concordance_mrv2 import MRV2_FUNCTIONS

    return MRV2_FUNCTIONS.get(f"{pair.vllm.path}::{pair.vllm.symbol}")


def _mrv2_section() -> list[str]:
    from minispec.concordance_mrv2 import V034_MRV2_MOVED, V034_REMOVED, V034_VERSION, mrv2_for, summary

    counts = summary(ROWS)
    lines = ["", "## Model Runner V2", ""]
    lines += [
        f"Each module with a {VLLM_VERSION} counterpart, beside the code MRv2 (`vllm/v1/worker/gpu/`) runs instead:",
        "its counterpart, **shared** (the same vLLM code runs under both runners; links name the MRv2 code that",
        "calls it) or **none** (and why). A module that names no runner code (nothing under `vllm/v1/worker/`,",
        "`vllm/v1/sample/` or `vllm/v1/spec_decode/`) is shared by rule. "
        f"{counts['counterpart']} modules have an MRv2 counterpart, {counts['shared']} are shared and "
        f"{counts['none']} have none.",
        "",
        f"| minispec | MRv2 in {VLLM_VERSION} | what differs |",
        "|---|---|---|",
    ]
    for row in ROWS:
        if row.vllm:
            refs, note = _mrv2_parts(mrv2_for(row))
            lines.append(f"| `{row.minispec}` | {_cell(refs)} | {_cell(note)} |")
    moved = [
        f"`{old}` ({f'moved to `{new}`' if new else 'removed'})"
        for old, new in sorted(V034_MRV2_MOVED.items())
    ]
    lines += [
        "",
        f"Every MRv2 file named here still exists in {V034_VERSION}; of the {VLLM_VERSION} files in "
        f"`vllm/v1/worker/gpu/`, {V034_VERSION} no longer has "
        + ", ".join(moved)
        + f". The {VLLM_VERSION} files named on this page that {V034_VERSION} removed: "
        + ", ".join(f"`{p}`" for p in sorted(V034_REMOVED))
        + ".",
    ]
    return lines


def to_markdown() -> str:
    lines = [
        "# Concordance: minispec and vLLM v0.32.0",
        "",
        "<!-- Generated by `python -m minispec.concordance --write docs/concordance.md` from minispec/concordance.py;"
        " do not edit by hand. -->",
        "",
        f"minispec mirrors **vLLM {VLLM_VERSION}**. Each row maps one minispec module to the files of that",
        "release it follows; links are permalinks to the release tag. Rows whose vLLM column says *none* are",
        "teaching, benchmark, figure or zoo modules with no counterpart, and say what they are for. V0 paths",
        f"name vLLM {V0_VERSION}, the last release with V0's `vllm/spec_decode/` (removed by PR #21152, absent",
        "from v0.10.0). This page is generated from `minispec/concordance.py`;",
        "`python -m minispec.concordance --check docs/concordance.md` fails when it is stale.",
        "",
        *_runners_intro(),
        "",
        f"| minispec | vLLM {VLLM_VERSION} | what minispec simplifies (or, without a counterpart, what it is for) |",
        "|---|---|---|",
    ]
    for row in ROWS:
        lines.append(f"| `{row.minispec}` | {_cell(_vllm_cell(row))} | {_cell(row.simplifies)} |")
    lines += _mrv2_section()
    lines += ["", "## Function by function", ""]
    lines += [
        f"| vLLM {VLLM_VERSION} | minispec | note | MRv2 (GPU) in {VLLM_VERSION} |",
        "|---|---|---|---|",
    ]
    for pair in FUNCTIONS:
        mine = f"`{pair.minispec}`" if pair.minispec else "none"
        mrv2 = _mrv2_cell(_mrv2_of_function(pair))
        lines.append(
            f"| {_cell(refs_markdown((pair.vllm,)))} | {_cell(mine)} | {_cell(pair.note)} | {_cell(mrv2)} |"
        )
    lines += ["", "## Where minispec goes beyond vLLM", ""]
    lines += [f"- `{row.minispec}`: {row.beyond}." for row in ROWS if row.beyond]
    lines += ["", f"## Known differences from {VLLM_VERSION}", ""]
    for d in KNOWN_DIFFERENCES:
        where = ", ".join(f"`{m}`" for m in d.minispec)
        vllm = refs_markdown(d.vllm)
        lines.append(f"- **{d.title}.** {d.detail} minispec: {where}; vLLM: {vllm}.")
    return "\n".join(lines) + "\n"


def skeleton_row(path: str) -> str:
    return f'    R("{path}", NONE, "TODO: what it simplifies, or what it is for"),'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minispec.concordance", description=__doc__.splitlines()[0]
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="PATH", type=Path, help="write the markdown to PATH")
    group.add_argument(
        "--check", metavar="PATH", type=Path, help="exit 1 when PATH differs from the markdown"
    )
    group.add_argument("--missing", action="store_true", help="print skeleton rows for modules without a row")
    group.add_argument(
        "--derive-v034",
        metavar="FILE_LIST",
        type=Path,
        help="v0.34.0's file list (paths under vllm/): print concordance_mrv2.V034_REMOVED as derived from it",
    )
    args = parser.parse_args(argv)
    if args.derive_v034:
        from minispec.concordance_mrv2 import V034_REMOVED, derive_v034_removed

        derived = derive_v034_removed(args.derive_v034.read_text().splitlines(), named_v032_paths())
        print("V034_REMOVED: frozenset[str] = frozenset({")
        print("".join(f'    "{path}",\n' for path in sorted(derived)) + "})")
        return 0 if derived == V034_REMOVED else 1
    if args.missing:
        have = {r.minispec for r in ROWS}
        todo = [p for p in modules_needing_rows() if p not in have]
        for path in todo:
            print(skeleton_row(path))
        return 1 if todo else 0
    text = to_markdown()
    if args.write:
        args.write.write_text(text)
        print(f"wrote {args.write} ({len(ROWS)} rows)")
        return 0
    current = args.check.read_text() if args.check.is_file() else ""
    if current == text:
        print(f"{args.check} is up to date ({len(ROWS)} rows)")
        return 0
    diff = difflib.unified_diff(
        current.splitlines(), text.splitlines(), str(args.check), "generated", lineterm=""
    )
    print("\n".join(list(diff)[:40]))
    print(f"{args.check} is stale: run python -m minispec.concordance --write {args.check}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

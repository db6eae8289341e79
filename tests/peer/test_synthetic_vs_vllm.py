"""`rejection_sample_method` against real vLLM v0.32.0's CPU build: it runs neither synthetic nor block.

Synthetic mode lives in vLLM's MRv1 rejection sampler, but the CPU platform swaps its Triton kernels for C++
ones (`vllm/platforms/cpu.py`, `register_kernels`) that assert `not SYNTHETIC_MODE` ("Synthetic acceptance
not supported with CPU sampling", `vllm/utils/cpu_triton_utils.py`); the engine fails while warming them up.
Block verification is Model Runner V2's, which the CPU build does not run. So minispec's synthetic rates are
checked against their configuration (tests/spec_decode/test_rejection_sample_method.py), not against vLLM;
this test notices the day the CPU build starts to run synthetic mode (docs/vllm.md).
"""

from __future__ import annotations

import os

import pytest

from minispec.bench import vs_vllm
from minispec.bench.vs_vllm import PeerMissing, Settings, VllmSide, make_job

try:
    vs_vllm.vllm_python()
except PeerMissing as e:
    if os.environ.get("MINISPEC_PEER_REQUIRED") == "1":
        raise
    pytest.skip(str(e), allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("peer")]

RATES = [0.9, 0.6, 0.4, 0.2]  # unconditional, one per draft position (num_speculative_tokens = 4)


def test_vllm_cpu_build_refuses_synthetic_acceptance():
    job = make_job("draft_model", Settings(num_prompts=1, big_batch=1, prompt_len=16, max_tokens=8))
    job["speculative_config"] |= {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": RATES}
    with pytest.raises(RuntimeError, match="Synthetic acceptance not supported with CPU sampling"):
        VllmSide(job).close()

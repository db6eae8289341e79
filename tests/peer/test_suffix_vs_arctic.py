"""minispec's suffix tree and cache draft exactly as Arctic Inference 0.1.1's, the C++ build that vLLM v0.32.0's
suffix decoding imports: peer/suffix_check.py runs both on random sequences under the peer's Python.

Skipped when .venv-vllm is missing, or lacks Arctic's suffix tree (`make peer` builds it with
peer/build_arctic.py), unless MINISPEC_PEER_REQUIRED=1.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from minispec.bench import vs_vllm

try:
    vs_vllm.vllm_python()
    if not vs_vllm.peer_has_arctic():
        raise vs_vllm.PeerMissing(
            "the vLLM peer environment has no arctic_inference.suffix_decoding: `make peer` builds it "
            "(peer/build_arctic.py; needs cmake and a C++20 compiler)"
        )
except vs_vllm.PeerMissing as e:
    if os.environ.get("MINISPEC_PEER_REQUIRED") == "1":
        raise
    pytest.skip(str(e), allow_module_level=True)

pytestmark = [pytest.mark.xdist_group("peer")]


def test_drafts_equal_arctic_inference():
    script = Path(__file__).resolve().parents[2] / "peer" / "suffix_check.py"
    out = subprocess.run(
        [str(vs_vllm.vllm_python()), str(script), "--trials", "300"],
        capture_output=True,
        text=True,
        timeout=300,
        env=vs_vllm.vllm_env(1),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["speculate_calls"] > 3000
    assert result["num_mismatches"] == 0, result["mismatches"]

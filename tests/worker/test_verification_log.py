"""ModelRunner.verification_log and EAGLE-2's expansion log: what a step drafted and how it was verified."""

import pytest
import torch

from minispec import LLM, SamplingParams

CONFIGS = {
    "eagle2": {"method": "eagle", "model": "zoo:eagle", "total_tokens": 10, "depth": 3, "top_k": 2},
    "chain": {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3},
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_records_explain_the_output(name):
    torch.set_num_threads(1)
    llm = LLM(model="zoo:target", device="cpu", dtype="float32", speculative_config=CONFIGS[name])
    runner = llm.llm_engine.model_runner
    runner.verification_log = []
    if name == "eagle2":
        runner.drafter.tree_log = []
    out = llm.generate(
        "def add(a, b):\n    return", SamplingParams(temperature=0, max_tokens=24), use_tqdm=False
    )
    records = runner.verification_log
    assert records
    emitted = []
    for rec in records:
        n = len(rec.node_tokens)
        assert rec.logits.shape[0] == n + 1 and len(rec.parents) == n + 1
        node = 0
        for u in rec.accepted:  # a root path, each node the target's argmax after its parent
            assert rec.parents[u] == node and rec.node_tokens[u - 1] == int(rec.logits[node].argmax())
            node = u
        assert rec.final_token == int(rec.logits[node].argmax())
        emitted += [rec.node_tokens[u - 1] for u in rec.accepted] + [rec.final_token]
    tokens = out[0].outputs[0].token_ids
    assert tokens[1 : 1 + len(emitted)] == emitted[: len(tokens) - 1]  # token 0 came from the prefill
    if name == "eagle2":
        trees = [t for _, t in runner.drafter.tree_log]
        for t in trees:
            e = t.expansion
            assert len(e.tokens) == 2 + 3 * 4 and len(e.frontiers) == 3 and len(e.kept) == 9
            assert t.tokens == [e.tokens[i] for i in e.kept]
            assert all(e.depths[i] == 1 for i in e.frontiers[0])

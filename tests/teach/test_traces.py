"""minispec/teach/traces.py: recorded steps explain the engine's output token for token, line up with the
proposals they verify, and the sampled walks they replay follow the target (chi-square, fixed seeds)."""

import pytest
import torch

from minispec import LLM, SamplingParams
from minispec.teach import traces as tr
from minispec.zoo.corpus import heldout_prompt_ids

PROMPT = heldout_prompt_ids(1, 40, seed=3)[0]
MAX_TOKENS = 20


@pytest.fixture(scope="module")
def plain_tokens():
    torch.set_num_threads(1)
    llm = LLM(model="zoo:target", device="cpu", num_kv_blocks=64, dtype="float32")
    out = llm.generate(
        {"prompt_token_ids": PROMPT},
        SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True),
        use_tqdm=False,
    )
    return list(out[0].outputs[0].token_ids)


@pytest.mark.parametrize("config", ["medusa tree", "medusa chain", "eagle2"])
def test_steps_explain_the_output(config, plain_tokens) -> None:
    llm = tr.make_llm(config)
    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)
    steps = tr.record_steps(llm, PROMPT, params)
    assert steps and llm.llm_engine.model_runner.verification_log is None  # hooks off again
    generated = list(PROMPT) + plain_tokens
    for s in steps:
        assert s.context == generated[: len(s.context)]  # the step starts where the previous one ended
        assert s.emitted == generated[len(s.context) : len(s.context) + len(s.emitted)]
        assert s.emitted == s.verified[: len(s.emitted)] and len(s.context) + len(s.emitted) <= len(generated)
        node = 0
        for u in s.accepted:
            assert s.node_tokens[u - 1] == s.target_argmax[node]
            node = u
        assert s.final_token == s.target_argmax[node]
        assert len(s.draft_logprobs) == s.num_nodes and max(s.draft_logprobs) <= 0
        assert s.is_chain or config != "medusa chain"
        for parent in range(s.num_nodes + 1):  # the drafter's candidates come best first: scores fall by rank
            kids = s.spec_tree().children(parent)
            scores = [s.draft_logprobs[c - 1] for c in kids]
            assert scores == sorted(scores, reverse=True), (parent, scores)
    if config == "eagle2":
        for s in steps:
            e = s.expansion
            kept = [e.scores[g] for g in e.kept][: s.num_nodes]
            assert s.cumulative_logprobs() == pytest.approx(kept, abs=1e-5)
            assert s.draft_run_entries == 12  # depth 6 x top_k 2
    if config.startswith("medusa"):
        assert "draft_logits" not in llm.llm_engine.model_runner.drafter.heads.__dict__  # the wrapper is gone


def test_first_pass_predicts_the_first_draft() -> None:
    llm = tr.make_llm("eagle chain")
    steps = tr.record_traces("eagle chain", [PROMPT], max_tokens=6, llm=llm)
    predictions = tr.eagle_first_pass(llm, steps[0].context)
    assert len(predictions) == len(steps[0].context) - 1
    assert predictions[-1] == steps[0].node_tokens[0]  # the last entry's prediction is the first draft


def test_measure_counts_like_the_engine(plain_tokens) -> None:
    m = tr.measure("medusa chain", [PROMPT], MAX_TOKENS)
    assert m.outputs == [plain_tokens]
    assert m.tokens_per_forward == pytest.approx(m.stats.mean_acceptance_length)
    assert m.num_steps == m.stats.num_drafts and m.nodes_per_step <= 4


def _synthetic_step() -> tr.StepTrace:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 12, generator=gen) * 1.5  # root, nodes 1..4
    parents = [-1, 0, 0, 1, 1]
    top0 = logits[0].topk(2).indices.tolist()
    top1 = logits[1].topk(2).indices.tolist()
    return tr.StepTrace("eagle", 0, [3], parents, top0 + top1, None, logits, [], 0, [])


@pytest.mark.parametrize("rule", ["walk", "siblings"])
def test_sampled_walks_follow_the_target(rule) -> None:
    step = _synthetic_step()
    samples = tr.sample_walks(step, 1.0, 6000, seed=1, rule=rule)
    assert sum(len(s) > 1 for s in samples) > 1000  # speculation ran: drafts were accepted
    assert tr.emitted_prefix_test(step, samples, 1.0)[2] > 1e-3
    greedy_first = [(step.node_tokens[0],) + s[1:] for s in samples]  # a rule that always keeps child 1
    assert tr.emitted_prefix_test(step, greedy_first, 1.0)[2] < 1e-6


def test_pickers_and_bad_input() -> None:
    a, b = _synthetic_step(), _synthetic_step()
    b.step, b.accepted = 1, [2]  # node 2 is the root's second child: a runner-up was right
    a.accepted = [1, 3]  # longer, but first choices only
    assert tr.pick_step([a, b]) is b and tr.pick_step([a]) is a
    assert tr.pick_sampling_step([a, b]) is a  # same mass: the earlier step
    with pytest.raises(ValueError, match="empty"):
        tr.pick_step([])
    with pytest.raises(ValueError, match="rule"):
        tr.sample_walks(a, 1.0, 10, rule="typical")
    with pytest.raises(ValueError, match="temperature"):
        a.target_probs(0.0)
    with pytest.raises(ValueError, match="method"):
        tr.record_steps(LLM(model="zoo:target", device="cpu", num_kv_blocks=64, dtype="float32"), PROMPT)
    with pytest.raises(ValueError, match="config"):
        tr.make_llm("medusa forest")


def test_typical_walks_are_biased() -> None:
    step = _synthetic_step()
    samples = tr.typical_walks(step, 1.0, 300, seed=0)
    assert len({s[0] for s in samples}) == 1  # the first token is decided without sampling
    assert tr.emitted_prefix_test(step, samples, 1.0)[2] < 1e-6


def test_measurement_intervals() -> None:
    m = tr.Measurement("x", [0, 2, 4, 2], [4, 4, 4, 4], [], None)
    iv = m.interval()
    assert iv.mean == pytest.approx(3.0) and iv.n == 4 and iv.low < 3.0 < iv.high
    depths = m.depth_intervals()
    assert [d.mean for d in depths] == [0.75, 0.75, 0.25, 0.25] and depths[0].n == 4
    with pytest.raises(ValueError, match="at least 2"):
        tr.Measurement("x", [1], [4], [], None).interval()
    with pytest.raises(ValueError, match="depth=0"):
        m.depth_intervals(0)

"""The zoo loads into minispec's engine, and its greedy completions equal transformers' token for token."""

import torch
from transformers import AutoModelForCausalLM

from minispec import LLM, SamplingParams, zoo
from minispec.zoo.corpus import heldout_prompt_ids


def test_target_greedy_completion_matches_transformers():
    prompts = heldout_prompt_ids(3, 48, seed=11)
    hf = AutoModelForCausalLM.from_pretrained(zoo.path("target"), dtype=torch.float32).eval()
    llm = LLM(model="zoo:target", device="cpu", dtype="float32")
    outs = llm.generate(
        [{"prompt_token_ids": p} for p in prompts], SamplingParams(temperature=0, max_tokens=24)
    )
    for prompt, out in zip(prompts, outs):
        with torch.no_grad():
            ref = hf.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False)[
                0, len(prompt) :
            ].tolist()
        assert out.outputs[0].token_ids == ref
        assert out.outputs[0].text == llm.get_tokenizer().decode(ref, skip_special_tokens=True)
        assert out.outputs[0].text.strip()


def test_draft_loads_in_minispec():
    llm = LLM(model="zoo:draft", device="cpu", dtype="float32")
    out = llm.generate("def main():\n", SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) >= 1

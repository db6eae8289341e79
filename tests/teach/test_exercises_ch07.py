"""Chapter 7's exercises: a pair of paths is checked against the concordance, any vLLM file the row names
counts, and wrong or malformed answers are refused."""

import pytest

from minispec.teach import exercises


def test_any_vllm_file_of_the_row_counts() -> None:
    ex = exercises.get("07.new_penalty")
    assert ex.is_correct(("minispec/sample/ops/penalties.py", "vllm/v1/sample/ops/penalties.py"))
    assert ex.is_correct(["./minispec/sample/ops/penalties.py", "vllm/model_executor/layers/utils.py"])
    assert ex.is_correct(
        ("minispec/sample/ops/penalties.py", "vllm/v1/sample/ops/penalties.py::apply_all_penalties")
    )


@pytest.mark.parametrize(
    "answer",
    [
        ("minispec/sample/sampler.py", "vllm/v1/sample/ops/penalties.py"),
        ("minispec/sample/ops/penalties.py", "vllm/v1/sample/sampler.py"),
        "minispec/sample/ops/penalties.py",
        ("minispec/sample/ops/penalties.py",),
    ],
)
def test_wrong_answers(answer) -> None:
    with pytest.raises(AssertionError, match="not right yet"):
        exercises.check("07.new_penalty", answer)


def test_expanded_sequences_is_exact() -> None:
    ex = exercises.get("07.expanded_sequences")
    assert ex.answer() == 16 and ex.is_correct(16) and not ex.is_correct(15)

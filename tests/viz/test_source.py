"""minispec.viz.source: the code a chapter shows and the vLLM v0.32.0 lines it links."""

import pytest

from minispec.concordance import find_vllm_source
from minispec.sample.rejection_sampler import rejection_sample
from minispec.viz import source
from minispec.viz.vllm_lines import VLLM_LINES

VLLM_SRC = find_vllm_source()


def test_show_code_prints_the_source_without_its_docstring_and_links_vllm() -> None:
    out = source.show_code(rejection_sample, vllm="vllm/v1/sample/rejection_sampler.py::rejection_sample")
    text = out.data
    assert text.startswith(source.MARKER)
    assert "def rejection_sample(" in text and "`minispec/sample/rejection_sampler.py`, lines" in text
    assert rejection_sample.__doc__.strip().splitlines()[0] not in text
    start, end = VLLM_LINES["vllm/v1/sample/rejection_sampler.py::rejection_sample"]
    assert f"blob/v0.32.0/vllm/v1/sample/rejection_sampler.py#L{start}-L{end}" in text


def test_unknown_refs_and_objects_without_source_are_refused() -> None:
    with pytest.raises(ValueError, match="vllm_lines.py"):
        source.show_code(rejection_sample, vllm="vllm/v1/sample/sampler.py::nothing_here")
    with pytest.raises(TypeError, match="no Python source"):
        source.show_code(len)
    with pytest.raises(ValueError, match="at least one"):
        source.show_code()


def test_symbol_lines_include_decorators_and_methods() -> None:
    text = "import x\n\n@dec\ndef f():\n    pass\n\nclass C:\n    def m(self):\n        return 1\n"
    assert source.symbol_lines(text, "f") == (3, 5)
    assert source.symbol_lines(text, "C.m") == (8, 9)
    with pytest.raises(ValueError, match="no def or class"):
        source.symbol_lines(text, "C.nothing")


@pytest.mark.skipif(VLLM_SRC is None, reason="no vLLM v0.32.0 source tree on this machine")
def test_line_table_matches_the_v0_32_0_source() -> None:
    for ref, lines in VLLM_LINES.items():
        path, _, symbol = ref.partition("::")
        assert source.symbol_lines((VLLM_SRC / path).read_text(), symbol) == lines, ref

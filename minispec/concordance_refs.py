"""vLLM references for the concordance: a path of a release with an optional symbol, and its permalink.

Chapter 7. minispec/concordance.py (the modules) and minispec/concordance_mrv2.py (Model Runner V2) both name
vLLM code this way; tests/test_concordance.py looks each reference up in a v0.32.0 source tree.
"""

from __future__ import annotations

from dataclasses import dataclass

VLLM_VERSION = "v0.32.0"
V0_VERSION = "v0.9.2"  # the last release with vllm/spec_decode/ (PR #21152 removed it; absent from v0.10.0)
GITHUB = "https://github.com/vllm-project/vllm"


def permalink(path: str, version: str = VLLM_VERSION) -> str:
    """GitHub permalink of a vLLM path at a release tag (`tree` for folders, which end in '/')."""
    file_path = path.split("::")[0]
    kind = "tree" if file_path.endswith("/") else "blob"
    return f"{GITHUB}/{kind}/{version}/{file_path.rstrip('/')}"


@dataclass(frozen=True)
class VllmRef:
    """One vLLM path, optionally with a symbol in it (a class, function or `Class.method`)."""

    path: str
    symbol: str = ""
    version: str = VLLM_VERSION

    @classmethod
    def parse(cls, text: str, version: str = VLLM_VERSION) -> VllmRef:
        path, _, symbol = text.partition("::")
        return cls(path, symbol, version)

    @property
    def url(self) -> str:
        return permalink(self.path, self.version)

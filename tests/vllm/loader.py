"""Runs one of vLLM's test files inside a tests/vllm module, so pytest collects its tests there.

`run_vllm_test_file("tests/v1/sample/test_sampler.py", globals(), skip={...})` unpacks the file from vLLM's
sdist (tests/vllm/sdist.py), installs the shim (tests/vllm/shim.py) and executes the file's code, with pytest's
assertion rewriting, in the calling module's namespace. The test bodies are vLLM's, byte for byte. `skip` names
tests that cannot run on a CPU, each with its reason.
"""

import ast
import os

import pytest
from _pytest.assertion.rewrite import rewrite_asserts

from tests.vllm import sdist, shim


def run_vllm_test_file(name: str, namespace: dict, skip: dict[str, str] | None = None) -> None:
    try:
        root = sdist.vllm_tests_dir()
    except OSError as error:  # offline: say so, or fail where CI requires the tests
        if os.environ.get("MINISPEC_VLLM_TESTS_REQUIRED") == "1":
            raise
        pytest.skip(f"cannot fetch vLLM {sdist.VERSION}'s sdist from PyPI: {error}", allow_module_level=True)
    shim.install(root)
    path = root / name
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    rewrite_asserts(tree, source.encode(), str(path))
    exec(compile(tree, str(path), "exec"), namespace)
    for test, reason in (skip or {}).items():
        if test not in namespace:
            raise KeyError(f"{name} has no {test} to skip")
        namespace[test] = pytest.mark.skip(reason=reason)(namespace[test])

"""Suite-wide settings: offline Hugging Face, a headless matplotlib, Triton's CPU interpreter, one thread per
pytest-xdist worker, and a failure when nothing was collected (pytest's exit code 5 would otherwise pass
unnoticed through make)."""

import os

# Before anything imports triton: its standard library (tl.max, ...) is decorated at import time, so the
# interpreter must be on from the first import, whichever test module happens to import triton first.
os.environ["TRITON_INTERPRET"] = "1"

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs one worker per core: one thread each
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

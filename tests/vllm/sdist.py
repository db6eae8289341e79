"""vLLM v0.32.0's own unit tests, taken unchanged from its source distribution on PyPI.

minispec commits none of vLLM's code. The release's sdist (`vllm-0.32.0.tar.gz`, pinned by its sha256) ships
the repository's tests/; `vllm_tests_dir()` downloads it once into build/vllm-sdist/ and unpacks the few test
files that tests/vllm/ runs against minispec into build/vllm-tests/. PyPI is the one place this needs to reach,
as `make test` already does to install the packages.
"""

import hashlib
import os
import tarfile
import tempfile
import urllib.request
from pathlib import Path

VERSION = "0.32.0"
SDIST_URL = (
    "https://files.pythonhosted.org/packages/d5/df/5471312c76e335eaa2b8333e87ea39f0d37bfe24f10a582620e34ff12e33/"
    f"vllm-{VERSION}.tar.gz"
)
SDIST_SHA256 = "d2c957d5eee3d0985012151315ddc62cbe0cd368fc96a5fc3510438d9dddf2ad"
REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD = REPO_ROOT / "build"

# The files tests/vllm/ runs, relative to vLLM's repository root, with the helpers they import.
FILES = (
    "tests/v1/sample/utils.py",
    "tests/v1/sample/test_rejection_sampler.py",
    "tests/v1/sample/test_sampler.py",
    "tests/v1/sample/test_topk_topp_sampler.py",
    "tests/v1/sample/test_batched_count_greater_than.py",
    "tests/v1/spec_decode/test_ngram.py",
    "tests/v1/spec_decode/test_synthetic_rejection_sampler_utils.py",
    "tests/v1/spec_decode/test_dynamic_sd.py",
)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_sdist(dest: Path = BUILD / "vllm-sdist") -> Path:
    """The sdist's path, downloaded and checked on first use (written atomically: two pytest workers may race)."""
    path = dest / f"vllm-{VERSION}.tar.gz"
    if path.is_file() and sha256(path) == SDIST_SHA256:
        return path
    dest.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest, suffix=".part")
    os.close(fd)
    try:
        urllib.request.urlretrieve(SDIST_URL, tmp)
        if sha256(Path(tmp)) != SDIST_SHA256:
            raise RuntimeError(f"{SDIST_URL} does not have the sha256 {SDIST_SHA256}")
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def vllm_tests_dir(dest: Path = BUILD / "vllm-tests") -> Path:
    """A folder holding FILES at their repository paths (unpacked once, each file written atomically)."""
    if all((dest / name).is_file() for name in FILES):
        return dest
    with tarfile.open(download_sdist()) as tar:
        for name in FILES:
            member = tar.extractfile(f"vllm-{VERSION}/{name}")
            if member is None:
                raise RuntimeError(f"vllm-{VERSION}.tar.gz has no {name}")
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
            with os.fdopen(fd, "wb") as f:
                f.write(member.read())
            os.replace(tmp, target)
    return dest

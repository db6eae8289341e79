"""Build Arctic Inference 0.1.1's suffix tree into the vLLM peer environment, so that vLLM v0.32.0 runs
`speculative_config={"method": "suffix"}` (vllm/v1/spec_decode/suffix_decoding.py imports
`arctic_inference.suffix_decoding.SuffixDecodingCache`).

Run by `make peer` under `.venv-vllm/bin/python`: `python peer/build_arctic.py WHEEL_DIR`, where WHEEL_DIR holds
the pins of peer/requirements-arctic.txt (arctic_inference-0.1.1.tar.gz, nanobind-2.9.2-*.whl). The package's
own setup.py imports torch, generates gRPC code and builds other ops, so only its suffix-decoding extension is
built, with CMake and nanobind as its csrc/suffix_decoding/CMakeLists.txt asks (a C++20 compiler and cmake >=
3.18 are needed), and installed with the three Python files it needs: `arctic_inference/__init__.py` and
`arctic_inference/suffix_decoding/{__init__,cache}.py`. No dist-info is written, so the package's vLLM plugin
entry point is never registered (vLLM would load it only with ARCTIC_INFERENCE_ENABLED set anyway).
`--check` imports the installed package and drafts once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

SDIST = "arctic_inference-0.1.1"
NANOBIND = "nanobind-2.9.2-py3-none-any.whl"
PY_FILES = ("arctic_inference/__init__.py", "arctic_inference/suffix_decoding/__init__.py")
PY_FILES += ("arctic_inference/suffix_decoding/cache.py",)


def cmake_command() -> str:
    """The system's cmake, or else PyPI's (installed into this peer environment: a build tool only)."""
    here = Path(sys.executable).parent
    found = shutil.which("cmake") or shutil.which("cmake", path=str(here))
    if found is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "cmake>=3.18"], check=True)
        found = str(here / "cmake")
    return found


def build(wheel_dir: Path) -> Path:
    """Build and install; returns the installed package folder."""
    target = Path(sysconfig.get_paths()["purelib"]) / "arctic_inference"
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with tarfile.open(wheel_dir / f"{SDIST}.tar.gz") as tar:
            members = [
                m
                for m in tar.getmembers()
                if m.name.startswith(f"{SDIST}/csrc/suffix_decoding/")
                or m.name.removeprefix(f"{SDIST}/") in PY_FILES
            ]
            tar.extractall(tmp, members=members, filter="data")
        src = tmp / SDIST
        with zipfile.ZipFile(wheel_dir / NANOBIND) as wheel:  # nanobind is only needed at build time
            wheel.extractall(tmp / "nanobind")
        env = dict(os.environ, PYTHONPATH=str(tmp / "nanobind"))
        build_dir = tmp / "build"
        cmake = cmake_command()
        subprocess.run(
            [cmake, "-S", src / "csrc" / "suffix_decoding", "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"]
            + [f"-DPython_EXECUTABLE={sys.executable}"],
            check=True,
            env=env,
        )
        subprocess.run([cmake, "--build", build_dir, "-j", str(os.cpu_count() or 1)], check=True, env=env)
        (extension,) = build_dir.glob("_C*.so")
        shutil.rmtree(target, ignore_errors=True)
        for name in PY_FILES:
            (target.parent / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src / name, target.parent / name)
        shutil.copy(extension, target / "suffix_decoding" / extension.name)
    return target


def check() -> None:
    from arctic_inference.suffix_decoding import SuffixDecodingCache

    cache = SuffixDecodingCache(max_tree_depth=24, max_cached_requests=10)
    cache.start_request("r", [1, 2, 3, 4, 1, 2, 3])
    cache.add_active_response("r", [4])
    draft = cache.speculate("r", [1, 2, 3, 4, 1, 2, 3, 4], max_spec_tokens=3)
    assert draft.token_ids == [1, 2, 3], draft
    print(f"arctic_inference suffix decoding OK: {Path(sys.modules['arctic_inference'].__file__).parent}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        check()
    elif len(sys.argv) == 2:
        print(f"installed {build(Path(sys.argv[1]))}")
    else:
        sys.exit(__doc__)

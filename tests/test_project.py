"""Project hygiene: ruff check and ruff format are clean, environment.yml lists what pyproject lists, kernels/ shadows nothing."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    name = re.split(r"[\s<>=!~\[;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")
    return {"pytorch": "torch"}.get(name, name)


def test_ruff_clean() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_clean() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, "run `ruff format .`:\n" + result.stdout + result.stderr


def test_environment_yml_matches_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    listed: set[str] = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            listed |= {_name(r) for r in dep.get("pip", []) if not r.startswith("-")}
        else:
            listed.add(_name(dep))
    listed -= {"python", "pip"}
    assert wanted - listed == set(), f"missing from environment.yml: {sorted(wanted - listed)}"
    assert listed - wanted == set(), (
        f"in environment.yml but not in pyproject.toml: {sorted(listed - wanted)}"
    )


def _run(code: str, extra_path: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = extra_path
    # `-c` puts the current directory (the repository root, which holds kernels/) first on sys.path.
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_kernels_folder_is_minispec_kernels() -> None:
    """kernels/ is minispec.kernels, never the top-level `kernels`: that name belongs to the PyPI distribution,
    which transformers 5.25 requires (and 5.24 stubs out when it is missing)."""
    result = _run(
        """
        from importlib.metadata import PackageNotFoundError, distribution
        import minispec.kernels
        from transformers import LlamaConfig  # probes (and may import) a top-level `kernels`
        from transformers.utils.import_utils import is_kernels_available
        import kernels
        try:
            installed = bool(distribution("kernels"))
        except PackageNotFoundError:
            installed = False
        print(minispec.kernels.__file__, installed, is_kernels_available(), getattr(kernels, "__file__", None))
        """
    )
    assert result.returncode == 0, result.stderr
    ours, installed, available, top = result.stdout.split()
    assert ours == str(ROOT / "kernels" / "__init__.py")
    assert available == installed  # transformers sees the distribution exactly when it is installed
    if installed == "True":
        assert Path(top).parent.parent.name in (
            "site-packages",
            "dist-packages",
        )  # the installed distribution
    else:
        assert top == "None"


def test_kernels_distribution_is_not_shadowed(tmp_path: Path) -> None:
    # A stand-in for the PyPI `kernels` distribution, installed on PYTHONPATH.
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("WHO = 'pypi'\n")
    (tmp_path / "kernels-0.1.dist-info").mkdir()
    (tmp_path / "kernels-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: kernels\nVersion: 0.1\n"
    )
    result = _run(
        """
        import minispec.kernels
        from transformers import LlamaConfig
        import kernels
        print(kernels.WHO, minispec.kernels.__name__)
        """,
        extra_path=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert "pypi minispec.kernels" in result.stdout

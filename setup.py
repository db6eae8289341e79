"""Package discovery that pyproject.toml alone cannot express: the top-level kernels/ folder is shipped as
the subpackage minispec.kernels (see the package-dir mapping in pyproject.toml)."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["minispec", "minispec.*"]), "minispec.kernels"])

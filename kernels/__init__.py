"""Triton kernels of minispec (chapter 6), imported as `minispec.kernels`.

The folder sits at the top of the repository, as the project layout asks, and pyproject.toml maps it onto the
package name `minispec.kernels`. PyPI also has an unrelated distribution called `kernels` (transformers can
use it). When the repository root is on sys.path (a `python -m ...` run from the root), `import kernels` would
find this folder first; the block below then hands the import over to the PyPI distribution, or fails with
ModuleNotFoundError as if this folder were not there.
"""

import importlib.machinery
import importlib.util
import os
import sys

if __name__ != "minispec.kernels":
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _root]
    _spec = importlib.machinery.PathFinder.find_spec(__name__, _path)
    if _spec is None or _spec.loader is None:
        raise ModuleNotFoundError(f"No module named {__name__!r}", name=__name__)
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[__name__] = _module
    _spec.loader.exec_module(_module)

"""Triton kernels of minispec (chapter 6), imported as `minispec.kernels`.

The folder sits at the top of the repository, as the project layout asks, and pyproject.toml maps it onto the
package name `minispec.kernels`. PyPI also has an unrelated distribution called `kernels`, which transformers
probes for (and imports) at import time. When the repository root is on sys.path (a `python -m ...` run from
the root), `import kernels` finds this folder first; the block below then hands the import over to the PyPI
distribution when it is installed, and otherwise leaves an empty namespace-like module, which is what Python
itself gives for a folder without `__init__.py` and what transformers reads as "not installed".
"""

import importlib.machinery
import importlib.util
import os
import sys
import types

if __name__ != "minispec.kernels":
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _root]
    _spec = importlib.machinery.PathFinder.find_spec(__name__, _path)
    if _spec is not None and _spec.loader is not None:
        _module = importlib.util.module_from_spec(_spec)
        sys.modules[__name__] = _module
        _spec.loader.exec_module(_module)
    else:
        _module = types.ModuleType(__name__)
        _module.__file__ = None
        _module.__path__ = []
        sys.modules[__name__] = _module

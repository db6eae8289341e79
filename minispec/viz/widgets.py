"""ipywidgets wrappers that fall back to a static figure without a front-end (all chapters).

vLLM has no counterpart. A figure function takes plain keyword arguments and returns a matplotlib Figure;
`interactive_or_static(fn, **controls)` turns it into sliders when a person is looking, and otherwise calls
fn once with default values.

"No front-end" means any of: MINISPEC_STATIC=1, MINISPEC_FAST=1 (CI), or not running inside an IPython
kernel (plain Python, pytest). A kernel driven by nbclient / nbconvert without MINISPEC_FAST still gets
the widget; its first drawing is then stored in the widget state instead of the cell output.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from minispec.viz.notebook import env_flag, fast_mode


def has_frontend() -> bool:
    """Whether widgets can be shown: inside an IPython kernel and not asked to be static."""
    if env_flag("MINISPEC_STATIC") or fast_mode():
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def static_values(fn: Callable[..., Any], controls: dict[str, Any]) -> dict[str, Any]:
    """The value each control would start at: a widget's value, fn's default, or ipywidgets' choice."""
    import ipywidgets

    signature = inspect.signature(fn)
    values = {}
    for name, control in controls.items():
        if name not in signature.parameters:
            raise ValueError(
                f"control {name!r} is not a parameter of {fn.__name__}; allowed: {list(signature.parameters)}"
            )
        default = signature.parameters[name].default
        if isinstance(control, (ipywidgets.fixed, ipywidgets.ValueWidget)):
            values[name] = control.value
        elif default is not inspect.Parameter.empty:
            values[name] = default
        else:
            values[name] = ipywidgets.interactive.widget_from_abbrev(control).value
    return values


def interactive_or_static(fn: Callable[..., Any], **controls: Any) -> Any:
    """ipywidgets.interactive(fn, **controls) with a front-end; fn(**defaults) (a Figure) without one."""
    if not has_frontend():
        return fn(**static_values(fn, controls))
    import ipywidgets
    from IPython.display import display

    def draw(**kwargs: Any) -> None:
        display(fn(**kwargs))

    draw.__signature__ = inspect.signature(fn)  # so ipywidgets sees fn's parameters and defaults
    return ipywidgets.interactive(draw, **controls)

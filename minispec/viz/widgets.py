"""ipywidgets wrappers that fall back to a static figure without a front-end (all chapters).

vLLM has no counterpart. A figure function takes plain keyword arguments and returns a matplotlib Figure;
`interactive_or_static(fn, **controls)` always draws fn once with the default values as a normal cell output
(so an HTML export, GitHub or the course site shows it), and, when a person is looking, adds the controls
below it: moving one redraws that same output in place (a display handle), so the cell never holds two
copies of the figure and the widget state holds none.

Widgets or a static figure, decided in this order by `has_frontend()`:

1. MINISPEC_STATIC=1: always static (the course site's build sets it, so its pages hold plain figures).
2. Not inside an IPython kernel (plain Python, pytest): static, since nothing could show a widget.
3. MINISPEC_WIDGETS=1: widgets, even under MINISPEC_FAST=1 (the browser test: FAST sizes, and a real
   JupyterLab front-end that must render every widget).
4. MINISPEC_FAST=1 alone: static (CI's nbclient runs, which have a kernel but no front-end).
5. Otherwise: widgets. A kernel driven by nbclient / nbconvert without MINISPEC_FAST still gets the widget;
   its first drawing is a normal output all the same.

Setting both MINISPEC_STATIC=1 and MINISPEC_WIDGETS=1 is a contradiction and raises ValueError.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from minispec.viz.notebook import env_flag, fast_mode


def has_frontend() -> bool:
    """Whether widgets are shown: inside an IPython kernel, by the rule in the module docstring."""
    static, widgets = env_flag("MINISPEC_STATIC"), env_flag("MINISPEC_WIDGETS")
    if static and widgets:
        raise ValueError(
            "MINISPEC_STATIC=1 and MINISPEC_WIDGETS=1 are both set; set at most one "
            "(MINISPEC_STATIC forces static figures, MINISPEC_WIDGETS forces widgets)"
        )
    if static or not in_kernel():
        return False
    return widgets or not fast_mode()


def in_kernel() -> bool:
    """Whether this code runs inside an IPython kernel (a notebook), not plain Python or a terminal IPython."""
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


WIDGET_NOTE = "<i>Interactive in JupyterLab: move a control to redraw the figure above.</i>"


def interactive_or_static(fn: Callable[..., Any], **controls: Any) -> Any:
    """fn(**defaults) as a normal output; with a front-end also controls that redraw it (the module docstring).

    Without a front-end the Figure is returned (the cell shows it); with one it is displayed and the returned
    `ipywidgets.interactive` holds a one-line note and the controls.
    """
    values = static_values(fn, controls)
    if not has_frontend():
        return fn(**values)
    import ipywidgets
    from IPython.display import display

    handle = display(fn(**values), display_id=True)
    drawn = {"first": True}

    def draw(**kwargs: Any) -> None:
        if drawn["first"]:  # ipywidgets calls once on creation, with the defaults already shown
            drawn["first"] = False
            return
        handle.update(fn(**kwargs))

    draw.__signature__ = inspect.signature(fn)  # so ipywidgets sees fn's parameters and defaults
    widget = ipywidgets.interactive(draw, **controls)
    widget.children = (ipywidgets.HTML(WIDGET_NOTE), *widget.children)
    return widget

"""Tests for minispec/viz/widgets.py and minispec/viz/notebook.py: the widgets-or-static rule, fast mode, answers."""

import ipywidgets
import pytest
from matplotlib.figure import Figure

from minispec.viz.notebook import check_answer, fast_mode
from minispec.viz.widgets import has_frontend, interactive_or_static, static_values


def figure_of(n: int, scale: float = 2.0, label: str = "a") -> Figure:
    fig = Figure()
    ax = fig.subplots()
    ax.plot(range(n), [scale * i for i in range(n)], label=label)
    return fig


WIDGET_VARS = ("MINISPEC_FAST", "MINISPEC_STATIC", "MINISPEC_WIDGETS")


@pytest.fixture
def clean_env(monkeypatch):
    for var in WIDGET_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


@pytest.fixture
def in_a_kernel(clean_env):
    import IPython

    class FakeShell:
        kernel = object()

    clean_env.setattr(IPython, "get_ipython", lambda: FakeShell())
    return clean_env


def test_no_frontend_outside_a_kernel(clean_env):
    assert has_frontend() is False  # pytest is not an IPython kernel
    clean_env.setenv("MINISPEC_WIDGETS", "1")
    assert has_frontend() is False  # nothing could show a widget, whatever is asked


@pytest.mark.parametrize("var", ["MINISPEC_FAST", "MINISPEC_STATIC"])
def test_env_vars_force_static_even_in_a_kernel(in_a_kernel, var):
    assert has_frontend() is True
    in_a_kernel.setenv(var, "1")
    assert has_frontend() is False


@pytest.mark.parametrize(
    ("fast", "static", "widgets", "expected"),
    [
        (None, None, None, True),  # a kernel: widgets
        ("1", None, None, False),  # FAST alone: nbclient's static fallback
        ("1", None, "1", True),  # FAST sizes in a real front-end (the browser test)
        (None, None, "1", True),
        ("1", "1", None, False),  # the site build
        (None, "1", "0", False),
        ("1", "0", "yes", True),
    ],
)
def test_the_rule_in_a_kernel(in_a_kernel, fast, static, widgets, expected):
    for var, value in zip(WIDGET_VARS, (fast, static, widgets)):
        if value is not None:
            in_a_kernel.setenv(var, value)
    assert has_frontend() is expected


def test_static_and_widgets_together_are_an_error(in_a_kernel):
    in_a_kernel.setenv("MINISPEC_STATIC", "1")
    in_a_kernel.setenv("MINISPEC_WIDGETS", "1")
    with pytest.raises(ValueError, match="MINISPEC_STATIC=1 and MINISPEC_WIDGETS=1"):
        has_frontend()
    with pytest.raises(ValueError, match="set at most one"):
        interactive_or_static(figure_of, n=(2, 20, 1))


def test_widgets_under_fast_mode(in_a_kernel):
    in_a_kernel.setenv("MINISPEC_FAST", "1")
    assert isinstance(interactive_or_static(figure_of, n=(2, 20, 1)), Figure)
    in_a_kernel.setenv("MINISPEC_WIDGETS", "1")
    assert isinstance(interactive_or_static(figure_of, n=(2, 20, 1)), ipywidgets.interactive)


def test_static_fallback_draws_once_with_defaults(monkeypatch):
    monkeypatch.delenv("MINISPEC_WIDGETS", raising=False)
    monkeypatch.setenv("MINISPEC_STATIC", "1")
    scale = ipywidgets.FloatSlider(value=3.0, min=0, max=5)
    fig = interactive_or_static(figure_of, n=(2, 20, 1), scale=scale, label=["x", "y"])
    assert isinstance(fig, Figure)
    line = fig.axes[0].lines[0]
    assert len(line.get_xdata()) == 11  # the middle of (2, 20, 1), ipywidgets' own choice
    assert line.get_ydata()[1] == 3.0  # the widget's value
    assert line.get_label() == "a"  # the function's default wins over the first option


def test_static_values_reject_unknown_controls():
    with pytest.raises(ValueError, match="not a parameter"):
        static_values(figure_of, {"bogus": (1, 2)})
    assert static_values(figure_of, {"n": ipywidgets.fixed(4)}) == {"n": 4}


def test_interactive_with_a_frontend(in_a_kernel):
    """The default figure is a normal output (a display handle); moving a control updates that output."""
    import IPython.display

    shown, updated = [], []

    class Handle:
        def update(self, obj):
            updated.append(obj)

    def fake_display(obj, display_id=False):
        shown.append(obj)
        return Handle()

    in_a_kernel.setattr(IPython.display, "display", fake_display)
    widget = interactive_or_static(figure_of, n=(2, 20, 1))
    assert isinstance(widget, ipywidgets.interactive)
    assert widget.kwargs == {"n": 11, "scale": 2.0, "label": "a"}
    assert len(shown) == 1 and isinstance(shown[0], Figure) and updated == []
    assert "Interactive in JupyterLab" in widget.children[0].value
    widget.children[1].value = 5  # the slider of n
    assert len(updated) == 1 and len(updated[0].axes[0].lines[0].get_xdata()) == 5


def test_fast_mode(monkeypatch):
    monkeypatch.setenv("MINISPEC_FAST", "1")
    assert fast_mode()
    monkeypatch.setenv("MINISPEC_FAST", "0")
    assert not fast_mode()
    monkeypatch.delenv("MINISPEC_FAST")
    assert not fast_mode()


def test_check_answer(capsys):
    assert check_answer("ridge", None, 206.0) is False
    assert "not answered yet" in capsys.readouterr().out
    assert check_answer("ridge", 207, 206.0) is True
    with pytest.raises(AssertionError, match="not right yet.*Hint: divide"):
        check_answer("ridge", 100, 206.0, hint="divide FLOP/s by bytes/s")
    with pytest.raises(AssertionError, match="expected a number"):
        check_answer("ridge", "lots", 206.0)

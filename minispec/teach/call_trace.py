"""Record which of minispec's own functions a call runs, as a call tree (chapter 7).

vLLM has no counterpart (its profiler wraps torch.profiler). `trace_calls(fn, ...)` runs `fn` under
`sys.setprofile` and keeps only calls whose code lives in the minispec package: torch, transformers and
the standard library are skipped, and a minispec function called through them (a module's `forward` through
`nn.Module.__call__`) hangs under its nearest minispec caller. Repeated calls of the same function from the
same node are merged into one node with a count, so one engine step reads as a tree of a few dozen nodes:

    trace = trace_calls(llm.generate, prompts, params, focus="LLMEngine.step", focus_call=2)
    print(trace.render_text(max_depth=4))

`focus` keeps, of all the calls of one function (e.g. the engine's `step`), only the `focus_call`-th with
everything below it; what led to it (`LLM.generate`) stays. Comprehensions, lambdas and generator
expressions are folded into the function that contains them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # .../minispec
# kernels/ sits beside the package in a checkout (imported as minispec.kernels), inside it when installed
_ROOTS = (PACKAGE_DIR, PACKAGE_DIR.parent / "kernels")
_SELF = Path(__file__).resolve()


@dataclass
class CallNode:
    qualname: str  # "Scheduler.schedule"
    path: str  # "minispec/core/sched/scheduler.py"
    lineno: int  # first line of the function
    depth: int  # 0 for calls made directly by the traced function's caller
    parent: int  # index of the calling node, -1 at the top
    count: int = 1  # calls merged into this node
    children: list[int] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.qualname if self.count == 1 else f"{self.qualname} x{self.count}"


@dataclass
class CallTrace:
    nodes: list[CallNode]
    result: Any = None  # what the traced call returned

    @property
    def roots(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.parent == -1]

    def find(self, qualname: str) -> list[int]:
        """Indices of the nodes of a function (`Class.method` or a function name)."""
        return [i for i, n in enumerate(self.nodes) if n.qualname == qualname]

    def functions(self) -> set[str]:
        return {n.qualname for n in self.nodes}

    def chain(self, index: int) -> list[str]:
        """Qualnames from the top of the tree down to node `index`."""
        names = []
        while index != -1:
            names.append(self.nodes[index].qualname)
            index = self.nodes[index].parent
        return names[::-1]

    def edges(self) -> dict[tuple[str, str], int]:
        """(caller, callee) -> number of calls, merged over the whole tree: the call graph."""
        graph: dict[tuple[str, str], int] = {}
        for n in self.nodes:
            if n.parent != -1:
                key = (self.nodes[n.parent].qualname, n.qualname)
                graph[key] = graph.get(key, 0) + n.count
        return graph

    def visible(self, max_depth: int | None = None) -> list[int]:
        """Node indices in depth-first order, down to `max_depth`."""
        order: list[int] = []

        def visit(i: int) -> None:
            if max_depth is not None and self.nodes[i].depth > max_depth:
                return
            order.append(i)
            for c in self.nodes[i].children:
                visit(c)

        for r in self.roots:
            visit(r)
        return order

    def render_text(self, max_depth: int | None = None) -> str:
        return "\n".join(
            "  " * self.nodes[i].depth + f"{self.nodes[i].label}  ({self.nodes[i].path})"
            for i in self.visible(max_depth)
        )


class CallTracer:
    """Context manager: while active, records minispec's calls in `self.nodes` (see the module docstring)."""

    def __init__(self, focus: str | None = None, focus_call: int = 1, max_depth: int | None = None):
        if focus_call < 1:
            raise ValueError(f"focus_call={focus_call} must be >= 1 (the first call is 1)")
        if max_depth is not None and max_depth < 0:
            raise ValueError(f"max_depth={max_depth} must be >= 0 or None")
        self.focus, self.focus_call, self.max_depth = focus, focus_call, max_depth
        self.nodes: list[CallNode] = []
        self._active: dict[FrameType, int] = {}  # live minispec frames -> their node
        self._wanted_cache: dict[CodeType, bool] = {}
        self._focus_seen = 0
        self._skip_frame: FrameType | None = None  # a focus call that is not the wanted one
        self._previous = None

    def __enter__(self) -> CallTracer:
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(self._previous)
        self._active.clear()
        self._skip_frame = None

    def trace(self) -> CallTrace:
        return CallTrace(self.nodes)

    # ---- the profile hook --------------------------------------------------------------------------------
    def _wanted(self, code: CodeType) -> bool:
        wanted = self._wanted_cache.get(code)
        if wanted is None:
            path = Path(code.co_filename)
            wanted = (
                not code.co_name.startswith("<")
                and path.is_absolute()
                and any(path.resolve().is_relative_to(root) for root in _ROOTS)
                and path.resolve() != _SELF
            )
            self._wanted_cache[code] = wanted
        return wanted

    def _profile(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            if self._skip_frame is not None or not self._wanted(frame.f_code):
                return
            code = frame.f_code
            qualname = getattr(code, "co_qualname", code.co_name)
            if self.focus is not None and qualname == self.focus:
                self._focus_seen += 1
                if self._focus_seen != self.focus_call:
                    self._skip_frame = frame
                    return
            parent = self._nearest_node(frame.f_back)
            depth = 0 if parent == -1 else self.nodes[parent].depth + 1
            if self.max_depth is not None and depth > self.max_depth:
                return
            self._active[frame] = self._child(parent, qualname, code, depth)
        elif event == "return":
            if frame is self._skip_frame:
                self._skip_frame = None
            else:
                self._active.pop(frame, None)

    def _nearest_node(self, frame: FrameType | None) -> int:
        while frame is not None:
            node = self._active.get(frame)
            if node is not None:
                return node
            frame = frame.f_back
        return -1

    def _child(self, parent: int, qualname: str, code: CodeType, depth: int) -> int:
        siblings = (
            self.nodes[parent].children
            if parent != -1
            else [i for i, n in enumerate(self.nodes) if n.parent == -1]
        )
        for i in siblings:
            if self.nodes[i].qualname == qualname and self.nodes[i].lineno == code.co_firstlineno:
                self.nodes[i].count += 1
                return i
        path = Path(code.co_filename).resolve().relative_to(PACKAGE_DIR.parent).as_posix()
        self.nodes.append(CallNode(qualname, path, code.co_firstlineno, depth, parent))
        index = len(self.nodes) - 1
        if parent != -1:
            self.nodes[parent].children.append(index)
        return index


def trace_calls(
    fn: Callable[..., Any],
    *args: Any,
    focus: str | None = None,
    focus_call: int = 1,
    max_depth: int | None = None,
    **kwargs: Any,
) -> CallTrace:
    """Run fn(*args, **kwargs) and return the tree of minispec calls it made (with fn's result)."""
    tracer = CallTracer(focus, focus_call, max_depth)
    with tracer:
        result = fn(*args, **kwargs)
    trace = tracer.trace()
    trace.result = result
    if focus is not None and tracer._focus_seen < focus_call:
        raise ValueError(
            f"focus={focus!r} was called {tracer._focus_seen} times; focus_call={focus_call} asks for more"
        )
    return trace

"""The package's layers follow the data (issue #50): no import cycle, the mirror never reaches into the speed,
teaching or figure code but at named seams, and mirror files stay short enough to read beside vLLM's.

Imports are read from the source with `ast`, function-local imports included (a lazy import is still an edge).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The folders and files that mirror vLLM v0.32.0 (minispec.<name>).
MIRROR = (
    "entrypoints",
    "engine",
    "core",
    "worker",
    "sample",
    "spec_decode",
    "attention",
    "model_executor",
    "config",
    "sampling_params",
    "outputs",
    "utils",
    "kernels",
    "metrics",
    "trees",  # beyond v0.32.0, held to the same rules
)
OFF_LIMITS = ("compilation", "teach", "viz", "bench")  # what the mirror imports only at a seam
# (importer, imported): the seams through which the mirror reaches minispec/compilation/
SEAMS = {
    ("minispec.engine.llm_engine", "minispec.compilation.seams"),
    ("minispec.worker.model_runner", "minispec.compilation.seams"),
}
# The mirror names no compile or export machinery: torch.compile's and torch.export's state is asked only in
# minispec/compilation/, which installs its variants behind the mirror's hooks (compilation/seams.py).
# (vLLM's own compiled helpers, such as sample/ops/logprobs.py's, may stay.)
COMPILE_MACHINERY = ("is_compiling", "is_exporting", "custom_op", "torch.export")
# (mirror file, name): the hooks that name the machinery on purpose
MACHINERY_SEAMS: set[tuple[str, str]] = set()
MAX_MIRROR_LINES = 350
# Mirror files that are longer for now; the rejection sampler is the one allowed to stay so (vLLM's is long too).
LONG_FILES = {
    "minispec/sample/rejection_sampler.py",
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "minispec").rglob("*.py")) + sorted((ROOT / "kernels").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(("minispec",) + parts if parts[0] == "kernels" else parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The minispec modules `path` imports, at the top or inside a function (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    skip = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("minispec")
        ):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("minispec")}
    return {m for m in out if m in modules}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def _top(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_cycles() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep) :] + [dep] if dep in path else [node, dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_mirror_reaches_speed_and_teaching_code_only_at_seams() -> None:
    bad = sorted(
        (importer, dep)
        for importer, deps in _graph().items()
        if _top(importer) in MIRROR
        for dep in deps
        if _top(dep) in OFF_LIMITS and (importer, dep) not in SEAMS
    )
    assert not bad, "mirror imports outside the seams:\n" + "\n".join(f"{a} -> {b}" for a, b in bad)


def test_config_imports_nothing_it_configures() -> None:
    """Every module of the minispec.config package imports only its siblings and minispec.utils."""
    graph = _graph()
    package = {name for name in graph if name == "minispec.config" or name.startswith("minispec.config.")}
    assert len(package) > 1  # the package and its files
    deps = set().union(*(graph[name] for name in package)) - package
    assert deps <= {"minispec.utils"}, sorted(deps)


def test_teach_does_not_import_bench() -> None:
    bad = sorted(
        (a, b) for a, deps in _graph().items() if _top(a) == "teach" for b in deps if _top(b) == "bench"
    )
    assert not bad, "bench/ may import teach/, never the reverse:\n" + "\n".join(
        f"{a} -> {b}" for a, b in bad
    )


def test_mirror_files_are_short() -> None:
    long = {}
    for name, path in _modules().items():
        rel = path.relative_to(ROOT).as_posix()
        if _top(name) in MIRROR and rel not in LONG_FILES:
            lines = len(path.read_text().splitlines())
            if lines > MAX_MIRROR_LINES:
                long[rel] = lines
    assert not long, f"mirror files over {MAX_MIRROR_LINES} lines: {long}"


def test_long_file_list_is_current() -> None:
    """A file that got short leaves LONG_FILES, so the list only shrinks."""
    short = [
        rel for rel in sorted(LONG_FILES) if len((ROOT / rel).read_text().splitlines()) <= MAX_MIRROR_LINES
    ]
    assert not short, f"now at most {MAX_MIRROR_LINES} lines, remove from LONG_FILES: {short}"


def test_mirror_names_no_compile_machinery() -> None:
    """Speed lives behind seams (issue #50): the mirror keeps one plain path, and minispec/compilation/ swaps in
    the variants that ask whether a graph is being compiled or exported."""
    found = []
    for name, path in _modules().items():
        rel = path.relative_to(ROOT).as_posix()
        if _top(name) not in MIRROR or _top(name) == "kernels":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for word in COMPILE_MACHINERY:
                if word in line and (rel, word) not in MACHINERY_SEAMS:
                    found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "compile or export machinery in the mirror:\n" + "\n".join(found)

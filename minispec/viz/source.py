"""Show a core algorithm's code on screen, beside the vLLM v0.32.0 lines it mirrors (chapters 2-8).

vLLM has no counterpart. `show_code(fn, vllm="vllm/v1/sample/rejection_sampler.py::rejection_sample")`
returns a Markdown output: where minispec's code lives, its source (docstring left out by default), and a
link to the matching lines of vLLM v0.32.0 on GitHub. It is a normal cell output, so an HTML export or
GitHub's viewer shows it too. The vLLM line numbers come from `minispec/viz/vllm_lines.py`, a table written
from a v0.32.0 source tree (the readers' machines have none):

    python -m minispec.viz.source --add "vllm/v1/sample/rejection_sampler.py::rejection_sample"

adds a reference (a path, `::`, then a function, class or `Class.method`); tests/viz/test_source.py checks
every entry against the source tree when one is present.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from minispec.concordance_refs import VLLM_VERSION, permalink
from minispec.viz.vllm_lines import VLLM_LINES

MARKER = "<!-- minispec:source -->"  # tests find the chapters' code outputs by it
_REPO = Path(__file__).resolve().parents[2]


def vllm_link(ref: str) -> str:
    """Markdown link to the lines of `ref` ("path::symbol") at v0.32.0; ValueError when the table lacks it."""
    if ref not in VLLM_LINES:
        raise ValueError(
            f"vllm={ref!r} is not in minispec/viz/vllm_lines.py; add it with "
            f'`python -m minispec.viz.source --add "{ref}"` (a path, "::", a function or Class.method)'
        )
    start, end = VLLM_LINES[ref]
    path, _, symbol = ref.partition("::")
    return f"[`{path}` `{symbol}`, lines {start}-{end}]({permalink(path)}#L{start}-L{end})"


def _without_docstring(source: str) -> str:
    tree = ast.parse(source)
    node = tree.body[0]
    body = getattr(node, "body", None)
    if not body or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Constant):
        return source
    if not isinstance(body[0].value.value, str):
        return source
    lines = source.splitlines(keepends=True)
    doc = body[0]
    return "".join(lines[: doc.lineno - 1] + lines[doc.end_lineno :])


def code_of(obj: object, docstring: bool = False) -> tuple[str, str]:
    """(where, source) of a function, class or method: 'minispec/x.py, lines a-b' and its dedented code."""
    target = inspect.unwrap(obj)
    try:
        lines, first = inspect.getsourcelines(target)
        path = Path(inspect.getsourcefile(target) or "")
    except (TypeError, OSError) as exc:
        raise TypeError(
            f"obj={obj!r} has no Python source to show (pass a function, class or method)"
        ) from exc
    source = textwrap.dedent("".join(lines))
    if not docstring:
        source = _without_docstring(source)
    try:
        where = path.resolve().relative_to(_REPO).as_posix()
    except ValueError:
        where = path.name
    return f"`{where}`, lines {first}-{first + len(lines) - 1}", source.rstrip() + "\n"


def show_code(
    *objects: object, vllm: str | Sequence[str] = (), note: str = "", docstring: bool = False
) -> object:
    """A Markdown output with each object's source and links to the vLLM v0.32.0 lines named in `vllm`.

    `note` (markdown) follows the links: say there what differs, or why vLLM has no counterpart.
    """
    from IPython.display import Markdown

    if not objects:
        raise ValueError("show_code needs at least one function, class or method to show")
    refs = [vllm] if isinstance(vllm, str) else list(vllm)
    parts = [MARKER]
    for obj in objects:
        where, source = code_of(obj, docstring=docstring)
        parts.append(f"**minispec** {where}\n\n```python\n{source}```")
    if refs:
        links = "; ".join(vllm_link(r) for r in refs)
        parts.append(f"**vLLM {VLLM_VERSION}:** {links}")
    if note:
        parts.append(note)
    return Markdown("\n\n".join(parts))


# ---- writing the line table from a v0.32.0 source tree --------------------------------------------------
def symbol_lines(source: str, symbol: str) -> tuple[int, int]:
    """First (decorators included) and last line of a function, class or `Class.method` in `source`."""
    body = ast.parse(source).body
    node = None
    for part in symbol.split("."):
        node = next(
            (
                n
                for n in body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part
            ),
            None,
        )
        if node is None:
            raise ValueError(f"symbol={symbol!r}: no def or class {part!r} found")
        body = node.body
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return first, node.end_lineno


def add_refs(refs: Sequence[str], base: Path) -> dict[str, tuple[int, int]]:
    """The table with `refs` looked up in the source tree `base` (the folder holding `vllm/`)."""
    table = dict(VLLM_LINES)
    for ref in refs:
        path, sep, symbol = ref.partition("::")
        if not sep or not symbol:
            raise ValueError(f"ref={ref!r} must read 'path::symbol'")
        table[ref] = symbol_lines((base / path).read_text(), symbol)
    return dict(sorted(table.items()))


def write_table(table: dict[str, tuple[int, int]]) -> None:
    lines = [
        '"""Line numbers of vLLM v0.32.0 functions that chapters show beside minispec\'s code (chapters 2-8).',
        "",
        "Written by `python -m minispec.viz.source --add REF`; checked against a source tree by",
        'tests/viz/test_source.py. vLLM has no counterpart."""',
        "",
        "VLLM_LINES: dict[str, tuple[int, int]] = {",
    ]
    lines += [f'    "{ref}": ({a}, {b}),' for ref, (a, b) in table.items()]
    lines.append("}")
    (Path(__file__).parent / "vllm_lines.py").write_text("\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from minispec.concordance import find_vllm_source

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--add", nargs="+", default=[], help='references "path::symbol" to add')
    parser.add_argument("--refresh", action="store_true", help="look every entry up again")
    args = parser.parse_args(argv)
    base = find_vllm_source()
    if base is None:
        print("no vLLM v0.32.0 source tree found (make peer builds one)", file=sys.stderr)
        return 1
    refs = list(args.add) + (list(VLLM_LINES) if args.refresh else [])
    write_table(add_refs(refs, base))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

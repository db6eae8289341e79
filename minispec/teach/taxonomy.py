"""The methods and the workload of chapter 5's taxonomy: each proposer's configuration, prompts in four
categories built from the zoo's held-out code, and the verdicts the chapter prints from its intervals.

No vLLM counterpart. `python -m minispec.bench.taxonomy` runs every method on these prompts; the chapter's
exercises read them too. `leader`, `lead_sentence`, `against`, `model_fit_sentence` and `published_sentence`
turn 95% intervals (`minispec.teach.stats`) into sentences: "level" wherever the intervals overlap.
"""

from __future__ import annotations

import ast
import random
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from minispec.teach.stats import Interval, compare_to_model, standing_to_value
from minispec.zoo.trees import DEFAULT_TREE as MEDUSA_TREE

CATEGORIES = ("code", "copy_edit", "docstring_to_code", "free_text")
CATEGORY_TITLES = {
    "code": "code completion",
    "copy_edit": "copy-heavy editing",
    "docstring_to_code": "docstring to code",
    "free_text": "free text (docstrings)",
}


@dataclass(frozen=True)
class Method:
    """One proposer as the table shows it: how to configure it and what it needs."""

    name: str
    method: str  # SpeculativeConfig.method
    extra: dict  # the rest of the speculative config (num_speculative_tokens is added for chains)
    training: str
    features: str  # what it reads from the target
    vllm_path: str  # its proposer in vLLM v0.32.0 (trees: last in v0.20.2)
    chain: bool = True

    def speculative_config(self, k: int) -> dict:
        return {"method": self.method, **self.extra, **({"num_speculative_tokens": k} if self.chain else {})}


METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method(
            "ngram",
            "ngram",
            {"prompt_lookup_min": 2, "prompt_lookup_max": 4},
            "none",
            "token ids only",
            "vllm/v1/spec_decode/ngram_proposer.py",
        ),
        Method(
            "suffix",
            "suffix",
            {},
            "none",
            "token ids only (this request's and earlier outputs)",
            "vllm/v1/spec_decode/suffix_decoding.py",
        ),
        Method(
            "draft_model",
            "draft_model",
            {"model": "zoo:draft"},
            "a small LM, same tokenizer",
            "none",
            "vllm/v1/spec_decode/draft_model.py",
        ),
        Method(
            "medusa chain",
            "medusa",
            {"model": "zoo:medusa"},
            "heads on the frozen target",
            "last hidden state",
            "vllm/v1/spec_decode/medusa.py",
        ),
        Method(
            "medusa tree",
            "medusa",
            {"model": "zoo:medusa", "speculative_token_tree": MEDUSA_TREE},
            "heads on the frozen target",
            "last hidden state",
            "vllm/v1/spec_decode/medusa.py",
            chain=False,
        ),
        Method(
            "eagle chain",
            "eagle",
            {"model": "zoo:eagle"},
            "one layer on target features",
            "last hidden state",
            "vllm/v1/spec_decode/eagle.py",
        ),
        Method(
            "eagle2 tree",
            "eagle",
            {"model": "zoo:eagle", "total_tokens": 16, "depth": 6, "top_k": 2},
            "one layer on target features",
            "last hidden state",
            "vllm/v1/spec_decode/llm_base_proposer.py",
            chain=False,
        ),
        Method(
            "eagle3 chain",
            "eagle3",
            {"model": "zoo:eagle3"},
            "one layer, training-time test",
            "3 layers' inputs, fused",
            "vllm/v1/spec_decode/eagle.py",
        ),
    ]
}


# ---- prompts ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskPrompt:
    category: str
    source: str  # "file.py:function"
    text: str
    token_ids: tuple[int, ...]
    reference: str  # how the held-out original (or, for copy_edit, the exact copy) goes on


@dataclass(frozen=True)
class _Function:
    source: str
    lines: tuple[str, ...]  # dedented source lines
    doc_span: tuple[int, int] | None  # first and last line of the docstring (0-based, in lines)
    args: tuple[str, ...]


@lru_cache(maxsize=1)
def _functions() -> tuple[_Function, ...]:
    """Every function of the held-out corpus files, in file and source order."""
    from minispec.zoo import corpus

    found = []
    for path in corpus.list_files("heldout"):
        text = corpus.read_file(path)
        try:
            tree = ast.parse(text or "")
        except SyntaxError:
            continue
        all_lines = (text or "").splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.decorator_list:
                continue
            lines = tuple(
                textwrap.dedent("\n".join(all_lines[node.lineno - 1 : node.end_lineno])).splitlines()
            )
            first = node.body[0]
            doc = None
            if (
                isinstance(first, ast.Expr)
                and isinstance(getattr(first, "value", None), ast.Constant)
                and isinstance(first.value.value, str)
            ):
                doc = (first.lineno - node.lineno, first.end_lineno - node.lineno)
            args = tuple(a.arg for a in node.args.args if a.arg not in ("self", "cls"))
            found.append(_Function(f"{path}:{node.name}", lines, doc, args))
    return tuple(found)


def _code(f: _Function) -> tuple[str, str] | None:
    """The first half of the function's code after its signature and docstring; the rest is the reference."""
    start = 1 + (f.doc_span[1] if f.doc_span else 0)
    if len(f.lines) - start < 8:
        return None
    return _split(f.lines, start + (len(f.lines) - start) // 2)


def _docstring_to_code(f: _Function) -> tuple[str, str] | None:
    if f.doc_span is None or len(f.lines) - f.doc_span[1] - 1 < 5:
        return None
    return _split(f.lines, f.doc_span[1] + 1)


def _free_text(f: _Function) -> tuple[str, str] | None:
    """The signature and the first third of a prose docstring (no doctest, no literal block) of 6+ lines."""
    if f.doc_span is None or f.doc_span[1] - f.doc_span[0] < 5:
        return None
    first, last = f.doc_span
    if any(">>>" in line or "::" in line for line in f.lines[first : last + 1]):
        return None
    return _split(f.lines[: last + 1], first + 1 + (last - first) // 3)


def _copy_edit(f: _Function, variant: int) -> tuple[str, str] | None:
    """The function, then the start of a copy: renamed, or with one argument renamed (a repeat with a change)."""
    if not 4 <= len(f.lines) <= 30 or len(f.source) > 1200:
        return None
    body = "\n".join(f.lines)
    name = f.source.rsplit(":", 1)[1]
    args = [a for a in f.args if len(a) > 2 and len(re.findall(rf"\b{a}\b", body)) >= 3]
    if variant % 2 and args:
        old, new = args[0], args[0] + "_new"
        copy_lines = [re.sub(rf"\b{old}\b", new, line) for line in f.lines]
        note = f"# The same function with the argument {old} renamed to {new}:"
    else:
        copy_lines = [f.lines[0].replace(f"def {name}(", f"def {name}_v2(", 1), *f.lines[1:]]
        note = f"# The same function, renamed to {name}_v2:"
    prompt, reference = _split(copy_lines, 1)
    return f"{body}\n\n\n{note}\n{prompt}", reference


def _split(lines, cut: int) -> tuple[str, str]:
    """(lines before `cut`, the rest): the prompt ends without a newline (the tokenizer merges a newline with
    the next line's indentation), the reference starts with it; blank lines at the cut go to the reference."""
    while cut > 1 and not lines[cut - 1].strip():
        cut -= 1
    return "\n".join(lines[:cut]), "\n" + "\n".join(lines[cut:])


def copied_chars(prompt: TaskPrompt, text: str) -> int:
    """How many leading characters of a continuation equal the prompt's reference (the held-out original)."""
    n = 0
    for a, b in zip(prompt.reference, text):
        if a != b:
            break
        n += 1
    return n


def build_prompts(
    n_per_category: int,
    seed: int = 0,
    categories: tuple[str, ...] = CATEGORIES,
    min_tokens: int = 24,
    max_tokens: int = 320,
) -> list[TaskPrompt]:
    """`n_per_category` prompts of each category, category by category, deterministic in `seed`: each from a
    different held-out function, between min_tokens and max_tokens zoo-tokenizer tokens long."""
    from minispec.zoo.corpus import _tokenizer

    if not isinstance(n_per_category, int) or n_per_category < 1:
        raise ValueError(f"n_per_category={n_per_category!r} must be an int >= 1")
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown or not categories:
        raise ValueError(f"categories={categories!r}: allowed {list(CATEGORIES)} (at least one)")
    tokenizer = _tokenizer(None)
    functions = _functions()
    out = []
    for category in categories:
        order = list(range(len(functions)))
        random.Random(f"{seed}-{category}").shuffle(order)
        picked: list[TaskPrompt] = []
        for i in order:
            f = functions[i]
            made = (
                _copy_edit(f, len(picked))
                if category == "copy_edit"
                else {"code": _code, "docstring_to_code": _docstring_to_code, "free_text": _free_text}[
                    category
                ](f)
            )
            if made is None:
                continue
            ids = tokenizer.encode(made[0], add_special_tokens=False).ids
            if min_tokens <= len(ids) <= max_tokens:
                picked.append(TaskPrompt(category, f.source, made[0], tuple(ids), made[1]))
            if len(picked) == n_per_category:
                break
        if len(picked) < n_per_category:
            raise ValueError(
                f"only {len(picked)} held-out functions make a {category!r} prompt of "
                f"{min_tokens}..{max_tokens} tokens; ask for fewer than {n_per_category}"
            )
        out += picked
    return out


# ---- verdicts from intervals ----------------------------------------------------------------------------
def leader(intervals: Mapping[str, Interval]) -> tuple[str, list[str]]:
    """(the name with the highest mean, the other names whose 95% interval overlaps the leader's)."""
    if not intervals:
        raise ValueError("intervals is empty; need {name: Interval} with at least one entry")
    best = max(intervals, key=lambda n: intervals[n].mean)
    return best, [n for n, iv in intervals.items() if n != best and iv.overlaps(intervals[best])]


def lead_sentence(title: str, intervals: Mapping[str, Interval], what: str, fmt: str = "{:.2f}") -> str:
    """'code completion: **x** leads in <what> (m ± h, n = N), level with y, z (the intervals overlap)', or
    'ahead of every other method (the intervals apart)'."""
    best, level = leader(intervals)
    iv = intervals[best]
    head = f"{title}: **{best}** leads in {what} ({iv.short(fmt)}, n = {iv.n})"
    if not level:
        return head + ", ahead of every other method (the intervals apart)"
    if len(level) == len(intervals) - 1:
        return head + ", level with every other method (the intervals overlap)"
    return head + f", level with {', '.join(level)} (the intervals overlap)"


def against(iv: Interval, value: float = 1.0) -> str:
    """'faster than' / 'slower than' / 'level with' a fixed speedup (plain decoding's 1.0), from the interval."""
    return {"above": "faster than", "below": "slower than", "level": "level with"}[
        standing_to_value(iv, value)
    ]


def model_fit_sentence(
    measured: Mapping[str, Interval],
    predicted: Mapping[str, float],
    model: str = "the model",
    anchor: float | None = None,
    leaves_out: str = "",
) -> str:
    """How measured intervals sit against a model's predictions, per name: inside, above, below. With an
    `anchor` (say 1.0), also whether every point apart from the model lies between it and the anchor; then
    `leaves_out` says why (what the model leaves out)."""
    missing = [n for n in measured if n not in predicted]
    if missing:
        raise ValueError(f"predicted lacks {missing}; need one prediction per measured name")
    names = list(measured)
    sides = {n: standing_to_value(measured[n], float(predicted[n])) for n in names}
    fit = compare_to_model([measured[n] for n in names], [float(predicted[n]) for n in names])
    by = {s: [n for n in names if sides[n] == s] for s in ("level", "above", "below")}
    out = f"{model} lies inside the measured 95% interval for {fit.level} of {fit.n}"
    if by["level"] and fit.level < fit.n:
        out += f" ({', '.join(by['level'])})"
    if by["above"]:
        out += f"; the measurement lies above it for {', '.join(by['above'])}"
    if by["below"]:
        out += f"; below it for {', '.join(by['below'])}"
    out += "."
    apart = by["above"] + by["below"]
    if anchor is not None and apart:
        toward = all(
            (sides[n] == "below") == (float(predicted[n]) > anchor) and float(predicted[n]) != anchor
            for n in apart
        )
        if toward:
            lead = (
                f"The one point apart from {model}"
                if len(apart) == 1
                else f"Both points apart from {model}"
                if len(apart) == 2
                else f"All {len(apart)} points apart from {model}"
            )
            out += f" {lead} {'lies' if len(apart) == 1 else 'lie'} on its side toward {anchor:g}"
            out += f": {leaves_out}" if leaves_out else "."
        else:
            out += f" The points apart from {model} do not all lie on its side toward {anchor:g}."
    elif fit.one_sided and leaves_out:
        out += f" Every point apart from {model} lies {fit.one_sided} it: {leaves_out}"
    return out


def published_sentence(measured: Mapping[str, Interval], published: Mapping[str, float], source: str) -> str:
    """Per name in both: the measured interval above, below or around the published number."""
    names = [n for n in measured if n in published]
    if not names:
        raise ValueError(f"no name is in both measured {list(measured)} and published {list(published)}")
    words = {"above": "above", "below": "below", "level": "level with"}
    parts = [
        f"{n} {measured[n].short()} (n = {measured[n].n}) is {words[standing_to_value(measured[n], published[n])]} "
        f"{source}'s {published[n]:.2f}x"
        for n in names
    ]
    return "; ".join(parts) + "."


def standing_to_leader(intervals: Mapping[str, Interval], name: str) -> str:
    """'ahead' when `name` leads with its interval apart from every other, 'level' when it leads or overlaps
    the leader's interval, 'behind' when its interval lies below the leader's."""
    if name not in intervals:
        raise ValueError(f"name={name!r} is not among {list(intervals)}")
    best, level = leader(intervals)
    if best == name:
        return "level" if level else "ahead"
    return "level" if name in level else "behind"

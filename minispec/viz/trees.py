"""Figures of token trees (chapters 3 and 4): the tree, its attention mask and buffers, KV compaction, EAGLE-2's
expansion, and the measurements that go with them (head accuracy, calibration, per-depth acceptance, FR-Spec's
draft vocabulary and what a truncated vocabulary keeps and saves).

vLLM has no counterpart (v0.32.0 has no tree speculation). Everything is matplotlib (no graphviz): a tree is
laid out in layers, depth left to right, leaves one row each and every parent centred on its children. A tree
is a `SpecTree` (`minispec/trees/spec_tree.py`), an EAGLE `DraftTree`, a `StepTrace`
(`minispec/teach/traces.py`) or a plain parent list (-1 at the root). Every function returns a Figure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from minispec.teach.stats import Interval, proportion_interval
from minispec.viz.intervals import bar_with_interval, errorbar, n_label

Decode = Callable[[int], str]
ACCEPTED, REJECTED, ROOT, FRONTIER = "#2ca02c", "#9e9e9e", "#1f77b4", "#ff7f0e"


def token_text(decode: Decode | None, token_id: int, max_chars: int = 10) -> str:
    """A token's text with visible whitespace (␣ space, ⏎ newline, ⇥ tab), cut to `max_chars`."""
    if decode is None:
        return str(token_id)
    text = decode(int(token_id)).replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥")
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def message_figure(text: str, width: float = 8.0) -> Figure:
    """A one-line figure holding a message (what a widget shows for a setting it refuses)."""
    fig = Figure(figsize=(width, 1.0))
    fig.text(0.02, 0.5, text, color="#d62728", fontsize=9, va="center", wrap=True)
    return fig


def _parents(tree) -> list[int]:
    parents = list(getattr(tree, "parents", tree))
    if not parents or parents[0] != -1 or any(not 0 <= p < i for i, p in enumerate(parents[1:], start=1)):
        raise ValueError(f"parents={parents[:8]} must start with -1 and list each parent before its child")
    return parents


def tree_layout(parents: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of every node: x = depth; leaves take rows 0, 1, 2, ... in depth-first order (children in
    index order) and every parent sits at the mean of its first and last child."""
    parents = _parents(parents)
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    depth = np.zeros(n)
    for i, p in enumerate(parents[1:], start=1):
        children[p].append(i)
        depth[i] = depth[p] + 1
    y = np.zeros(n)
    next_row = [0.0]

    def place(u: int) -> None:
        if not children[u]:
            y[u] = next_row[0]
            next_row[0] += 1
            return
        for c in children[u]:
            place(c)
        y[u] = (y[children[u][0]] + y[children[u][-1]]) / 2

    place(0)
    return depth, y


def _tree_parts(tree, tokens, accepted_path, scores):
    """Defaults read from a DraftTree ([root] + tokens, cumulative scores, accepted) or a StepTrace."""
    if hasattr(tree, "node_tokens"):  # a StepTrace
        tokens = tokens if tokens is not None else [tree.root_token, *tree.node_tokens]
        accepted_path = accepted_path if accepted_path is not None else tree.accepted
    elif hasattr(tree, "root_token"):  # a DraftTree
        tokens = tokens if tokens is not None else [tree.root_token, *tree.tokens]
        scores = scores if scores is not None else tree.scores
        accepted_path = accepted_path if accepted_path is not None else tree.accepted
    parents = _parents(tree)
    for name, values, sizes in (
        ("tokens", tokens, (len(parents), len(parents) - 1)),
        ("scores", scores, (len(parents) - 1,)),
    ):
        if values is not None and len(values) not in sizes:
            raise ValueError(
                f"{name} has {len(values)} entries; the tree has {len(parents) - 1} nodes and a root"
            )
    return parents, tokens, list(accepted_path or []), scores


def draw_tree(
    tree,
    tokens=None,
    accepted_path=None,
    scores=None,
    decode: Decode | None = None,
    ax=None,
    title: str | None = None,
    score_label: str = "score",
    norm=None,
    faint=None,
    outline=None,
    cmap: str = "viridis",
    labels: Sequence[str] | None = None,
) -> Figure:
    """Draw a token tree. `tokens`: [N + 1] (root first) or [N], shown through `decode`; `labels` [N + 1]:
    text to show instead; `scores` [N] colour the nodes (colour bar labelled `score_label`); `accepted_path`:
    the accepted nodes, drawn bold with their edges; `faint`: nodes drawn pale (EAGLE-2's pruned nodes);
    `outline`: nodes ringed in orange (a frontier)."""
    parents, tokens, accepted, scores = _tree_parts(tree, tokens, accepted_path, scores)
    if labels is not None and len(labels) != len(parents):
        raise ValueError(f"labels has {len(labels)} entries; the tree has {len(parents)} with the root")
    x, y = tree_layout(parents)
    fig = (
        ax.figure
        if ax is not None
        else Figure(figsize=(2.2 + 1.7 * x.max(), 1.2 + 0.42 * (y.max() + 1)), layout="constrained")
    )
    ax = ax if ax is not None else fig.add_subplot()
    faint, outline, on_path = set(faint or ()), set(outline or ()), set(accepted) | {0}
    colours = [ROOT] + [REJECTED] * (len(parents) - 1)
    if scores is not None:
        norm = norm or mpl.colors.Normalize(
            min(scores), max(scores) if max(scores) > min(scores) else min(scores) + 1
        )
        mapper = mpl.cm.ScalarMappable(norm=norm, cmap=cmap)
        colours[1:] = [mapper.to_rgba(s) for s in scores]
        fig.colorbar(mapper, ax=ax, label=score_label, fraction=0.04, pad=0.01)
    for u in range(1, len(parents)):
        p = parents[u]
        bold = u in on_path and p in on_path
        ax.plot(
            [x[p], x[u]],
            [y[p], y[u]],
            color="black" if bold else "#bdbdbd",
            lw=3 if bold else 1,
            alpha=0.25 if u in faint else 1,
            zorder=1,
        )
    for u in range(len(parents)):
        if labels is not None:
            label = labels[u]
        elif (
            tokens is not None and (u > 0 or len(tokens) == len(parents)) and (u > 0 or tokens[0] is not None)
        ):
            label = token_text(decode, tokens[u] if len(tokens) == len(parents) else tokens[u - 1])
        else:
            label = "root" if u == 0 else str(u)
        r, g, b, _ = mpl.colors.to_rgba(colours[u])
        light = 0.299 * r + 0.587 * g + 0.114 * b > 0.55
        ax.text(
            x[u],
            y[u],
            label,
            ha="center",
            va="center",
            fontsize=8,
            zorder=3,
            color="black" if light else "white",
            alpha=0.5 if u in faint else 1,
            fontweight="bold" if u in on_path else "normal",
            bbox=dict(
                boxstyle="round,pad=0.3",
                fc=colours[u],
                alpha=0.3 if u in faint else 1,
                ec=FRONTIER if u in outline else ("black" if u in on_path else "white"),
                lw=2.5 if (u in outline or u in on_path) else 0.5,
            ),
        )
    ax.set_xlim(-0.6, x.max() + 0.6)
    ax.set_ylim(y.max() + 0.7, -0.7)
    ax.set_xticks(range(int(x.max()) + 1))
    ax.set_xticklabels(["root"] + [f"depth {d}" for d in range(1, int(x.max()) + 1)], fontsize=8)
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def plot_step(trace, decode: Decode | None = None, temperature: float = 1.0) -> Figure:
    """One recorded verification (a StepTrace): colour = the target's probability of each node's token after
    its parent (what rejection sampling accepts a one-hot draft with), accepted path bold."""
    emitted = " ".join(token_text(decode, t) for t in trace.emitted)
    fig = draw_tree(
        trace,
        decode=decode,
        scores=trace.target_probs(temperature),
        norm=mpl.colors.Normalize(0, 1),
        score_label="target p(token | parent)",
        title=f"{trace.method} step {trace.step}: {trace.num_nodes} nodes, {len(trace.accepted)} "
        f"accepted; emits [{emitted}] (last = {'bonus' if _is_bonus(trace) else 'recovered'})",
    )
    return fig


def _is_bonus(trace) -> bool:
    end = trace.accepted[-1] if trace.accepted else 0
    return end != 0 and end not in trace.parents[1:]


# ---- buffers -----------------------------------------------------------------------------------------------
def plot_tree_mask(tree, context_len: int = 3, ax=None) -> Figure:
    """The step's attention mask over [context + root + nodes]: context rows causal (earlier steps), the
    step's rows (root and nodes) see the whole context and, inside the tree, their ancestors and themselves."""
    from minispec.trees.spec_tree import SpecTree

    parents = _parents(tree)
    tree_mask = SpecTree(parents).attention_mask().numpy()  # [N + 1, N + 1]
    c, n = context_len, len(parents)
    full = np.tril(np.ones((c + n, c + n)))  # causal over the whole sequence
    full[c:, c:] = 2 * tree_mask  # the tree block replaces causal order among the new tokens
    full[c:, :c] = 1.5
    fig = ax.figure if ax is not None else Figure(figsize=(5.2, 4.6), layout="constrained")
    ax = ax if ax is not None else fig.add_subplot()
    cmap = mpl.colors.ListedColormap(["#f5f5f5", "#bdbdbd", "#9ecae1", "#08519c"])
    ax.imshow(
        full, cmap=cmap, norm=mpl.colors.BoundaryNorm([0, 0.5, 1.25, 1.75, 2.5], 4), interpolation="nearest"
    )
    ax.add_patch(Rectangle((c - 0.5, c - 0.5), n, n, fill=False, ec="#d62728", lw=2))
    labels = [f"c{i}" for i in range(c)] + ["root"] + [str(u) for u in range(1, n)]
    ax.set_xticks(range(c + n), labels, fontsize=7, rotation=90)
    ax.set_yticks(range(c + n), labels, fontsize=7)
    ax.set_xlabel("key (cached context, then this step's tokens)")
    ax.set_ylabel("query")
    ax.set_title("tree mask (red box) inside the causal mask", fontsize=10)
    return fig


def plot_tree_buffers(tree, ax=None) -> Figure:
    """Per node: rank path, parent, position id (depth); then retrieve_indices, one row per leaf."""
    from minispec.trees.spec_tree import SpecTree

    spec = tree if isinstance(tree, SpecTree) else SpecTree(_parents(tree))
    rows = [["node", "path", "parent", "position id"]]
    for u in range(spec.num_nodes + 1):
        path = "root" if u == 0 else (str(spec.paths[u - 1]) if spec.paths else "-")
        rows.append([str(u), path, str(spec.parents[u]), str(spec.depths[u])])
    retrieve = spec.retrieve_indices().tolist()
    fig = (
        ax.figure
        if ax is not None
        else Figure(figsize=(4.4, 0.5 + 0.22 * (len(rows) + len(retrieve) + 2)), layout="constrained")
    )
    ax = ax if ax is not None else fig.add_subplot()
    ax.axis("off")
    lines = [f"{a:>4}  {b:<14}{c:>6}  {d:>11}" for a, b, c, d in rows]
    lines += ["", "retrieve_indices (one row per leaf):"] + ["  " + str(r) for r in retrieve]
    ax.text(0, 1, "\n".join(lines), family="monospace", fontsize=7.5, va="top", transform=ax.transAxes)
    ax.set_title("buffers", fontsize=10)
    return fig


def plot_tree_overview(tree, context_len: int = 3, errors: str = "raise") -> Figure:
    """Tree, mask and buffers side by side. `tree`: a SpecTree or rank paths (vLLM's string of tuples);
    with errors="show" an invalid tree draws its error message instead of raising (for a text-box widget)."""
    from minispec.trees.spec_tree import SpecTree

    if errors not in ("raise", "show"):
        raise ValueError(f"errors={errors!r} must be 'raise' or 'show'")
    try:
        spec = tree if isinstance(tree, SpecTree) else SpecTree.from_paths(tree)
    except ValueError as e:
        if errors == "raise":
            raise
        return message_figure(f"not a tree: {e}")
    width = 1.5 + 1.1 * spec.depth
    fig = Figure(figsize=(width + 9.0, max(4.6, 1.2 + 0.3 * spec.num_nodes)), layout="constrained")
    ax_t, ax_m, ax_b = fig.subplots(1, 3, width_ratios=[width, 5, 4.5])
    labels = (
        None
        if spec.paths is None
        else ["root"] + [f"{u}: " + ",".join(map(str, p)) for u, p in enumerate(spec.paths, start=1)]
    )
    draw_tree(
        spec,
        labels=labels,
        ax=ax_t,
        title=f"{spec.num_nodes} nodes, depth {spec.depth} (labels: node: rank path)",
    )
    plot_tree_mask(spec, context_len, ax=ax_m)
    plot_tree_buffers(spec, ax=ax_b)
    return fig


# ---- KV compaction -----------------------------------------------------------------------------------------
def plot_kv_compaction(trace, decode: Decode | None = None) -> Figure:
    """The step's cache positions before and after compaction (a StepTrace or VerificationRecord): before, the
    root and nodes 1..N in node order; after, the accepted path's keys and values copied to the positions
    right after the root (arrows, labelled source -> destination slot), the rest stale until overwritten."""
    parents, accepted, moved = list(trace.parents), list(trace.accepted), list(trace.kv_moved)
    n = len(parents)
    moves = [(node, depth) for depth, node in enumerate(accepted, start=1) if node != depth]
    if len(moves) != len(moved):
        raise ValueError(
            f"kv_moved has {len(moved)} entries; the accepted path {accepted} moves {len(moves)} nodes"
        )
    tokens = [getattr(trace, "root_token", None), *trace.node_tokens]
    fig = Figure(figsize=(max(6.0, 0.62 * n + 1.5), 3.2), layout="constrained")
    ax = fig.add_subplot()
    after_node = {0: 0, **{depth: node for depth, node in enumerate(accepted, start=1)}}
    for i in range(n):
        kept = i == 0 or i in accepted
        label = "root" if i == 0 else f"{i}\n{token_text(decode, tokens[i], 6) if decode else ''}"
        ax.add_patch(
            Rectangle(
                (i, 1.6),
                0.9,
                0.8,
                fc=ROOT if i == 0 else (ACCEPTED if kept else REJECTED),
                ec="white",
                alpha=1 if kept else 0.6,
            )
        )
        ax.text(
            i + 0.45, 2.0, label, ha="center", va="center", fontsize=7, color="white" if kept else "black"
        )
        node = after_node.get(i)
        ax.add_patch(
            Rectangle(
                (i, 0),
                0.9,
                0.8,
                fc=ROOT if i == 0 else (ACCEPTED if node else "white"),
                ec="#757575",
                hatch=None if node is not None else "//",
                lw=0.6,
            )
        )
        if node is not None:
            ax.text(
                i + 0.45,
                0.4,
                "root" if i == 0 else str(node),
                ha="center",
                va="center",
                fontsize=7,
                color="white",
            )
    for (node, depth), (src, dst) in zip(moves, moved):
        ax.add_patch(
            FancyArrowPatch(
                (node + 0.45, 1.6),
                (depth + 0.45, 0.8),
                arrowstyle="-|>",
                mutation_scale=12,
                color="black",
                lw=1.2,
            )
        )
        ax.text(
            (node + depth) / 2 + 0.45,
            1.2,
            f"{src}→{dst}",
            fontsize=7,
            ha="center",
            bbox=dict(fc="white", ec="none", pad=0.5),
        )
    ax.set_xlim(-0.2, n + 0.1)
    ax.set_ylim(-0.3, 2.7)
    ax.set_yticks([0.4, 2.0], ["after", "before"])
    ax.set_xticks([i + 0.45 for i in range(n)], [f"ctx+{i}" for i in range(n)], fontsize=7, rotation=90)
    ax.set_title(
        f"KV compaction: accepted path {accepted or '(none)'}, {len(moves)} slot copies "
        "(hatched: stale, overwritten by later tokens)",
        fontsize=9,
    )
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return fig


# ---- EAGLE-2 ---------------------------------------------------------------------------------------------
def plot_expansion(tree, decode: Decode | None = None) -> Figure:
    """EAGLE-2's expansion of one step (a DraftTree or StepTrace with `.expansion`): every generated node,
    pruned ones faint, kept ones solid, the frontier of each depth ringed in orange, the accepted path bold,
    colour = cumulative draft log-probability."""
    e = tree.expansion
    if e is None:
        raise ValueError(
            "the tree has no expansion: it comes from an EAGLE-2 (dynamic tree) step with tree_log on"
        )
    parents = [-1] + [
        0 if p < 0 else p + 1 for p in e.parents
    ]  # node 0 is the root, generated node g is g + 1
    kept = {g + 1 for g in e.kept}
    accepted = [e.kept[u - 1] + 1 for u in (tree.accepted or [])]
    frontier = {g + 1 for f in e.frontiers for g in f}
    root = tree.root_token if hasattr(tree, "root_token") else None
    fig = draw_tree(
        parents,
        tokens=[root, *e.tokens],
        accepted_path=accepted,
        scores=e.scores,
        decode=decode,
        faint=set(range(1, len(parents))) - kept,
        outline=frontier,
        score_label="cumulative draft log-prob",
        title=f"EAGLE-2: {len(e.tokens)} generated, {len(kept)} kept (solid), frontier ringed, "
        f"accepted path bold ({len(accepted)} nodes)",
    )
    return fig


# ---- measurements ----------------------------------------------------------------------------------------
def plot_head_accuracy(
    per_rank, num_positions: Sequence[int] | None = None, title: str = "Medusa heads on held-out text"
) -> Figure:
    """`per_rank` [heads, ranks]: P(head i's rank-r candidate is the token). Left: the table as a heatmap;
    right: top-k accuracy (cumulative over ranks) per head. With `num_positions` (positions scored per head)
    the right panel draws Wilson 95% intervals and the titles give n."""
    a = np.asarray(per_rank, dtype=np.float64)
    if num_positions is not None and len(num_positions) != a.shape[0]:
        raise ValueError(f"num_positions has {len(num_positions)} entries; per_rank has {a.shape[0]} heads")
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    ax_h, ax_c = fig.subplots(1, 2)
    im = ax_h.imshow(a, cmap="Blues", vmin=0, vmax=max(a.max(), 1e-9), aspect="auto")
    for (i, r), v in np.ndenumerate(a):
        ax_h.text(
            r,
            i,
            f"{v:.2f}",
            ha="center",
            va="center",
            fontsize=8,
            color="white" if v > a.max() / 2 else "black",
        )
    ax_h.set_xticks(range(a.shape[1]), [str(r + 1) for r in range(a.shape[1])])
    ax_h.set_yticks(range(a.shape[0]), [f"head {i} (t+{i + 2})" for i in range(a.shape[0])])
    ax_h.set_xlabel("rank of the candidate")
    n_text = "" if num_positions is None else f", n = {min(num_positions)} to {max(num_positions)} positions"
    ax_h.set_title(f"{title}: P(rank r is right){n_text}", fontsize=10)
    fig.colorbar(im, ax=ax_h, fraction=0.04)
    ranks = np.arange(1, a.shape[1] + 1)
    for i, row in enumerate(a):
        top = np.cumsum(row)
        if num_positions is None:
            ax_c.plot(ranks, top, "o-", label=f"head {i}")
        else:
            n = int(num_positions[i])
            ivs = [proportion_interval(round(v * n), n) for v in np.clip(top, 0, 1)]
            errorbar(ax_c, ranks, ivs, fmt="o-", label=f"head {i}")
    ax_c.set_xlabel("k")
    ax_c.set_ylabel("top-k accuracy")
    ax_c.set_ylim(0, 1)
    ax_c.set_xticks(ranks)
    ax_c.grid(alpha=0.3)
    ax_c.legend(fontsize=8)
    ax_c.set_title(
        "top-k accuracy: the right token is often a runner-up"
        + ("" if num_positions is None else " (95% intervals)"),
        fontsize=10,
    )
    return fig


def plot_draft_vocab(
    sizes: Sequence[int], coverage: Sequence[float], lm_head_share: Sequence[float], num_tokens: int
) -> Figure:
    """FR-Spec's trade: for each draft vocabulary size, the share of `num_tokens` held-out tokens it covers
    (what the head can still propose) and the lm_head's share of the weights a head forward reads (what the
    head still pays for scoring)."""
    if not (len(sizes) == len(coverage) == len(lm_head_share)) or not len(sizes):
        raise ValueError(
            f"sizes, coverage and lm_head_share must have one entry each per size; got lengths "
            f"{len(sizes)}, {len(coverage)}, {len(lm_head_share)}"
        )
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.subplots()
    ax.plot(
        sizes, coverage, "o-", color=ACCEPTED, label=f"held-out tokens in the vocabulary (of {num_tokens})"
    )
    ax.plot(sizes, lm_head_share, "s--", color=FRONTIER, label="lm_head's share of a head forward's weights")
    for x, c in zip(sizes, coverage):
        ax.annotate(f"{c:.0%}", (x, c), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(sizes), [str(n) for n in sizes])
    ax.set_xlabel("draft vocabulary size (the most frequent tokens of the training split)")
    ax.set_ylim(0, 1.08)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("FR-Spec: a quarter of the vocabulary covers most tokens", fontsize=10)
    return fig


def plot_vocab_trade(
    sizes: Sequence[int],
    tokens_per_forward: Sequence[Interval],
    draft_cost: Sequence[Interval],
    vocab_size: int,
) -> Figure:
    """A truncated draft vocabulary, measured per size: tokens per target forward on the left, the drafting
    call's time per step over a plain decoding step (c) on the right, each with its 95% interval and n; the
    size equal to `vocab_size` is the whole vocabulary."""
    if not (len(sizes) == len(tokens_per_forward) == len(draft_cost)) or not len(sizes):
        raise ValueError(
            f"sizes, tokens_per_forward and draft_cost must have one entry each per size; got lengths "
            f"{len(sizes)}, {len(tokens_per_forward)}, {len(draft_cost)}"
        )
    labels = ["all" if n == vocab_size else str(n) for n in sizes]
    colors = [ROOT if n == vocab_size else FRONTIER for n in sizes]
    x = np.arange(len(sizes))
    fig = Figure(figsize=(8.4, 3.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    for ax, ivs, fmt, ylabel in (
        (left, tokens_per_forward, "{:.2f}", "tokens per target forward"),
        (right, draft_cost, "{:.3f}", "drafting call / plain step (c)"),
    ):
        bar_with_interval(ax, x, ivs, color=colors)
        for i, iv in enumerate(ivs):
            ax.annotate(
                fmt.format(iv.mean),
                (i, iv.high),
                textcoords="offset points",
                xytext=(0, 3),
                ha="center",
                fontsize=8,
            )
        ax.set_ylabel(ylabel)
        ax.set_xticks(x, labels)
        ax.set_xlabel(f"tokens the heads score (of {vocab_size})")
        ax.grid(axis="y", alpha=0.3)
        ax.set_title(f"95% intervals, {n_label(ivs)}", fontsize=9)
    fig.suptitle("A smaller draft vocabulary: what the drafts keep, what a drafting call saves", fontsize=10)
    return fig


def plot_calibration(buckets, title: str = "EAGLE draft scores against acceptance") -> Figure:
    """Calibration (from `minispec.teach.calibration`): per bucket of draft probability, the share of nodes the
    target accepted, with Wilson 95% intervals and the node counts; the diagonal is perfect calibration."""
    from minispec.teach.theory import wilson_interval

    used = [b for b in buckets if b.count > 0]
    if not used:
        raise ValueError("every bucket is empty: no scored node to plot")
    xs = np.array([b.mean_score for b in used])
    rate = np.array([b.accepted / b.count for b in used])
    lo, hi = wilson_interval([b.accepted for b in used], [b.count for b in used])
    fig = Figure(figsize=(5.6, 4.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], "--", color="#9e9e9e", label="perfect calibration")
    ax.errorbar(
        xs,
        rate,
        yerr=[rate - lo, hi - rate],
        fmt="o-",
        capsize=3,
        color="#d62728",
        label="measured (95% interval)",
    )
    for x, r, b in zip(xs, rate, used):
        ax.annotate(f"n={b.count}", (x, r), textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("draft probability (bucket mean)")
    ax.set_ylabel("share accepted by the target")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title, fontsize=10)
    return fig


def plot_per_depth(rows: dict[str, tuple[Sequence[int], int]], title: str = "per-depth acceptance") -> Figure:
    """rows: name -> (accepted count per depth, verifications). Bars: share of verifications whose accepted
    path reached depth d, Wilson 95% intervals, counts in the legend."""
    from minispec.teach.theory import wilson_interval

    if not rows:
        raise ValueError("rows is empty")
    depth = max(len(c) for c, _ in rows.values())
    fig = Figure(figsize=(max(6.5, 1.1 * depth + 3), 4.0), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(rows)
    for j, (name, (counts, drafts)) in enumerate(rows.items()):
        counts = np.asarray(list(counts) + [0] * (depth - len(counts)))
        rate = counts / drafts
        lo, hi = wilson_interval(counts, np.full(depth, drafts))
        xs = np.arange(1, depth + 1) + (j - (len(rows) - 1) / 2) * width
        ax.bar(xs, rate, width, label=f"{name} ({drafts} steps)")
        ax.errorbar(xs, rate, yerr=[rate - lo, hi - rate], fmt="none", ecolor="black", capsize=2, lw=0.8)
    ax.set_xticks(range(1, depth + 1))
    ax.set_xlabel("depth on the accepted path")
    ax.set_ylabel("share of verifications reaching it")
    ax.set_ylim(0, 1.05)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    return fig


def plot_grid_heatmaps(
    panels: dict[str, np.ndarray],
    row_values: Sequence,
    col_values: Sequence,
    row_label: str,
    col_label: str,
    fmt: str = "{:.2f}",
) -> Figure:
    """One annotated heatmap per panel (title -> [rows, cols] array; NaN cells are left blank)."""
    fig = Figure(figsize=(4.6 * len(panels), 3.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    for ax, (name, values) in zip(axes, panels.items()):
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (len(row_values), len(col_values)):
            raise ValueError(
                f"panel {name!r} has shape {v.shape}; expected {(len(row_values), len(col_values))}"
            )
        im = ax.imshow(v, cmap="viridis", aspect="auto")
        finite = v[np.isfinite(v)]
        mid = finite.mean() if finite.size else 0
        for (i, j), x in np.ndenumerate(v):
            if np.isfinite(x):
                ax.text(
                    j,
                    i,
                    fmt.format(x),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if x < mid else "black",
                )
        ax.set_xticks(range(len(col_values)), [str(c) for c in col_values])
        ax.set_yticks(range(len(row_values)), [str(r) for r in row_values])
        ax.set_xlabel(col_label)
        ax.set_ylabel(row_label)
        ax.set_title(name, fontsize=10)
        fig.colorbar(im, ax=ax, fraction=0.05)
    return fig


def plot_tree_curve(
    curve: Sequence[float],
    points: dict[str, tuple[int, float]] | None = None,
    measured: dict[str, tuple[float, Interval]] | None = None,
) -> Figure:
    """Predicted tokens per target forward of the best tree of n nodes (line); `points`: other trees'
    predictions (name -> (nodes, E)), hollow markers; `measured`: engine measurements (name -> (nodes per
    step, Interval)), filled markers with their 95% interval, same shape and colour as the name's prediction."""
    n = np.arange(1, len(curve) + 1)
    fig = Figure(figsize=(7.2, 4.4), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(n, curve, "-", color="#1f77b4", label="best tree of n nodes (model)")
    names = list(dict.fromkeys([*(points or {}), *(measured or {})]))
    marker = {name: "sD^vP*Xo<>"[i % 10] for i, name in enumerate(names)}
    colour = {name: f"C{(i + 1) % 10}" for i, name in enumerate(names)}
    for name, (nodes, e) in (points or {}).items():
        ax.plot(
            nodes,
            e,
            marker[name],
            ms=9,
            mfc="none",
            mew=1.8,
            color=colour[name],
            label=f"{name}, model: {e:.2f}",
        )
    for name, (nodes, iv) in (measured or {}).items():
        errorbar(
            ax,
            [nodes],
            [iv],
            fmt=marker[name],
            ms=7,
            color=colour[name],
            label=f"{name}, measured: {iv.short()}",
        )
    ax.set_xlabel("nodes verified per step")
    ax.set_ylabel("tokens per target forward")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    title = "what a tree of n nodes can buy"
    if measured:
        title += f" (measured: 95% intervals, {n_label([iv for _, iv in measured.values()])} verifications)"
    ax.set_title(title, fontsize=10)
    return fig


def plot_setting_intervals(
    panels: dict[str, dict[str, Interval]], reference: dict[str, float] | None = None
) -> Figure:
    """One panel per measured quantity (title -> {setting: Interval}): each setting's mean and 95% interval as
    a horizontal bar; `reference` (title -> value) draws a dashed line, e.g. speed 1 = plain decoding."""
    if not panels or any(not v for v in panels.values()):
        raise ValueError("panels must map each title to a non-empty {setting: Interval}")
    fig = Figure(
        figsize=(4.8 * len(panels), 0.45 * max(len(v) for v in panels.values()) + 1.6), layout="constrained"
    )
    axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
    for ax, (title, ivs) in zip(axes, panels.items()):
        names = list(ivs)
        ys = np.arange(len(names))
        means = np.array([ivs[k].mean for k in names])
        err = np.array(
            [[ivs[k].mean - ivs[k].low for k in names], [ivs[k].high - ivs[k].mean for k in names]]
        )
        ax.errorbar(means, ys, xerr=err, fmt="o", capsize=3, color=FRONTIER)
        if reference and title in reference:
            ax.axvline(reference[title], color="#9e9e9e", ls="--", lw=1)
        ax.set_yticks(ys, names)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(f"{title}\n95% intervals, {n_label(list(ivs.values()))}", fontsize=9)
    return fig


def plot_emitted_distribution(
    p,
    frequencies: dict[str, np.ndarray],
    decode: Decode | None = None,
    top: int = 8,
    title: str = "first emitted token",
) -> Figure:
    """Bars over the target's `top` likeliest tokens: the target distribution p and each method's empirical
    frequencies (name -> [V] counts or shares); the remaining mass is pooled in "other"."""
    p = np.asarray(p, dtype=np.float64)
    order = np.argsort(-p, kind="stable")[:top]
    fig = Figure(figsize=(8.5, 3.8), layout="constrained")
    ax = fig.add_subplot()
    series = {
        "target p": p,
        **{k: np.asarray(v, dtype=np.float64) / np.sum(v) for k, v in frequencies.items()},
    }
    width = 0.8 / len(series)
    xs = np.arange(top + 1)
    for j, (name, dist) in enumerate(series.items()):
        heights = np.append(dist[order], 1 - dist[order].sum())
        ax.bar(xs + (j - (len(series) - 1) / 2) * width, heights, width, label=name)
    ax.set_xticks(xs, [token_text(decode, t, 8) for t in order] + ["other"], fontsize=8)
    ax.set_ylabel("probability / share")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title, fontsize=10)
    return fig


def plot_alignment(
    tokens: Sequence[int], decode: Decode | None, predicted: Sequence[int] | None = None
) -> Figure:
    """EAGLE's shifted alignment on a prompt x_0 .. x_{n-1}: draft entry p reads the token x_{p+1} and the
    target's feature f_p, sits at position p and predicts x_{p+2}; `predicted` [n - 2] are the draft's
    argmax predictions per entry (green when they equal x_{p+2})."""
    n = len(tokens)
    if n < 3:
        raise ValueError(f"tokens has {n} entries; the alignment needs at least 3")
    fig = Figure(figsize=(1.0 + 0.95 * n, 3.6), layout="constrained")
    ax = fig.add_subplot()
    rows = {"token x_p": 3, "target feature f_p": 2, "draft entry p reads": 1, "draft predicts": 0}
    for p in range(n):
        ax.text(
            p,
            3,
            token_text(decode, tokens[p], 7),
            ha="center",
            va="center",
            fontsize=8,
            bbox=dict(boxstyle="round", fc="#deebf7", ec="none"),
        )
        ax.text(
            p,
            2,
            f"f{p}",
            ha="center",
            va="center",
            fontsize=8,
            bbox=dict(boxstyle="round", fc="#fdd0a2", ec="none"),
        )
        if p <= n - 2:
            ax.text(
                p,
                1,
                f"x{p + 1}, f{p}",
                ha="center",
                va="center",
                fontsize=7,
                bbox=dict(boxstyle="round", fc="#e5e5e5", ec="none"),
            )
            ax.add_patch(
                FancyArrowPatch(
                    (p + 1, 2.75),
                    (p + 0.1, 1.25),
                    arrowstyle="-|>",
                    mutation_scale=8,
                    color="#6baed6",
                    lw=0.8,
                )
            )
            ax.add_patch(
                FancyArrowPatch(
                    (p, 1.78), (p, 1.25), arrowstyle="-|>", mutation_scale=8, color="#fd8d3c", lw=0.8
                )
            )
        if predicted is not None and p < len(predicted):
            right = p + 2 < n and int(predicted[p]) == int(tokens[p + 2])
            ax.text(
                p,
                0,
                token_text(decode, predicted[p], 7),
                ha="center",
                va="center",
                fontsize=8,
                bbox=dict(boxstyle="round", fc=ACCEPTED if right else "#fcbba1", ec="none"),
            )
    ax.set_yticks(list(rows.values()), list(rows))
    ax.set_xticks(range(n), [f"p={p}" for p in range(n)], fontsize=7)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(-0.6, 3.6)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(
        "EAGLE's alignment: entry p reads (x_{p+1}, f_p) and predicts x_{p+2} "
        "(green: equal to the text's x_{p+2})",
        fontsize=10,
    )
    return fig


__all__ = [
    "draw_tree",
    "message_figure",
    "plot_alignment",
    "plot_calibration",
    "plot_emitted_distribution",
    "plot_expansion",
    "plot_grid_heatmaps",
    "plot_head_accuracy",
    "plot_kv_compaction",
    "plot_per_depth",
    "plot_step",
    "plot_tree_buffers",
    "plot_setting_intervals",
    "plot_tree_curve",
    "plot_tree_mask",
    "plot_tree_overview",
    "token_text",
    "tree_layout",
]

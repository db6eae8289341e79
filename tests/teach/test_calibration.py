"""minispec/teach/calibration.py: hand-counted buckets on a synthetic step."""

import math

import pytest
import torch

from minispec.teach.calibration import calibration_table, scored_nodes
from minispec.teach.traces import StepTrace


def _trace() -> StepTrace:
    # root children 1 (p 0.9, accepted) and 2 (p 0.05); 3 under 1 (p 0.5, rejected); 4 under 2 (never judged)
    logp = [math.log(0.9), math.log(0.05), math.log(0.5), math.log(0.95)]
    return StepTrace("eagle", 0, [1, 2], [-1, 0, 0, 1, 2], [5, 6, 7, 8], logp, torch.zeros(5, 10), [1], 9, [])


def test_node_and_path_scores() -> None:
    nodes = scored_nodes([_trace()], "node")
    assert [(round(s, 3), a) for s, a in nodes] == [(0.9, True), (0.05, False), (0.5, False)]
    paths = scored_nodes([_trace()], "path")
    assert [round(s, 4) for s, _ in paths] == [0.9, 0.05, 0.45, 0.0475]


def test_buckets_count_nodes() -> None:
    table = calibration_table([_trace(), _trace()], "node", edges=(0, 0.5, 1))
    assert [(b.count, b.accepted) for b in table] == [(2, 0), (4, 2)]  # 0.5 falls in [0.5, 1]
    assert table[1].mean_score == pytest.approx(0.7) and table[1].acceptance == pytest.approx(0.5)
    assert math.isnan(calibration_table([], edges=(0, 1))[0].acceptance)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="kind"):
        scored_nodes([_trace()], "tree")
    with pytest.raises(ValueError, match="edges"):
        calibration_table([_trace()], edges=(0.2, 1))
    no_scores = _trace()
    no_scores.draft_logprobs = None
    with pytest.raises(ValueError, match="no draft scores"):
        calibration_table([no_scores])

"""minispec.teach.tree_verdicts: every branch of every verdict, from hand-made intervals."""

import pytest

from minispec.teach.stats import Interval, ModelFit
from minispec.teach.tree_verdicts import (
    calibration_sentence,
    compare,
    depth_comparison,
    model_fit_sentence,
    regime_sentence,
    speed_sentence,
)

HIGH, LOW, MID = Interval(3.0, 2.8, 3.2, 20), Interval(2.0, 1.8, 2.2, 20), Interval(2.5, 1.9, 3.1, 20)


def test_compare_each_side():
    assert "is above B" in compare("A", HIGH, "B", LOW)
    assert "is below B" in compare("A", LOW, "B", HIGH)
    assert "cannot tell them apart" in compare("A", MID, "B", HIGH)
    assert "(n = 20)" in compare("A", MID, "B", HIGH)


def test_depth_comparison():
    text = depth_comparison("chain", [LOW, HIGH, MID], "tree", [HIGH, LOW, MID])
    assert "above the chain at depth 1" in text
    assert "below the chain at depth 2" in text
    assert "level with the chain at depth 3" in text
    assert "depths 1 and 2" in depth_comparison("chain", [LOW, LOW], "tree", [HIGH, HIGH])
    with pytest.raises(ValueError, match="one interval per depth"):
        depth_comparison("chain", [LOW], "tree", [])


def test_model_fit_sentence_each_side():
    assert "fall above it: up" in model_fit_sentence(ModelFit(3, 0, 1), "the model", "up", "down")
    assert "fall below it: down" in model_fit_sentence(ModelFit(0, 3, 1), "the model", "up", "down")
    assert "apart from it lie above it: up" in model_fit_sentence(
        ModelFit(2, 0, 2), "the model", "up", "down"
    )
    assert "apart from it lie below it: down" in model_fit_sentence(
        ModelFit(0, 1, 3), "the model", "up", "down"
    )
    assert "both sides" in model_fit_sentence(ModelFit(1, 1, 2), "the model", "up", "down")
    assert "Every point is level" in model_fit_sentence(ModelFit(0, 0, 4), "the model", "up", "down")


def test_regime_sentence_each_regime():
    assert "about free" in regime_sentence(Interval(1.1, 0.9, 1.3, 8), 17)
    assert "above 1 and below 17" in regime_sentence(Interval(4.0, 3.0, 5.0, 8), 17)
    assert "in proportion" in regime_sentence(Interval(17.0, 15.0, 19.0, 8), 17)
    with pytest.raises(ValueError, match="tokens=1"):
        regime_sentence(HIGH, 1)


def test_speed_sentence():
    text = speed_sentence({"a": Interval(1.5, 1.3, 1.7, 5), "b": Interval(1.4, 1.2, 1.6, 5)})
    assert "2 of 2 faster than plain decoding" in text and "1 other setting is level with it" in text
    assert "The fastest mean is a: 1.50 [1.30, 1.70] (n = 5) times the speed of plain decoding" in text
    text = speed_sentence({"a": Interval(0.8, 0.7, 0.9, 5), "b": Interval(1.0, 0.9, 1.1, 5)})
    assert "1 of 2 level with" in text and "1 of 2 slower than" in text
    assert "apart from every other" in speed_sentence(
        {"a": Interval(2.0, 1.9, 2.1, 5), "b": Interval(1.0, 0.9, 1.1, 5)}
    )
    with pytest.raises(ValueError, match="speeds is empty"):
        speed_sentence({})


def test_calibration_sentence_branches():
    low, high = Interval(0.2, 0.1, 0.3, 30), Interval(0.9, 0.8, 0.95, 30)
    assert "rises" in calibration_sentence(low, high, ModelFit(3, 0, 1))
    assert "under-confident" in calibration_sentence(low, high, ModelFit(3, 0, 1))
    assert "over-confident" in calibration_sentence(low, high, ModelFit(0, 3, 1))
    assert "too few buckets" in calibration_sentence(low, high, ModelFit(1, 0, 8))
    assert "both sides" in calibration_sentence(low, high, ModelFit(1, 1, 2))
    assert "close to calibrated" in calibration_sentence(low, high, ModelFit(0, 0, 4))
    assert "cannot show" in calibration_sentence(MID, HIGH, ModelFit(0, 0, 4))
    assert "falls" in calibration_sentence(high, low, ModelFit(0, 0, 4))

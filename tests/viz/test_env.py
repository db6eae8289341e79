"""Tests for minispec/viz/env.py: the environment report of chapter 0."""

import sys
import types

from minispec.viz.env import FALLBACK_ZOO_MODELS, EnvReport, env_report, zoo_model_names, zoo_status


def test_env_report_fields():
    report = env_report(zoo_models=())
    assert isinstance(report, EnvReport)
    assert report.python == sys.version.split()[0]
    assert report.packages["torch"].startswith("2.")
    assert report.cpu_count >= 1 and report.torch_threads >= 1
    table = report.to_markdown()
    assert table.startswith("| item | value |")
    assert "| torch |" in table and "GPU" in table


def test_zoo_status_says_not_built_yet(monkeypatch, tmp_path):
    fake = types.ModuleType("minispec.zoo")

    def missing(name):
        raise FileNotFoundError(f"no model {name}")

    fake.path = missing
    monkeypatch.setitem(sys.modules, "minispec.zoo", fake)
    monkeypatch.setattr("minispec.zoo", fake, raising=False)
    assert zoo_status("target").startswith("not built yet (FileNotFoundError")

    fake.path = lambda name: tmp_path / "nothing-here"
    assert zoo_status("target").startswith("not built yet (expected at")

    fake.path = lambda name: tmp_path
    assert zoo_status("target") == str(tmp_path)


def test_zoo_status_without_a_zoo_module(monkeypatch):
    import minispec

    monkeypatch.setitem(sys.modules, "minispec.zoo", None)  # import fails
    monkeypatch.delattr(minispec, "zoo", raising=False)  # even when an earlier test imported it
    assert zoo_status("target") == "not built yet (minispec.zoo is not available)"
    assert zoo_model_names() == FALLBACK_ZOO_MODELS
    report = env_report()
    missing = "not built yet (minispec.zoo is not available)"
    assert report.zoo == {name: missing for name in FALLBACK_ZOO_MODELS}

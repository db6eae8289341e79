"""minispec/config/__init__.py: every config importable from `minispec.config`, each defined in its mirror file."""

import minispec.config as config
from minispec.config.speculative_tree import SpeculativeTreeMixin

HOMES = {
    "ModelConfig": "model",
    "CacheConfig": "cache",
    "SchedulerConfig": "scheduler",
    "CompilationConfig": "compilation",
    "SpeculativeConfig": "speculative",
    "DynamicTreeConfig": "speculative_tree",
    "VllmConfig": "vllm",
}


def test_every_exported_name_is_there() -> None:
    assert sorted(config.__all__) == sorted(set(config.__all__))
    assert [name for name in config.__all__ if not hasattr(config, name)] == []
    assert set(HOMES) <= set(config.__all__)


def test_each_config_lives_in_its_mirror_file() -> None:
    for name, module in HOMES.items():
        assert getattr(config, name).__module__ == f"minispec.config.{module}", name


def test_speculative_config_takes_the_tree_checks() -> None:
    spec = config.SpeculativeConfig.from_dict({"method": "eagle", "model": "zoo:eagle", "total_tokens": 9})
    assert isinstance(spec, SpeculativeTreeMixin)
    assert spec.num_speculative_tokens == 8 and spec.dynamic_tree == config.DynamicTreeConfig(9, 6, 2)

"""Fixtures of the reliability suite: the small checkpoints (written once per session) and the shared
engines with their fresh-engine references."""

import pytest

from tests.reliability.harness import Engines
from tests.reliability.models import spec_configs, write_models


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return write_models(tmp_path_factory.mktemp("reliability_models"))


@pytest.fixture(scope="session")
def engines(models):
    return Engines(models, spec_configs(models))

"""vLLM's sampler tests call torch.set_default_device(...), which installs a device context for the whole
process: under pytest-xdist the next tests in the worker would inherit it (transformers then refuses to load a
model without `accelerate`). Each test here leaves the default device as it found it: unset."""

import pytest
import torch


@pytest.fixture(autouse=True)
def unset_default_device():
    yield
    torch.set_default_device(None)

"""minispec/config/speculative.py: `rejection_sample_method` and the synthetic keys, with vLLM v0.32.0's rules."""

import pytest

from minispec.config import SpeculativeConfig


def spec(**kwargs) -> SpeculativeConfig:
    return SpeculativeConfig.from_dict({"method": "ngram", "num_speculative_tokens": 3, **kwargs})


def test_default_is_standard_and_the_three_values_are_taken():
    assert spec().rejection_sample_method == "standard"
    assert spec(rejection_sample_method="block").rejection_sample_method == "block"
    s = spec(rejection_sample_method="synthetic", synthetic_acceptance_rates=[0.9, 0.5, 0.2])
    assert s.synthetic_acceptance_rates == [0.9, 0.5, 0.2]


def test_synthetic_length_resolves_to_the_minimum_variance_rates():
    s = spec(rejection_sample_method="synthetic", synthetic_acceptance_length=2.6)
    assert s.synthetic_acceptance_rates == pytest.approx([1.0, 0.6, 0.0])
    assert s.synthetic_acceptance_length is None  # consolidated, as vLLM does


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rejection_sample_method": "strict"}, r"rejection_sample_method='strict' is unknown.*standard"),
        ({"rejection_sample_method": "synthetic"}, "requires exactly one of synthetic_acceptance_rates or"),
        (
            {
                "rejection_sample_method": "synthetic",
                "synthetic_acceptance_rates": [0.5, 0.5, 0.5],
                "synthetic_acceptance_length": 2.0,
            },
            "requires exactly one of",
        ),
        (
            {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.5, 0.5]},
            r"synthetic_acceptance_rates must have length num_speculative_tokens=3, got \[0.5, 0.5\]",
        ),
        (
            {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [1.5, 0.5, 0.5]},
            r"entries must be in \[0, 1\], got \[1.5, 0.5, 0.5\]",
        ),
        (
            {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.5, 0.6, 0.1]},
            "must be non-increasing",
        ),
        (
            {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 4.5},
            r"synthetic_acceptance_length must be in \[1, 4\], got 4.5",
        ),
        (
            {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 0.5},
            r"synthetic_acceptance_length must be in \[1, 4\]",
        ),
        (
            {"synthetic_acceptance_rates": [0.5, 0.5, 0.5]},
            "only valid with rejection_sample_method='synthetic'",
        ),
        (
            {"rejection_sample_method": "block", "synthetic_acceptance_length": 2.0},
            "only valid with rejection_sample_method='synthetic'; got rejection_sample_method='block'",
        ),
    ],
)
def test_invalid_values_name_the_key(kwargs, message):
    with pytest.raises(ValueError, match=message):
        spec(**kwargs)


def test_wrong_types_raise_type_error():
    with pytest.raises(TypeError, match="rejection_sample_method"):
        spec(rejection_sample_method=1)
    with pytest.raises(TypeError, match=r"synthetic_acceptance_rates\[1\]"):
        spec(rejection_sample_method="synthetic", synthetic_acceptance_rates=[0.5, "x", 0.1])
    with pytest.raises(TypeError, match="synthetic_acceptance_length"):
        spec(rejection_sample_method="synthetic", synthetic_acceptance_length=True)


@pytest.mark.parametrize("method", ["synthetic", "block"])
def test_non_standard_methods_refuse_trees_and_typical_acceptance(method):
    extra = {"synthetic_acceptance_length": 2.0} if method == "synthetic" else {}
    tree = {"method": "medusa", "model": "zoo:medusa", "speculative_token_tree": [(0,), (0, 0)]}
    with pytest.raises(ValueError, match="token tree is verified by its own tree walk"):
        SpeculativeConfig.from_dict({**tree, "rejection_sample_method": method, **extra})
    typical = {"method": "medusa", "model": "zoo:medusa", "num_speculative_tokens": 2}
    typical["acceptance_method"] = "typical_acceptance_sampler"
    with pytest.raises(ValueError, match="typical acceptance replaces rejection sampling"):
        SpeculativeConfig.from_dict({**typical, "rejection_sample_method": method, **extra})

"""minispec.sample.ops: the sampler's tensor ops (top-k/top-p, exponential race, penalties, min-p, bias)."""

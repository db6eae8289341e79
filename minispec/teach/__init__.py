"""minispec.teach: teaching helpers that have no vLLM counterpart.

Kept apart from the modules that mirror vLLM v0.32.0 (principle 6), so that a reader comparing, say,
`minispec/sample/rejection_sampler.py` with vLLM's file sees only the mirrored logic. Here live the one-position
toy sampler (`toy`), a speculative step taken apart for display (`walkthrough`), and the closed-form theory
of speculative decoding (`theory`). Figures that draw them are in `minispec.viz`.
"""

"""minispec.teach: teaching helpers that have no vLLM counterpart.

Kept apart from the modules that mirror vLLM v0.32.0 (principle 6), so that a reader comparing, say,
`minispec/sample/rejection_sampler.py` with vLLM's file sees only the mirrored logic. Here live the one-position
toy sampler (`toy`), a speculative step taken apart for display (`walkthrough`), and the closed-form theory
of speculative decoding (`theory`); for token trees (chapters 3 and 4), recorded verification steps (`traces`),
the expected acceptance length of a tree and the best tree (`tree_theory`), Medusa head accuracy per rank
(`medusa_accuracy`) and EAGLE draft-score calibration (`calibration`).
Chapter 7 adds V0's two ways of scoring drafts (`batch_expansion`), a
call tracer (`call_trace`) and a recorder of request statuses (`lifecycle`). Chapter 6 adds the sampler's
pipeline stage by stage (`sampler_stages`) and the rejection sampler's Triton launches as data
(`kernel_grid`). Figures that draw them are in `minispec.viz`.
"""

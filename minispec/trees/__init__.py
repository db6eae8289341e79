"""Token trees, beyond vLLM v0.32.0: tree shapes and their verification buffers (`spec_tree.py`, chapter 3); the
proposers that draft trees, subclasses of the chain proposers of `minispec/spec_decode/`: Medusa's
(`medusa_tree_proposer.py`, chapter 3) and EAGLE's static and EAGLE-2 dynamic trees (`eagle_tree_proposer.py`, its
algorithms in `eagle_tree.py`, chapter 4); and their statistics per depth (`metrics.py`). v0.32.0 drafts chains
only; its static trees were last released in v0.20.2."""

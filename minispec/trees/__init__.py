"""Token trees, beyond vLLM v0.32.0: tree shapes and their verification buffers (`spec_tree.py`, chapter 3) and
EAGLE's static and EAGLE-2 dynamic draft trees (`eagle_tree.py`, chapter 4). v0.32.0 drafts chains only; its
static trees were last released in v0.20.2."""

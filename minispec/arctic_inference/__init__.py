"""Arctic Inference's pieces that vLLM v0.32.0 imports from outside its tree (chapter 5): its suffix tree."""

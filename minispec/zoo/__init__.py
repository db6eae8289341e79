"""The model zoo: small Llama models that minispec trains itself and ships inside the package.

Chapters 1-8 use these models so that every notebook runs offline on a laptop CPU and still shows real
acceptance behaviour. The zoo has no vLLM counterpart (vLLM downloads models from the Hugging Face Hub);
the architecture reference is transformers' Llama (`transformers/models/llama/modeling_llama.py`).

    minispec.zoo.path("target")      -> Path to a Hugging Face model folder
    minispec.zoo.resolve("zoo:draft") -> the same folder as a string; other names pass through

Train from scratch with `python -m minispec.zoo.train all`; measure with `python -m minispec.zoo.evaluate`.
The model card is docs/zoo.md.
"""

from __future__ import annotations

from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent / "models"

# Names the zoo knows. "tokenizer" is the shared BPE tokenizer alone; medusa/eagle/eagle3 are draft heads
# that later chapters add.
KNOWN_NAMES = ("target", "draft", "tokenizer", "medusa", "eagle", "eagle3")

ZOO_PREFIX = "zoo:"


def path(name: str) -> Path:
    """Folder of the zoo model `name` (config.json, model.safetensors, tokenizer files)."""
    if name not in KNOWN_NAMES:
        raise ValueError(f"name={name!r} is not a zoo model; known names: {', '.join(KNOWN_NAMES)}")
    folder = MODELS_DIR / name
    marker = "tokenizer.json" if name == "tokenizer" else "config.json"
    if not (folder / marker).is_file():
        raise FileNotFoundError(
            f"zoo model {name!r} is known but its files are missing: {folder / marker} does not exist. "
            f"Train it with `python -m minispec.zoo.train all` (or the subcommand for {name!r})."
        )
    return folder


def resolve(model: str) -> str:
    """Map "zoo:<name>" to the zoo folder; pass any other model name or path through unchanged."""
    if not isinstance(model, str):
        raise ValueError(f"model={model!r} must be a str: a path, a hub name or 'zoo:<name>'")
    if model.startswith(ZOO_PREFIX):
        return str(path(model[len(ZOO_PREFIX) :]))
    return model


__all__ = ["KNOWN_NAMES", "MODELS_DIR", "path", "resolve"]

"""Load a Hugging Face checkpoint folder (config.json + safetensors, sharded or not) into minispec's decoder.

Chapter 7. vLLM counterpart: `vllm/model_executor/model_loader/` (`DefaultModelLoader`, `safetensors_weights_iterator`).
minispec reads local folders only: nothing is downloaded, which is how every chapter runs offline.

Every way a folder can be wrong (not JSON, a config missing a key, a truncated safetensors file, tensors of
another shape, a draft head where a language model is expected) ends in a ValueError that names the
parameter, the folder and what was expected, never in an error from deep inside safetensors or torch.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from minispec.model_executor.layers.rotary_embedding import RotaryEmbedding
from minispec.model_executor.models.llama import LlamaArchConfig, LlamaForCausalLM
from minispec.utils import check_path

SUPPORTED_ARCHITECTURES = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}
SPEC_MODEL = "speculative_config model"  # how errors name the drafter's folder
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
MEDUSA_FILES = ("medusa_lm_head.safetensors", "medusa_lm_head.pt")
# what checkpoint_kind finds, in words, and the speculative method that loads it
KINDS = {
    "lm": ("a language model", "draft_model"),
    "medusa": ("Medusa heads", "medusa"),
    "eagle": ("an EAGLE-1 head", "eagle"),
    "eagle3": ("an EAGLE-3 head", "eagle3"),
}


def resolve_model_path(model, param: str = "model", need_config: bool = True) -> Path:
    """A folder path, or a zoo name such as "zoo:target". `param` names the argument in error messages."""
    from minispec import zoo

    model = check_path(param, model)
    path = Path(zoo.path(model.removeprefix("zoo:")) if model.startswith("zoo:") else model)
    if not path.is_dir():
        raise ValueError(
            f"{param}={model!r} is not a folder; pass a Hugging Face model folder or 'zoo:<name>'"
        )
    if need_config and not (path / "config.json").is_file():
        raise ValueError(f"{param}={model!r} has no config.json; a Hugging Face model folder needs one")
    return path


def resolve_dtype(
    dtype: str | torch.dtype, hf_config: dict | None = None, device: str | torch.device = "cpu"
) -> torch.dtype:
    """A torch dtype from "float32" / "bfloat16" / "float16", a torch.dtype, or "auto" (vLLM's default).

    "auto" follows vLLM v0.32.0 (`_get_and_verify_dtype` in vllm/config/model.py): the checkpoint's
    `torch_dtype` (or `dtype`), except that a float32 (or unstated) checkpoint runs in the platform's preferred
    half type: bfloat16 on CPUs and on GPUs of compute capability 8.0 or more, float16 on older GPUs."""
    if isinstance(dtype, torch.dtype):
        if dtype in DTYPES.values():
            return dtype
        raise ValueError(f"dtype={dtype!r} is not supported; choose 'auto' or one of {sorted(DTYPES)}")
    if not isinstance(dtype, str):
        raise TypeError(
            f"dtype={dtype!r} must be a str, 'auto' or one of {sorted(DTYPES)} (or that torch.dtype)"
        )
    if dtype == "auto":
        return _auto_dtype(hf_config or {}, torch.device(device))
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not supported; choose 'auto' or one of {sorted(DTYPES)}")
    return DTYPES[dtype]


def _auto_dtype(hf_config: dict, device: torch.device) -> torch.dtype:
    stated = hf_config.get("torch_dtype") or hf_config.get("dtype") or "float32"
    checkpoint = DTYPES.get(str(stated).removeprefix("torch."), torch.float32)
    bf16_ok = device.type != "cuda" or torch.cuda.get_device_capability(device)[0] >= 8
    preferred = torch.bfloat16 if bf16_ok else torch.float16
    if checkpoint == torch.float32 or (checkpoint == torch.bfloat16 and not bf16_ok):
        return preferred
    return checkpoint


def read_json(file: Path) -> dict:
    """A JSON object from `file`; ValueError naming the file when it is unreadable, not JSON or not an object."""
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{file} cannot be read: {e}") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"{file} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from e
    if not isinstance(raw, dict):
        raise ValueError(f"{file} must hold a JSON object ({{...}}), got a {type(raw).__name__}")
    return raw


def load_hf_config(path: Path) -> dict:
    hf = read_json(path / "config.json")
    archs = hf.get("architectures") or ["LlamaForCausalLM"]
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ValueError(f"{path}/config.json: architectures={archs!r} must be a list of class names")
    if not set(archs) & SUPPORTED_ARCHITECTURES:
        raise ValueError(
            f"architectures={sorted(archs)} in {path}/config.json; minispec runs {sorted(SUPPORTED_ARCHITECTURES)}"
        )
    return hf


def _weight_files(path: Path) -> tuple[list[str], Path | None]:
    index = path / "model.safetensors.index.json"
    if not index.is_file():
        return sorted(p.name for p in path.glob("*.safetensors")), None
    weight_map = read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ValueError(f"{index} needs a 'weight_map' object of tensor name -> shard file name")
    return sorted(set(weight_map.values())), index


def tensor_names(path: Path) -> set[str] | None:
    """The tensor names of a folder's safetensors files, read from their headers (None if unreadable)."""
    try:
        files, _ = _weight_files(path)
        names: set[str] = set()
        for name in files:
            with safe_open(str(path / name), framework="pt") as f:
                names.update(f.keys())
        return names
    except Exception:  # noqa: BLE001 - a damaged file is reported with its name by load_weights
        return None


def checkpoint_kind(path: Path) -> str:
    """What a folder holds: "lm", "medusa", "eagle", "eagle3" or "unknown" (from its files, not its name)."""
    try:
        hf = read_json(path / "config.json")
    except ValueError:
        hf = {}
    archs = hf.get("architectures") if isinstance(hf.get("architectures"), list) else []
    if any((path / f).is_file() for f in MEDUSA_FILES) or "medusa_num_heads" in hf:
        return "medusa"
    if "draft_vocab_size" in hf or any(isinstance(a, str) and "eagle3" in a.lower() for a in archs):
        return "eagle3"
    names = tensor_names(path) or set()
    if "fc.weight" in names or "midlayer.self_attn.q_proj.weight" in names:
        return "eagle3" if any(n.startswith("midlayer.") for n in names) else "eagle"
    if any(n.startswith("model.") for n in names):
        return "lm"
    return "unknown"


def check_kind(path: Path, expected: str, param: str, model) -> None:
    """ValueError when the folder holds another kind of checkpoint than `expected` (see KINDS)."""
    kind = checkpoint_kind(path)
    if kind in ("unknown", expected):
        return
    what, method = KINDS[kind]
    hint = (
        f"pass it as speculative_config={{'method': {method!r}, 'model': {model!r}, ...}}"
        if method != "draft_model"
        else "use it as model=, or with method='draft_model'"
    )
    raise ValueError(f"{param}={model!r} holds {what}, not {KINDS[expected][0]}; {hint}")


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    files, index = _weight_files(path)
    if not files:
        raise ValueError(f"{path} holds no *.safetensors file; minispec loads safetensors checkpoints")
    weights: dict[str, torch.Tensor] = {}
    for name in files:
        if not (path / name).is_file():
            raise ValueError(f"checkpoint shard {name!r} listed in {index.name} is missing from {path}")
        try:
            weights.update(load_file(path / name))
        except Exception as e:  # noqa: BLE001 - SafetensorError, OSError, ...: all mean an unusable file
            raise ValueError(
                f"{path / name} is not a readable safetensors file (truncated or corrupt?): "
                f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            ) from e
    return weights


def _num_params_on_meta(cfg: LlamaArchConfig) -> int:
    with torch.device("meta"):
        net = LlamaForCausalLM(cfg)
    return sum(p.numel() for p in net.parameters())


def _check_size(path: Path, cfg: LlamaArchConfig, param: str, model) -> None:
    """Refuse a config that describes a much larger model than the weights hold, before allocating it."""
    try:
        files, _ = _weight_files(path)
        stored = 0
        for name in files:
            with safe_open(str(path / name), framework="pt") as f:
                for key in f.keys():
                    stored += math.prod(f.get_slice(key).get_shape())
    except Exception:  # noqa: BLE001 - unreadable files are reported by load_weights
        return
    if not files:
        return  # load_weights says there are none
    expected = _num_params_on_meta(cfg)
    if expected > 2 * stored + 1024:
        raise ValueError(
            f"{param}={model!r}: {path}/config.json describes a model of {expected:,} parameters "
            f"but its safetensors files hold {stored:,} values; config.json and the weights disagree"
        )


def get_model(
    model: str | Path,
    dtype: str | torch.dtype = "float32",
    device: str | torch.device = "cpu",
    param: str = "model",
) -> LlamaForCausalLM:
    """Build the decoder described by `model`/config.json and load its weights (dtype "auto": vLLM's rule,
    see resolve_dtype)."""
    path = resolve_model_path(model, param)
    resolve_dtype(dtype)  # a bad value fails before anything is read
    check_kind(path, "lm", param, model)
    try:
        hf_config = load_hf_config(path)
        torch_dtype = resolve_dtype(dtype, hf_config, device)
        cfg = LlamaArchConfig.from_hf(hf_config, source=f"{path}/config.json")
    except ValueError as e:
        raise ValueError(f"{param}={model!r}: {e}") from e
    _check_size(path, cfg, param, model)
    net = LlamaForCausalLM(cfg)
    try:
        net.load_weights(load_weights(path))
    except ValueError as e:
        raise ValueError(f"{param}={model!r}: {e}") from e
    net = net.to(device=device, dtype=torch_dtype).eval().requires_grad_(False)
    for module in net.modules():
        if isinstance(module, RotaryEmbedding):
            module.cos_sin = module.cos_sin.to(device=device, dtype=torch.float32)  # RoPE stays in float32
    return net

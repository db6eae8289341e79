"""A batch-1 drafting call compiled ahead of time: `torch.export`, then AOTInductor, then one C++ call a step.

Chapters 1 and 7. vLLM v0.32.0 counterpart: none on a CPU. On a GPU vLLM captures a drafter's step in a CUDA graph
and replays it (`vllm/v1/spec_decode/eagle.py`, `vllm/compilation/cuda_graph.py`), because a small drafter's
kernels take less time than the framework's work of launching them one by one. A CPU has no graphs to replay.

A `torch.compile`d call pays on top of its kernels for Dynamo's guard check and for Python running AOTAutograd's
and Inductor's wrappers, paths that are out of the caches right after the target's forward; for a small call
such as Medusa's heads that is a large share of it (docs/performance.md). AOTInductor compiles the exported graph,
wrapper included, into a shared library: one call from the host, no Python between the kernels, no guards. The
price: sizes only within the exported ranges, the example's dtypes and devices (anything else takes
`torch.compile`'s graph), and a compile per proposer. Used by `medusa_drafting.py` (Medusa's heads, chain or
tree) and `eagle_drafting.py` (`_draft_in_graph`: an EAGLE chain or EAGLE-2 tree).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable

import torch
from torch import nn
from torch.export import Dim


class _Call(nn.Module):
    """`fn` as a module whose forward calls it; `network` registered so that export finds its weights."""

    def __init__(self, fn: Callable, network: nn.Module):
        super().__init__()
        self.network = network
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(*args)


class AotCompiledCall:
    """`fn(*example_args)`, exported and compiled by AOTInductor with Inductor's `options`, its weights copied into
    the compiled library (as freezing makes them constants: they must not change afterwards). `dynamic` names the
    sizes that may vary, {argument index: {dim: (name, min, max)}}, one name for sizes that are always equal; every
    other size is the example's. Inputs the call
    writes in place (a KV cache) are written in place. Called with contiguous tensors of the examples' dtypes and
    devices, and sizes in range (`accepts`); returns one tensor, or a tuple of them."""

    def __init__(
        self,
        fn: Callable,
        network: nn.Module,
        example_args: tuple[torch.Tensor, ...],
        options: dict | None = None,
        dynamic: dict[int, dict[int, tuple[str, int, int]]] | None = None,
    ):
        dynamic = dynamic or {}
        self.signature = [(a.dtype, a.device) for a in example_args]
        self.ranges = [
            [dynamic.get(i, {}).get(d, (None, n, n))[1:] for d, n in enumerate(a.shape)]
            for i, a in enumerate(example_args)
        ]  # [argument][dim] -> (min, max)
        dims = {
            name: Dim(name, min=lo, max=hi) for sizes in dynamic.values() for name, lo, hi in sizes.values()
        }
        shapes = [
            {d: dims[name] for d, (name, _, _) in dynamic.get(i, {}).items()}
            for i in range(len(example_args))
        ]
        with warnings.catch_warnings():
            # PyTorch's own pytree code warns about itself (torch 2.13); not the caller's concern
            warnings.filterwarnings("ignore", message=r".*LeafSpec.* is deprecated", category=FutureWarning)
            with torch.inference_mode():
                exported = torch.export.export(
                    _Call(fn, network).eval(),
                    example_args,
                    dynamic_shapes=(tuple(shapes),) if dynamic else None,
                    strict=False,
                )
            self.num_outputs = len(exported.graph_signature.user_outputs)
            package = io.BytesIO()  # the .pt2 archive, kept in memory
            torch._inductor.aoti_compile_and_package(
                exported, package_path=package, inductor_configs=dict(options or {})
            )
            package.seek(0)
            # the loader's own call: AOTICompiledModel.__call__ would parse the input and output specs at every call
            self.loader = torch._inductor.aoti_load_package(package).loader

    def accepts(self, *args: torch.Tensor) -> bool:
        if len(args) != len(self.ranges):
            return False
        for a, (dtype, device), dims in zip(
            args, self.signature, self.ranges
        ):  # a plain loop: called every step
            if a.dtype != dtype or a.device != device or a.dim() != len(dims) or not a.is_contiguous():
                return False
            for n, (lo, hi) in zip(a.shape, dims):
                if not lo <= n <= hi:
                    return False
        return True

    def __call__(self, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        outputs = self.loader.boxed_run(list(args))
        return outputs[0] if self.num_outputs == 1 else tuple(outputs)

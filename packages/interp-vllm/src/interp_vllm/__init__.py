"""interp-engine: the vLLM backends (hooked, static taps, generate-only).

`backend` registers `vllm`, `vllm-static` and `vllm-generate` under `interp.backends`;
`model.VLLMModel` is the model all three return (AsyncLLM, per-request capture, steering and
lens); `worker.InterpWorkerExtension` runs inside vLLM's workers; `sites` maps the standardized
points onto vLLM's module tree per family; `attention` rebuilds attention patterns from q and k.
"""

from interp_vllm.__about__ import __version__

__all__ = ["__version__"]

"""interp-engine: the vLLM backends (hooked, static taps, generate-only).

`backend` registers `vllm`, `vllm-static` and `vllm-generate` under `interp.backends`;
`support` is the one table of what vLLM serves per family and why not, which `supports()`, the
load checks, the docs and the tests read; `model.VLLMModel` is the model all three return
(AsyncLLM, per-request capture, steering and lens), `wire` packs its requests for the workers
and reassembles their rows, `engine` starts and stops vLLM; `worker.InterpWorkerExtension` runs
inside vLLM's workers; `sites` maps the standardized points onto vLLM's module tree per family
(with `site_kinds`, `module_tree` and `routing`); `attention` rebuilds attention patterns from
q and k; `layout` checks how workers split into pipeline stages, and `cpu_ray` (a vLLM plugin)
lets vLLM's Ray executor place CPU workers.
"""

from interp_vllm.__about__ import __version__

__all__ = ["__version__"]

"""interp-engine: the vLLM backends (hooked, static taps, generate-only).

So far the foundation of the hooked `vllm` backend: `backend.VLLMBackend` (registered under
`interp.backends`), `model.VLLMModel` (resid_pre/resid_post capture and add-steering for one
prompt, generation) and `worker.InterpWorkerExtension` (the hooks inside vLLM's workers). The
static-tap and generate-only backends are tracked in the project issues.
"""

from interp_vllm.__about__ import __version__

__all__ = ["__version__"]

"""interp-engine: cross-engine validation.

`interp-validate` compares every backend registered here with reference engines — raw HF
transformers hooks (in-process, `references.hf_hooks`), TransformerLens, nnsight and nnterp
(each in a pinned environment, `references` and `envs`) — at every point of every tiny test
family and of SmolLM2-135M-Instruct, and writes `summary.json`, per-run JSON, a Markdown report
and a plot (`report`). The modules, from the bottom up: `scoring` (metrics, tolerances, verdicts),
`records` (statuses, the summary file, regressions), `plan` (models, layers, addresses, prompt),
`subjects` (running a backend), `engines` (running a reference engine), `sweep` (all of it),
`cli`.

Importing the package imports only the core; torch and the engines load when a sweep runs (the
`run` extra).
"""

from interp_validator.__about__ import __version__

__all__ = ["__version__"]

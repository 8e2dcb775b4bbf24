"""What does `VLLMModel` lend the objects it delegates to, and what did its workers install?

`VLLMModel` serves the protocol's request path itself and hands the rest to collaborators: the
static tier's declaration and warm-up proof (`interp_vllm.static_client.StaticTier`), SAE features
encoded in the workers (`interp_vllm.sae_client.WorkerSAEs`), residuals decoded in the workers
(`interp_vllm.decoding.WorkerDecoding`), the tokenizer conveniences
(`interp_vllm.tokens.PromptTokens`) and the weight rows, probes and fitted lenses read out in the
workers (`interp_vllm.readouts_client.VLLMReadouts`). Each receives one `ModelCalls`: the model's
facts and the calls of its request path, named, so a collaborator never reaches into the model
(a test holds them to that) and the import picture shows what depends on what.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.address import Address
from interp_core.facts import ModelFacts
from interp_vllm.wire import run_and_collect

__all__ = ["Installed", "ModelCalls"]


@dataclass(frozen=True)
class Installed:
    """What the workers resolved at start: the site keys they serve and why others are not."""

    sites: frozenset[str]
    writable: frozenset[str]
    write_refusals: dict[str, str]
    refused: dict[str, str]

    @classmethod
    def from_answers(cls, answers: list[dict[str, Any]], *, static: bool, model: str) -> Installed:
        """The workers' `interp_install` answers, one per worker; a static tier whose taps did
        not install is refused with the workers' reason."""
        from interp_core.errors import CapabilityUnsupported

        failed = next((a["static_error"] for a in answers if a.get("static_error")), None)
        if static and (failed or answers[0].get("compiled_taps") is None):
            msg = f"vllm-static could not install its taps on {model}"
            raise CapabilityUnsupported.build(
                msg,
                failed or "the engine's workers are not the static workers",
                "load with backend='vllm' (hooked), or declare fewer static_points",
            )
        # Pipeline stages each answer for their own layers: the model serves the union, and a
        # point is refused only where no stage placed it.
        sites = frozenset(k for a in answers for k in a["sites"])
        served = {k.partition(".")[0] for k in sites}
        refused = {n: r for a in reversed(answers) for n, r in a["refused"].items()}
        return cls(
            sites=sites,
            writable=frozenset(k for a in answers for k in a["writable"]),
            write_refusals={k: r for a in answers for k, r in a["write_refusals"].items()},
            refused={n: r for n, r in refused.items() if n not in served},
        )


@dataclass(frozen=True)
class ModelCalls:
    """The facts and request-path calls of one `VLLMModel`, as its collaborators use them.

    Every call checks or runs exactly as the model's own methods do (they are those methods):
    `ready` starts the engine on first need and returns it; `installed` is what its workers
    installed (None until started); `request` runs one request to its end and returns the final
    output and the payload the workers collected; the checks refuse before anything reaches a
    worker. `pipeline` is the number of pipeline stages the layers are split over.
    """

    facts: ModelFacts
    config: dict[str, Any]
    tokenizer: Callable[[], Any]
    ready: Callable[[], Awaitable[Any]]
    installed: Callable[[], Installed | None]
    request: Callable[..., Awaitable[tuple[Any, dict[str, Any]]]]
    sampling: Callable[..., Any]
    prompts: Callable[[Any], list[list[int]]]
    # (tokens, what): the one prompt of a call that takes one, a batch refused naming `what`.
    one_prompt: Callable[[Any, str], list[int]]
    require_hooks: Callable[[str], None]
    may_write: Callable[[Any], None]
    addresses: Callable[[Sequence[Any]], list[Address]]
    # (steering, length, call, prompts=None): the prompts resolve the specs' scopes.
    writes: Callable[..., list[dict[str, Any]]]
    has_site: Callable[[str], bool]
    pipeline: int = 1

    async def rpc(self, method: str, *args: Any) -> list[Any]:
        """Every worker's answer to `method(*args)`, called by name over `collective_rpc`."""
        engine = await self.ready()
        return list(await engine.collective_rpc(method, args=args))

    async def collected(
        self, prompt: list[int], spec: dict[str, Any], method: str, *args: Any
    ) -> list[dict[str, Any]]:
        """Run one greedy single-step request with `spec`, then collect it with the worker
        method `method(request_id, *args)`: every worker's answer, a refusal raised."""
        engine = await self.ready()
        return await run_and_collect(engine, prompt, self.sampling(1, 0.0), spec, method, args)

    def served(self) -> frozenset[str]:
        """The site keys the workers serve (none before the engine started)."""
        installed = self.installed()
        return frozenset() if installed is None else installed.sites

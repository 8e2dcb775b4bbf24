"""The client side of `vllm-static`: the declared tap set, and the proof it works at warmup.

`StaticTier` is a collaborator of `VLLMModel`. The declaration (`static_points=`,
`static_writes=`) is checked when the model is built (`StaticTier.declare`), before any engine
starts, because the workers trace the taps into vLLM's compiled forward when they load the
weights (`interp_vllm.static_worker`); `taps` is what they receive. `self_test` runs at warmup,
through the model's `ModelCalls`, and refuses to serve, naming the points, when a declared read
does not return its rows or a declared write does not act under compilation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.address import Address, to_address
from interp_core.errors import (
    CapabilityUnsupported,
    InvalidArgument,
    PointUnsupported,
    SteeringSpecError,
)
from interp_core.facts import ModelFacts
from interp_core.results import Support
from interp_core.steering import STATIC_WRITE_SLOTS, STATIC_WRITER_SLOTS, SteeringSpec
from interp_core.writes import spec_to_wire
from interp_vllm.calls import ModelCalls
from interp_vllm.support import RECOMPUTED
from interp_vllm.wire import address_key, needed_keys, sink_keys

__all__ = ["StaticTier"]


@dataclass(frozen=True)
class StaticTier:
    """The declared tap set of a `vllm-static` model (site keys; empty on the other modes)."""

    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()
    entries: int = STATIC_WRITER_SLOTS  # the op table's size at each write point

    @classmethod
    def declare(
        cls,
        mode: str,
        n_layers: int,
        supports: Callable[[Address], Support],
        reads: Any,
        writes: Any,
        entries: Any = None,
    ) -> StaticTier:
        """The declaration checked against the model (`supports`) before any engine starts;
        `entries` sizes each write point's op table (`static_write_slots=`)."""
        table = _declare_entries(mode, entries)
        if mode != "static":
            if reads is not None or writes is not None:
                msg = (
                    "static_points / static_writes declare the fixed tap set of backend="
                    "'vllm-static'; the hooked backend taps whatever each request asks for"
                )
                raise InvalidArgument(msg)
            return cls()
        auto = frozenset(f"resid_post.{layer}" for layer in range(n_layers))
        declared_reads = auto if reads in (None, "auto") else _static_set(reads, "points", supports)
        declared_writes = (
            declared_reads if writes in (None, "auto") else _static_set(writes, "writes", supports)
        )
        return cls(declared_reads, declared_writes, table)

    def taps(self, config: dict[str, Any]) -> dict[str, Any]:
        """What the static workers trace into the compiled forward (EngineSettings.static)."""
        reads = [to_address(k) for k in self.reads]
        # Attention patterns are rebuilt from q and k: those (and any sinks) are the taps. A
        # sink site the model lacks is skipped by the workers.
        keys = {*needed_keys(reads, lambda _key: False), *sink_keys(reads)}
        return {
            "reads": sorted(keys),
            "writes": sorted(self.writes),
            "slots": STATIC_WRITE_SLOTS,
            "entries": self.entries,
            "config": config,
        }

    async def self_test(self, calls: ModelCalls) -> None:
        """Prove the taps work under compilation before serving, or refuse to start.

        Reads: a 3-token request must get one finite row per position at every declared read.
        Writes: at each declared write a sentinel request adds a vector twice (two slots) whose
        sum overflows float32; the compiled forward must compute it on that request's rows and
        flag them non-finite, which the workers turn into a SteeringSpecError. A write tap that
        never ran would let the request succeed.
        """
        prompt = [1, 2, 3]  # any in-vocabulary tokens: what is checked is where rows land
        served = calls.served()
        declared = [to_address(k) for k in self.reads]
        keys = sorted(k for k in needed_keys(declared, calls.has_site) if k in served)
        _, payload = await calls.request(prompt, calls.sampling(1, 0.0), {"capture": keys})
        bad = [
            k
            for k in keys
            if payload["positions"].get(k) != [0, 1, 2]
            or not bool(payload["captured"][k].isfinite().all())
        ]
        if bad:
            _refuse_start(
                f"the static taps {bad} did not return one finite row per position in warmup"
            )
        installed = calls.installed()
        writable = installed.writable if installed is not None else frozenset()
        writes = sorted(k for k in self.writes if k in writable)
        outcomes = await asyncio.gather(
            *(_sentinel(calls, prompt, key) for key in writes), return_exceptions=True
        )
        dead = [k for k, o in zip(writes, outcomes, strict=True) if not _sentinel_refused(o)]
        if dead:
            _refuse_start(f"the static writes {dead} did not act in warmup")


def _declare_entries(mode: str, entries: Any) -> int:
    """The op table's size at each static write point (`static_write_slots=`)."""
    if entries is None:
        return STATIC_WRITER_SLOTS
    if mode != "static":
        msg = (
            "static_write_slots sizes the op table of backend='vllm-static'; the hooked "
            "backend applies any number of writes"
        )
        raise InvalidArgument(msg)
    if isinstance(entries, bool) or not isinstance(entries, int) or entries < 1:
        msg = (
            f"static_write_slots={entries!r} must be a positive int: how many steering "
            f"operations each static write point's op table holds (default "
            f"{STATIC_WRITER_SLOTS})"
        )
        raise InvalidArgument(msg)
    return entries


def _static_set(points: Any, which: str, supports: Callable[[Address], Support]) -> frozenset[str]:
    if isinstance(points, str) or not isinstance(points, Sequence):
        msg = f"static_{which} must be 'auto' or a list of addresses, got {points!r}"
        raise InvalidArgument(msg)
    keys = set()
    for point in points:
        address = to_address(point)
        if which == "writes" and address.name in RECOMPUTED:
            msg = f"{address} cannot be a static write: attention patterns are read-only"
            raise InvalidArgument(msg)
        verdict = supports(address)
        if not verdict:
            raise PointUnsupported(verdict.explain())
        keys.add(address_key(address))
    return frozenset(keys)


async def _sentinel(calls: ModelCalls, prompt: list[int], key: str) -> Any:
    width = _write_width(key, calls.facts)
    huge = [3.0e38] * width  # finite in float32; two of them overflow it
    steer = [spec_to_wire(SteeringSpec(to_address(key), huge))] * STATIC_WRITE_SLOTS
    return await calls.request(prompt, calls.sampling(1, 0.0), {"capture": [], "steer": steer})


def _write_width(key: str, facts: ModelFacts) -> int:
    """The full width a write vector at `key` has (the workers slice it per rank)."""
    from interp_core.shapes import point_width

    return point_width(to_address(key), facts)


def _refuse_start(what: str) -> None:
    raise CapabilityUnsupported.build(
        what,
        "the compiled forward ran without them, so their answers would be wrong",
        "load with backend='vllm' (hooked), and report this with the family and the points",
    )


def _sentinel_refused(outcome: Any) -> bool:
    return isinstance(outcome, SteeringSpecError) and "not finite" in str(outcome)

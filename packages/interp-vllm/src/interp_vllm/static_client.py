"""The client side of `vllm-static`: the declared tap set, and the proof it works at warmup.

Mixed into `VLLMModel`. The declaration (`static_points=`, `static_writes=`) is checked when the
model is built, before any engine starts, because the workers trace the taps into vLLM's compiled
forward when they load the weights (`interp_vllm.static_worker`); `_static_taps` is what they
receive. `_self_test` runs at warmup and refuses to serve, naming the points, when a declared
read does not return its rows or a declared write does not act under compilation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from interp_core.address import to_address
from interp_core.errors import (
    CapabilityUnsupported,
    InvalidArgument,
    PointUnsupported,
    SteeringSpecError,
)
from interp_core.steering import STATIC_WRITE_SLOTS, STATIC_WRITER_SLOTS, SteeringSpec
from interp_core.steering_lens import special_token_ids
from interp_core.writes import spec_to_wire
from interp_vllm.support import RECOMPUTED
from interp_vllm.wire import address_key, needed_keys, sink_keys

__all__ = ["StaticTier"]


class StaticTier:
    """Relies on `VLLMModel`'s `_mode`, `_config`, `_facts`, `_installed`, `_request`, `_sampling`,
    `_static_entries`, `supports`, `_has_site`, `tokenizer` and `n_layers`."""

    def _declare_static(self, reads: Any, writes: Any) -> tuple[frozenset[str], frozenset[str]]:
        if self._mode != "static":
            if reads is not None or writes is not None:
                msg = (
                    "static_points / static_writes declare the fixed tap set of backend="
                    "'vllm-static'; the hooked backend taps whatever each request asks for"
                )
                raise InvalidArgument(msg)
            return frozenset(), frozenset()
        auto = frozenset(f"resid_post.{layer}" for layer in range(self.n_layers))
        declared_reads = auto if reads in (None, "auto") else self._static_set(reads, "points")
        declared_writes = (
            declared_reads if writes in (None, "auto") else self._static_set(writes, "writes")
        )
        return declared_reads, declared_writes

    def _declare_entries(self, entries: Any) -> int:
        """The op table's size at each static write point (`static_write_slots=`)."""
        if entries is None:
            return STATIC_WRITER_SLOTS
        if self._mode != "static":
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

    def _static_set(self, points: Any, which: str) -> frozenset[str]:
        if isinstance(points, str) or not isinstance(points, Sequence):
            msg = f"static_{which} must be 'auto' or a list of addresses, got {points!r}"
            raise InvalidArgument(msg)
        keys = set()
        for point in points:
            address = to_address(point)
            if which == "writes" and address.name in RECOMPUTED:
                msg = f"{address} cannot be a static write: attention patterns are read-only"
                raise InvalidArgument(msg)
            verdict = self.supports(address)
            if not verdict:
                raise PointUnsupported(verdict.explain())
            keys.add(address_key(address))
        return frozenset(keys)

    def _static_taps(self) -> dict[str, Any]:
        """What the static workers trace into the compiled forward (EngineSettings.static)."""
        reads = [to_address(k) for k in self._static_reads]
        # Attention patterns are rebuilt from q and k: those (and any sinks) are the taps. A
        # sink site the model lacks is skipped by the workers.
        keys = {*needed_keys(reads, lambda _key: False), *sink_keys(reads)}
        return {
            "reads": sorted(keys),
            "writes": sorted(self._static_writes),
            "slots": STATIC_WRITE_SLOTS,
            "entries": self._static_entries,
            "config": self._config,
        }

    async def _self_test(self) -> None:
        """Prove the taps work under compilation before serving, or refuse to start.

        Reads: a 3-token request must get one finite row per position at every declared read.
        Writes: at each declared write a sentinel request adds a vector twice (two slots) whose
        sum overflows float32; the compiled forward must compute it on that request's rows and
        flag them non-finite, which the workers turn into a SteeringSpecError. A write tap that
        never ran would let the request succeed.
        """
        prompt = [1, 2, 3]  # any in-vocabulary tokens: what is checked is where rows land
        served = self._installed.sites if self._installed is not None else frozenset()
        declared = [to_address(k) for k in self._static_reads]
        keys = sorted(k for k in needed_keys(declared, self._has_site) if k in served)
        _, payload = await self._request(prompt, self._sampling(1, 0.0), {"capture": keys})
        bad = [
            k
            for k in keys
            if payload["positions"].get(k) != [0, 1, 2]
            or not bool(payload["captured"][k].isfinite().all())
        ]
        if bad:
            self._refuse_start(
                f"the static taps {bad} did not return one finite row per position in warmup"
            )
        writable = self._installed.writable if self._installed is not None else frozenset()
        writes = sorted(k for k in self._static_writes if k in writable)
        outcomes = await asyncio.gather(
            *(self._sentinel(prompt, key) for key in writes), return_exceptions=True
        )
        dead = [k for k, o in zip(writes, outcomes, strict=True) if not _sentinel_refused(o)]
        if dead:
            self._refuse_start(f"the static writes {dead} did not act in warmup")

    async def _sentinel(self, prompt: list[int], key: str) -> Any:
        width = self._write_width(key)
        huge = [3.0e38] * width  # finite in float32; two of them overflow it
        steer = [spec_to_wire(SteeringSpec(to_address(key), huge))] * STATIC_WRITE_SLOTS
        return await self._request(prompt, self._sampling(1, 0.0), {"capture": [], "steer": steer})

    def _special_ids(self) -> frozenset[int]:
        """The ids `skip_special=True` leaves alone (the tokenizer's special tokens)."""
        return special_token_ids(self.tokenizer)

    def _write_width(self, key: str) -> int:
        """The full width a write vector at `key` has (the workers slice it per rank)."""
        from interp_core.shapes import point_width

        return point_width(to_address(key), self._facts)

    def _refuse_start(self, what: str) -> None:
        raise CapabilityUnsupported.build(
            what,
            "the compiled forward ran without them, so their answers would be wrong",
            "load with backend='vllm' (hooked), and report this with the family and the points",
        )


def _sentinel_refused(outcome: Any) -> bool:
    return isinstance(outcome, SteeringSpecError) and "not finite" in str(outcome)

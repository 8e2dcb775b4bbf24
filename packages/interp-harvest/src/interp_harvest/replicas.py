"""Where does the activations job's forward run: here, or on replicas of the model on Ray?

A job's forwards are a sequence of batches (`Forward`: the batch's contexts, the shard group it
belongs to, whether it ends that group). `local_forwards` runs each on the driver's own model.
`RayReplicas` runs them on N Ray actors instead, each of which loaded the model once with
`interp_core.load_model(model_id, backend=..., **load_options)` — the backend's own engine, so
on vLLM each replica is a whole vLLM engine — and answers one batch's capture at a time. The
driver keeps everything else (packing, shard grouping, writing, the manifest, resume, progress)
and gets the batches back in their order, so the files are written by one process, in order,
identical whatever the number of replicas: a batch holds the same contexts either way.

Work is handed to the least busy live replica, at most `IN_FLIGHT` batches each, and no more
than `IN_FLIGHT` per live replica are held between being sent and being written, so memory stays
bounded by a few batches however uneven the replicas are. When a replica or its node dies (Ray
reports `RayActorError`: `ActorDiedError`, `ActorUnavailableError`), every batch it held is sent
again to the live ones; when none is left, `ReplicasLost` says so, and the shards written so far
are valid for `resume`. Ray is imported only here, and only for a job that asks for it.
"""

from __future__ import annotations

import heapq
import importlib.util
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interp_core import sync
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_harvest.errors import ReplicasLost
from interp_harvest.packing import Context

__all__ = [
    "IN_FLIGHT",
    "RAY_INSTALL",
    "Forward",
    "RayReplicas",
    "ReplicaDied",
    "capture_batch",
    "check_replicas",
    "local_forwards",
    "uses_ray",
]

IN_FLIGHT = 2  # batches per replica: one computing, one queued behind it so it never idles
RAY_INSTALL = "pip install 'interpoint-harvest[ray]'"
SHUTDOWN_TIMEOUT_S = 60


class ReplicaDied(UserWarning):
    """A replica (or its node) died during a job; its batches are run again by the others."""


@dataclass(frozen=True)
class Forward:
    """One forward batch of the job: its contexts, its shard's contexts, and whether it is the
    last batch of that shard."""

    batch: list[Context]
    group: list[Context]
    last: bool


def uses_ray(replicas: int, ray_address: str | None) -> bool:
    return replicas > 1 or ray_address is not None


def check_replicas(
    replicas: Any, ray_address: str | None = None, *, cpus: float = 1, gpus: float = 0
) -> None:
    """Refuse a replica count that is not a whole number >= 1, a replica's share of the
    cluster that is not one, and Ray replicas without Ray."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        message = f"replicas must be a whole number >= 1, got {replicas!r}"
        raise InvalidArgument(message)
    if not cpus > 0 or not gpus >= 0:
        message = f"a replica needs cpus > 0 and gpus >= 0, got cpus={cpus}, gpus={gpus}"
        raise InvalidArgument(message)
    if uses_ray(replicas, ray_address) and importlib.util.find_spec("ray") is None:
        wanted = f"{replicas} replicas" if replicas > 1 else f"a Ray address ({ray_address})"
        message = (
            f"{wanted} run on Ray, which is not installed here; install it with {RAY_INSTALL}, "
            f"or run one replica in this process (replicas=1, no ray_address)"
        )
        raise CapabilityUnsupported(message)


def capture_batch(
    model: Any, tokens: Sequence[Sequence[int]], points: Sequence[str], dtype: str
) -> dict[str, Any]:
    """One forward over `tokens` (a batch of equal-length contexts): each point's rows on the
    CPU in the storage dtype, named by address. The driver and every replica call this."""
    import torch

    ids = torch.tensor([list(t) for t in tokens], dtype=torch.long)
    cache = sync.capture(model, ids, list(points))
    storage = getattr(torch, dtype)
    return {point: cache[point].detach().to("cpu", storage).contiguous() for point in points}


def local_forwards(
    model: Any, forwards: Iterator[Forward], points: Sequence[str], dtype: str
) -> Iterator[tuple[Forward, dict[str, Any]]]:
    for forward in forwards:
        yield forward, capture_batch(model, [c.tokens for c in forward.batch], points, dtype)


class Replica:
    """One replica's model, loaded once in its Ray actor (this class is wrapped by
    `ray.remote` only when a job asks for replicas)."""

    def __init__(
        self, model_id: str, backend: str, load_options: Mapping[str, Any], threads: int
    ) -> None:
        import torch

        # CPU matmuls are bitwise reproducible only at a fixed thread count: stated, never
        # left to the worker's environment.
        torch.set_num_threads(threads)
        from interp_core import load_model

        self.model = load_model(model_id, backend=backend, **dict(load_options))

    def ready(self) -> str:
        return self.model.backend_name

    def capture(
        self, tokens: list[tuple[int, ...]], points: list[str], dtype: str
    ) -> dict[str, Any]:
        return capture_batch(self.model, tokens, points, dtype)

    def shutdown(self) -> None:
        sync.shutdown(self.model)


class RayReplicas:
    """N replicas of the model on Ray, started on entering and shut down on leaving (and Ray
    itself shut down, when this started it)."""

    def __init__(
        self,
        model_id: str,
        backend: str,
        *,
        replicas: int,
        ray_address: str | None = None,
        load_options: Mapping[str, Any] | None = None,
        cpus: float = 1,
        gpus: float = 0,
    ) -> None:
        check_replicas(replicas, ray_address, cpus=cpus, gpus=gpus)
        self.model_id, self.backend, self.count = model_id, backend, replicas
        self.address = ray_address or os.environ.get("RAY_ADDRESS") or "local"
        self.load_options = dict(load_options or {})
        self.cpus, self.gpus = cpus, gpus
        self.live: list[Any] = []
        self.lost: list[str] = []
        self._started_ray = False

    def __enter__(self) -> RayReplicas:
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address)
            self._started_ray = True
        try:
            self._start(ray)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self, ray: Any) -> None:
        have = ray.cluster_resources()
        for name, each in (("CPU", self.cpus), ("GPU", self.gpus)):
            if each and have.get(name, 0) < each * self.count:
                message = (
                    f"{self.count} replicas of {each:g} {name} each need {each * self.count:g} "
                    f"{name}s; the Ray cluster at {self.address} has {have.get(name, 0):g}: ask "
                    f"for fewer replicas or less per replica (--replica-cpus, --replica-gpus)"
                )
                raise InvalidArgument(message)
        actor = ray.remote(Replica).options(
            num_cpus=self.cpus,
            num_gpus=self.gpus,
            max_restarts=0,
            max_task_retries=0,
            # one replica per node where the cluster allows: a lost node takes fewer with it
            scheduling_strategy="SPREAD",
        )
        threads = max(1, int(self.cpus))
        self.live = [
            actor.remote(self.model_id, self.backend, self.load_options, threads)
            for _ in range(self.count)
        ]
        for index, replica in enumerate(list(self.live)):
            try:
                ray.get(replica.ready.remote())
            except ray.exceptions.RayError as error:
                message = (
                    f"replica {index + 1} of {self.count} could not load {self.model_id!r} on "
                    f"the {self.backend} backend (the model must load on every node, from the "
                    f"same id or path): {_last_line(error)}"
                )
                raise ReplicasLost(message) from error

    def __exit__(self, *_: object) -> None:
        import ray

        live, self.live = self.live, []
        closing = [replica.shutdown.remote() for replica in live]
        try:
            if closing:  # each engine stops its own processes before its actor is killed
                ray.wait(closing, num_returns=len(closing), timeout=SHUTDOWN_TIMEOUT_S)
        finally:
            for replica in live:
                _kill(ray, replica)
            if self._started_ray:
                ray.shutdown()

    def map(
        self, forwards: Iterator[Forward], points: Sequence[str], dtype: str
    ) -> Iterator[tuple[Forward, dict[str, Any]]]:
        """Each forward with its captured rows, in the order given."""
        import ray

        points = list(points)
        held: dict[int, Forward] = {}  # sent and not yet given back, by position
        results: dict[int, dict[str, Any]] = {}
        again: list[int] = []  # positions a lost replica held (a heap: earliest first)
        running: dict[Any, tuple[int, Any]] = {}  # object ref -> (position, replica)
        load: dict[Any, int] = {replica: 0 for replica in self.live}
        # ties go to the replica sent the fewest batches, so every replica gets its turn
        total: dict[Any, int] = dict.fromkeys(self.live, 0)
        source, sent, given, exhausted = iter(forwards), 0, 0, False
        while True:
            while self.live:
                replica = min(self.live, key=lambda r: (load[r], total[r]))
                if load[replica] >= IN_FLIGHT:
                    break
                if again:
                    position = heapq.heappop(again)
                elif not exhausted and len(held) < IN_FLIGHT * len(self.live):
                    forward = next(source, None)
                    if forward is None:
                        exhausted = True
                        continue
                    position, sent = sent, sent + 1
                    held[position] = forward
                else:
                    break
                tokens = [c.tokens for c in held[position].batch]
                running[replica.capture.remote(tokens, points, dtype)] = (position, replica)
                load[replica] += 1
                total[replica] += 1
            while given in results:
                yield held.pop(given), results.pop(given)
                given += 1
            if exhausted and not held:
                return
            if not running and self.live:
                continue  # everything sent came back and was given: send more
            if not running:
                message = (
                    f"all {self.count} replicas of {self.model_id!r} were lost "
                    f"({'; '.join(self.lost)}); every shard the manifest lists is complete and "
                    f"valid: rerun with --resume (resume=True) once the cluster has room"
                )
                raise ReplicasLost(message)
            [ref], _ = ray.wait(list(running), num_returns=1)
            position, replica = running.pop(ref)
            load[replica] -= 1
            try:
                results[position] = ray.get(ref)
            except ray.exceptions.RayActorError as error:
                self._lose(ray, replica, error)
                heapq.heappush(again, position)
            except ray.exceptions.ObjectLostError:
                # A finished batch large enough to live in its node's object store went with
                # that node before it was fetched: computed again; the replica, if it is dead
                # too, fails its next batch and is dropped then.
                heapq.heappush(again, position)
            except ray.exceptions.RayTaskError as error:
                # The model refused or failed the batch itself: the same error as one replica.
                if isinstance(error.cause, Exception):
                    raise error.cause from error
                raise

    def _lose(self, ray: Any, replica: Any, error: Exception) -> None:
        if replica in self.live:
            self.live.remove(replica)
            self.lost.append(f"{type(error).__name__}: {_first_lines(error, 1)}")
            warnings.warn(
                f"a replica of {self.model_id!r} was lost ({self.lost[-1]}); the batches it "
                f"held run again on the {len(self.live)} left",
                ReplicaDied,
                stacklevel=2,
            )
            # An unreachable replica might come back: make sure it never does work twice.
            _kill(ray, replica)


def _kill(ray: Any, replica: Any) -> None:
    try:
        ray.kill(replica, no_restart=True)
    except ray.exceptions.RayError:
        pass  # already gone with its node


def _first_lines(error: BaseException, count: int = 3) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " ".join(lines[:count])[:500]


def _last_line(error: BaseException) -> str:
    """What a replica's constructor raised: Ray's message ends with its traceback's last line
    (`interp_core.errors.InvalidArgument: ...`)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1][:500] if lines else type(error).__name__

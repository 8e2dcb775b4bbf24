"""Reference environments: exact pins, a stable hash, and build-once under concurrency.

Everything except the last test runs without installing anything: the installer is replaced by
a fake that writes a folder, so the lock, the marker and the discard-on-failure logic are tested
in milliseconds. The slow test builds (or finds) the real environments and runs `pip check`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from interp_validator import envs
from interp_validator.envs import (
    ENVS,
    MARKER,
    EnvError,
    EnvSpec,
    ensure_env,
    env_dir,
    env_status,
    parse_pin,
    pins_hash,
)

# --- pins and hashing ---------------------------------------------------------------------------


def test_every_pin_is_exact_and_parses() -> None:
    for spec in ENVS.values():
        for pin in spec.pins:
            name, version = parse_pin(pin)
            assert name and version[0].isdigit(), pin


@pytest.mark.parametrize(
    "pin", ["torch", "torch>=2", "torch==2.*", "torch==2.1,<3", "torch ~= 2.1", "==1.0", "a b==1"]
)
def test_non_exact_pins_are_refused(pin: str) -> None:
    with pytest.raises(ValueError, match="exact pin"):
        parse_pin(pin)


def test_parse_pin_normalises_names() -> None:
    assert parse_pin("Transformer_Lens==3.9.0") == ("transformer-lens", "3.9.0")
    assert parse_pin(" nnsight == 0.7.0 ") == ("nnsight", "0.7.0")


def test_duplicate_packages_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        EnvSpec("x", ("torch==2.13.0", "Torch==2.12.0"), "dup")


def test_hash_ignores_order_and_spelling_but_not_versions() -> None:
    a = pins_hash(["torch==2.13.0", "transformer-lens==3.9.0"], python="3.11")
    assert a == pins_hash(["Transformer_Lens==3.9.0", "torch==2.13.0"], python="3.11")
    assert a != pins_hash(["torch==2.13.0", "transformer-lens==3.9.1"], python="3.11")
    assert a != pins_hash(["torch==2.13.0", "transformer-lens==3.9.0"], python="3.12")
    assert len(a) == 12 and int(a, 16) >= 0


def test_hash_is_stable_across_processes() -> None:
    # A fixed value: the folder name must not change between runs or machines (no salted hash).
    assert pins_hash(["a==1", "b==2"], python="3.11") == "cd86a017d8ec"
    code = "from interp_validator.envs import pins_hash; print(pins_hash(['b==2','a==1'], '3.11'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "cd86a017d8ec"


def test_env_root_honours_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(envs.ENV_ROOT_VAR, str(tmp_path))
    folder = env_dir("refs")
    assert folder.parent == tmp_path
    assert folder.name == f"refs-{pins_hash(ENVS['refs'].pins)}"
    monkeypatch.delenv(envs.ENV_ROOT_VAR)
    assert env_dir("refs").parent == Path.home() / ".cache" / "interp-engine" / "validator-envs"


def test_unknown_environment_is_refused() -> None:
    with pytest.raises(KeyError, match="known ones"):
        env_dir("nope")


# --- build once, safely -------------------------------------------------------------------------

SPEC = EnvSpec("fake", ("demo==1.0",), "tests")


def _fake_installer(calls: list[str], delay: float = 0.0):
    def install(spec: EnvSpec, folder: Path) -> None:
        calls.append(str(folder))
        time.sleep(delay)
        python = envs.env_python(folder)
        python.parent.mkdir(parents=True)
        python.write_text("#!/bin/sh\n")
        python.chmod(0o755)

    return install


def _fake_check(spec: EnvSpec, folder: Path, seconds: float) -> dict:
    marker = {
        "marker_version": 1,
        "name": spec.name,
        "pins": list(spec.normalised_pins()),
        "hash": pins_hash(spec.pins),
        "freeze": ["demo==1.0"],
    }
    (folder / MARKER).write_text(json.dumps(marker))
    return marker


def test_builds_once_then_reuses(tmp_path: Path) -> None:
    calls: list[str] = []
    python = ensure_env(SPEC, root=tmp_path, installer=_fake_installer(calls), check=_fake_check)
    assert python == envs.env_python(env_dir(SPEC, root=tmp_path))
    assert env_status(SPEC, root=tmp_path)["freeze"] == ["demo==1.0"]
    again = ensure_env(SPEC, root=tmp_path, installer=_fake_installer(calls), check=_fake_check)
    assert again == python and len(calls) == 1


def test_concurrent_callers_build_once(tmp_path: Path) -> None:
    calls: list[str] = []
    results: list[Path] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(
                ensure_env(
                    SPEC, root=tmp_path, installer=_fake_installer(calls, 0.2), check=_fake_check
                )
            )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(calls) == 1 and len(set(results)) == 1


def test_concurrent_processes_build_once(tmp_path: Path) -> None:
    script = tmp_path / "build.py"
    script.write_text(
        "import sys, time\n"
        "from pathlib import Path\n"
        "from interp_validator import envs\n"
        "spec = envs.EnvSpec('fake', ('demo==1.0',), 'tests')\n"
        "def install(spec, folder):\n"
        "    with open(sys.argv[2], 'a') as log: log.write('built\\n')\n"
        "    time.sleep(0.5)\n"
        "    p = envs.env_python(folder); p.parent.mkdir(parents=True); p.write_text('')\n"
        "def check(spec, folder, seconds):\n"
        "    import json\n"
        "    m = {'marker_version': 1, 'hash': envs.pins_hash(spec.pins)}\n"
        "    (folder / envs.MARKER).write_text(json.dumps(m))\n"
        "print(envs.ensure_env(spec, root=Path(sys.argv[1]), installer=install, check=check))\n"
    )
    log = tmp_path / "log.txt"
    root = tmp_path / "root"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(root), str(log)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert len(outputs) == 1
    assert log.read_text().count("built") == 1


def test_half_built_folder_is_discarded(tmp_path: Path) -> None:
    folder = env_dir(SPEC, root=tmp_path)
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("")  # a python but no marker: a build that died
    (folder / "leftover").write_text("x")
    calls: list[str] = []
    ensure_env(SPEC, root=tmp_path, installer=_fake_installer(calls), check=_fake_check)
    assert len(calls) == 1
    assert not (folder / "leftover").exists()


def test_failed_build_leaves_nothing_and_says_why(tmp_path: Path) -> None:
    def broken(spec: EnvSpec, folder: Path) -> None:
        folder.mkdir(parents=True)
        envs._run(
            [
                sys.executable,
                "-c",
                "print('ERROR: No matching distribution found for demo==1.0'); raise SystemExit(1)",
            ],
            what="pip install for the fake environment",
            echo=False,
        )

    with pytest.raises(EnvError) as caught:
        ensure_env(SPEC, root=tmp_path, installer=broken, check=_fake_check)
    message = str(caught.value)
    assert "pip install for the fake environment failed (exit 1)" in message
    assert "demo==1.0" in message and "run the setup again" in message
    assert not env_dir(SPEC, root=tmp_path).exists()
    calls: list[str] = []  # the next caller starts afresh
    ensure_env(SPEC, root=tmp_path, installer=_fake_installer(calls), check=_fake_check)
    assert len(calls) == 1


def test_pins_must_be_installed_exactly() -> None:
    spec = EnvSpec("probe", ("torch==2.13.0", "nnsight==0.7.0"), "tests")
    envs.verify_pins(spec, ["torch==2.13.0+cpu", "nnsight==0.7.0", "other==1"])  # local label ok
    with pytest.raises(EnvError, match=r"nnsight is 0\.8\.1, not 0\.7\.0 as pinned"):
        envs.verify_pins(spec, ["torch==2.13.0+cpu", "nnsight==0.8.1"])
    with pytest.raises(EnvError, match="nnsight is missing"):
        envs.verify_pins(spec, ["torch==2.13.0"])


# --- the real environments ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ENVS))
def test_real_environment_exists_and_passes_pip_check(name: str) -> None:
    from interp_validator.references.testing import env_python_or_skip

    python = env_python_or_skip(name)
    marker = env_status(name)
    assert marker is not None and marker["pins"] == list(ENVS[name].normalised_pins())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    check = subprocess.run(
        [str(python), "-m", "pip", "check"], capture_output=True, text=True, env=env, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    # Every pinned package imports (its import name is the pin's name with `_` for `-`).
    modules = ", ".join(parse_pin(pin)[0].replace("-", "_") for pin in ENVS[name].pins)
    hide = "".join(f"sys.modules[{m!r}] = None; " for m in ENVS[name].hidden)
    probe = f"import sys; {hide}import {modules}; print('ok')"
    run = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, env=env, check=False
    )
    assert run.stdout.strip() == "ok", run.stderr[-2000:]

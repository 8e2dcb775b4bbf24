"""Pinned virtual environments for the reference engines, created on demand.

TransformerLens, nnsight and nnterp disagree on their pins (nnterp 1.3.0 breaks on nnsight 0.8;
TransformerLens 4 removed HookedTransformer), and none of them belongs in the environment that
runs interp-engine. Each reference engine therefore runs as a subprocess with the python of one of
the environments below, which this module creates with exact pins and checks with `pip check`.

Where: `$INTERP_VALIDATOR_ENVS/<name>-<hash>`, else
`~/.cache/interp-engine/validator-envs/<name>-<hash>`. The hash covers the pins and the Python
version, so changing a pin builds a new environment beside the old one instead of mutating it.
Creation is idempotent and safe under concurrent callers: a lock file next to the environment
serialises builders, and a marker file written last (pins, `pip freeze`, timings) says the
environment is complete. A folder without the marker is a build that died half way and is
rebuilt.

The environment's pip is used (not uv), so the machine's pip configuration — its local wheel
folder with the CPU build of torch, its index mirrors and constraints — applies unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ENVS",
    "ENV_ROOT_VAR",
    "MARKER",
    "EnvError",
    "EnvSpec",
    "ensure_all",
    "ensure_env",
    "env_dir",
    "env_python",
    "env_root",
    "env_status",
    "main",
    "parse_pin",
    "pins_hash",
    "verify_pins",
]

ENV_ROOT_VAR = "INTERP_VALIDATOR_ENVS"
MARKER = "interp-validator-env.json"
_MARKER_VERSION = 1


class EnvError(RuntimeError):
    """A reference environment could not be created or failed its checks."""


def parse_pin(pin: str) -> tuple[str, str]:
    """Split an exact pin `name==version` into (normalised name, version); refuse anything else.

    Only exact pins are accepted: a range would let two machines build different environments
    under the same hash, and then a validation result would not say what it validated against.
    """
    name, sep, version = pin.strip().partition("==")
    name, version = name.strip(), version.strip()
    ok_name = name and all(ch.isalnum() or ch in "-_." for ch in name)
    ok_version = version and not any(ch in version for ch in "<>=!~*, ;")
    if not sep or not ok_name or not ok_version:
        msg = (
            f"{pin!r} is not an exact pin: reference environments accept only `name==version`, "
            "so that the environment's hash says exactly what it contains. Write the pin as "
            "e.g. 'transformers==5.24.0'."
        )
        raise ValueError(msg)
    return name.lower().replace("_", "-").replace(".", "-"), version


@dataclass(frozen=True)
class EnvSpec:
    """One reference environment: a name, exact pins and why it exists."""

    name: str
    pins: tuple[str, ...]
    purpose: str
    # Modules a dependency installs that cannot import with this environment's torch; every
    # script run in the environment hides them (`sys.modules[name] = None`) before it imports
    # anything, as the environment's own check does. Not part of the hash: they change no pin.
    hidden: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for pin in self.pins:
            package, _ = parse_pin(pin)
            if package in seen:
                msg = f"environment {self.name!r} pins {package!r} twice; keep one pin per package"
                raise ValueError(msg)
            seen.add(package)

    def normalised_pins(self) -> tuple[str, ...]:
        """The pins in canonical form (`name==version`, normalised names, sorted)."""
        return tuple(sorted("==".join(parse_pin(pin)) for pin in self.pins))


ENVS: dict[str, EnvSpec] = {
    spec.name: spec
    for spec in (
        EnvSpec(
            name="refs",
            pins=(
                "torch==2.13.0",
                "transformers==5.24.0",
                "transformer-lens==3.9.0",
                "nnsight==0.7.0",
                "nnterp==1.3.0",
                "safetensors==0.8.0",
            ),
            purpose=(
                "TransformerLens 3.9 (TransformerBridge and HookedTransformer), nnsight 0.7 and "
                "nnterp 1.3 together; nnterp 1.3.0 does not import with nnsight 0.8."
            ),
        ),
        EnvSpec(
            name="refs-latest",
            pins=(
                "torch==2.13.0",
                "transformers==5.24.0",
                "transformer-lens==4.3.0",
                "nnsight==0.8.1",
                "safetensors==0.8.0",
            ),
            purpose=(
                "The newest TransformerLens (4.x: TransformerBridge only) and nnsight (0.8); "
                "kept apart because nnterp cannot run on nnsight 0.8."
            ),
        ),
        EnvSpec(
            name="sae-lens",
            pins=(
                "torch==2.13.0",
                "transformers==5.24.0",
                "sae-lens==6.54.12",
                "safetensors==0.8.0",
            ),
            purpose=(
                "SAELens, whose own encode/decode interp-sae's readers are compared with; it "
                "pulls TransformerLens and its own transformers pins, so it runs apart."
            ),
        ),
        EnvSpec(
            name="sae-dashboard",
            pins=(
                "torch==2.13.0",
                "transformers==4.56.2",
                "transformer-lens==2.17.0",
                "sae-lens==6.54.12",
                "sae-dashboard==0.8.0",
                "safetensors==0.4.5",
                "datasets==3.6.0",
                # pyarrow 26 needs NumPy 2, which TransformerLens 2 holds below; it declares no
                # numpy requirement, so pip would not say so.
                "pyarrow==25.0.0",
            ),
            purpose=(
                "sae-dashboard, whose NeuronpediaRunner the harvest's feature dashboards are "
                "compared and benchmarked with; it needs TransformerLens 2 and transformers "
                "below 4.57, which no other environment here can hold."
            ),
            # decode-clt (a sae-dashboard dependency) requires torchvision and torchaudio, and
            # the registry's builds of them fail against the CPU torch ("operator
            # torchvision::nms does not exist"); transformers imports torchvision when present.
            hidden=("torchvision", "torchaudio"),
        ),
    )
}


def _python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def pins_hash(pins: Sequence[str], python: str | None = None) -> str:
    """A short stable hash of the pins and the Python version (pin order and spelling ignored)."""
    canonical = sorted("==".join(parse_pin(pin)) for pin in pins)
    payload = json.dumps({"python": python or _python_tag(), "pins": canonical}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def env_root() -> Path:
    """Where the environments live: $INTERP_VALIDATOR_ENVS, else the user's cache."""
    override = os.environ.get(ENV_ROOT_VAR)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "interp-engine" / "validator-envs"


def _spec(name: str | EnvSpec) -> EnvSpec:
    if isinstance(name, EnvSpec):
        return name
    try:
        return ENVS[name]
    except KeyError:
        msg = f"no reference environment is called {name!r}; the known ones are {sorted(ENVS)}"
        raise KeyError(msg) from None


def env_dir(name: str | EnvSpec, *, root: Path | None = None) -> Path:
    """The folder of the environment (which may not exist yet)."""
    spec = _spec(name)
    return (root or env_root()) / f"{spec.name}-{pins_hash(spec.pins)}"


def env_python(folder: Path) -> Path:
    """The python executable inside a virtual environment folder."""
    if os.name == "nt":  # pragma: no cover - the project runs on Linux
        return folder / "Scripts" / "python.exe"
    return folder / "bin" / "python"


def _read_marker(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("marker_version") != _MARKER_VERSION:
        return None
    return data


def env_status(name: str | EnvSpec, *, root: Path | None = None) -> dict | None:
    """The marker of a complete environment (pins, freeze, timings), or None if it is not built."""
    spec = _spec(name)
    folder = env_dir(spec, root=root)
    marker = _read_marker(folder)
    if marker is None or not env_python(folder).exists():
        return None
    if marker.get("hash") != pins_hash(spec.pins):
        return None
    return marker


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on `path` (created if needed) for the block.

    The OS drops the lock when the holder dies, so a killed build never blocks the next caller.
    """
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _say(message: str) -> None:
    print(f"[validator-envs] {message}", file=sys.stderr, flush=True)


def _run(
    command: Sequence[str | os.PathLike], *, what: str, echo: bool = True, timeout: float = 3600
) -> str:
    """Run a command, echoing its output line by line as progress; refuse clearly on failure."""
    argv = [str(part) for part in command]
    tail: deque[str] = deque(maxlen=60)
    lines: list[str] = []
    env = dict(os.environ, PIP_NO_INPUT="1", PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)  # the main environment's packages must not leak in
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
    except OSError as exc:
        msg = f"could not start `{' '.join(argv)}` ({what}): {exc}"
        raise EnvError(msg) from exc
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        lines.append(line)
        tail.append(line)
        if echo and line.strip() and _NOISE not in line:
            _say(f"  {line}")
        if time.monotonic() - started > timeout:
            proc.kill()
            break
    code = proc.wait()
    if code != 0:
        failing = _failing_package(lines)
        hint = f" The failing package looks like {failing}." if failing else ""
        msg = (
            f"{what} failed (exit {code}) running `{' '.join(argv)}`.{hint} Its last output:\n"
            + "\n".join(tail)
            + "\nFix the pin or the package index and run the setup again; the half-built "
            "environment is discarded automatically."
        )
        raise EnvError(msg)
    return "\n".join(lines)


def _failing_package(lines: Sequence[str]) -> str | None:
    """Best effort: the package pip names in its error lines."""
    for line in reversed(lines):
        low = line.lower()
        for needle in (
            "no matching distribution found for ",
            "could not find a version that satisfies the requirement ",
            "failed building wheel for ",
        ):
            if needle in low:
                return line[low.index(needle) + len(needle) :].split()[0]
        if " has requirement " in low or "conflict" in low:
            return line.strip()
    return None


Installer = Callable[[EnvSpec, Path], None]
# pip repeats this for every package the local index mirrors lack; it says nothing useful.
_NOISE = "is ignored: it is neither a file nor a directory"


def pip_install(spec: EnvSpec, folder: Path) -> None:
    """Create a venv at `folder` with the running interpreter and pip-install the pins into it."""
    started = time.monotonic()
    _say(f"creating {spec.name} at {folder} (Python {_python_tag()})")
    base = getattr(sys, "_base_executable", None) or sys.executable
    _run([base, "-m", "venv", folder], what=f"creating the {spec.name} virtual environment")
    python = env_python(folder)
    _say(f"installing {' '.join(spec.pins)} (this takes a few minutes)")
    _run(
        [python, "-m", "pip", "install", "--progress-bar", "off", *spec.pins],
        what=f"pip install for the {spec.name} environment",
    )
    _say(f"installed in {time.monotonic() - started:.0f} s; running pip check")


def verify_pins(spec: EnvSpec, freeze: Sequence[str]) -> None:
    """Refuse an environment whose `pip freeze` does not hold every pin exactly."""
    installed: dict[str, str] = {}
    for line in freeze:
        if "==" in line:
            package, version = parse_pin(line.split(" ", 1)[0])
            installed[package] = version
    for pin in spec.pins:
        package, version = parse_pin(pin)
        got = installed.get(package)
        # A local version label (torch 2.13.0+cpu) still satisfies the pin 2.13.0.
        if got is None or got.split("+", 1)[0] != version:
            msg = (
                f"the {spec.name} environment was built but {package} is {got or 'missing'}, "
                f"not {version} as pinned; check the machine's pip constraints "
                "(`pip config list`) and the package index"
            )
            raise EnvError(msg)


def _check_and_mark(spec: EnvSpec, folder: Path, seconds_hint: float) -> dict:
    """`pip check`, verify every pin resolved exactly, and write the marker (last)."""
    python = env_python(folder)
    _run([python, "-m", "pip", "check"], what=f"`pip check` in the {spec.name} environment")
    freeze = _run(
        [python, "-m", "pip", "freeze", "--all"],
        what=f"`pip freeze` in the {spec.name} environment",
        echo=False,
    ).splitlines()
    verify_pins(spec, freeze)
    marker = {
        "marker_version": _MARKER_VERSION,
        "name": spec.name,
        "pins": list(spec.normalised_pins()),
        "hash": pins_hash(spec.pins),
        "python": _python_tag(),
        "freeze": freeze,
        "build_seconds": round(seconds_hint, 1),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    tmp = folder / (MARKER + ".tmp")
    tmp.write_text(json.dumps(marker, indent=2) + "\n")
    tmp.replace(folder / MARKER)
    return marker


def ensure_env(
    name: str | EnvSpec,
    *,
    root: Path | None = None,
    installer: Installer | None = None,
    check: Callable[[EnvSpec, Path, float], dict] | None = None,
) -> Path:
    """Return the python of the named environment, building it first if it is not complete.

    Idempotent; concurrent callers (threads or processes) wait on one lock, and only the first
    builds. `installer` and `check` exist for tests (the defaults pip-install and `pip check`).
    """
    spec = _spec(name)
    folder = env_dir(spec, root=root)
    if env_status(spec, root=root) is not None:
        return env_python(folder)
    with _locked(folder.with_name(folder.name + ".lock")):
        if env_status(spec, root=root) is not None:  # someone else built it while we waited
            return env_python(folder)
        if folder.exists():
            _say(f"discarding the incomplete environment at {folder}")
            shutil.rmtree(folder)
        started = time.monotonic()
        try:
            (installer or pip_install)(spec, folder)
            (check or _check_and_mark)(spec, folder, time.monotonic() - started)
        except BaseException:
            # Leave nothing that looks usable; the next caller rebuilds from scratch.
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if env_status(spec, root=root) is None:
            msg = f"building {spec.name} at {folder} finished without writing its marker {MARKER}"
            raise EnvError(msg)
        _say(f"{spec.name} ready at {folder} in {time.monotonic() - started:.0f} s")
    return env_python(folder)


def ensure_all(names: Sequence[str] | None = None, *, root: Path | None = None) -> dict[str, Path]:
    """Build (or find) several environments; returns name -> python."""
    return {name: ensure_env(name, root=root) for name in (names or list(ENVS))}


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m interp_validator.envs [NAME ...]`: build the environments, print their pythons."""
    names = list(argv if argv is not None else sys.argv[1:]) or list(ENVS)
    try:
        pythons = ensure_all(names)
    except (EnvError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, python in pythons.items():
        print(f"{name}\t{python}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

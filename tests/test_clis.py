"""The four commands agree on what a user types: --version, --json, help with defaults, --gpu.

`interp`, `interp-size`, `interp-validate` and `interp-bench` live in three packages; a user
learns one and expects the others to behave alike. Each is run as a subprocess (`python -m`), as
a shell would run it, and only its help and version are asked for: nothing is swept or timed.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

# command name -> (module run with -m, arguments before --help: a subcommand where needed)
COMMANDS = {
    "interp": ("interp_core.cli", ("points",)),
    "interp-size": ("interp_sizer.cli", ()),
    "interp-validate": ("interp_validator", ()),
    "interp-bench": ("interp_validator.bench.cli", ()),
}


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        check=False,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", **_pythonpath()},
    )


def _pythonpath() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME", "HF_HUB_OFFLINE")}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_version_and_json(name: str) -> None:
    module, sub = COMMANDS[name]
    version = _run(module, "--version")
    assert version.returncode == 0 and re.search(r"\d+\.\d+\.\d+", version.stdout), version
    help_text = _run(module, *sub, "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert "--json" in help_text.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_with_a_default_shows_it(name: str) -> None:
    module, sub = COMMANDS[name]
    text = _run(module, *sub, "--help").stdout
    options = text.split("options:", 1)[1]
    # Each option's help (the lines after its flag, up to the next flag) mentions a default
    # unless it is a switch, --help or --version.
    entries = re.split(r"\n  (?=-)", options.split("\n\n", 1)[0])
    for entry in filter(str.strip, entries):
        flags = entry.split()[0]
        if flags.startswith(("-h", "--version")):
            continue
        takes_value = bool(re.match(r"\S+ (\{|[A-Z])", entry.strip()))
        if takes_value:
            assert "default" in entry, f"{name}: {entry.strip()}"
        else:
            assert len(entry.split()) > 1, f"{name}: {flags} has no help text"


def test_gpu_names_a_gpu_wherever_it_is_accepted() -> None:
    size = _run("interp_sizer.cli", "--help").stdout
    assert re.search(r"--gpu NAME\s", size)
    bench = _run("interp_validator.bench.cli", "--gpu")
    assert bench.returncode == 2 and "--suite gpu" in bench.stderr


def test_bench_help_lists_its_workloads() -> None:
    text = _run("interp_validator.bench.cli", "--help").stdout
    for workload in ("P1", "P2", "P3", "P4", "L ", "S ", "F ", "A ", "H ", "D "):
        assert f"\n  {workload}" in text


def test_validate_help_lists_families_and_engines_and_warns_about_the_full_sweep() -> None:
    text = " ".join(_run("interp_validator", "--help").stdout.split())
    assert "about 30 minutes" in text
    assert "engines: hf (in-process), tl_bridge" in text and "nnterp" in text
    assert "families: gpt2," in text and "gemma2" in text and "deepseek_v3" in text

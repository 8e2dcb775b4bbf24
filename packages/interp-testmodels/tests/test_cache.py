"""Does a cached folder appear whole or not at all, and does importing the package stay cheap?

`publish_folder` is what every build and conversion goes through: a reader that finds the folder
finds its manifest, a failed write leaves nothing behind, and a folder already published is never
written again.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from interp_testmodels.cache import publish_folder

MANIFEST = "manifest.json"


def _writer(calls: list[Path]) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        calls.append(folder)
        (folder / "weights.bin").write_bytes(b"\x00" * 16)
        (folder / MANIFEST).write_text("{}")

    return write


def test_a_published_folder_is_complete_and_no_scratch_is_left(tmp_path: Path) -> None:
    calls: list[Path] = []
    target = publish_folder(tmp_path / "model", MANIFEST, _writer(calls))
    assert target == tmp_path / "model"
    assert sorted(p.name for p in target.iterdir()) == [MANIFEST, "weights.bin"]
    # The write went to a private scratch folder beside the target, renamed into place.
    assert calls[0] != target and calls[0].parent == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_a_folder_with_its_manifest_is_never_written_again(tmp_path: Path) -> None:
    calls: list[Path] = []
    publish_folder(tmp_path / "model", MANIFEST, _writer(calls))
    publish_folder(tmp_path / "model", MANIFEST, _writer(calls))
    assert len(calls) == 1


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    def fail(folder: Path) -> None:
        (folder / "weights.bin").write_bytes(b"half")
        message = "disk full"
        raise OSError(message)

    with pytest.raises(OSError, match="disk full"):
        publish_folder(tmp_path / "model", MANIFEST, fail)
    assert list(tmp_path.iterdir()) == []


def test_losing_the_rename_keeps_the_winners_folder(tmp_path: Path) -> None:
    target = tmp_path / "model"

    def write_while_another_wins(folder: Path) -> None:
        (folder / MANIFEST).write_text("loser")
        target.mkdir()
        (target / MANIFEST).write_text("winner")

    assert publish_folder(target, MANIFEST, write_while_another_wins) == target
    assert (target / MANIFEST).read_text() == "winner"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_importing_the_package_imports_neither_torch_nor_transformers() -> None:
    code = (
        "import sys, interp_testmodels, interp_testmodels.configs;"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"

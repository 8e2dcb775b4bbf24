"""Every source the code cites is one a user can open.

A calibration's `source` (and any comment) names a public file, paper, datasheet or issue. Notes
kept outside the repository are not sources: a reader cannot follow them, so the fact itself and
where it was published are written instead.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Working notes this project was built from, which are not published with it.
UNPUBLISHED = ("sizer-anchors", "INPUTS.md", "anchor-spec")


def _sources() -> list[Path]:
    folders = [*ROOT.glob("packages/*/src"), ROOT / "apps", ROOT / "tools"]
    return sorted(path for folder in folders for path in folder.rglob("*.py"))


def test_the_scan_reaches_the_sizer_and_the_other_packages() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in _sources()}
    assert "packages/interp-sizer/src/interp_sizer/calibration.py" in names
    assert "packages/interp-core/src/interp_core/facts.py" in names


def test_no_source_file_cites_a_document_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(name.lower() in line.lower() for name in UNPUBLISHED)
    ]
    assert not found, "state the fact and its public source instead:\n" + "\n".join(found)


def test_sources_name_the_public_repository_they_come_from() -> None:
    # "interp-engine GPUS" reads as this project; the figures come from decoderesearch's.
    import re

    from interp_sizer import CALIBRATIONS, GPUS

    texts = [gpu.source for gpu in GPUS] + [c.source for c in CALIBRATIONS]
    bare = [t for t in texts if re.search(r"(?<![\w/])interp-engine\b", t)]
    assert not bare, bare
    assert all(gpu.source for gpu in GPUS)

"""No command reads a shortened flag as a longer one.

argparse takes any unambiguous prefix of a long flag by default, so `interp serve MODEL --api X`
was read as `--api-key-file X`, silently. Every parser in the repo turns that off; read from the
source (an AST scan, so a parser added later is covered without a list to keep), and checked on
the `interp` command itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    *ROOT.glob("packages/*/src/**/*.py"),
    *ROOT.glob("tools/**/*.py"),
    *ROOT.glob("apps/**/*.py"),
]


def _parser_calls(path: Path) -> list[ast.Call]:
    calls = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("ArgumentParser", "add_parser"):
                calls.append(node)
    return calls


def _turns_abbreviations_off(call: ast.Call) -> bool:
    return any(
        k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in call.keywords
    )


def test_every_parser_turns_abbreviations_off() -> None:
    calls = [(path, call) for path in SOURCES for call in _parser_calls(path)]
    assert len(calls) >= 8, "the scan found too few parsers: is it looking in the right place?"
    missing = [
        f"{path.relative_to(ROOT)}:{call.lineno}"
        for path, call in calls
        if not _turns_abbreviations_off(call)
    ]
    assert not missing, f"parsers without allow_abbrev=False: {missing}"


def test_a_shortened_flag_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from interp_core.cli import build_parser

    assert build_parser().parse_args(["points", "m", "--json"]).json is True
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["points", "m", "--js"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --js" in capsys.readouterr().err

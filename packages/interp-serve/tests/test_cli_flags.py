"""`interp serve`'s flags: whole names only, and the connection limits reach the settings."""

from __future__ import annotations

import argparse

import pytest

from interp_core.errors import InvalidArgument
from interp_serve.cli import add_arguments, build_settings, register
from interp_serve.settings import ServerSettings


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="interp", allow_abbrev=False)
    register(parser.add_subparsers(dest="command"))
    return parser


def test_a_prefix_of_api_key_file_is_not_read_as_it(capsys: pytest.CaptureFixture[str]) -> None:
    parser = _serve_parser()
    whole = parser.parse_args(["serve", "m", "--api-key-file", "keys.txt"])
    assert str(whole.api_key_file) == "keys.txt"
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["serve", "m", "--api", "keys.txt"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --api" in capsys.readouterr().err


def test_connection_limits_reach_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTERP_API_KEYS", raising=False)
    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_arguments(parser)
    defaults = build_settings(parser.parse_args(["m"]))
    assert defaults == ServerSettings()
    args = parser.parse_args(
        ["m", "--max-header-bytes", "4096", "--max-header-fields", "7", "--header-timeout",
         "1.5", "--body-timeout", "2.5", "--keep-alive-timeout", "3", "--max-connections", "9",
         "--drain-bytes", "0", "--drain-timeout", "0.5"]
    )  # fmt: skip
    settings = build_settings(args)
    assert (settings.max_header_bytes, settings.max_header_fields) == (4096, 7)
    assert (settings.header_timeout_s, settings.body_timeout_s) == (1.5, 2.5)
    assert (settings.keep_alive_timeout_s, settings.max_connections) == (3.0, 9)
    assert (settings.drain_bytes, settings.drain_timeout_s) == (0, 0.5)
    with pytest.raises(InvalidArgument, match="--max-connections is 0"):
        build_settings(parser.parse_args(["m", "--max-connections", "0"]))
    with pytest.raises(InvalidArgument, match="--header-timeout is -1"):
        build_settings(parser.parse_args(["m", "--header-timeout", "-1"]))

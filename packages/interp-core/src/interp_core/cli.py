"""What can I read on this model, and which backends can serve it here?

`interp points MODEL` answers the first question from a config alone: every standardized point
with its width, its shape and the layers that have it, or the reason the model has none.
`interp backends` answers the second: every registered backend and its probe's verdict.
`interp models` lists the bundled configs' repo ids. MODEL is a `config.json`, a folder
holding one, or the repo id of a bundled config. Every built-in subcommand takes `--json`.

Other packages add subcommands through the `interp.commands` entry-point group: each entry names
a `register(subparsers)` function that adds its parser and sets `run` (interp-serve's `serve`).
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from interp_core.__about__ import __version__
from interp_core.cli_common import HelpFormatter, quiet_broken_pipe
from interp_core.errors import ConfigError, InterpError
from interp_core.facts import ModelFacts
from interp_core.points import POINTS, Scope, absence_reason, layer_ranges
from interp_core.shapes import point_shape

__all__ = ["COMMANDS_GROUP", "load_config", "main", "point_table"]

COMMANDS_GROUP = "interp.commands"

# Shapes are computed with these stand-ins and printed symbolically; no real width is this large.
_BATCH, _SEQ = 1_000_003, 1_000_033


def load_config(model: str) -> tuple[str, dict[str, Any]]:
    """Read a config from a file, a folder or the bundled catalogue; return (label, config)."""
    path = Path(model).expanduser()
    if not path.exists() and _looks_like_path(model):
        message = (
            f"the path {model!r} does not exist; pass an existing config.json or model folder, "
            f"or a bundled repo id (`interp models` lists them)"
        )
        raise ConfigError(message)
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            message = (
                f"{model!r} is a folder without a config.json; "
                f"point at a model folder or a config file"
            )
            raise ConfigError(message)
    if path.is_file():
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            message = f"cannot read {str(path)!r} as JSON: {error}"
            raise ConfigError(message) from error
        return str(path), config
    from interp_core.known_models import known_model_ids, load_known_config

    known = known_model_ids()
    if model not in known:
        # The library's message names Python calls; a shell user is told what to type instead.
        by_folded = {name.casefold(): name for name in known}
        close = difflib.get_close_matches(model.casefold(), list(by_folded), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(by_folded[c]) for c in close)}?" if close else ""
        message = (
            f"{model!r} is neither a config file, a model folder, nor one of the {len(known)} "
            f"bundled configs.{hint} Pass a config.json or a model folder; `interp models` "
            f"lists the bundled ids"
        )
        raise ConfigError(message)
    return model, load_known_config(model)


def _looks_like_path(model: str) -> bool:
    """Whether `model` was meant as a path (a repo id is `org/name`, never these)."""
    return (
        model.startswith(("/", "./", "../", "~", "\\"))
        or model.endswith(".json")
        or model.count("/") > 1
        or (os.sep != "/" and os.sep in model)
    )


def _symbolic(shape: tuple[int, ...]) -> str:
    names = {_BATCH: "batch", _SEQ: "seq"}
    return "[" + ", ".join(names.get(d, str(d)) for d in shape) + "]"


def point_table(facts: ModelFacts) -> list[dict[str, Any]]:
    """One row per standardized point: where the model has it and its shape, or why it has none."""
    rows: list[dict[str, Any]] = []
    for name, spec in POINTS.items():
        if spec.scope is Scope.TRUNK:
            reason = absence_reason(name, facts)
            layers: list[int] = []
            shape = None if reason else point_shape(name, facts, _BATCH, _SEQ)
        else:
            layers = [
                layer
                for layer in range(facts.n_layers)
                if absence_reason(name, facts, layer) is None
            ]
            reason = absence_reason(name, facts) if not layers else None
            shape = point_shape(name, facts, _BATCH, _SEQ, layers[0]) if layers else None
        width: int | str | None = None
        if shape is not None and shape.count(_SEQ) > 1:
            # Attention matrices [batch, heads, q, k]: per query token, heads × key positions.
            width = f"{shape[1]}×seq"
        elif shape is not None:
            width = math.prod(shape[2:])
        shape_text = _symbolic(shape) if shape else None
        by_layer = {layer: point_shape(name, facts, _BATCH, _SEQ, layer) for layer in layers}
        if len(set(by_layer.values())) > 1:
            # Widths that differ by layer (Gemma-4's full layers): every shape, with its layers.
            shapes = sorted(set(by_layer.values()))
            width = "/".join(str(math.prod(s[2:])) for s in shapes)
            shape_text = " or ".join(
                f"{_symbolic(s)} at {layer_ranges([i for i, t in by_layer.items() if t == s])}"
                for s in shapes
            )
        rows.append(
            {
                "point": name,
                "scope": spec.scope.name.lower(),
                "layers": layers,
                "width": width,
                "shape": shape_text,
                "writable": spec.writable,
                "absent": reason,
            }
        )
    return rows


def _print_points(label: str, facts: ModelFacts, rows: list[dict[str, Any]]) -> None:
    present = [r for r in rows if r["absent"] is None]
    absent = [r for r in rows if r["absent"] is not None]
    print(
        f"{label}: {facts.architecture}, {facts.n_layers} layers, d_model {facts.d_model}, "
        f"{len(present)} of {len(rows)} points"
    )
    header = f"  {'point':<22} {'scope':<6} {'layers':<12} {'width':>8}  {'steer':<5} shape"
    print(header)
    for row in present:
        layers = "-" if row["scope"] == "trunk" else layer_ranges(row["layers"])
        steer = "yes" if row["writable"] else "no"
        print(
            f"  {row['point']:<22} {row['scope']:<6} {layers:<12} {row['width']:>8}  "
            f"{steer:<5} {row['shape']}"
        )
    if absent:
        print(f"absent on this model ({len(absent)}):")
        for row in absent:
            print(f"  {row['point']:<22} {row['absent']}")


def _cmd_points(args: argparse.Namespace) -> int:
    label, config = load_config(args.model)
    facts = ModelFacts.from_config(config)
    rows = point_table(facts)
    if args.json:
        print(json.dumps({"model": label, "n_layers": facts.n_layers, "points": rows}, indent=2))
    else:
        _print_points(label, facts, rows)
    return 0


def _cmd_backends(args: argparse.Namespace) -> int:
    from interp_core.backends import FIRST_PARTY, available_backends

    verdicts = available_backends()
    rows = []
    for name in sorted(set(verdicts) | set(FIRST_PARTY)):
        if name in verdicts:
            status = "ready" if verdicts[name] is None else "cannot run here"
            detail = verdicts[name] or ""
        else:
            dist = FIRST_PARTY[name]
            try:
                installed = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                status, detail = "not installed", f"pip install {dist}"
            else:
                # The distribution is here but does not register this name (not built yet).
                status = "not provided"
                detail = f"{dist} {installed} registers no {name!r} backend; upgrade {dist}"
        rows.append({"backend": name, "status": status, "detail": detail})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        line = f"  {row['backend']:<14} {row['status']:<16}"
        print(f"{line} {row['detail']}".rstrip())
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from interp_core.known_models import known_model_ids

    ids = list(known_model_ids())
    print(json.dumps(ids, indent=2) if args.json else "\n".join(ids))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interp",
        allow_abbrev=False,  # a shortened flag could be read as another one
        description="interp-engine: standardized points and backends.",
        formatter_class=HelpFormatter,
        epilog="examples:\n  interp points Qwen/Qwen3-8B\n  interp points ./my-model --json\n"
        "  interp backends\n  interp models | grep -i llama",
    )
    parser.add_argument("--version", action="version", version=f"interp-core {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    points = _subcommand(
        sub,
        "points",
        _cmd_points,
        "every point a model has, with width and shape, or why it is absent",
        "print one JSON object",
    )
    points.add_argument("model", help="a config.json, a model folder, or a bundled repo id")
    _subcommand(
        sub,
        "backends",
        _cmd_backends,
        "registered backends and whether they can run here",
        "print a JSON list",
    )
    _subcommand(
        sub,
        "models",
        _cmd_models,
        "the repo ids of the bundled configs (usable offline as MODEL)",
        "print a JSON list",
    )
    _add_plugin_commands(sub)
    return parser


def _subcommand(
    sub: Any, name: str, run: Callable[[argparse.Namespace], int], summary: str, json_help: str
) -> argparse.ArgumentParser:
    """A built-in subcommand: whole flag names only, and a `--json` switch on every one."""
    command: argparse.ArgumentParser = sub.add_parser(
        name, formatter_class=HelpFormatter, allow_abbrev=False, help=summary
    )
    command.add_argument("--json", action="store_true", help=json_help)
    command.set_defaults(run=run)
    return command


def _add_plugin_commands(sub: Any) -> None:
    """Subcommands other packages register (`interp.commands` entry points)."""
    for entry in sorted(
        importlib.metadata.entry_points(group=COMMANDS_GROUP), key=lambda e: e.name
    ):
        if entry.name in sub.choices:
            continue  # a built-in name is never replaced
        try:
            register = entry.load()
            register(sub)
        except Exception as error:
            broken = sub.add_parser(entry.name, help=f"(cannot load: {error})", allow_abbrev=False)
            broken.add_argument("rest", nargs=argparse.REMAINDER)
            reason = f"{entry.name!r} comes from {entry.value}, which failed to load: {error}"
            broken.set_defaults(run=_broken(reason))


def _broken(reason: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        message = f"interp {reason}; reinstall the package that provides it"
        raise InterpError(message)

    return run


@quiet_broken_pipe
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except InterpError as error:
        # A refusal is a message for a person, not a traceback.
        print(f"interp: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

"""`interp serve MODEL`: load a model through the registry and serve it over HTTP.

Registered as a subcommand of the `interp` CLI through the `interp.commands` entry-point group.
Backend options (`--dtype`, `--max-model-len`, `--num-gpus`, `--pipeline-parallel`,
`--distributed`, `--static-points`, or any `--option KEY=JSON`) go to `load_model` untouched;
the backend refuses those it does not take. `--sae [NAME=]PATH` (repeatable) loads SAEs at start
for `/v1/features` and feature steering; it needs interp-sae, imported only then.

Keys: `INTERP_API_KEYS` (comma-separated) and/or `--api-key-file` (one key per line). Without a
key the server accepts anyone, which is allowed on a loopback address only; binding any other
address without keys is refused unless `--no-auth` says so explicitly.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import signal
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from interp_core.cli_common import add_option_argument, load_options
from interp_core.errors import InvalidArgument
from interp_serve.injection import parse_lora_option
from interp_serve.saes import import_interp_sae, load_saes
from interp_serve.settings import ServerSettings

__all__ = ["build_settings", "main", "register"]

KEYS_ENV = "INTERP_API_KEYS"

# (flag, ServerSettings field, type, help): each flag's default is its field's, and its value
# goes to that field as given.
_LIMITS: tuple[tuple[str, str, type, str | None], ...] = (
    ("--max-concurrency", "max_concurrency", int, None),
    ("--max-queue", "max_queue", int, None),
    ("--request-timeout", "request_timeout_s", float, None),
    ("--max-body-bytes", "max_body_bytes", int, None),
    ("--max-capture-bytes", "max_capture_bytes", int, None),
    ("--store-budget-bytes", "store_budget_bytes", int, None),
    ("--inline-max-bytes", "inline_max_bytes", int, None),
    ("--activation-ttl", "activation_ttl_s", float, None),
    ("--max-top-k", "max_top_k", int, "top_k cap (features, lens)"),
    (
        "--max-forward-bytes",
        "max_forward_bytes",
        int,
        "activations one request's forward may need, priced before it runs",
    ),
    (
        "--max-text-chars",
        "max_text_chars",
        int,
        "characters of text one request may have tokenized",
    ),
)

# The connection layer's limits, as _LIMITS plus whether zero is allowed (else the value must
# be more than zero; build_settings refuses the rest).
_CONNECTION_LIMITS: tuple[tuple[str, str, type, bool, str], ...] = (
    (
        "--max-header-bytes",
        "max_header_bytes",
        int,
        False,
        "request line + headers over this are refused with 431",
    ),
    (
        "--max-header-fields",
        "max_header_fields",
        int,
        False,
        "more header fields than this are refused with 431",
    ),
    (
        "--header-timeout",
        "header_timeout_s",
        float,
        False,
        "seconds a whole request head may take to arrive; then the connection closes",
    ),
    (
        "--body-timeout",
        "body_timeout_s",
        float,
        False,
        "seconds a request body may stall; then the connection closes",
    ),
    (
        "--keep-alive-timeout",
        "keep_alive_timeout_s",
        float,
        False,
        "seconds an idle keep-alive connection is kept",
    ),
    (
        "--max-connections",
        "max_connections",
        int,
        False,
        "open connections beyond this are answered 503 and closed",
    ),
    (
        "--drain-bytes",
        "drain_bytes",
        int,
        True,
        "bytes of a refused request's body read and dropped so its client sees the answer",
    ),
    (
        "--drain-timeout",
        "drain_timeout_s",
        float,
        True,
        "seconds spent draining a refused request's body at most",
    ),
)


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def register(subparsers: Any) -> None:
    """Add `serve` to the `interp` CLI's subcommands."""
    parser = subparsers.add_parser(
        "serve",
        help="serve a model over HTTP (OpenAI-compatible + interp endpoints)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        # `--api X` must not be read as `--api-key-file X`: only whole flag names count.
        allow_abbrev=False,
    )
    add_arguments(parser)
    parser.set_defaults(run=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = ServerSettings()
    parser.add_argument("model", help="a model folder or repo id, as load_model takes it")
    parser.add_argument("--backend", default="auto", help="registered backend (default: auto)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-name", help="model name clients send (default: MODEL)")
    backend = parser.add_argument_group("backend options (passed to load_model)")
    backend.add_argument("--dtype")
    backend.add_argument("--max-model-len", type=int)
    backend.add_argument("--num-gpus", type=int)
    backend.add_argument(
        "--pipeline-parallel", type=int, help="pipeline stages the --num-gpus are split into"
    )
    backend.add_argument(
        "--distributed", choices=("mp", "ray"), help="how the workers run (vLLM: mp or ray)"
    )
    backend.add_argument("--static-points", nargs="+", metavar="ADDRESS")
    add_option_argument(backend)
    parser.add_argument(
        "--sae",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="load this SAE folder at start (repeatable; named after its folder unless NAME=); "
        "needs interp-sae",
    )
    parser.add_argument(
        "--lora",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a PEFT LoRA folder requests may name (repeatable; checked at start; vLLM needs "
        "--option extra_vllm_kwargs='{\"enable_lora\": true}')",
    )
    auth = parser.add_argument_group("authentication")
    auth.add_argument("--api-key-file", type=Path, help=f"keys, one per line (also: {KEYS_ENV})")
    auth.add_argument(
        "--no-auth", action="store_true", help="serve a non-loopback address without keys"
    )
    limits = parser.add_argument_group("limits")
    for flag, field, kind, help_ in _LIMITS:
        limits.add_argument(flag, type=kind, default=getattr(defaults, field), help=help_)
    connections = parser.add_argument_group(
        "connections (checked before the API key; see interp_serve.transport)"
    )
    for flag, field, kind, _zero, help_ in _CONNECTION_LIMITS:
        connections.add_argument(flag, type=kind, default=getattr(defaults, field), help=help_)
    parser.add_argument(
        "--cors-origin", action="append", default=[], help="allow this origin (default: none)"
    )
    parser.add_argument(
        "--lens-dir", help="a folder of fitted-lens files clients may install by file name"
    )
    parser.add_argument(
        "--watch-pid", type=int, help="stop when this process exits (supervisors, tests)"
    )
    parser.add_argument("--log-level", default="info")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _keys(args: argparse.Namespace) -> tuple[str, ...]:
    keys = [k.strip() for k in os.environ.get(KEYS_ENV, "").split(",") if k.strip()]
    if args.api_key_file is not None:
        try:
            lines = args.api_key_file.read_text().splitlines()
        except OSError as error:
            message = f"cannot read --api-key-file {str(args.api_key_file)!r}: {error}"
            raise InvalidArgument(message) from error
        keys.extend(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    return tuple(dict.fromkeys(keys))


def build_settings(args: argparse.Namespace) -> ServerSettings:
    """Settings from the arguments; refuses an open server on a non-loopback address."""
    keys = _keys(args)
    if not keys and not _is_loopback(args.host) and not args.no_auth:
        message = (
            f"refusing to serve {args.host} without API keys: anyone who can reach it could "
            f"use the model. Set {KEYS_ENV}=key1,key2 or --api-key-file FILE, bind 127.0.0.1, "
            f"or pass --no-auth to serve it open on purpose"
        )
        raise InvalidArgument(message)
    return ServerSettings(
        api_keys=keys,
        served_name=args.served_name,
        cors_origins=tuple(args.cors_origin),
        lens_dir=args.lens_dir,
        loras=parse_lora_option(args.lora),
        **{field: getattr(args, _dest(flag)) for flag, field, _kind, _help in _LIMITS},
        **{
            field: _positive(args, _dest(flag), zero=zero)
            for flag, field, _kind, zero, _help in _CONNECTION_LIMITS
        },
    )


def _positive(args: argparse.Namespace, name: str, zero: bool = False) -> Any:
    value = getattr(args, name)
    if value < 0 or (value == 0 and not zero):
        flag = "--" + name.replace("_", "-")
        wanted = "zero or more" if zero else "more than zero"
        message = f"{flag} is {value}; it must be {wanted}"
        raise InvalidArgument(message)
    return value


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    keys = ("dtype", "max_model_len", "num_gpus", "pipeline_parallel", "distributed")
    for key in (*keys, "static_points"):
        value = getattr(args, key)
        if value is not None:
            options[key] = value
    options.update(load_options(args.option))
    return options


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from interp_core import load_model
    from interp_serve.app import create_app
    from interp_serve.transport import uvicorn_options

    settings = build_settings(args)
    if args.sae:
        # Refused (interp-sae missing) before a model load that can take minutes.
        import_interp_sae()
    model = load_model(args.model, backend=args.backend, **backend_options(args))
    try:
        saes = load_saes(args.sae, model) if args.sae else {}
    except BaseException:
        from interp_core import sync

        sync.shutdown(model)
        raise
    app = create_app(model, settings, saes)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: Any) -> Any:
        # Warm up on the server's own loop: a loop-bound engine (vLLM) must live on it.
        await app.state.service.engine.warmup()
        watcher = asyncio.create_task(_watch(args.watch_pid)) if args.watch_pid else None
        async with inner(app_) as state:
            yield state
        if watcher is not None:
            watcher.cancel()
        # After the engine's shutdown (the inner lifespan's exit): supervisors read this line.
        print("interp serve: stopped; the model was shut down", flush=True)

    app.router.lifespan_context = lifespan
    print(
        f"interp serve: {args.model} on backend {model.backend_name} at "
        f"http://{args.host}:{args.port} ({'keys required' if settings.api_keys else 'no auth'})",
        flush=True,
    )
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        **uvicorn_options(settings),
    )
    return 0


async def _watch(pid: int) -> None:
    while True:
        await asyncio.sleep(0.5)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            # uvicorn treats SIGTERM as a graceful shutdown, lifespan included.
            with suppress(ProcessLookupError):
                os.kill(os.getpid(), signal.SIGTERM)
            return


def main(argv: list[str] | None = None) -> int:
    """`python -m interp_serve.cli MODEL ...` (the same as `interp serve MODEL ...`)."""
    from interp_core.cli import main as interp_main

    return interp_main(["serve", *(argv if argv is not None else [])])


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))

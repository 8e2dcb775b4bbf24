"""The CLI's refusals and option parsing, the wire formats, and the committed OpenAPI schema.

No server here: these are the pieces a server and a client share, checked on their own.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

import pytest

from interp_core.cli import build_parser
from interp_core.errors import (
    InvalidArgument,
    PointUnsupported,
    SteeringSpecError,
    UnknownPoint,
)
from interp_core.facts import ModelFacts
from interp_core.known_models import facts_for
from interp_core.results import Generation, GenerationStep, LensPrediction, LensResult
from interp_core.steering import SteeringSpec
from interp_serve import openapi
from interp_serve.cli import backend_options, build_settings
from interp_serve.errors import Overloaded, RemoteError, StoreFull, status_of
from interp_serve.saes import parse_sae_arg
from interp_serve.wire import (
    error_from_json,
    error_to_json,
    facts_from_json,
    facts_to_json,
    lens_from_json,
    lens_to_json,
    spec_from_json,
    spec_to_json,
    step_from_json,
    step_to_json,
)


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", "some/model", *argv])


def test_serve_is_an_interp_subcommand() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "interp_core.cli", "serve", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    for option in ("--backend", "--api-key-file", "--no-auth", "--max-queue", "--dtype"):
        assert option in done.stdout


def test_open_non_loopback_bind_needs_keys_or_no_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTERP_API_KEYS", raising=False)
    with pytest.raises(InvalidArgument, match="without API keys"):
        build_settings(_args("--host", "0.0.0.0"))
    assert build_settings(_args("--host", "0.0.0.0", "--no-auth")).api_keys == ()
    assert build_settings(_args("--host", "::1")).api_keys == ()
    monkeypatch.setenv("INTERP_API_KEYS", "a, b,,a")
    assert build_settings(_args("--host", "10.0.0.1")).api_keys == ("a", "b")


def test_api_key_file(tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTERP_API_KEYS", raising=False)
    keys = tmp_path / "keys.txt"  # type: ignore[operator]
    keys.write_text("# operators\nk1\n\nk2\n")
    settings = build_settings(_args("--host", "0.0.0.0", "--api-key-file", str(keys)))
    assert settings.api_keys == ("k1", "k2")


def test_backend_options_pass_through() -> None:
    args = _args("--dtype", "bfloat16", "--max-model-len", "512", "--option", "requires_grad=true")
    assert backend_options(args) == {
        "dtype": "bfloat16",
        "max_model_len": 512,
        "requires_grad": True,
    }
    layout = _args("--num-gpus", "4", "--pipeline-parallel", "2", "--distributed", "ray")
    assert backend_options(layout) == {"num_gpus": 4, "pipeline_parallel": 2, "distributed": "ray"}
    with pytest.raises(SystemExit):  # argparse names the choices: mp, ray
        _args("--distributed", "slurm")
    with pytest.raises(InvalidArgument, match="KEY=JSON"):
        backend_options(_args("--option", "nonsense"))
    with pytest.raises(InvalidArgument, match="is not JSON"):
        backend_options(_args("--option", "dtype=bfloat16"))


def test_sae_arguments_name_their_saes() -> None:
    assert _args("--sae", "a=/x/y", "--sae", "/s/blocks.3.hook_resid_post").sae == [
        "a=/x/y",
        "/s/blocks.3.hook_resid_post",
    ]
    assert parse_sae_arg("res8=/saes/l8") == ("res8", "/saes/l8")
    assert parse_sae_arg("/saes/l8") == ("l8", "/saes/l8")
    assert parse_sae_arg("/saes/k=v/l8") == ("l8", "/saes/k=v/l8")  # a path with '=' in it


def test_errors_keep_their_class_and_message() -> None:
    for error in (
        PointUnsupported("resid_post.9 is beyond the model"),
        UnknownPoint("'x' names no standardized point"),
        StoreFull("the store is full"),
    ):
        status = status_of(error)
        back = error_from_json(json.loads(json.dumps(error_to_json(error, status))), status)
        assert type(back) is type(error) and str(back) == str(error)
    busy = error_from_json(error_to_json(Overloaded("busy", 3), 429), 429, 3.0)
    assert isinstance(busy, Overloaded) and busy.retry_after == 3
    # An unexpected error travels as a RemoteError: its class is never looked up by name.
    other = error_from_json(error_to_json(KeyError("secret"), 500), 500)
    assert type(other) is RemoteError and other.status == 500
    forged = error_from_json({"error": {"type": "SystemExit", "message": "x"}}, 400)
    assert type(forged) is RemoteError
    assert status_of(ValueError()) == 500 and status_of(PointUnsupported("x")) == 400


def test_steering_specs_round_trip_and_refuse_non_finite_values() -> None:
    spec = SteeringSpec(
        "resid_post.3", [1.0, -2.0, 0.5], op="orthogonal", scale=2.0, positions=[0, 2]
    )
    back = spec_from_json(json.loads(json.dumps(spec_to_json(spec))))
    assert (back.address, back.op, back.scale, back.positions, back.values()) == (
        spec.address, spec.op, spec.scale, spec.positions, spec.values()
    )  # fmt: skip
    cap = SteeringSpec("resid_post.0", [1.0, 1.0], op="projection_cap", min=-1.0, max=2.0)
    back = spec_from_json(spec_to_json(cap))
    assert (back.min, back.max) == (-1.0, 2.0)
    with pytest.raises(SteeringSpecError):
        spec_to_json(SteeringSpec("resid_post.0", _Opaque([1.0, math.nan])))
    with pytest.raises(SteeringSpecError, match="unknown fields"):
        spec_from_json({"address": "resid_post.0", "vector": [1.0], "code": "import os"})


class _Opaque:
    def __init__(self, values: list[float]) -> None:
        self._values = values
        self.shape = (len(values),)

    def tolist(self) -> list[float]:
        return list(self._values)


def test_results_and_facts_round_trip() -> None:
    step = GenerationStep(2, 17, "ab", -0.25, True, "length")
    assert step_from_json(json.loads(json.dumps(step_to_json(step)))) == step
    lens = LensResult(
        "resid_post",
        (0, 1),
        1,
        {0: ((LensPrediction(3, "a", 0.5),),), 1: ((LensPrediction(4, "b", 0.25),),)},
    )
    back = lens_from_json(json.loads(json.dumps(lens_to_json(lens))))
    assert dict(back.predictions) == dict(lens.predictions) and back.layers == lens.layers
    facts = facts_for("Qwen/Qwen3-30B-A3B")
    again = facts_from_json(json.loads(json.dumps(facts_to_json(facts))))
    assert isinstance(again, ModelFacts) and again == facts
    assert Generation("x", [1], [0]) == Generation("x", (1,), (0,))


def test_the_committed_openapi_schema_matches_the_routes() -> None:
    assert openapi.SCHEMA_PATH.read_text() == openapi.render(), (
        "the routes changed: run python -m interp_serve.openapi --write"
    )
    paths = json.loads(openapi.SCHEMA_PATH.read_text())["paths"]
    for route in ("/v1/completions", "/v1/chat/completions", "/v1/capture", "/v1/points"):
        assert route in paths

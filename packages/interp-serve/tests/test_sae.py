"""SAEs on a server (`interp serve MODEL --sae ...`): the features endpoint and feature steering
equal the same calls in-process on the eager backend, and what is not there is refused.

One server of its own (module-scoped) with two tiny SAELens SAEs, written by interp-sae's own
test writers: a ReLU SAE named on the command line and a JumpReLU one named after its folder.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import serve_helpers
import torch
from safetensors.torch import load

from interp_core import sync
from interp_testmodels import TEST_PROMPT

D_SAE = 64
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def sae_dirs(tmp_path_factory: pytest.TempPathFactory, local: Any) -> dict[str, Path]:
    return serve_helpers.write_saes(tmp_path_factory.mktemp("serve-saes"), local.d_model, D_SAE)


@pytest.fixture(scope="module")
def saes(sae_dirs: dict[str, Path]) -> dict[str, Any]:
    from interp_sae import load_sae

    return {name: load_sae(path) for name, path in sae_dirs.items()}


@pytest.fixture(scope="module")
def sae_server(
    model_path: Path, sae_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    logs = tmp_path_factory.mktemp("serve-sae-logs")
    args = ("--sae", f"relu={sae_dirs['relu']}", "--sae", str(sae_dirs["jr0"]), "--max-top-k", "8")
    yield from serve_helpers.serving(model_path, logs, name="sae", args=args)


@pytest.fixture(scope="module")
def http(sae_server: Any) -> Iterator[Any]:
    with sae_server.client() as client:
        yield client


def _complete(http: Any, interp: dict[str, Any]) -> dict[str, Any]:
    body = {
        "model": http.get("/v1/models").json()["data"][0]["id"],
        "prompt": TEST_PROMPT,
        "max_tokens": NEW_TOKENS,
        "temperature": 0,
        "interp": interp,
    }
    answer = http.post("/v1/completions", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _generate(local: Any, steering: Any) -> list[int]:
    ids = local.to_tokens(TEST_PROMPT)
    generation = sync.generate(
        local, ids, max_new_tokens=NEW_TOKENS, temperature=0.0, steering=steering
    )
    return list(generation.token_ids)


def test_the_loaded_saes_are_listed(http: Any, saes: dict[str, Any]) -> None:
    rows = http.get("/v1/saes").json()["saes"]
    assert [r["name"] for r in rows] == ["relu", "jr0"]
    assert rows[0]["address"] == rows[0]["write_address"] == "resid_post.1"
    assert rows[1]["address"] == "resid_post.0"
    assert all(r["d_in"] == saes["relu"].d_in and r["d_sae"] == D_SAE for r in rows)
    assert rows[1]["activation"] == "jumprelu"


def test_features_equal_the_in_process_call(http: Any, local: Any, saes: dict[str, Any]) -> None:
    from interp_sae import features_sync

    steer = {"sae": "relu", "feature": 5, "strength": 3.0}
    body = {"text": TEST_PROMPT, "saes": ["relu", "jr0"], "top_k": 6, "features": [steer]}
    answer = http.post("/v1/features", json=body)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    ids = local.to_tokens(TEST_PROMPT)
    assert got["tokens"] == ids.tolist()
    steering = saes["relu"].steering(5, 3.0)
    expected = features_sync(local, ids, [saes["relu"], saes["jr0"]], top_k=6, steering=steering)
    plain = features_sync(local, ids, [saes["relu"], saes["jr0"]], top_k=6)
    inline = got["interp"]["inline"]
    for name, result in zip(["relu", "jr0"], expected, strict=True):
        indices = torch.tensor(inline[f"{name}.indices"])
        values = torch.tensor(inline[f"{name}.values"])
        assert indices.shape == (1, ids.shape[1], 6)
        assert torch.equal(indices, result.top.indices)
        assert float((values - result.top.values).abs().max()) <= 1e-6
        assert float(values.max()) > 0  # features fire on the real model
    # The steering reached the forward: layer 1's features moved, layer 0's (before it) did not.
    assert not torch.equal(expected[0].top.values, plain[0].top.values)
    assert torch.equal(expected[1].top.values, plain[1].top.values)
    # The same answer as safetensors bytes, the metadata inside them.
    body.update(direct=True, saes=["relu"])
    raw = http.post("/v1/features", json=body)
    assert raw.headers["content-type"] == "application/octet-stream"
    tensors = load(raw.content)
    assert torch.equal(tensors["relu.indices"], expected[0].top.indices)
    assert float((tensors["relu.values"] - expected[0].top.values).abs().max()) <= 1e-6


@pytest.mark.parametrize(
    ("interp", "in_process"),
    [
        (
            {"features": [{"sae": "jr0", "feature": 3, "strength": 12.0}]},
            lambda saes: saes["jr0"].steering(3, 12.0),
        ),
        (
            {"clamp": [{"sae": "relu", "feature": 7, "value": 40.0}]},
            lambda saes: saes["relu"].clamp(7, 40.0),
        ),
    ],
    ids=["steered", "clamped"],
)
def test_completion_steered_by_a_feature_equals_in_process(
    http: Any,
    local: Any,
    saes: dict[str, Any],
    interp: dict[str, Any],
    in_process: Callable[[dict[str, Any]], Any],
) -> None:
    got = _complete(http, interp)["interp"]["token_ids"]
    assert got == _generate(local, in_process(saes))
    assert got != _generate(local, None)  # the steering changes the generation


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"interp": {"features": [{"sae": "nope", "feature": 1, "strength": 1}]}}, "no SAE named"),
        ({"interp": {"clamp": [{"sae": "relu", "feature": D_SAE, "value": 1}]}}, "out of range"),
    ],
)
def test_completion_refuses_unknown_saes_and_features(http: Any, body: Any, words: str) -> None:
    body = {"model": "x", "prompt": [1, 2], "max_tokens": 1, **body}
    body["model"] = http.get("/v1/models").json()["data"][0]["id"]
    answer = http.post("/v1/completions", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert words in error["message"] and error["type"] == "InvalidArgument"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"saes": ["nope"], "top_k": 2}, "loaded: jr0, relu"),
        ({"top_k": 9}, "cap of 8"),
        ({"top_k": 0}, "from 1"),
    ],
)
def test_features_refusals(http: Any, body: Any, words: str) -> None:
    answer = http.post("/v1/features", json={"tokens": [[1, 2, 3]], **body})
    assert answer.status_code == 400
    assert words in answer.json()["error"]["message"]


def test_interp_sae_is_imported_only_for_sae_servers() -> None:
    code = (
        "import sys, interp_serve.app, interp_serve.cli\n"
        "assert 'interp_sae' not in sys.modules, 'imported at import time'\n"
        "sys.modules['interp_sae'] = None  # as if it were not installed\n"
        "from interp_serve.cli import main\n"
        "raise SystemExit(main(['no-such-model', '--sae', 'x']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'interpoint-serve[sae]'" in done.stderr
    assert "--sae needs the interp-sae package" in done.stderr


def test_the_remote_backend_asks_the_server_for_features(
    sae_server: Any, local: Any, saes: dict[str, Any]
) -> None:
    from interp_sae import features_sync

    from interp_core import load_model

    remote = load_model(sae_server.url, backend="remote", api_key=serve_helpers.KEY)
    try:
        assert [row["name"] for row in remote.saes()] == ["relu", "jr0"]
        ids = local.to_tokens([TEST_PROMPT, TEST_PROMPT.upper()])
        got = sync.run(remote, lambda: remote.features(ids, ["jr0"], top_k=4))
        (expected,) = features_sync(local, ids, [saes["jr0"]], top_k=4)
        assert list(got) == ["jr0"]
        assert torch.equal(got["jr0"]["indices"], expected.top.indices)
        assert float((got["jr0"]["values"] - expected.top.values).abs().max()) <= 1e-6
    finally:
        sync.shutdown(remote)


def test_an_sae_of_another_width_or_a_repeated_name_is_refused_at_start(
    tmp_path: Path, local: Any, sae_dirs: dict[str, Path]
) -> None:
    from sae_files import write_saelens

    from interp_core.errors import InvalidArgument
    from interp_serve.saes import load_saes

    wide = tmp_path / "wide"
    hook = "blocks.1.hook_resid_post"
    write_saelens(wide, "standard", d_in=local.d_model + 8, d_sae=D_SAE, hook_name=hook)
    with pytest.raises(InvalidArgument, match=f"is {local.d_model} wide"):
        load_saes([str(wide)], local)
    with pytest.raises(InvalidArgument, match="two --sae values are named 'relu'"):
        load_saes([f"relu={sae_dirs['relu']}", f"relu={sae_dirs['jr0']}"], local)
    assert list(load_saes([str(sae_dirs["jr0"])], local)) == ["jr0"]

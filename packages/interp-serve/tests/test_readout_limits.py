"""The read-out routes go through `Service` and its limits, like every other route (issue 28).

A server started for this module has small caps (forward budget, per-request cap, top-k), so
each refusal below is the server's check answering before the engine runs, not the backend's.
The structural test keeps new routes from calling the model directly again.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import serve_helpers
import torch

from interp_serve import tensors as tensor_io

FORWARD_CAP = 16 * 2**20
CAPTURE_CAP = 2 * 2**20
TOP_K = 8
SRC = Path(__file__).resolve().parents[1] / "src" / "interp_serve"
# Reads of what the model is, not engine work: allowed on `<...>.model` in route modules.
METADATA = {"supports", "points", "facts", "backend_name", "model_id", "dtype", "tokenizer"}


@pytest.fixture(scope="module")
def capped(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from serve_helpers.serving(
        model_path,
        tmp_path_factory.mktemp("capped-logs"),
        name="capped",
        args=(
            "--max-forward-bytes",
            str(FORWARD_CAP),
            "--max-capture-bytes",
            str(CAPTURE_CAP),
            "--max-top-k",
            str(TOP_K),
        ),
    )


def _error(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text[:500]
    body = answer.json()
    assert set(body) == {"error"}, body
    return str(body["error"]["message"])


def _tensors(tensors: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    body = tensor_io.encode(tensors, {"interp": json.dumps(meta)})
    return {"content": body, "headers": {"content-type": "application/octet-stream"}}


def test_weight_rows_refuse_bad_ids_and_too_many_rows(capped: Any) -> None:
    with capped.client() as http:
        for bad in ([-1], [2**40], [True], [[1, 2]], [None], ["3"], [1000], []):
            answer = http.post("/v1/unembed_rows", json={"token_ids": bad})
            assert answer.status_code == 400, (bad, answer.text)
        # 5,000 rows x 128 x 4 bytes = 2.4 MiB, over the 2 MiB cap: refused before gathering.
        many = {"token_ids": [5] * 5000}
        message = _error(http.post("/v1/embed_rows", json=many), 413)
        assert "embed_rows" in message and "--max-capture-bytes" in message
        ok = http.post("/v1/embed_rows", json={"token_ids": [5] * 100})
        assert ok.status_code == 200, ok.text
        assert tuple(tensor_io.decode(ok.content, "torch")["rows"].shape) == (100, 128)


def test_decode_residuals_caps_top_k_rows_and_width(capped: Any) -> None:
    with capped.client() as http:
        small = torch.zeros(2, 128)
        over = http.post("/v1/decode_residuals", **_tensors({"residuals": small}, {"top_k": 9}))
        assert "--max-top-k" in _error(over, 400)
        for top_k in (0, True, "3"):
            bad = {"top_k": top_k}
            answer = http.post("/v1/decode_residuals", **_tensors({"residuals": small}, bad))
            assert answer.status_code == 400, (top_k, answer.text)
        wide = http.post("/v1/decode_residuals", **_tensors({"residuals": torch.zeros(2, 7)}, {}))
        assert "d_model=128" in _error(wide, 400)
        # 1,000 rows of 1,000 float32 logits is 4 MB, over the 2 MiB answer cap (the body is
        # only 0.5 MB); with top_k=8 the same rows answer 96 kB and run.
        rows = torch.zeros(1000, 128)
        answer = http.post("/v1/decode_residuals", **_tensors({"residuals": rows}, {}))
        assert "--max-capture-bytes" in _error(answer, 413)
        top = http.post("/v1/decode_residuals", **_tensors({"residuals": rows}, {"top_k": 8}))
        assert top.status_code == 200, top.text
        assert tuple(tensor_io.decode(top.content, "torch")["ids"].shape) == (1000, 8)
        # 5,000 rows: the logits alone (5,000 x 1,000 x 8 bytes) are over the forward budget.
        rows = torch.zeros(5000, 128)
        big = http.post("/v1/decode_residuals", **_tensors({"residuals": rows}, {"top_k": 1}))
        assert "--max-forward-bytes" in _error(big, 413)


def test_project_and_the_fitted_lens_are_priced_and_checked(capped: Any) -> None:
    vectors = {"vectors.0": torch.zeros(4, 128)}
    sets = [{"point": "resid_post.1"}]
    with capped.client() as http:
        for bad in ([[5, 1000]], [[5, -1]], [[True, 5]]):
            meta = {"tokens": bad, "sets": sets}
            answer = http.post("/v1/project", **_tensors(vectors, meta))
            assert answer.status_code == 400, (bad, answer.text)
        # 40 rows x 100 tokens: the point's rows (2.0 MB) fit the 2 MiB cap, but ~33 MB of
        # logits are over the 16 MiB forward budget.
        meta = {"tokens": [list(range(1, 101))] * 40, "sets": sets}
        message = _error(http.post("/v1/project", **_tensors(vectors, meta)), 413)
        assert "this projection" in message and "--max-forward-bytes" in message
        # 400 rows: the point's rows the backend holds (20 MB) are priced like a capture.
        meta = {"tokens": [list(range(1, 101))] * 400, "sets": sets}
        message = _error(http.post("/v1/project", **_tensors(vectors, meta)), 413)
        assert "--max-capture-bytes" in message
        ok = http.post("/v1/project", **_tensors(vectors, {"tokens": [[0, 5, 6]], "sets": sets}))
        assert ok.status_code == 200, ok.text
        assert tuple(tensor_io.decode(ok.content, "torch")["values.0"].shape) == (1, 3, 4)
        lens = {"tokens": [[0, 5, 6]], "top_k": TOP_K + 1}
        assert "--max-top-k" in _error(http.post("/v1/lens/fitted", json=lens), 400)
        lens = {"tokens": [list(range(1, 101))] * 400, "top_k": 3}
        assert "--max-forward-bytes" in _error(http.post("/v1/lens/fitted", json=lens), 413)
        assert http.get("/v1/lens_jacobians").json() == {"sets": {}}


def _engine_calls(tree: ast.AST) -> list[str]:
    """`<...>.model.<method>(...)`, `model.<method>(...)` and `getattr(<...>.model, ...)`."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr not in METADATA:
            owner = func.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "model") or (
                isinstance(owner, ast.Name) and owner.id == "model"
            ):
                found.append(f"line {node.lineno}: .model.{func.attr}(")
        if isinstance(func, ast.Name) and func.id == "getattr" and node.args:
            target = node.args[0]
            if isinstance(target, ast.Attribute) and target.attr == "model":
                found.append(f"line {node.lineno}: getattr(.model, ...)")
    return found


def test_no_route_module_calls_the_model_directly() -> None:
    routes = [*sorted(SRC.glob("*_routes.py")), SRC / "app.py"]
    assert len(routes) >= 4, routes
    calls = {path.name: _engine_calls(ast.parse(path.read_text())) for path in routes}
    assert not any(calls.values()), calls
    # The check sees a direct call when there is one.
    sample = "async def f(service):\n    return await service.model.project(1, 2)\n"
    assert _engine_calls(ast.parse(sample)) == ["line 2: .model.project("]

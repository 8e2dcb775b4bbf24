"""The framework's own refusals answer in the API's error shape, not FastAPI's `{"detail"}`.

An unmatched route, a method a route lacks and a body the framework cannot read are refused by
FastAPI before any of our code runs; a client (the remote backend, the OpenAI client) must still
find `{"error": {"message", "type", "code"}}` there, as on every other refusal.
"""

from __future__ import annotations

from typing import Any

import httpx


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert "detail" not in body
    error = body["error"]
    assert (error["code"], error["type"]) == (status, "InvalidArgument")
    return str(error["message"])


def test_an_unmatched_route_is_404_in_our_shape(server: Any) -> None:
    with server.client() as http:
        for method, path in (("GET", "/nope"), ("POST", "/v1/nope"), ("DELETE", "/v1/")):
            message = _error(http.request(method, path), 404)
            assert f"no route {method} {path}" in message


def test_a_method_the_route_lacks_is_405_with_allow(server: Any) -> None:
    with server.client() as http:
        answer = http.get("/v1/completions")
        assert "takes POST" in _error(answer, 405)
        assert answer.headers["allow"] == "POST"
        deleted = http.delete("/v1/models")
        assert "DELETE /v1/models" in _error(deleted, 405)


def test_a_body_that_cannot_be_read_is_400_in_our_shape(server: Any) -> None:
    # Not JSON-decodable bytes (invalid UTF-8): FastAPI's "There was an error parsing the body".
    with server.client() as http:
        answer = http.post(
            "/v1/tokenize", content=b"\xff\xfe{", headers={"content-type": "application/json"}
        )
    message = _error(answer, 400)
    assert "could not be read" in message


def test_str_tokens_without_one_text_or_ids_is_400(server: Any) -> None:
    # Both were 500s the fuzzer found: None, and a list of texts, reached the tokenizer.
    with server.client() as http:
        for body in (
            {"str_tokens": True},
            {"str_tokens": True, "text": None, "tokens": None},
            {"str_tokens": True, "text": ["a", "b"]},
        ):
            answer = http.post("/v1/tokenize", json=body)
            assert answer.status_code == 400, (body, answer.text)
            assert "str_tokens" in answer.json()["error"]["message"]
        one = http.post("/v1/tokenize", json={"str_tokens": True, "text": ["a b"]}).json()
        assert (
            one["str_tokens"]
            == http.post("/v1/tokenize", json={"str_tokens": True, "text": "a b"}).json()[
                "str_tokens"
            ]
        )

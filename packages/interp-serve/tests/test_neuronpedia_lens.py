"""Neuronpedia's lens/prompt, apply-chat-template and failIfBusy on `interp serve` (eager).

lens/prompt's frames are checked against the frame shapes of Neuronpedia's server at the
contract's commit (its openapi.json documents the route's answer as `{}`: the frames are NDJSON,
stated in `endpoints/lens/prompt.py`), and their values against our lens over a generation run
in-process (`sync.generate_with_lens` on the suite's eager reference), with the same fitted set
and the same steering written by hand as our ops. failIfBusy runs against a server in this
process whose engine the test holds busy behind a gate it opens itself, so the busy window is
exact rather than timed.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import serve_helpers
import torch
from neuronpedia_helpers import FRAMES, SECRET, ok

from interp_core import load_model, sync
from interp_core.readouts import LensSpec
from interp_core.steering import SteeringSpec
from interp_serve.neuronpedia import contract
from interp_serve.neuronpedia.lens import BUSY, is_word_like
from interp_testmodels import TEST_PROMPT

NEW = 3
TOP = 4


def _lens_body(**extra: Any) -> dict[str, Any]:
    body = {
        "model": "m",
        "type": ["LOGIT_LENS"],
        "prompt": TEST_PROMPT,
        "topN": TOP,
        "numCompletionTokens": NEW,
        "temperature": 0,
        "filterNonWordTokens": False,
    }
    return {**body, **extra}


def _frames(np: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The NDJSON frames of one streamed lens/prompt, each checked against its shape."""
    assert contract.problems(body, contract.request_schema("/v1/lens/prompt")) == []
    frames = []
    with np.stream("POST", "/v1/lens/prompt", json=body) as answer:
        assert answer.status_code == 200, answer.read()
        assert answer.headers["content-type"].startswith("application/x-ndjson")
        for line in answer.iter_lines():
            if line:
                frames.append(json.loads(line))
    for frame in frames:
        assert contract.problems(frame, FRAMES[frame["kind"]]) == [], frame
    kinds = [f["kind"] for f in frames]
    assert kinds[:2] == ["meta", "prompt"] and kinds[-1] == "done"
    assert set(kinds[2:-1]) <= {"token"}
    return frames


def _vocab(local: Any) -> list[str]:
    tokenizer = local.tokenizer
    return tokenizer.batch_decode(
        [[i] for i in range(local.facts.vocab_size)], clean_up_tokenization_spaces=False
    )


def _expected(local: Any, lenses: list[Any], **options: Any) -> list[Any]:
    ids = local.to_tokens(TEST_PROMPT)
    options = {"top_n": TOP, "max_new_tokens": NEW + 1, "temperature": 0.0, **options}
    return list(sync.generate_with_lens(local, ids, lenses, **options))


def _same_readout(
    frame: dict[str, Any], got: dict[str, Any], step: Any, vocab: list[str], lenses: range
) -> None:
    """A token frame's slice `got` equals the in-process step's lenses (joined by layer)."""
    assert frame["position"] == step.position and frame["id"] == step.token_id
    assert frame["is_generated"] == step.is_generated
    ids = torch.cat([step.top_ids[i] for i in lenses])
    probs = torch.cat([step.top_probs[i] for i in lenses]).float()
    assert got["top_tokens"] == [[vocab[i] for i in row] for row in ids.tolist()]
    assert float((torch.tensor(got["top_probs"]) - probs).abs().max()) <= 1e-5


def test_logit_lens_equals_our_lens_over_the_generation(np: Any, local: Any) -> None:
    frames = _frames(np, _lens_body(stream=True))
    vocab = _vocab(local)
    expected = _expected(local, [LensSpec([0, 1])])
    meta, prompt, *tokens, done = frames
    ids = local.to_tokens(TEST_PROMPT)[0].tolist()
    assert meta["layers_by_type"] == {"LOGIT_LENS": [0, 1]} and meta["prompt_len"] == len(ids)
    assert [t["id"] for t in prompt["tokens"]] == ids
    # Every prompt position and every shown generated token, each read out.
    assert len(tokens) == len(expected) == len(ids) + NEW
    for frame, step in zip(tokens, expected, strict=True):
        _same_readout(frame, frame["results"][0], step, vocab, range(1))
    generated = [s.token_id for s in expected if s.is_generated]
    assert done["completion"] == local.to_string(torch.tensor(generated))
    assert done["seq_len"] == len(ids) + NEW
    # Without stream, the same frames in one object.
    whole = ok(np, "/v1/lens/prompt", _lens_body(stream=False))
    assert whole == {"meta": meta, "tokens": tokens, "done": done}
    # cachedTokenIds: the positions the client holds are not read again.
    again = _frames(np, _lens_body(cachedTokenIds=ids[:5]))
    assert again[0]["reuse_len"] == 5
    assert [f["position"] for f in again[2:-1]] == [f["position"] for f in tokens][5:]
    assert again[2:-1] == tokens[5:]


def test_word_filter_ranks_only_words(np: Any, local: Any) -> None:
    frames = _frames(np, _lens_body(filterNonWordTokens=True, numCompletionTokens=0))
    vocab = _vocab(local)
    mask = [is_word_like(t) for t in vocab]
    expected = _expected(local, [LensSpec([0, 1])], word_mask=mask, max_new_tokens=1)
    tokens = frames[2:-1]
    assert len(tokens) == len(expected)
    for frame, step in zip(tokens, expected, strict=True):
        _same_readout(frame, frame["results"][0], step, vocab, range(1))
        words = [t for row in frame["results"][0]["top_tokens"] for t in row]
        assert all(is_word_like(t) for t in words)
    assert is_word_like(" Paris") and is_word_like("don't")
    assert not is_word_like(" ,") and not is_word_like("<s>") and not is_word_like("-a")


@pytest.fixture
def fitted(np_server: Any, local: Any) -> Iterator[dict[int, torch.Tensor]]:
    """A fitted set for layer 0 installed as "default" on the server and as "np" here."""
    far = load_model(np_server.url, backend="remote", api_key=serve_helpers.KEY)
    d = local.d_model
    generator = torch.Generator().manual_seed(5)
    lens = {0: torch.eye(d) + 0.3 * torch.randn(d, d, generator=generator)}
    sync.set_lens_jacobians(far, lens, name="default")
    sync.set_lens_jacobians(local, lens, name="np")
    try:
        yield lens
    finally:
        sync.set_lens_jacobians(far, None, name="default")
        sync.set_lens_jacobians(local, None, name="np")
        sync.shutdown(far)


def test_jacobian_lens_equals_our_fitted_lens_read_out(np: Any, local: Any, fitted: Any) -> None:
    assert np.get("/v1/capabilities").json()["endpoints"]["lens_jacobian"] is True
    body = _lens_body(type=["JACOBIAN_LENS", "LOGIT_LENS"])
    meta, _, *tokens, _ = _frames(np, body)
    # The set holds layer 0; the last layer is the model's output, read plainly.
    assert meta["layers_by_type"] == {"JACOBIAN_LENS": [0, 1], "LOGIT_LENS": [0, 1]}
    fitted_spec = LensSpec([0], jacobian=True, jacobian_set="np")
    expected = _expected(local, [fitted_spec, LensSpec([1]), LensSpec([0, 1])])
    vocab = _vocab(local)
    for frame, step in zip(tokens, expected, strict=True):
        jacobian, logit = frame["results"]
        assert (jacobian["type"], logit["type"]) == ("JACOBIAN_LENS", "LOGIT_LENS")
        _same_readout(frame, jacobian, step, vocab, range(2))
        _same_readout(frame, logit, step, vocab, range(2, 3))
    # The fitted read-out is not the plain one at layer 0 (the set changed something).
    assert any(f["results"][0]["top_probs"][0] != f["results"][1]["top_probs"][0] for f in tokens)


def _unique_token(vocab: list[str]) -> tuple[int, str]:
    for token_id, text in enumerate(vocab):
        if is_word_like(text) and vocab.count(text) == 1:
            return token_id, text
    raise AssertionError("the test vocabulary has no unique word token")


@pytest.mark.parametrize("op", ["norm_add", "ablate", "swap"])
def test_lens_steering_equals_our_lens_space_ops(np: Any, local: Any, op: str) -> None:
    vocab = _vocab(local)
    source, text = _unique_token(vocab)
    target, target_text = _unique_token(vocab[source + 1 :])
    target += source + 1
    body = _lens_body(
        steerTokens=[{"token": text, "type": "LOGIT_LENS"}],
        steerLayers=[0],
        steerStrength=0.5 if op == "norm_add" else 0.0,
        steerAblate=op == "ablate",
        swapToken={"token": target_text, "type": "LOGIT_LENS"} if op == "swap" else None,
    )
    tokens = _frames(np, body)[2:-1]
    unembed = sync.unembed_rows(local, [source, target]).float()
    units = unembed / unembed.norm(dim=-1, keepdim=True)
    n = local.to_tokens(TEST_PROMPT).shape[1]
    # The prompt's positions but the BOS: generated tokens are left alone by default.
    scope = {"positions": list(range(1, n))}
    if op == "norm_add":
        spec = SteeringSpec("resid_post.0", units[0], "norm_add", 0.5, max_fraction=1.0, **scope)
    elif op == "ablate":
        spec = SteeringSpec("resid_post.0", units[0], "ablate", **scope)
    else:
        spec = SteeringSpec("resid_post.0", units[0], "swap", target=units[1], **scope)
    expected = _expected(local, [LensSpec([0, 1])], steering=[spec])
    plain = _expected(local, [LensSpec([0, 1])])
    for frame, step in zip(tokens, expected, strict=True):
        _same_readout(frame, frame["results"][0], step, vocab, range(1))
    moved = [
        not torch.equal(a.top_probs[0], b.top_probs[0])
        for a, b in zip(expected, plain, strict=True)
    ]
    assert any(moved[1:]) and not moved[0]  # the steering acted, and left the BOS alone


def test_lens_refusals_are_statuses_before_the_stream(np: Any) -> None:
    for extra, words in (
        ({"type": ["JACOBIAN_LENS"]}, "PUT /v1/lens_jacobians/default"),
        ({"chat": [{"role": "user", "content": "hi"}]}, "exactly one of prompt"),
        ({"layers": [7]}, "not layers of this model"),
        ({"steerTokens": [{"token": "\u2603\u2603", "type": "LOGIT_LENS"}],
          "steerLayers": [0], "steerStrength": 1.0}, "no token decodes to it"),
        ({"steerTokens": [{"token": " the", "type": "JACOBIAN_LENS"}],
          "steerLayers": [0], "steerStrength": 1.0}, "LOGIT_LENS token"),
    ):  # fmt: skip
        answer = np.post("/v1/lens/prompt", json=_lens_body(**extra))
        assert answer.status_code == 400, (extra, answer.text)
        assert list(answer.json()) == ["error"] and words in answer.json()["error"], answer.text


def test_lens_over_a_chat_carries_our_chat_spans(np: Any, np_ours: Any) -> None:
    chat = [{"role": "user", "content": TEST_PROMPT}]
    frames = _frames(np, _lens_body(prompt=None, chat=chat, numCompletionTokens=2))
    spans = np_ours.post(
        "/v1/chat/spans", json={"messages": chat, "add_generation_prompt": True}
    ).json()
    prompt = frames[1]["tokens"]
    assert [t["id"] for t in prompt] == spans["token_ids"]
    for token, span in zip(prompt, spans["spans"], strict=True):
        assert (token["message_index"], token["role"], token["section"], token["channel"]) == (
            span["message"], span["role"], span["section"], span["channel"]
        )  # fmt: skip
    generated = [f for f in frames[2:-1] if f["is_generated"]]
    assert len(generated) == 2 and all(f["role"] == "assistant" for f in generated)


def test_apply_chat_template_equals_our_chat_spans(np: Any, np_ours: Any) -> None:
    chat = [{"role": "user", "content": TEST_PROMPT}, {"role": "assistant", "content": "Yes."}]
    got = ok(np, "/v1/apply-chat-template", {"messages": chat, "addGenerationPrompt": False})
    mine = np_ours.post("/v1/chat/spans", json={"messages": chat}).json()
    assert got["prompt"] == mine["text"] and got["tokens"] == mine["token_ids"]
    assert [s["position"] for s in got["spans"]] == list(range(len(got["tokens"])))
    for span, ours in zip(got["spans"], mine["spans"], strict=True):
        assert (span["messageIndex"], span["role"], span["section"], span["channel"]) == (
            ours["message"], ours["role"], ours["section"], ours["channel"]
        )  # fmt: skip
    assert {s["messageIndex"] for s in got["spans"]} == {0, 1}
    joined = "".join(s["tokenStr"] for s in got["spans"])
    assert joined.replace(" ", "") == got["prompt"].replace(" ", "")
    # The generation prompt opens the assistant's turn: tokens of message len(messages).
    opened = ok(np, "/v1/apply-chat-template", {"messages": chat[:1]})
    assert opened["spans"][-1]["messageIndex"] == 1
    refused = np.post("/v1/apply-chat-template", json={"messages": chat, "chatTemplateKwargs":
                                                       {"tools": []}})  # fmt: skip
    assert refused.status_code == 400 and "tools" in refused.json()["error"]


def test_a_wrong_secret_is_401_on_every_route(np_server: Any) -> None:
    url = f"{np_server.url}/neuronpedia"
    paths = contract.contract()["paths"]
    checked = 0
    for path, operations in paths.items():
        for method in operations:
            for headers in ({}, {"X-SECRET-KEY": "wrong"}, {"X-SECRET-KEY": SECRET + "x"}):
                answer = httpx.request(method, f"{url}{path}", json={}, headers=headers)
                if path == "/health":
                    assert answer.status_code == 200  # the one open route, as on Neuronpedia's
                    continue
                assert answer.status_code == 401, (method, path, answer.text)
                assert answer.json() == {"error": "Invalid or missing X-SECRET-KEY header"}
                checked += 1
    assert checked == 3 * (len(paths) - 1)


# --- failIfBusy: a server in this process, its engine held busy behind a gate ---------------
class GatedModel:
    """The eager reference, whose first lens over a generation waits at a gate the test opens:
    until then it holds the engine's one slot, however long the test takes to look."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.entered = threading.Event()
        self.gate = threading.Event()
        self._armed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def generate_with_lens(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        inner = self._model.generate_with_lens(*args, **kwargs)
        if not self._armed:
            return inner
        self._armed = False

        async def gated() -> AsyncIterator[Any]:
            self.entered.set()
            assert self.gate.wait(timeout=120), "the test never opened the gate"
            async for step in inner:
                yield step

        return gated()

    async def shutdown(self) -> None:
        """The reference is the session's; this server's exit must not shut it down."""


@pytest.fixture
def gated_server(local: Any) -> Iterator[tuple[str, GatedModel, Any]]:
    import uvicorn

    from interp_serve.app import create_app
    from interp_serve.settings import ServerSettings

    model = GatedModel(local)
    app = create_app(model, ServerSettings(max_concurrency=1, max_queue=4))
    port = serve_helpers.free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/neuronpedia", model, app.state.service
    finally:
        model.gate.set()
        server.should_exit = True
        thread.join(30)


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_fail_if_busy_is_429_instead_of_queueing(
    gated_server: tuple[str, GatedModel, Any],
) -> None:
    url, model, service = gated_server
    body = _lens_body(stream=False, numCompletionTokens=1)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        held = pool.submit(httpx.post, f"{url}/v1/lens/prompt", json=body, timeout=120)
        assert model.entered.wait(30), "the first request never reached the engine"
        assert service.engine.running == 1
        busy = httpx.post(f"{url}/v1/lens/prompt", json={**body, "failIfBusy": True}, timeout=30)
        assert busy.status_code == 429
        assert busy.json() == {"error": BUSY, "busy": True}
        # Without failIfBusy the same request waits its turn.
        queued = pool.submit(httpx.post, f"{url}/v1/lens/prompt", json=body, timeout=120)
        _until(lambda: service.engine.waiting == 1, "the second request was not queued")
        assert not queued.done()
        model.gate.set()
        first, second = held.result(120), queued.result(120)
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    # Idle again, failIfBusy is served.
    idle = httpx.post(f"{url}/v1/lens/prompt", json={**body, "failIfBusy": True}, timeout=60)
    assert idle.status_code == 200 and idle.json() == first.json()

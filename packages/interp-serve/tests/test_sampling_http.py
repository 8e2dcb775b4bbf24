"""Does generation over HTTP sample as the checkpoint means it, with penalties and logprobs?

A server on a tiny Llama whose generation_config.json recommends temperature 0.7, top_k 5 and
repetition_penalty 1.3. Over the remote backend: unset knobs follow it and `.sampling` says so
(decided on the server), set knobs win, the flag off gives the library defaults; penalties and
n_logprobs equal the same calls in-process. Through the official `openai` client: the OpenAI
`logprobs` / `top_logprobs` fields answer log_softmax of the eager logits (ids identical, values
<= 1e-5), and the response's `interp.sampling` reports the settings used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
import serve_helpers
import torch

from interp_core import load_model, sync
from interp_core.errors import CapabilityUnsupported
from interp_testmodels.sampling_checkpoint import (
    RECOMMENDED,
    check_recommended,
    recommending_checkpoint,
)

PROMPT = "The quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return recommending_checkpoint(tmp_path_factory.mktemp("recommending"))


@pytest.fixture(scope="module")
def server(folder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from serve_helpers.serving(folder, tmp_path_factory.mktemp("logs"), name="sampling")


@pytest.fixture(scope="module")
def local(folder: Any) -> Any:
    return load_model(str(folder), backend="eager", dtype="float32")


@pytest.fixture(scope="module")
def remote(server: Any) -> Iterator[Any]:
    model = load_model(server.url, backend="remote", api_key=serve_helpers.KEY)
    yield model
    sync.shutdown(model)


@pytest.fixture(scope="module")
def client(server: Any) -> Iterator[Any]:
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.keys[0], max_retries=0) as c:
        yield c


def _log_softmax(local: Any, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return torch.log_softmax(local.hf_model(torch.tensor([ids])).logits[0].float(), dim=-1)


def test_remote_sampling_follows_the_servers_checkpoint(remote: Any, local: Any) -> None:
    ids = local.to_tokens(PROMPT)
    used = sync.generate(remote, ids, max_new_tokens=3, seed=4).sampling
    check_recommended(used)
    set_ = sync.generate(remote, ids, max_new_tokens=3, temperature=0.0, top_k=50).sampling
    assert (set_.temperature, set_.top_k) == (0.0, 50) and set_.sources["top_k"] == "caller"
    plain = sync.generate(remote, ids, max_new_tokens=3, use_generation_config=False).sampling
    assert (plain.temperature, plain.top_k, plain.repetition_penalty) == (1.0, None, 1.0)
    assert set(plain.sources.values()) == {"default"}
    first = next(iter(sync.generate_stream(remote, ids, max_new_tokens=2, temperature=0.0)))
    assert first.sampling.sources["repetition_penalty"] == "generation_config"


def test_remote_penalties_and_logprobs_equal_in_process(remote: Any, local: Any) -> None:
    ids = local.to_tokens(PROMPT)
    options = {
        "max_new_tokens": 12,
        "temperature": 0.0,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.7,
        "repetition_penalty": 1.2,
        "n_logprobs": 4,
        "prompt_logprobs": 2,
    }
    got = sync.generate(remote, ids, **options)
    want = sync.generate(local, ids, **options)
    assert got.token_ids == want.token_ids
    logprobs = _log_softmax(local, [*ids[0].tolist(), *got.token_ids[:-1]])
    prompt = ids.shape[1]
    for step, entry in enumerate(got.logprobs):
        values, indices = logprobs[prompt - 1 + step].topk(4)
        assert [t for t, _ in entry.top] == indices.tolist()
        assert max(abs(v - w) for (_, v), w in zip(entry.top, values.tolist(), strict=True)) <= 1e-5
    assert got.prompt_logprobs[0] is None
    assert got.prompt_logprobs[1:] == want.prompt_logprobs[1:]
    streamed = list(sync.generate_stream(remote, ids, **{**options, "prompt_logprobs": None}))
    assert [s.top_logprobs for s in streamed] == list(want.top_logprobs)


def test_openai_completion_logprobs(client: Any, local: Any) -> None:
    name = client.models.list().data[0].id
    answer = client.completions.create(
        model=name, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=3, presence_penalty=0.4
    )
    meta = answer.model_extra["interp"]
    assert meta["sampling"]["presence_penalty"] == 0.4
    assert meta["sampling"]["sources"]["top_k"] == "generation_config"
    ids = local.to_tokens(PROMPT)[0].tolist()
    logprobs = _log_softmax(local, [*ids, *meta["token_ids"][:-1]])
    choice = answer.choices[0].logprobs
    assert len(choice.token_logprobs) == len(meta["token_ids"])
    for step, entry in enumerate(meta["logprobs"]):
        row = logprobs[len(ids) - 1 + step]
        values, indices = row.topk(3)
        assert [t for t, _ in entry["top"]] == indices.tolist()
        assert sorted(choice.top_logprobs[step].values(), reverse=True) == pytest.approx(
            values.tolist(), abs=1e-5
        )
        assert choice.token_logprobs[step] == pytest.approx(float(row[entry["token_id"]]), abs=1e-5)


def test_openai_chat_logprobs(client: Any, local: Any) -> None:
    name = client.models.list().data[0].id
    messages = [{"role": "user", "content": "hello there"}]
    answer = client.chat.completions.create(
        model=name,
        messages=messages,
        max_tokens=4,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
        frequency_penalty=0.3,
    )
    meta = answer.model_extra["interp"]
    assert meta["sampling"]["frequency_penalty"] == 0.3
    prompt = meta["prompt_token_ids"]
    logprobs = _log_softmax(local, [*prompt, *meta["token_ids"][:-1]])
    content = answer.choices[0].logprobs.content
    assert len(content) == len(meta["token_ids"])
    for step, entry in enumerate(content):
        row = logprobs[len(prompt) - 1 + step]
        values, indices = row.topk(3)
        assert [alt.model_extra["token_id"] for alt in entry.top_logprobs] == indices.tolist()
        assert [alt.logprob for alt in entry.top_logprobs] == pytest.approx(
            values.tolist(), abs=1e-5
        )
        assert entry.logprob == pytest.approx(float(row[meta["token_ids"][step]]), abs=1e-5)


def test_n_completions_are_n_seeded_samples(client: Any, remote: Any, local: Any) -> None:
    name = client.models.list().data[0].id
    answer = client.completions.create(
        model=name, prompt=PROMPT, max_tokens=6, temperature=1.0, seed=11, n=3
    )
    assert [c.index for c in answer.choices] == [0, 1, 2]
    ids = local.to_tokens(PROMPT)
    # Sample i is the seed + i generation, so each is repeatable in-process.
    for index, choice in enumerate(answer.choices):
        alone = sync.generate(local, ids, max_new_tokens=6, temperature=1.0, seed=11 + index)
        assert choice.text == alone.text
    assert len({c.text for c in answer.choices}) > 1
    assert answer.usage.completion_tokens == sum(
        len(c["token_ids"]) for c in answer.model_extra["interp"]["choices"]
    )


def test_unserved_combinations_are_refused(server: Any, client: Any) -> None:
    name = client.models.list().data[0].id
    refusals = [
        ({"prompt": "x", "logprobs": 21}, "logprobs=21"),
        ({"prompt": "x", "top_logprobs": 2}, "top_logprobs is a chat field"),
        ({"prompt": "x", "presence_penalty": 5}, "presence_penalty=5"),
        ({"prompt": "x", "n": 0}, "n=0"),
        (
            {
                "prompt": "x",
                "use_generation_config": False,
                "interp": {"capture": ["resid_post.0"]},
            },
            "use_generation_config with interp.capture",
        ),
    ]
    with server.client() as http:
        for fields, words in refusals:
            answer = http.post("/v1/completions", json={"model": name, "max_tokens": 2, **fields})
            assert answer.status_code == 400, fields
            assert words in answer.json()["error"]["message"], (fields, answer.json())
        chat = {"model": name, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        answer = http.post("/v1/chat/completions", json={**chat, "top_logprobs": 2})
        assert answer.status_code == 400
        assert "logprobs: true" in answer.json()["error"]["message"]


# --- streamed logprobs, streamed capture and rows over HTTP (issue 31) ---------------------------
def test_openai_streams_carry_the_logprobs_of_the_answer(client: Any) -> None:
    name = client.models.list().data[0].id
    options = {"model": name, "max_tokens": 5, "temperature": 0}
    whole = client.completions.create(prompt=PROMPT, logprobs=3, **options).choices[0].logprobs
    pieces = [
        c.choices[0].logprobs
        for c in client.completions.create(prompt=PROMPT, logprobs=3, stream=True, **options)
    ]
    assert [t for p in pieces for t in p.token_logprobs] == whole.token_logprobs
    assert [t for p in pieces for t in p.top_logprobs] == whole.top_logprobs
    assert [o for p in pieces for o in p.text_offset] == whole.text_offset
    chat = {"messages": [{"role": "user", "content": "hello"}], "logprobs": True, "top_logprobs": 2}
    answer = client.chat.completions.create(**chat, **options).choices[0].logprobs.content
    streamed = [
        entry
        for c in client.chat.completions.create(**chat, stream=True, **options)
        if c.choices and c.choices[0].logprobs is not None
        for entry in c.choices[0].logprobs.content
    ]
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in answer]
    assert [[a.logprob for a in e.top_logprobs] for e in streamed] == [
        [a.logprob for a in e.top_logprobs] for e in answer
    ]


def test_remote_streamed_capture_and_rows(remote: Any, local: Any) -> None:
    from interp_core.capture_stream import join_chunks

    ids = local.to_tokens(PROMPT)
    points = ["resid_post.0", "mlp_out.1"]
    options = {"max_new_tokens": 5, "temperature": 0.0}
    chunks = list(sync.capture_generation_stream(remote, ids, points, **options))
    generation, cache = sync.capture_generation(local, ids, points, **options)
    assert len(chunks) == len(generation.token_ids) and chunks[-1].finished
    assert not chunks[0].finished and chunks[0].stop == ids.shape[1]
    assert chunks[-1].generation.token_ids == generation.token_ids
    joined = join_chunks(chunks, torch.cat)
    for point in points:
        torch.testing.assert_close(joined[point], cache[point], atol=1e-5, rtol=1e-5)
    full = sync.capture(local, ids, points)
    part = sync.capture(remote, ids, points, rows=[4, -1, 0])
    for point in points:
        expected = full[point].index_select(1, torch.tensor([4, ids.shape[1] - 1, 0]))
        torch.testing.assert_close(part[point], expected, atol=1e-6, rtol=1e-6)
    # Refused before the stream opens, in the backend's words.
    with pytest.raises(CapabilityUnsupported, match="key axis"):
        list(sync.capture_generation_stream(remote, ids, ["attn_probs.0"], max_new_tokens=2))


def test_openai_client_sampling_follows_the_checkpoint_unless_set_or_off(client: Any) -> None:
    # Through the official client: unset knobs follow generation_config.json, a set knob wins,
    # and use_generation_config=False (an extra field) gives the library defaults.
    name = client.models.list().data[0].id
    options = {"model": name, "prompt": PROMPT, "max_tokens": 2, "seed": 3}
    followed = client.completions.create(**options).model_extra["interp"]["sampling"]
    assert (followed["temperature"], followed["top_k"], followed["repetition_penalty"]) == (
        RECOMMENDED["temperature"],
        RECOMMENDED["top_k"],
        RECOMMENDED["repetition_penalty"],
    )
    assert followed["sources"]["temperature"] == "generation_config"
    set_ = client.completions.create(temperature=0, **options).model_extra["interp"]["sampling"]
    assert set_["temperature"] == 0.0 and set_["sources"]["temperature"] == "caller"
    assert set_["sources"]["top_k"] == "generation_config"
    off = client.completions.create(extra_body={"use_generation_config": False}, **options)
    plain = off.model_extra["interp"]["sampling"]
    assert (plain["temperature"], plain["top_k"], plain["repetition_penalty"]) == (1.0, None, 1.0)
    assert set(plain["sources"].values()) == {"default"}

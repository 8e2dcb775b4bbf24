"""`POST /v1/chat/spans`: the served model's chat spans, token for token the in-process ones."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from interp_core.channels import generation_labels
from interp_core.chat import message_spans
from interp_core.errors import CapabilityUnsupported

_CHAT = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "<think>\nEasy.\n</think>\n\nParis."},
    {"role": "user", "content": "And Germany?"},
]


def _post(server: Any, body: dict[str, Any]) -> Any:
    with server.client() as http:
        return http.post("/v1/chat/spans", json=body)


def test_spans_and_channels_equal_the_in_process_ones(server: Any, local: Any) -> None:
    # The served template is plain ChatML; format="think" reads the assistant's <think> blocks.
    # The reply is continued inside an opened block, so the generated text is reasoning until
    # its </think>, then the answer.
    chat = [*_CHAT, {"role": "assistant", "content": "<think>\nWell"}]
    generated = local.to_tokens("Berlin.</think> Berlin.", prepend_bos=False)[0].tolist()
    body = {"messages": chat, "continue_final_message": True, "format": "think"}
    answer = _post(server, {**body, "generated": generated})
    assert answer.status_code == 200, answer.text
    got = answer.json()
    want = message_spans(local.tokenizer, chat, continue_final_message=True, fmt="think")
    assert got["text"] == want.text
    assert got["token_ids"] == list(want.token_ids)
    assert [tuple(s.values()) for s in got["spans"]] == [
        (s.message, s.role, s.section, s.channel) for s in want.spans
    ]
    assert [tuple(r) for r in got["partition"]] == list(want.partition)
    channels = {s["channel"] for s in got["spans"] if s["message"] == 1}
    assert channels == {None, "analysis", "final"}
    labels = generation_labels(local.tokenizer, want.token_ids, generated, fmt="think")
    assert [tuple(x.values()) for x in got["labels"]] == [(c, s, m) for c, s, m in labels]
    # "Ber" "lin" "." | "<" "/" "th" "in" "k" ">" | " Ber" "lin" "." with the test tokenizer
    assert [(c, s) for c, s, _ in labels] == [
        *[("analysis", "content")] * 3,
        *[("analysis", "footer")] * 6,
        *[("final", "content")] * 3,
    ]


def test_options_the_template_cannot_honour_are_refused(server: Any) -> None:
    answer = _post(server, {"messages": _CHAT, "enable_thinking": True})
    assert answer.status_code in (400, 422), answer.text
    assert "no thinking switch" in answer.text
    both = {"messages": _CHAT, "add_generation_prompt": True, "continue_final_message": True}
    assert "set only one" in _post(server, both).text
    assert _post(server, {"messages": _CHAT, "format": "yaml"}).status_code in (400, 422)


def test_the_remote_backend_reads_its_spans_from_the_server(remote: Any, local: Any) -> None:
    chat = [*_CHAT, {"role": "assistant", "content": "<think>\nWell"}]
    options = {"continue_final_message": True, "fmt": "think"}
    assert remote.message_spans(chat, **options) == local.message_spans(chat, **options)
    assert remote.message_partition(_CHAT) == local.message_partition(_CHAT)
    with pytest.raises(CapabilityUnsupported, match="/v1/chat/spans"):
        remote.generation_labels([1, 2], [3])


# --- a chat format defined in code: DeepSeek-V4 ------------------------------------------------
_DSV4_CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Capital of France?"},
    {"role": "assistant", "content": "Paris.", "reasoning": "Easy."},
    {"role": "user", "content": "And Germany?"},
]


def test_deepseek_v4_spans_over_http_equal_the_in_process_ones(
    server: Any, local: Any, remote: Any
) -> None:
    options = {"add_generation_prompt": True, "drop_thinking": False, "reasoning_effort": "max"}
    generated = local.tokenizer.encode(" so</think>Blue", add_special_tokens=False)
    body = {"messages": _DSV4_CHAT, "chat_format": "deepseek-v4", **options}
    answer = _post(server, {**body, "generated": generated})
    assert answer.status_code == 200, answer.text
    got = answer.json()
    want = local.message_spans(_DSV4_CHAT, chat_format="deepseek-v4", **options)
    assert got["text"] == want.text and got["text"].endswith("<｜Assistant｜><think>")
    assert "Reasoning Effort: Beyond maximum" in got["text"] and "Easy.</think>" in got["text"]
    assert got["token_ids"] == list(want.token_ids)
    assert [tuple(s.values()) for s in got["spans"]] == [
        (s.message, s.role, s.section, s.channel) for s in want.spans
    ]
    assert [tuple(r) for r in got["partition"]] == list(want.partition)
    labels = local.generation_labels(want.token_ids, generated, chat_format="deepseek-v4")
    assert [tuple(x.values()) for x in got["labels"]] == list(labels)
    assert [c for c, _, _ in labels][-1] == "final" and labels[0][0] == "analysis"
    # The remote backend forwards the format and its options.
    assert remote.message_spans(_DSV4_CHAT, chat_format="deepseek-v4", **options) == want
    refused = _post(server, {**body, "chat_format": "deepseek-v9"})
    assert refused.status_code in (400, 422) and "'template', 'deepseek-v4'" in refused.text
    # The served template has no reasoning-effort option: refused, not ignored.
    plain = _post(server, {"messages": _CHAT, "reasoning_effort": "high"})
    assert plain.status_code in (400, 422) and "no reasoning_effort option" in plain.text


def test_chat_completions_render_a_checkpoint_that_ships_its_encoder(
    model_path: Path, tmp_path: Path
) -> None:
    # A checkpoint folder with no template and DeepSeek-V4's encoder beside it: the chat
    # completion's prompt is our rendering of the format, with the generation prompt.
    from interp_core import load_model
    from interp_core.chat_formats import format_text
    from interp_serve.service import Service
    from interp_serve.settings import ServerSettings

    folder = tmp_path / "dsv4-like"
    shutil.copytree(model_path, folder)
    (folder / "chat_template.jinja").unlink()
    (folder / "encoding").mkdir()
    (folder / "encoding" / "encoding_dsv4.py").write_text("# the checkpoint's encoder\n")
    model = load_model(str(folder), backend="eager")
    service = Service(model, ServerSettings())
    messages = [{"role": "user", "content": "Name a colour."}]
    ids = asyncio.run(service.chat_ids(messages))
    text = format_text("deepseek-v4", messages, add_generation_prompt=True)
    assert text == "<｜begin▁of▁sentence｜><｜User｜>Name a colour.<｜Assistant｜><think>"
    assert ids == [model.tokenizer.encode(text, add_special_tokens=False)]

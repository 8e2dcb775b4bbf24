"""`POST /v1/chat/spans`: the served model's chat spans, token for token the in-process ones."""

from __future__ import annotations

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

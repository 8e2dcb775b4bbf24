"""Our DeepSeek-V4 renderer writes, byte for byte, what vLLM's vendored encoder writes.

vLLM carries a fork of the encoder DeepSeek-V4 checkpoints ship (`vllm.tokenizers.
deepseek_v4_encoding`, reading an assistant's reasoning from `reasoning`); it is the reference
here. The file is loaded on its own (it imports only the standard library), so no engine starts
and vLLM's package is not imported. A table names the cases that matter (multi-turn reasoning
dropped or kept, chat mode, efforts, developer messages, tools and tool results, an open final
message), and hypothesis draws many more chats of every role.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interp_core.chat_formats import format_text
from interp_core.errors import CapabilityUnsupported, InvalidArgument


def _reference() -> ModuleType:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("vllm is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "tokenizers"
    path = path / "deepseek_v4_encoding.py"
    if not path.is_file():
        pytest.skip("this vllm does not vendor the DeepSeek-V4 encoder")
    loaded = importlib.util.spec_from_file_location("_dsv4_reference", path)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


REFERENCE = _reference()

_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Today's weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
_CALLS = [
    {"id": "c1", "function": {"name": "weather", "arguments": '{"city": "Paris", "days": 2}'}},
    {"id": "c2", "function": {"name": "weather", "arguments": {"city": "Köln", "units": ["C"]}}},
]


def _ours(messages: list[dict[str, Any]], **options: Any) -> str:
    return format_text("deepseek-v4", messages, **options)


def _theirs(
    messages: list[dict[str, Any]],
    *,
    enable_thinking: bool = True,
    drop_thinking: bool = True,
    reasoning_effort: str | None = None,
    continue_final_message: bool = False,
) -> str:
    sent = copy.deepcopy(messages)
    for message in sent:  # the fork's key for an assistant's reasoning
        if "reasoning_content" in message:
            message["reasoning"] = message.pop("reasoning_content")
    if continue_final_message:
        sent[-1]["wo_eos"] = True
    return REFERENCE.encode_messages(
        sent,
        thinking_mode="thinking" if enable_thinking else "chat",
        drop_thinking=drop_thinking,
        reasoning_effort=reasoning_effort,
    )


def _options(messages: list[dict[str, Any]]) -> dict[str, Any]:
    # The encoder opens the assistant's turn after a final user-side message by itself: that is
    # our generation prompt. After a final assistant message it writes nothing more.
    return {"add_generation_prompt": messages[-1]["role"] != "assistant"}


_TABLE: dict[str, list[dict[str, Any]]] = {
    "one user": [{"role": "user", "content": "Hi"}],
    "system only": [{"role": "system", "content": "You are terse."}],
    "multi-turn reasoning": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris.", "reasoning_content": "Easy."},
        {"role": "user", "content": "And Germany?"},
        {"role": "assistant", "content": "Berlin.", "reasoning_content": "Also easy."},
        {"role": "user", "content": "Spain?"},
    ],
    "ends on the answer": [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris.", "reasoning_content": "Easy."},
    ],
    "system opens an assistant turn": [
        {"role": "system", "content": "Greet."},
        {"role": "assistant", "content": "Hello!", "reasoning_content": "Be kind."},
    ],
    "developer messages": [
        {"role": "developer", "content": "Use French."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Bonjour", "reasoning_content": "French."},
        {"role": "developer", "content": "Now German.", "response_format": {"type": "text"}},
        {"role": "user", "content": "Hello again"},
    ],
    "consecutive users": [
        {"role": "user", "content": "First part."},
        {"role": "user", "content": "Second part."},
    ],
    "tools and results": [
        {"role": "system", "content": "Use tools.", "tools": _TOOLS},
        {"role": "user", "content": "Weather in Paris and Köln?"},
        {"role": "assistant", "content": "", "reasoning_content": "Call.", "tool_calls": _CALLS},
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "Rain"},
        {"role": "assistant", "content": "Sunny and rain.", "reasoning_content": "Done."},
        {"role": "user", "content": "Thanks"},
    ],
    "tool result then user": [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "Calling.", "tool_calls": _CALLS[:1]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "user", "content": "And?"},
    ],
    "markers in text": [
        {"role": "user", "content": "Say <think> and </think> and <｜User｜>."},
        {"role": "assistant", "content": " x \n", "reasoning_content": "\n"},
        {"role": "user", "content": ""},
    ],
}


@pytest.mark.parametrize("name", sorted(_TABLE))
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"enable_thinking": False},
        {"drop_thinking": False},
        {"reasoning_effort": "high"},
        {"reasoning_effort": "max", "drop_thinking": False},
        {"enable_thinking": False, "reasoning_effort": "max"},
    ],
    ids=["default", "chat", "keep-thinking", "high", "max-keep", "chat-max"],
)
def test_a_table_of_chats_renders_as_the_encoder_does(name: str, options: dict[str, Any]) -> None:
    messages = _TABLE[name]
    assert _ours(messages, **_options(messages), **options) == _theirs(messages, **options)


def test_an_open_final_message_is_the_encoders_wo_eos() -> None:
    messages = _TABLE["ends on the answer"]
    for thinking in (True, False):
        ours = _ours(messages, continue_final_message=True, enable_thinking=thinking)
        theirs = _theirs(messages, continue_final_message=True, enable_thinking=thinking)
        assert ours == theirs
        assert not ours.endswith("<｜end▁of▁sentence｜>")


def test_what_the_renderer_cannot_draw_is_refused() -> None:
    user = {"role": "user", "content": "Hi"}
    answer = {"role": "assistant", "content": "Hello."}
    cases = [
        ([{"role": "latest_reminder", "content": "x"}], {}, CapabilityUnsupported, "role"),
        ([{**user, "task": "query"}], {}, CapabilityUnsupported, "task"),
        ([user, answer], {"add_generation_prompt": True}, CapabilityUnsupported, "final assistant"),
        ([user], {"continue_final_message": True}, CapabilityUnsupported, "final assistant"),
        ([user], {"reasoning_effort": "medium"}, InvalidArgument, "low"),
        ([{**answer, "thinking": "x"}], {}, InvalidArgument, "reasoning_content"),
        ([{"role": "developer", "content": ""}], {}, InvalidArgument, "developer"),
        ([{**user, "content": [{"type": "text"}]}], {}, CapabilityUnsupported, "string"),
        ([{**user, "tools": _TOOLS}], {}, CapabilityUnsupported, "system and developer"),
        (
            [
                user,
                {**answer, "tool_calls": _CALLS},
                {"role": "tool", "tool_call_id": "c2", "content": "b"},
                {"role": "tool", "tool_call_id": "c1", "content": "a"},
            ],
            {},
            CapabilityUnsupported,
            "order of their calls",
        ),
    ]
    for messages, options, error, words in cases:
        with pytest.raises(error, match=words):
            _ours(messages, **options)


# --- drawn chats -------------------------------------------------------------------------------
_TEXT = st.text(alphabet="ab \n.<>/ｄ", max_size=6)


@st.composite
def _chats(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    pending: list[str] = []  # calls the last assistant made, answered in order
    for _ in range(draw(st.integers(1, 7))):
        role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
        if role == "tool" and not pending:
            role = "user"
        message: dict[str, Any] = {"role": role, "content": draw(_TEXT)}
        if role == "developer" and not message["content"]:
            message["content"] = "d"
        if role in ("system", "developer") and draw(st.booleans()) and draw(st.booleans()):
            message["tools"] = _TOOLS
        if role == "assistant":
            if draw(st.booleans()):
                message["reasoning_content"] = draw(_TEXT)
            if draw(st.booleans()):
                calls = _CALLS[: draw(st.integers(1, 2))]
                message["tool_calls"] = calls
                pending = [c["id"] for c in calls]
        if role == "tool":
            message["tool_call_id"] = pending.pop(0)
        messages.append(message)
    return messages


@settings(max_examples=300, deadline=None)
@given(
    messages=_chats(),
    thinking=st.booleans(),
    drop=st.booleans(),
    effort=st.sampled_from([None, "low", "high", "max"]),
)
def test_drawn_chats_render_as_the_encoder_does(
    messages: list[dict[str, Any]], thinking: bool, drop: bool, effort: str | None
) -> None:
    options = {"enable_thinking": thinking, "drop_thinking": drop, "reasoning_effort": effort}
    assert _ours(messages, **_options(messages), **options) == _theirs(messages, **options)
    if messages[-1]["role"] == "assistant":
        open_final = _ours(messages, continue_final_message=True, **options)
        assert open_final == _theirs(messages, continue_final_message=True, **options)
    json.dumps(messages)  # the drawn chats are JSON, as the HTTP route receives them

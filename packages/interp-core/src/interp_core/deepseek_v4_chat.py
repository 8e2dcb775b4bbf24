"""DeepSeek-V4's chat format, rendered message by message so every character has an owner.

DeepSeek-V4 checkpoints ship no Jinja chat template: the format is defined by a Python encoder
beside the weights (`encoding/encoding_dsv4.py`; vLLM vendors a fork of it). This module is our
own renderer of that format, written from its facts, and it returns the rendering as one block
per message, each a run of `Piece(text, section, channel)`, so chat spans are read off the blocks
instead of being recovered by diffing renders of growing prefixes. Diffing cannot work here: the
format is not prefix-monotone, because which user turn is the *last* one decides how every
earlier assistant turn is written (its reasoning is dropped) and whether earlier developer
messages appear at all.

The facts of the format, as rendered here:

* The text starts with `<｜begin▁of▁sentence｜>`. In thinking mode the first rendered message is
  preceded by the reasoning-effort preamble (empty for `low`, the default).
* `system`: its text, then `\\n\\n` and the tools section when it carries `tools`, then `\\n\\n`
  and the response-format section when it carries `response_format`.
* `developer`: `<｜User｜>`, its (non-empty) text, then tools / response format as for system.
* `user` and `tool`: a run of consecutive user and tool messages is one user turn: `<｜User｜>`,
  then the messages joined by `\\n\\n`, a tool result written `<tool_result>TEXT</tool_result>`.
* `assistant`: `<｜Assistant｜>` and a thinking marker open it (written after the turn before
  it): `<think>` in thinking mode for a turn after the last user message, `</think>` otherwise
  (chat mode, or an earlier turn whose reasoning is dropped). The turn is then its reasoning and
  `</think>` (thinking mode, turns after the last user message, or every turn when reasoning is
  kept), its text, its tool calls as a DSML block, and `<｜end▁of▁sentence｜>`. In chat mode an
  assistant's reasoning is not written at all.
* `drop_thinking` (on by default, off whenever any message carries tools): in thinking mode,
  assistant turns before the last user message lose their reasoning, and developer messages
  before it are left out.
* A chat ending on a user, developer or system message is followed by the opening of the
  assistant's turn, the generation prompt.

Assistant reasoning is read from `reasoning_content` (the checkpoint's key) or `reasoning`
(vLLM's fork's). What the format has and this renderer does not draw (internal `task` tokens,
`latest_reminder` messages, images, content blocks) is refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = [
    "BOS",
    "EOS",
    "REASONING_EFFORTS",
    "Block",
    "Piece",
    "render_blocks",
    "turn_segments",
]

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
DSML = "｜DSML｜"
TOOL_RESULT = ("<tool_result>", "</tool_result>")
CALLS_OPEN = f"\n\n<{DSML}tool_calls>\n"
CALLS_CLOSE = f"\n</{DSML}tool_calls>"

ROLES = ("system", "developer", "user", "tool", "assistant")
# Keys the format gives a meaning this renderer does not draw: refused rather than ignored.
_UNDRAWN = {
    "task": "internal classification task tokens",
    "wo_eos": "an open final message (pass continue_final_message=True instead)",
    "content_blocks": "pre-merged content blocks (send tool results as role 'tool' messages)",
    "mask": "training masks",
}

# The preamble thinking mode writes before the first message, by reasoning effort. The texts are
# the format's own instructions to the model (they are what the checkpoint was trained to read).
REASONING_EFFORTS: dict[str, str] = {
    "low": "",
    "high": (
        "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
        "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
        "resolve the root cause, rigorously stress-testing your logic against all potential "
        "paths, edge cases, and adversarial scenarios.\n"
        "Explicitly write out your entire deliberation process, documenting every intermediate "
        "step, considered alternative, and rejected hypothesis to ensure absolutely no "
        "assumption is left unchecked.\n\n"
    ),
    "max": (
        "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
        "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: "
        "exhaustively decompose the problem into its most fundamental components, trace every "
        "causal chain to its root, and resolve the underlying cause rather than any surface "
        "symptom.\n"
        "Do not stop reasoning until you have independently verified the solution from multiple "
        "angles and are certain that no assumption remains unchecked and no error remains "
        "undiscovered.\n\n"
    ),
}

_TOOLS_SECTION = """## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by \
writing a "<{d}tool_calls>" block like the following:

<{d}tool_calls>
<{d}invoke name="$TOOL_NAME">
<{d}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{d}parameter>
...
</{d}invoke>
<{d}invoke name="$TOOL_NAME2">
...
</{d}invoke>
</{d}tool_calls>

String parameters should be specified as is and set `string="true"`. For all other types \
(numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning \
inside <think>...</think> BEFORE any tool calls or final response.

Otherwise, output directly after </think> with tool calls or final response.

### Available Tool Schemas

{schemas}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
"""
_RESPONSE_FORMAT = (
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n{schema}"
)


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of one message's text with one section (header / content / footer) and channel
    (`analysis`, `commentary`, `final` or None, as in `interp_core.channels`)."""

    text: str
    section: str
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class Block:
    """What one message wrote (`pieces`, possibly none: a dropped developer message); the
    generation prompt is one more block, role `assistant`."""

    role: str
    pieces: tuple[Piece, ...]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.pieces)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        what = f"a tool schema, call argument or response format is not JSON ({error})"
        raise InvalidArgument.build(what, None, "send JSON values") from None


def _text(message: Mapping[str, Any], index: int, key: str = "content") -> str:
    value = message.get(key)
    if value is None and key == "content" and message.get("role") in ("system", "assistant"):
        return ""
    if not isinstance(value, str):
        what = f"message {index}'s {key} is {type(value).__name__}, not text"
        why = "the DeepSeek-V4 renderer draws text (images and content blocks are not drawn)"
        raise CapabilityUnsupported.build(what, why, f"send the {key} as a string")
    return value


def _reasoning(message: Mapping[str, Any], index: int) -> str:
    given = {k: message[k] for k in ("reasoning_content", "reasoning") if message.get(k)}
    if len(set(given.values())) > 1:
        what = f"message {index} carries both reasoning_content and reasoning, and they differ"
        raise InvalidArgument.build(what, None, "send the reasoning under one of the two keys")
    for key in given:
        return _text(message, index, key)
    return ""


def _check(messages: Sequence[Mapping[str, Any]]) -> None:
    if isinstance(messages, str | bytes) or not messages:
        what = "a DeepSeek-V4 chat needs a non-empty list of {'role': ..., 'content': ...}"
        raise InvalidArgument(what)
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            msg = f"message {index} is {message!r}, not a mapping"
            raise InvalidArgument(msg)
        role = message.get("role")
        if role not in ROLES:
            what = (
                f"message {index} has role {role!r}, which the DeepSeek-V4 renderer does not draw"
            )
            why = "its format has no other roles (latest_reminder is not drawn here)"
            raise CapabilityUnsupported.build(what, why, f"use one of {ROLES}")
        for key, meaning in _UNDRAWN.items():
            if key in message:
                what = f"message {index} carries {key!r}: {meaning}"
                why = "this renderer does not draw it, and ignoring it would render a wrong prompt"
                raise CapabilityUnsupported.build(what, why, f"drop {key!r} from the message")
        if message.get("thinking") is not None:
            what = f"message {index} carries 'thinking', harmony's key for reasoning"
            why = "DeepSeek-V4 reads an assistant's reasoning from reasoning_content"
            raise InvalidArgument.build(what, why, "send it as reasoning_content")
        if role == "developer" and not _text(message, index):
            msg = f"message {index}: a developer message needs some text"
            raise InvalidArgument(msg)
        for key, roles in (
            ("tools", ("system", "developer")),
            ("response_format", ("system", "developer")),
            ("tool_calls", ("assistant",)),
        ):
            if message.get(key) and role not in roles:
                what = f"message {index} ({role}) carries {key!r}"
                why = f"the format draws {key} only on {' and '.join(roles)} messages"
                raise CapabilityUnsupported.build(what, why, f"move it onto a {roles[0]} message")
        if (message.get("reasoning_content") or message.get("reasoning")) and role != "assistant":
            msg = f"message {index} ({role}) carries reasoning; only assistants do"
            raise InvalidArgument(msg)


def _tools(tools: Sequence[Mapping[str, Any]]) -> str:
    try:
        schemas = "\n".join(_json(tool["function"]) for tool in tools)
    except (KeyError, TypeError):
        what = "a tool is not in the OpenAI form {'type': 'function', 'function': {...}}"
        raise InvalidArgument.build(what, None, "send each tool as OpenAI's API does") from None
    return _TOOLS_SECTION.replace("{d}", DSML).replace("{schemas}", schemas)


def _sections(message: Mapping[str, Any]) -> list[Piece]:
    """The tools and response-format sections a system or developer message writes after its
    text: format text, so footer."""
    out = []
    if message.get("tools"):
        out.append(Piece("\n\n" + _tools(message["tools"]), "footer"))
    if message.get("response_format"):
        out.append(
            Piece(
                "\n\n" + _RESPONSE_FORMAT.format(schema=_json(message["response_format"])), "footer"
            )
        )
    return out


def _call(call: Mapping[str, Any]) -> str:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        what = f"the tool call {call!r} has no function name"
        instead = "send tool calls as OpenAI's API does: {'function': {'name', 'arguments'}}"
        raise InvalidArgument.build(what, None, instead)
    arguments = function.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            what = f"the arguments of tool call {function['name']!r} are not JSON"
            raise InvalidArgument.build(what, None, "send a JSON object") from None
    if not isinstance(arguments, Mapping):
        msg = f"the arguments of tool call {function['name']!r} are not an object"
        raise InvalidArgument(msg)
    parameters = "\n".join(
        f'<{DSML}parameter name="{key}" string="{"true" if isinstance(value, str) else "false"}">'
        f"{value if isinstance(value, str) else _json(value)}</{DSML}parameter>"
        for key, value in arguments.items()
    )
    return f'<{DSML}invoke name="{function["name"]}">\n{parameters}\n</{DSML}invoke>'


def _call_id(call: Any) -> str:
    if not isinstance(call, Mapping):
        return ""
    function = call.get("function")
    nested = function.get("id", "") if isinstance(function, Mapping) else ""
    return call.get("id") or nested or ""


def _check_result_order(messages: Sequence[Mapping[str, Any]], turns: list[list[int]]) -> None:
    """The format writes a turn's tool results in the order of the calls they answer. A turn
    whose results come in another order would be reordered, putting messages out of their
    spans' order, so it is refused."""
    order: dict[str, int] = {}
    turn_of = {members[0]: members for members in turns}
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            order = {_call_id(c): n for n, c in enumerate(message["tool_calls"]) if _call_id(c)}
        members = turn_of.get(index)
        if not members or not order:
            continue
        results = [m for m in members if messages[m]["role"] == "tool"]
        ranks = [order.get(str(messages[m].get("tool_call_id", "")), 0) for m in results]
        if len(results) > 1 and ranks != sorted(ranks):
            what = f"the tool results in messages {results} are not in the order of their calls"
            why = "the format writes them in call order, which would move messages out of order"
            raise CapabilityUnsupported.build(what, why, "send tool results in the calls' order")


def _turns(messages: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """Message indices grouped into the format's turns: a run of user and tool messages is one."""
    turns: list[list[int]] = []
    for index, message in enumerate(messages):
        joins = turns and message["role"] in ("user", "tool")
        if joins and messages[turns[-1][-1]]["role"] in ("user", "tool"):
            turns[-1].append(index)
        else:
            turns.append([index])
    return turns


def _opener(thinking: bool) -> list[Piece]:
    """The opening of an assistant turn: `<think>` when it starts with reasoning, else the
    closing marker alone (an empty reasoning block)."""
    if thinking:
        return [Piece(ASSISTANT, "header"), Piece(THINK_OPEN, "header", "analysis")]
    return [Piece(ASSISTANT, "header"), Piece(THINK_CLOSE, "footer", "analysis")]


def render_blocks(
    messages: Sequence[Mapping[str, Any]],
    *,
    thinking: bool = True,
    reasoning_effort: str | None = None,
    drop_thinking: bool = True,
    add_generation_prompt: bool = False,
    continue_final_message: bool = False,
) -> tuple[Block, ...]:
    """One block per message, in order, then the generation prompt's block when asked for.

    Joined, the blocks' texts are the format's rendering of the chat. `thinking` picks thinking
    mode (else chat mode); `reasoning_effort` is `low` (None), `high` or `max`."""
    _check(messages)
    effort = "low" if reasoning_effort is None else reasoning_effort
    if effort not in REASONING_EFFORTS:
        what = f"reasoning_effort={reasoning_effort!r} is not one of DeepSeek-V4's efforts"
        raise InvalidArgument.build(what, None, f"pass one of {tuple(REASONING_EFFORTS)} or None")
    last_role = messages[-1]["role"]
    if continue_final_message and (add_generation_prompt or last_role != "assistant"):
        what = "continue_final_message needs a final assistant message and no generation prompt"
        why = "it leaves that assistant turn open; a new turn cannot also be opened after it"
        raise CapabilityUnsupported.build(what, why, "end the chat with the assistant's message")
    if add_generation_prompt and last_role == "assistant":
        what = "add_generation_prompt after a final assistant message"
        why = "DeepSeek-V4 opens an assistant turn only after a user, developer or system message"
        instead = "end the chat with a user message, or use continue_final_message=True"
        raise CapabilityUnsupported.build(what, why, instead)
    turns = _turns(messages)
    _check_result_order(messages, turns)
    dropping = thinking and drop_thinking and not any(m.get("tools") for m in messages)

    def user_like(turn: list[int]) -> bool:
        return messages[turn[0]]["role"] in ("user", "tool", "developer")

    last_user = max((n for n, t in enumerate(turns) if user_like(t)), default=-1)
    if dropping:  # developer messages before the last user turn are not written at all
        kept = [
            n
            for n, t in enumerate(turns)
            if n >= last_user or messages[t[0]]["role"] != "developer"
        ]
    else:
        kept = list(range(len(turns)))
    # Positions in the kept turns decide the transitions; the last user turn counts among them.
    last_kept_user = max((k for k, n in enumerate(kept) if user_like(turns[n])), default=-1)

    pieces: list[list[Piece]] = [[] for _ in messages]
    prompt: list[Piece] = []
    for position, turn_index in enumerate(kept):
        turn = turns[turn_index]
        first = turn[0]
        head = pieces[first]
        if position == 0:
            head.append(Piece(BOS, "header"))
            if thinking and REASONING_EFFORTS[effort]:
                head.append(Piece(REASONING_EFFORTS[effort], "header"))
        role = messages[first]["role"]
        if role in ("user", "tool"):
            for member, index in enumerate(turn):
                message = messages[index]
                out = pieces[index]
                out.append(Piece(USER if member == 0 else "\n\n", "header"))
                if message["role"] == "tool":
                    out.append(Piece(TOOL_RESULT[0], "header"))
                    out.append(Piece(_text(message, index), "content"))
                    out.append(Piece(TOOL_RESULT[1], "footer"))
                else:
                    out.append(Piece(_text(message, index), "content"))
        elif role in ("system", "developer"):
            if role == "developer":
                head.append(Piece(USER, "header"))
            head.append(Piece(_text(messages[first], first), "content"))
            head.extend(_sections(messages[first]))
        else:
            message = messages[first]
            with_reasoning = thinking and (not dropping or position > last_kept_user)
            if with_reasoning:
                head.append(Piece(_reasoning(message, first), "content", "analysis"))
                head.append(Piece(THINK_CLOSE, "footer", "analysis"))
            head.append(Piece(_text(message, first), "content", "final"))
            if message.get("tool_calls"):
                calls = "\n".join(_call(c) for c in message["tool_calls"])
                head.append(Piece(CALLS_OPEN + calls + CALLS_CLOSE, "content", "commentary"))
            if not (continue_final_message and first == len(messages) - 1):
                head.append(Piece(EOS, "footer"))
        # What follows a turn: the next assistant turn's opening, written here by the format
        # but owned by that assistant message; after the last turn, the generation prompt.
        following = kept[position + 1] if position + 1 < len(kept) else None
        next_role = None if following is None else messages[turns[following][0]]["role"]
        if role == "assistant" or (next_role is not None and next_role != "assistant"):
            continue
        opener = _opener(thinking and (not dropping or position >= last_kept_user))
        if following is None:
            prompt = opener
        else:
            pieces[turns[following][0]][:0] = opener
    blocks = [
        Block(str(m["role"]), tuple(p for p in ps if p.text))
        for m, ps in zip(messages, pieces, strict=True)
    ]
    if add_generation_prompt:
        blocks.append(Block("assistant", tuple(prompt)))
    return tuple(blocks)


def turn_segments(
    text: str, *, reasoning_open: bool
) -> list[tuple[int, int, str | None, str, int]]:
    """`(start, end, channel, section, message)` tiling the text of an assistant turn the model
    writes: its reasoning (`analysis`, up to and including `</think>`) when `reasoning_open`, then
    its answer (`final`), a DSML tool-call block (`commentary`), and `<｜end▁of▁sentence｜>`
    (a footer). Anything after that marker is outside the turn: no channel, message 1."""
    out: list[tuple[int, int, str | None, str, int]] = []
    cursor = 0
    if reasoning_open:
        close = text.find(THINK_CLOSE)
        stop = len(text) if close < 0 else close
        out.append((0, stop, "analysis", "content", 0))
        if close >= 0:
            out.append((close, close + len(THINK_CLOSE), "analysis", "footer", 0))
        cursor = len(text) if close < 0 else close + len(THINK_CLOSE)
    end = text.find(EOS, cursor)
    answer_end = len(text) if end < 0 else end
    calls = text.find(CALLS_OPEN.strip("\n"), cursor, answer_end)
    if calls >= 0 and text[max(cursor, calls - 2) : calls] == "\n\n":
        calls -= 2  # the blank line the format writes before the block belongs to it
    stop = answer_end if calls < 0 else calls
    out.append((cursor, stop, "final", "content", 0))
    if calls >= 0:
        out.append((calls, answer_end, "commentary", "content", 0))
    if end >= 0:
        out.append((end, end + len(EOS), None, "footer", 0))
        out.append((end + len(EOS), len(text), None, "content", 1))
    return [s for s in out if s[1] > s[0]]

"""Prompt embeddings and LoRA adapters over HTTP: the wire forms and the server's adapters.

Embedding rows travel as base64 safetensors, never JSON lists (floats would round-trip through
decimal text and a `[seq, d_model]` prompt is large): a tensor `rows` `[k, d_model]` and, when
they replace token slots of the request's tokens, an int64 tensor `positions` `[k]`; without
`positions` the rows are the whole prompt and the request sends no tokens. Adapters are named,
never sent as paths: the operator names the folders the server may use (`--lora NAME=PATH`),
each read and checked at start, and a request picks one by name.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from interp_core.adapters import LoraConfig, read_lora_config
from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = [
    "ServedAdapters",
    "completion_inputs",
    "decode_prompt_embeds",
    "encode_prompt_embeds",
    "parse_lora_option",
    "prompt_length",
    "remote_fields",
    "whole_embeds_prompt",
]


def encode_prompt_embeds(prompt_embeds: Any) -> str:
    """The wire form (base64 safetensors) of a `[seq, d]` tensor or a `{position: row}` map."""
    import torch

    from interp_serve.tensors import encode

    if isinstance(prompt_embeds, Mapping):
        order = sorted(prompt_embeds)
        rows = torch.stack([torch.as_tensor(prompt_embeds[p]) for p in order])
        tensors = {"rows": rows, "positions": torch.tensor(order, dtype=torch.int64)}
    else:
        tensors = {"rows": torch.as_tensor(prompt_embeds)}
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    return base64.b64encode(encode(tensors)).decode("ascii")


def decode_prompt_embeds(text: str, cap: int) -> Any:
    """The backend's `prompt_embeds=` from the wire form: a tensor, or `{position: row}`."""
    from interp_serve.tensors import decode

    if len(text) * 3 // 4 > cap:
        msg = (
            f"prompt_embeds is {len(text) * 3 // 4} bytes, over this server's cap of {cap}; "
            f"send a shorter prompt"
        )
        raise InvalidArgument(msg)
    try:
        data = base64.b64decode(text, validate=True)
        tensors = decode(data, "torch")
    # safetensors raises its own SafetensorError (an Exception) on malformed bytes.
    except Exception as error:
        msg = (
            f"prompt_embeds is not base64 safetensors ({error}); encode it with "
            f"interp_serve.injection.encode_prompt_embeds"
        )
        raise InvalidArgument(msg) from error
    if set(tensors) not in ({"rows"}, {"rows", "positions"}):
        msg = (
            f"prompt_embeds holds tensors {sorted(tensors)}; it holds `rows` and, to replace "
            f"token slots, `positions`"
        )
        raise InvalidArgument(msg)
    rows = tensors["rows"]
    if "positions" not in tensors:
        return rows
    positions = tensors["positions"]
    if positions.dim() != 1 or rows.dim() != 2 or positions.shape[0] != rows.shape[0]:
        msg = (
            f"prompt_embeds has positions {tuple(positions.shape)} for rows "
            f"{tuple(rows.shape)}; one position per row, rows [k, d_model]"
        )
        raise InvalidArgument(msg)
    if positions.is_floating_point():
        msg = "prompt_embeds positions are floats; send int64 positions"
        raise InvalidArgument(msg)
    keys = [int(p) for p in positions.tolist()]
    if len(set(keys)) != len(keys):
        msg = f"prompt_embeds positions {keys} repeat a position"
        raise InvalidArgument(msg)
    return dict(zip(keys, rows, strict=True))


def parse_lora_option(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`--lora NAME=PATH` values as (name, path) pairs, each folder read and checked now."""
    pairs: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            msg = f"--lora {item!r} is not NAME=PATH; e.g. --lora oracle=./adapter"
            raise InvalidArgument(msg)
        if name in pairs:
            msg = f"--lora names {name!r} twice; give each adapter its own name"
            raise InvalidArgument(msg)
        read_lora_config(path, name=name)  # refused at start, not on the first request
        pairs[name] = path
    return tuple(pairs.items())


class ServedAdapters:
    """The adapters the operator named, as `LoraConfig`s read once at start."""

    def __init__(self, pairs: Sequence[tuple[str, str]]) -> None:
        self._configs = {name: read_lora_config(path, name=name) for name, path in pairs}

    def names(self) -> list[str]:
        return sorted(self._configs)

    def pick(self, name: Any) -> LoraConfig | None:
        if name is None:
            return None
        if name not in self._configs:
            served = ", ".join(self.names()) or "none (start the server with --lora NAME=PATH)"
            msg = f"lora={name!r} is not an adapter this server serves; served: {served}"
            raise InvalidArgument(msg)
        return self._configs[name]


def completion_inputs(service: Any, body: Any) -> dict[str, Any]:
    """The `interp.prompt_embeds` / `interp.lora` of a completion request, refused where the
    route cannot serve them (before any work)."""
    options = body.interp
    if options is None or (options.prompt_embeds is None and options.lora is None):
        return {}
    if options.lens is not None:
        msg = (
            "interp.lens with interp.prompt_embeds or interp.lora is not served: the lens runs "
            "the base model on the prompt's tokens; drop interp.lens"
        )
        raise CapabilityUnsupported(msg)
    inputs = service.call_inputs(options.prompt_embeds, options.lora)
    rows = inputs.get("prompt_embeds")
    if rows is not None and not isinstance(rows, Mapping) and getattr(body, "messages", None):
        msg = (
            "interp.prompt_embeds without positions is a whole prompt, and a chat request's "
            "messages are one too; send positions to replace token slots of the rendered chat, "
            "or use /v1/completions with prompt: []"
        )
        raise InvalidArgument(msg)
    return inputs


def whole_embeds_prompt(inputs: Mapping[str, Any], prompt: Any) -> bool:
    """Whether the rows are the whole prompt; then the request's `prompt` must be `[]`."""
    rows = inputs.get("prompt_embeds")
    if rows is None or isinstance(rows, Mapping):
        return False
    if prompt != []:
        msg = (
            "interp.prompt_embeds without positions is the whole prompt; send prompt: [] (or "
            "positions, to replace slots of the prompt's tokens)"
        )
        raise InvalidArgument(msg)
    return True


def prompt_length(tokens: Any, inputs: Mapping[str, Any] | None) -> int:
    """Positions of the request's prompt: its tokens, or the rows of a whole-embeds prompt."""
    if tokens is None:
        return int((inputs or {})["prompt_embeds"].shape[0])
    return len(tokens[0])


def remote_fields(prompt_embeds: Any, lora: Any) -> dict[str, Any]:
    """The request fields the remote backend sends for `prompt_embeds=` / `lora=`."""
    fields: dict[str, Any] = {}
    if prompt_embeds is not None:
        fields["prompt_embeds"] = encode_prompt_embeds(prompt_embeds)
    if lora is not None:
        if not isinstance(lora, str):
            msg = (
                f"lora={type(lora).__name__} on backend='remote': the server's adapters are "
                f"named, never sent; pass the name the server serves it under (--lora NAME=PATH)"
            )
            raise InvalidArgument(msg)
        fields["lora"] = lora
    return fields

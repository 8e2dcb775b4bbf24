"""Neuronpedia's `lens/prompt`: the logit lens and the Jacobian lens over a prompt (or a chat)
and its generation, as Neuronpedia's NDJSON frames.

It runs our lens over a generation (`Service.generate_with_lens`, the lens issue's read-out):
`LOGIT_LENS` is `LensSpec(layers)`, `JACOBIAN_LENS` is the installed fitted set (`PUT
/v1/lens_jacobians/default`) at the layers it holds. As on Neuronpedia's server the model's last
layer is always read, and for the Jacobian lens it is read plainly where the set holds no
`J_bar` for it (the model's own output). A frame stream is `meta`, `prompt` (the prompt's tokens,
with their chat spans for a chat), one `token` per read position, then `done`; without
`stream` the same frames come back as one `{"meta", "tokens", "done"}` object.

Our lens reads every position the model runs on. Neuronpedia's runs the model on each of the
`numCompletionTokens` tokens it generates, so one token more is sampled here (never shown)
to have the last shown token read out. Steering is our lens-space ops at `resid_post` of each
`steerLayers` layer (`norm_add` for `steerStrength`, `ablate`, `swap`), the BOS left alone.
`failIfBusy` answers 429 `{"error", "busy": true}` when no engine slot is free, instead of
queueing behind the running requests.
"""

from __future__ import annotations

import asyncio
import json
import unicodedata
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse, StreamingResponse

from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.readouts import LensSpec
from interp_core.steering import SteeringSpec
from interp_serve.neuronpedia.chat_template import rendered_spans
from interp_serve.service import Gone, Service

__all__ = ["is_word_like", "lens_prompt"]

LOGIT, JACOBIAN = "LOGIT_LENS", "JACOBIAN_LENS"
FITTED_SET = "default"  # the set JACOBIAN_LENS reads: `PUT /v1/lens_jacobians/default`
BUSY = (
    "the server is busy: every engine slot is running a request, and failIfBusy asks not to queue"
)

# Per model: each vocabulary id's decoded string (built once: a whole-vocabulary decode).
_VOCAB: dict[int, list[str]] = {}


def is_word_like(token: str) -> bool:
    """Whether a token reads as a word: after trimming, only letters and digits, with an
    apostrophe or hyphen allowed inside it; never a special marker (`<|...|>`, `<s>`)."""
    text = token.strip()
    if not text or "<|" in text or (text.startswith("<") and text.endswith(">")):
        return False
    last = len(text) - 1
    for index, char in enumerate(text):
        if unicodedata.category(char)[0] in "LN":
            continue
        if 0 < index < last and char in "'-\u2019":
            continue
        return False
    return True


async def _vocab(service: Service) -> list[str]:
    key = id(service.model)
    if key not in _VOCAB:
        tokenizer = service.model.tokenizer
        size = service.model.facts.vocab_size
        known = len(tokenizer)

        def decode() -> list[str]:
            texts = tokenizer.batch_decode(
                [[i] for i in range(min(size, known))], clean_up_tokenization_spaces=False
            )
            return [*texts, *([""] * max(0, size - known))]

        _VOCAB[key] = await asyncio.to_thread(decode)
    return _VOCAB[key]


def _layers(wanted: list[int], available: list[int], final: int) -> list[int]:
    chosen = [layer for layer in available if not wanted or layer in set(wanted)]
    return sorted({*chosen, final})


def _plan(service: Service, body: dict[str, Any]) -> tuple[list[str], dict[str, list[Any]]]:
    """The asked types (deduplicated) and, per type, the lens specs whose rows it shows."""
    types = list(dict.fromkeys(body["type"]))
    if not types:
        message = "type is empty: ask for LOGIT_LENS, JACOBIAN_LENS or both"
        raise InvalidArgument(message)
    n_layers = service.model.facts.n_layers
    final = n_layers - 1
    wanted = list(body["layers"])
    outside = [layer for layer in wanted if not 0 <= layer < n_layers]
    if outside:
        message = f"layers {outside} are not layers of this model (0..{final})"
        raise InvalidArgument(message)
    specs: dict[str, list[Any]] = {}
    for kind in types:
        if kind == LOGIT:
            specs[kind] = [LensSpec(_layers(wanted, list(range(n_layers)), final))]
            continue
        held = service.lens_sets().get(FITTED_SET)
        if held is None:
            message = (
                f"JACOBIAN_LENS needs a fitted lens installed as {FITTED_SET!r} (installed: "
                f"{sorted(service.lens_sets()) or 'none'}); install it with PUT "
                f"/v1/lens_jacobians/{FITTED_SET}, or ask for LOGIT_LENS"
            )
            raise CapabilityUnsupported(message)
        layers = _layers(wanted, sorted(held), final)
        fitted = [layer for layer in layers if layer in held]
        kinds = [LensSpec(fitted, jacobian=True, jacobian_set=FITTED_SET)] if fitted else []
        if final not in held:
            kinds.append(LensSpec([final]))  # J is the identity at the output: read it plainly
        specs[kind] = kinds
    return types, specs


async def _prompt_ids(
    service: Service, body: dict[str, Any]
) -> tuple[list[int], list[dict[str, Any]] | None]:
    """The ids to read over, and each one's chat span fields (None for a plain prompt)."""
    if body["inputTokenIds"]:
        return service.ids(list(body["inputTokenIds"]), "inputTokenIds", in_range=True), None
    if (body.get("prompt") is None) == (body.get("chat") is None):
        message = "send exactly one of prompt (text) or chat (messages), or inputTokenIds"
        raise InvalidArgument(message)
    if body.get("prompt") is not None:
        ids = (await service.tokenize(body["prompt"], prepend_bos=bool(body["prependBos"])))[0]
        return ids, None
    options = {"enable_thinking": True} if body["enableThinking"] else {}
    chat = await rendered_spans(service, body["chat"], True, **options)
    fields = [
        {"message_index": s.message, "role": s.role, "channel": s.channel, "section": s.section}
        for s in chat.spans
    ]
    return list(chat.token_ids), fields


def _common_prefix(ids: list[int], cached: list[int]) -> int:
    length = 0
    for mine, theirs in zip(ids, cached, strict=False):
        if mine != theirs:
            break
        length += 1
    return length


def _steer_id(vocab: list[str], token: str) -> int:
    found = [i for i, text in enumerate(vocab) if text == token]
    if len(found) != 1:
        why = "no token decodes to it" if not found else f"ids {found} all decode to it"
        message = (
            f"steer token {token!r}: {why}; send a token string exactly as a read-out shows it"
        )
        raise InvalidArgument(message)
    return found[0]


async def _steering(
    service: Service, body: dict[str, Any], ids: list[int], new_tokens: int
) -> list[SteeringSpec]:
    """The request's steer / ablate / swap as our lens-space ops at resid_post."""
    import torch

    tokens = body["steerTokens"]
    swap = body.get("swapToken")
    active = tokens and (swap is not None or body["steerAblate"] or body["steerStrength"] != 0)
    if not active or not body["steerLayers"]:
        return []  # as on Neuronpedia's server: no layers, or no strength, steer nothing
    asked = [*tokens, *([swap] if swap is not None else [])]
    if any(t["type"] != LOGIT for t in asked):
        message = (
            "steering on a JACOBIAN_LENS token is not served here (its direction J_bar^T w_t "
            "needs the fitted set's matrices, which stay in the engine); steer on the "
            "LOGIT_LENS token, whose direction is its unembedding row"
        )
        raise CapabilityUnsupported(message)
    n_layers = service.model.facts.n_layers
    bad = [layer for layer in body["steerLayers"] if not 0 <= layer < n_layers]
    if bad:
        message = f"steerLayers {bad} are not layers of this model (0..{n_layers - 1})"
        raise InvalidArgument(message)
    vocab = await _vocab(service)
    wanted = [_steer_id(vocab, t["token"]) for t in asked]
    rows = (await service.weight_rows("unembed_rows", wanted)).float().cpu()
    units = rows / rows.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    source = units[: len(tokens)].sum(dim=0)  # each token's unit direction, summed
    # The BOS is left alone, as on Neuronpedia's server (its attention-sink norm is huge).
    bos = getattr(service.model.tokenizer, "bos_token_id", None)
    at_bos = {p for p, token in enumerate(ids) if token == bos}
    reach = len(ids) + new_tokens - 1  # the last sampled token is never run
    if body["steerGeneratedTokens"]:
        positions = [p for p in range(reach) if p not in at_bos] if at_bos else None
    else:
        # Listing the prompt's positions leaves every generated one unsteered.
        positions = [p for p in range(len(ids)) if p not in at_bos]
    if positions == []:
        message = "the prompt is its BOS alone, which steering leaves alone: nothing to steer"
        raise InvalidArgument(message)
    specs = []
    for layer in dict.fromkeys(body["steerLayers"]):
        address = f"resid_post.{layer}"
        scope = {"positions": positions}
        if swap is not None:
            spec = SteeringSpec(address, source, "swap", target=units[-1], **scope)
        elif body["steerAblate"]:
            spec = SteeringSpec(address, source, "ablate", **scope)
        else:
            # norm_add adds scale·‖h‖·d̂; Neuronpedia adds strength·‖h‖·(the summed units).
            scale = float(body["steerStrength"]) * float(torch.linalg.vector_norm(source))
            spec = SteeringSpec(address, source, "norm_add", scale, max_fraction=1.0, **scope)
        specs.append(spec)
    return specs


def _busy(service: Service) -> bool:
    engine = service.engine
    return engine.running >= engine.max_concurrency or engine.waiting > 0


async def lens_prompt(service: Service, body: dict[str, Any], gone: Gone) -> Any:
    types, specs = _plan(service, body)
    if body["temperature"] < 0 or body["numCompletionTokens"] < 0:
        message = "temperature and numCompletionTokens must be >= 0"
        raise InvalidArgument(message)
    ids, spans = await _prompt_ids(service, body)
    if body.get("maxSeqLen") is not None:
        if body["maxSeqLen"] < 1:
            message = f"maxSeqLen={body['maxSeqLen']}: send a length >= 1, or null"
            raise InvalidArgument(message)
        ids = ids[: body["maxSeqLen"]]
        spans = None if spans is None else spans[: body["maxSeqLen"]]
    if not ids:
        message = "the prompt produced no tokens; send some text"
        raise InvalidArgument(message)
    shown = 0 if body["inputTokenIds"] else int(body["numCompletionTokens"])
    new_tokens = shown + 1  # one more, never shown, so the last shown token is read out
    steering = await _steering(service, body, ids, new_tokens)
    reuse = 0 if steering else min(_common_prefix(ids, body["cachedTokenIds"]), len(ids))
    top_n = service.lens_top_k(body["topN"])
    vocab = await _vocab(service)
    mask = [is_word_like(t) for t in vocab] if body["filterNonWordTokens"] else None
    if not any(mask or [True]):
        message = "filterNonWordTokens leaves no token of this vocabulary; send it false"
        raise InvalidArgument(message)
    flat = [spec for kind in types for spec in specs[kind]]
    layers_by_type = {
        kind: sorted({layer for spec in specs[kind] for layer in spec.layers}) for kind in types
    }
    if body["failIfBusy"] and _busy(service):
        return JSONResponse({"error": BUSY, "busy": True}, status_code=429)
    temperature = float(body["temperature"])
    steps = service.generate_with_lens(
        [ids],
        flat,
        steering,
        top_n=top_n,
        max_new_tokens=new_tokens,
        skip_before=min(reuse, len(ids) - 1),
        word_mask=mask,
        temperature=temperature,
    )
    try:
        first = await anext(steps)  # a refusal is a status, not a frame
    except BaseException:
        await steps.aclose()
        raise
    frames = _frames(service, body, types, specs, layers_by_type, ids, spans, reuse, vocab)
    stream = frames(first, steps, shown)
    if body["stream"]:
        return StreamingResponse(_ndjson(stream), media_type="application/x-ndjson")
    collected: dict[str, Any] = {"meta": None, "tokens": [], "done": None}
    async for frame in stream:
        if frame["kind"] == "error":
            return JSONResponse(frame, status_code=500)
        if frame["kind"] == "token":
            collected["tokens"].append(frame)
        elif frame["kind"] in ("meta", "done"):
            collected[frame["kind"]] = frame
    return collected


async def _ndjson(frames: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    async for frame in frames:
        yield (json.dumps(frame) + "\n").encode()


def _frames(
    service: Service,
    body: dict[str, Any],
    types: list[str],
    specs: dict[str, list[Any]],
    layers_by_type: dict[str, list[int]],
    ids: list[int],
    spans: list[dict[str, Any]] | None,
    reuse: int,
    vocab: list[str],
) -> Any:
    """The frame generator over the lens steps (the first one already awaited)."""
    from interp_core.channels import generation_labels

    tokenizer = service.model.tokenizer
    empty = {"message_index": None, "role": None, "channel": None, "section": None}

    def span_of(position: int, generated: list[int]) -> dict[str, Any]:
        if spans is None:
            return dict(empty)
        if position < len(spans):
            return spans[position]
        channel, section, message = generation_labels(tokenizer, ids, generated)[-1]
        return {"message_index": message, "role": "assistant", "channel": channel,
                "section": section}  # fmt: skip

    def results(step: Any) -> list[dict[str, Any]]:
        out, index = [], 0
        for kind in types:
            top_ids, top_probs = [], []
            for _ in specs[kind]:
                top_ids += step.top_ids[index].tolist()
                top_probs += step.top_probs[index].float().tolist()
                index += 1
            # Layers in ascending order across the specs of one type (the plain final last).
            out.append({
                "type": kind,
                "top_tokens": [[vocab[i] for i in row] for row in top_ids],
                "top_probs": top_probs,
            })  # fmt: skip
        return out

    async def frames(first: Any, steps: Any, shown: int) -> AsyncIterator[dict[str, Any]]:
        generated: list[int] = []
        yield {
            "kind": "meta",
            "model": body["model"],
            "types": types,
            "layers_by_type": layers_by_type,
            "top_n": int(body["topN"]),
            "prompt_len": len(ids),
            "num_completion_tokens": shown,
            "temperature": float(body["temperature"]),
            "prepend_bos": bool(body["prependBos"]),
            "reuse_len": reuse,
        }
        prompt = [
            {"position": p, "token": vocab[i], "id": i, "is_generated": False,
             "is_char_continuation": False, **span_of(p, generated)}
            for p, i in enumerate(ids)
        ]  # fmt: skip
        yield {"kind": "prompt", "tokens": prompt}
        try:
            step: Any = first
            while step is not None:
                if step.position >= reuse and step.position < len(ids) + shown:
                    if step.is_generated:
                        generated.append(step.token_id)
                    yield {
                        "kind": "token",
                        "position": step.position,
                        "token": vocab[step.token_id],
                        "id": step.token_id,
                        "is_generated": step.is_generated,
                        "results": results(step),
                        "is_char_continuation": False,
                        **span_of(step.position, generated),
                    }
                step = await anext(steps, None)
        except Exception as error:
            # The 200 has gone out: a failure mid-stream is the stream's last frame.
            yield {"kind": "error", "error": str(error)}
            return
        finally:
            await steps.aclose()
        yield {
            "kind": "done",
            "seq_len": len(ids) + len(generated),
            "prompt_len": len(ids),
            "vocab_size": len(vocab),
            "completion": await service.detokenize(generated) if generated else "",
        }

    return frames

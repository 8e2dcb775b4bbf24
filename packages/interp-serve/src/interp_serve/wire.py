"""What crosses the wire, in which JSON form: one definition used by the server and the client.

Only JSON and safetensors travel. Steering specs, generations, lens read-outs, support verdicts,
model facts and library errors each have a `*_to_json` / `*_from_json` pair here, so the server
and the `remote` backend cannot disagree about a field. Nothing is ever pickled or evaluated: an
error travels as its class name (looked up among `interp_core.errors`, never imported by name
from anywhere else) and its message.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import interp_core.errors as library_errors
from interp_core.errors import InterpError
from interp_core.facts import ModelFacts
from interp_core.results import (
    Generation,
    GenerationStep,
    LensPrediction,
    LensResult,
    Support,
    TokenLogprobs,
)
from interp_core.sampling import Sampling
from interp_core.steering import as_specs
from interp_core.writes import spec_from_wire, spec_to_wire
from interp_serve import errors as serve_errors
from interp_serve.errors import RemoteError

__all__ = [
    "error_from_json",
    "error_to_json",
    "facts_from_json",
    "facts_to_json",
    "generation_from_json",
    "generation_to_json",
    "lens_from_json",
    "lens_to_json",
    "nested_ids",
    "sampling_from_json",
    "sampling_to_json",
    "spec_from_json",
    "spec_to_json",
    "specs_to_json",
    "step_from_json",
    "step_to_json",
    "support_from_json",
    "support_to_json",
]


# --- errors -------------------------------------------------------------------------------------
# Classes an error may travel as: the library's and the server's own, by name, and nothing else.
_KNOWN: dict[str, type[InterpError]] = {
    name: getattr(module, name)
    for module in (library_errors, serve_errors)
    for name in module.__all__
    if isinstance(getattr(module, name), type) and issubclass(getattr(module, name), InterpError)
}


def error_to_json(error: BaseException, status: int) -> dict[str, Any]:
    """The OpenAI-shaped error body; `type` is the library class name so a client can re-raise."""
    # A backend's own subclass travels as the nearest class the client knows.
    kind = next(
        (c.__name__ for c in type(error).__mro__ if _KNOWN.get(c.__name__) is c), "RemoteError"
    )
    return {"error": {"message": str(error), "type": kind, "code": status, "param": None}}


def error_from_json(body: Any, status: int, retry_after: float | None = None) -> InterpError:
    """The exception a server's error body stands for: the same library class and message."""
    detail = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(detail, Mapping):
        return RemoteError(f"the server answered HTTP {status} without an error body", status)
    message = str(detail.get("message", ""))
    kind = detail.get("type")
    cls = _KNOWN.get(str(kind))
    if cls is serve_errors.Overloaded:
        return serve_errors.Overloaded(message, int(retry_after or 1))
    if cls is not None and cls is not RemoteError:
        return cls(message)
    return RemoteError(message, status, retry_after)


# --- steering -----------------------------------------------------------------------------------
# A spec travels in the core's one wire form (every field, clamp's encoder, bias and threshold
# included), the same form vLLM's client sends its workers: one encoder, one decoder.
spec_to_json = spec_to_wire
spec_from_json = spec_from_wire


def specs_to_json(steering: Any) -> list[dict[str, Any]]:
    return [spec_to_wire(spec) for spec in as_specs(steering)]


# --- results ------------------------------------------------------------------------------------
def _finite(value: float) -> float | None:
    # JSON has no -inf; a zero-probability token keeps its meaning as null.
    return value if math.isfinite(value) else None


def _entry_to_json(entry: TokenLogprobs | None) -> Any:
    if entry is None:
        return None
    top = [[token, _finite(logprob)] for token, logprob in entry.top]
    return {"token_id": entry.token_id, "logprob": _finite(entry.logprob), "top": top}


def _entry_from_json(data: Any) -> TokenLogprobs | None:
    if data is None:
        return None
    minus_inf = float("-inf")

    def value(v: Any) -> float:
        return minus_inf if v is None else float(v)

    top = [(int(t), value(lp)) for t, lp in data.get("top", ())]
    return TokenLogprobs(int(data["token_id"]), value(data.get("logprob")), top)


def sampling_to_json(sampling: Sampling | None) -> dict[str, Any] | None:
    """The settings a generation ran with (and where each came from); null when unknown."""
    if sampling is None:
        return None
    return {
        **sampling.as_dict(),
        "max_new_tokens": sampling.max_new_tokens,
        "n_logprobs": sampling.n_logprobs,
        "prompt_logprobs": sampling.prompt_logprobs,
    }


def sampling_from_json(data: Mapping[str, Any] | None) -> Sampling | None:
    if data is None:
        return None
    known = {f.name for f in dataclasses.fields(Sampling)} - {"sources"}
    return Sampling(
        **{k: v for k, v in data.items() if k in known}, sources=dict(data.get("sources") or {})
    )


def generation_to_json(generation: Generation) -> dict[str, Any]:
    body: dict[str, Any] = {
        "text": generation.text,
        "token_ids": list(generation.token_ids),
        "prompt_token_ids": list(generation.prompt_token_ids),
        "finish_reason": generation.finish_reason,
        "sampling": sampling_to_json(generation.sampling),
    }
    if generation.logprobs is not None:
        body["logprobs"] = [_entry_to_json(entry) for entry in generation.logprobs]
    if generation.prompt_logprobs is not None:
        body["prompt_logprobs"] = [_entry_to_json(entry) for entry in generation.prompt_logprobs]
    return body


def generation_from_json(data: Mapping[str, Any]) -> Generation:
    logprobs = data.get("logprobs")
    prompt_logprobs = data.get("prompt_logprobs")
    return Generation(
        text=data["text"],
        token_ids=data["token_ids"],
        prompt_token_ids=data.get("prompt_token_ids", ()),
        finish_reason=data.get("finish_reason"),
        sampling=sampling_from_json(data.get("sampling")),
        logprobs=None if logprobs is None else tuple(_entry_from_json(e) for e in logprobs),
        prompt_logprobs=(
            None if prompt_logprobs is None else tuple(_entry_from_json(e) for e in prompt_logprobs)
        ),
    )


def step_to_json(step: GenerationStep) -> dict[str, Any]:
    logprob = step.logprob
    if logprob is not None and not math.isfinite(logprob):
        # JSON has no -inf; a zero-probability token under sampling keeps its meaning as null.
        logprob = None
    return {
        "index": step.index,
        "token_id": step.token_id,
        "text": step.text,
        "logprob": logprob,
        "finished": step.finished,
        "finish_reason": step.finish_reason,
        "top_logprobs": [[token, _finite(lp)] for token, lp in step.top_logprobs],
        "sampling": sampling_to_json(step.sampling),
        "token_logprobs": (
            None if step.token_logprobs is None else _entry_to_json(step.token_logprobs)
        ),
    }


def step_from_json(data: Mapping[str, Any]) -> GenerationStep:
    return GenerationStep(
        index=int(data["index"]),
        token_id=int(data["token_id"]),
        text=data["text"],
        logprob=data.get("logprob"),
        finished=bool(data.get("finished", False)),
        finish_reason=data.get("finish_reason"),
        top_logprobs=[
            (int(t), float("-inf") if lp is None else float(lp))
            for t, lp in data.get("top_logprobs") or ()
        ],
        sampling=sampling_from_json(data.get("sampling")),
        token_logprobs=(
            None if data.get("token_logprobs") is None else _entry_from_json(data["token_logprobs"])
        ),
    )


def lens_to_json(lens: LensResult) -> dict[str, Any]:
    return {
        "point": lens.point,
        "layers": list(lens.layers),
        "top_k": lens.top_k,
        "predictions": {
            str(layer): [
                [[p.token_id, p.token, p.prob] for p in row] for row in lens.predictions[layer]
            ]
            for layer in lens.layers
        },
    }


def lens_from_json(data: Mapping[str, Any]) -> LensResult:
    predictions = {
        int(layer): tuple(
            tuple(LensPrediction(int(t), str(s), float(p)) for t, s, p in row) for row in rows
        )
        for layer, rows in data["predictions"].items()
    }
    return LensResult(data["point"], tuple(data["layers"]), int(data["top_k"]), predictions)


def support_to_json(verdict: Support) -> dict[str, Any]:
    return {"ok": verdict.ok, "reason": verdict.reason, "instead": verdict.instead}


def support_from_json(data: Mapping[str, Any]) -> Support:
    return Support(bool(data["ok"]), data.get("reason"), data.get("instead"))


# --- facts --------------------------------------------------------------------------------------
def _facts_fields(facts: ModelFacts) -> dict[str, Any]:
    fields = dataclasses.asdict(facts)
    fields.pop("extras", None)
    # Through JSON and back, so tuples and lists compare alike.
    return json.loads(json.dumps(fields))


def facts_to_json(facts: ModelFacts) -> dict[str, Any]:
    """The config the facts were read from, and the facts themselves to check the reading."""
    return {"config": dict(facts.extras), "fields": _facts_fields(facts)}


def facts_from_json(data: Mapping[str, Any]) -> ModelFacts:
    """Facts re-read from the server's config; refused when this interp-core reads it otherwise."""
    facts = ModelFacts.from_config(data["config"])
    mine, theirs = _facts_fields(facts), data["fields"]
    differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if differ:
        error = library_errors.ConfigError.build(
            f"this interp-core reads the server's model config differently ({', '.join(differ)})",
            "the client and the server run different interp-core versions",
            "install the server's interpoint-core version on the client",
        )
        raise error
    return facts


# --- token ids ----------------------------------------------------------------------------------
def nested_ids(tokens: Any) -> list[Any]:
    """Token ids (a tensor, an array or lists) as plain nested lists of ints for JSON."""
    tolist = getattr(tokens, "tolist", None)
    value = tolist() if callable(tolist) else tokens
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value

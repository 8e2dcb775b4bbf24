"""Neuronpedia's activation routes over the Service: one feature, the top features, top-k per token.

Each route tokenizes through the Service (with the model's BOS, as Neuronpedia's server does),
captures through it (priced and run under the engine's limits), and encodes with the loaded
interp-sae SAE, so a value here is `sae.encode(capture)` at that feature and nothing else.
Token strings come back index-aligned with the values; the special-token flags are the
tokenizer's own special ids.
"""

from __future__ import annotations

import asyncio
from typing import Any

from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.steering_lens import special_token_ids
from interp_serve.neuronpedia.dfa import dfa_points, dfa_values
from interp_serve.neuronpedia.sources import in_set, pick_source
from interp_serve.service import Gone, Service

__all__ = ["activation_all", "activation_single", "topk_by_token"]

DEFAULT_TOP_K = 5


async def _prompt(service: Service, prompt: str) -> tuple[list[int], list[str], list[bool]]:
    """The prompt's ids (with BOS where the model has one), their strings and special flags."""
    ids = (await service.tokenize(prompt))[0]
    strings = await service.str_tokens(ids)
    special = special_token_ids(getattr(service.model, "tokenizer", None))
    return ids, [str(s) for s in strings], [i in special for i in ids]


def _bos_first(service: Service, ids: list[int]) -> bool:
    bos = getattr(getattr(service.model, "tokenizer", None), "bos_token_id", None)
    return bos is not None and bool(ids) and ids[0] == bos


def _rows(cache: Any, address: Any) -> Any:
    """The capture at `address` of the one prompt, as float32 rows `[seq, width]` on the CPU."""
    tensor = cache[address]
    tensor = tensor[0] if tensor.dim() > 2 else tensor
    return tensor.reshape(tensor.shape[0], -1).float().cpu()


def _values(values: Any) -> dict[str, Any]:
    listed = [float(v) for v in values.tolist()]
    best = max(range(len(listed)), key=listed.__getitem__) if listed else 0
    return {"values": listed, "maxValue": listed[best] if listed else 0.0, "maxValueIndex": best}


def _feature_index(index: Any, sae: Any, source: str) -> int:
    text = str(index).strip()
    if not text.isdigit() or not 0 <= int(text) < sae.d_sae:
        message = (
            f"index {index!r} is not a feature of {source!r}: send a whole number from 0 to "
            f"{sae.d_sae - 1}"
        )
        raise InvalidArgument(message)
    return int(text)


async def activation_single(service: Service, body: dict[str, Any], gone: Gone) -> dict[str, Any]:
    """One feature's (`source` + `index`) or one vector's (`vector` + `hook`) activation per
    token: the feature's encoding, or the dot product of the hook's activation with the vector."""
    feature = body.get("source") is not None and body.get("index") is not None
    vector = body.get("vector") is not None and body.get("hook") is not None
    if feature == vector:
        message = (
            "send exactly one of source + index (an SAE feature) or vector + hook (a raw "
            "direction at a TransformerLens hook)"
        )
        raise InvalidArgument(message)
    ids, strings, special = await _prompt(service, body["prompt"])
    if feature:
        sae = pick_source(service.saes, body["source"])
        index = _feature_index(body["index"], sae, body["source"])
        facts = service.model.facts
        extra = dfa_points(sae, service.model)
        cache = await service.capture([ids], [str(sae.address), *extra], [], gone=gone)
        rows = _rows(cache, sae.address)
        values = await asyncio.to_thread(lambda: sae.encode(rows)[:, index])
        activation = _values(values)
        if extra:
            target = activation["maxValueIndex"]
            activation.update(dfa_values(sae, index, target, cache, facts))
    else:
        from interp_sae.hooks import address_for_tl_hook

        address = address_for_tl_hook(body["hook"])
        cache = await service.capture([ids], [str(address)], [], gone=gone)
        rows = _rows(cache, address)
        direction = body["vector"]
        if len(direction) != rows.shape[1]:
            message = (
                f"vector has {len(direction)} values, but {body['hook']} ({address}) is "
                f"{rows.shape[1]} wide on this model; send a vector of that width"
            )
            raise InvalidArgument(message)
        import torch

        activation = _values(rows @ torch.tensor(direction, dtype=torch.float32))
    return {"activation": activation, "tokens": strings, "tokensIsSpecial": special}


async def activation_all(service: Service, body: dict[str, Any], gone: Gone) -> dict[str, Any]:
    """The top `numResults` features over the sources of a set, by their largest activation,
    or by the sum of their activations at `sortByTokenIndexes`; with `ignoreBos`, the BOS
    position counts as 0 for every feature."""
    import torch

    names = in_set(service.saes, body["sourceSet"], body["selectedSources"])
    wanted = body.get("numResults")
    wanted = 25 if wanted is None else wanted
    cap = service.settings.max_top_k
    if not 1 <= wanted <= cap:
        message = (
            f"numResults={wanted}: ask for 1 to {cap} features (this server's cap, "
            f"--max-top-k; each feature carries one value per token)"
        )
        raise InvalidArgument(message)
    ids, strings, _ = await _prompt(service, body["prompt"])
    by_index = body["sortByTokenIndexes"]
    outside = [i for i in by_index if not 0 <= i < len(ids)]
    if outside:
        message = (
            f"sortByTokenIndexes {outside} are outside the prompt's {len(ids)} tokens "
            f"(0..{len(ids) - 1})"
        )
        raise InvalidArgument(message)
    saes = [pick_source(service.saes, name) for name in names]
    facts = service.model.facts
    wanted_points = [p for sae in saes for p in (str(sae.address), *dfa_points(sae, service.model))]
    points = list(dict.fromkeys(wanted_points))
    cache = await service.capture([ids], points, [], gone=gone)
    zero_bos = bool(body["ignoreBos"]) and _bos_first(service, ids)

    def rank() -> list[dict[str, Any]]:
        keys, dense_of = [], []
        for sae in saes:
            dense = sae.encode(_rows(cache, sae.address)).float()  # [seq, d_sae]
            if zero_bos:
                dense[0] = 0
            dense_of.append(dense)
            keys.append(dense[by_index].sum(dim=0) if by_index else dense.max(dim=0).values)
        flat = torch.cat(keys)
        # Features that never fire rank nowhere; ties keep source order, then feature order.
        order = torch.sort(flat, descending=True, stable=True).indices
        picked = []
        widths = [sae.d_sae for sae in saes]
        for position in order.tolist():
            if len(picked) == wanted or float(flat[position]) <= 0:
                break
            which = 0
            while position >= widths[which]:
                position -= widths[which]
                which += 1
            column = dense_of[which][:, position]
            entry = {"source": names[which], "index": position, **_values(column)}
            entry["sumValues"] = float(flat[sum(widths[:which]) + position]) if by_index else None
            if dfa_points(saes[which], service.model):
                target = entry["maxValueIndex"]
                entry.update(dfa_values(saes[which], position, target, cache, facts))
            picked.append(entry)
        return picked

    return {"activations": await asyncio.to_thread(rank), "tokens": strings, "counts": None}


async def topk_by_token(service: Service, body: dict[str, Any], gone: Gone) -> dict[str, Any]:
    """The `topK` largest features of one source at each token (BOS left out with
    `ignoreBos`), through the Service's features pass (encoded in the workers on vLLM)."""
    source = body["source"]
    sae = pick_source(service.saes, source)
    top_k = body.get("topK")
    top_k = DEFAULT_TOP_K if top_k is None else top_k
    if top_k > sae.d_sae:
        message = f"topK={top_k} is more than the {sae.d_sae} features of {source!r}"
        raise InvalidArgument(message)
    ids, strings, special = await _prompt(service, body["prompt"])
    _, found = await service.features([ids], [source], top_k, [], gone)
    top = found[0].top
    if top is None:
        message = "the features pass returned no top-k; this is a bug"
        raise CapabilityUnsupported(message)
    values = top.values[0].float().cpu().tolist()
    indices = top.indices[0].cpu().tolist()
    start = 1 if body["ignoreBos"] and _bos_first(service, ids) else 0
    results = [
        {
            "tokenPosition": position,
            "token": strings[position],
            "isSpecial": special[position],
            "topFeatures": [
                {"featureIndex": int(i), "activationValue": float(v)}
                for i, v in zip(indices[position], values[position], strict=True)
            ],
        }
        for position in range(start, len(ids))
    ]
    return {"results": results, "tokens": strings}

"""Neuronpedia's read-out routes with no feature ranking: every active feature of a source,
final-token residuals per layer, one head's attention as a sparse matrix."""

from __future__ import annotations

import asyncio
from typing import Any

from interp_core.errors import InvalidArgument
from interp_serve.neuronpedia.activations import _prompt, _rows
from interp_serve.neuronpedia.sources import pick_source
from interp_serve.service import Gone, Service
from interp_serve.store import check_request_bytes

__all__ = ["activation_attention", "activation_raw", "activation_source"]

# Keys kept per query row of an attention matrix, as Neuronpedia's head view reads them.
KEYS_PER_ROW = 8


async def activation_source(service: Service, body: dict[str, Any], gone: Gone) -> dict[str, Any]:
    """Each prompt's active features of one source: feature -> [[token, value], ...], zeros
    left out."""
    import torch

    sae = pick_source(service.saes, body["source"])
    results = []
    for prompt in body["prompts"]:
        ids, strings, _ = await _prompt(service, prompt)
        cache = await service.capture([ids], [str(sae.address)], [], gone=gone)

        def sparse(cache: Any = cache) -> dict[str, list[list[float]]]:
            dense = sae.encode(_rows(cache, sae.address)).float()
            where = torch.nonzero(dense)  # [n, 2]: (token, feature), in token order
            # Two numbers a pair, as JSON: refused before building an answer over the cap.
            check_request_bytes(int(where.shape[0]) * 32, service.settings.max_capture_bytes)
            active: dict[str, list[list[float]]] = {}
            for token, feature in where.tolist():
                active.setdefault(str(feature), []).append([token, float(dense[token, feature])])
            return active

        active = await asyncio.to_thread(sparse)
        results.append({"activeFeatures": active, "tokens": strings})
    return {"results": results}


async def activation_raw(service: Service, body: dict[str, Any], gone: Gone) -> dict[str, Any]:
    """`resid_post` at each asked layer (all by default), at each prompt's final token."""
    if body["hookPoint"] != "residual_stream" or body["type"] != "final_output_token":
        message = (
            f"hookPoint={body['hookPoint']!r}, type={body['type']!r}: only hookPoint "
            f"'residual_stream' with type 'final_output_token' is served (as on Neuronpedia's "
            f"server); capture other points with POST /v1/capture"
        )
        raise InvalidArgument(message)
    n_layers = service.model.facts.n_layers
    layers = body.get("layers")
    layers = list(range(n_layers)) if layers is None else sorted(set(layers))
    outside = [layer for layer in layers if not 0 <= layer < n_layers]
    if outside or not layers:
        message = f"layers {outside or '[]'}: ask for layers in 0..{n_layers - 1}"
        raise InvalidArgument(message)
    results = []
    for prompt in body["prompts"]:
        ids, strings, _ = await _prompt(service, prompt)
        points = [f"resid_post.{layer}" for layer in layers]
        cache = await service.capture([ids], points, [], gone=gone)
        rows = []
        for layer in layers:
            final = _rows(cache, f"resid_post.{layer}")[-1]
            rows.append(
                {"layer": layer, "tokenIndices": [len(ids) - 1], "values": [final.tolist()]}
            )
        results.append({"tokenStrings": strings, "tokenIds": ids, "activations": rows})
    dtype = str(getattr(service.model, "dtype", "unknown")).removeprefix("torch.")
    device = str(getattr(service.model, "device", "unknown"))
    return {
        "hookPoint": "residual_stream",
        "type": "final_output_token",
        "dtype": dtype,
        "device": device,
        "results": results,
    }


async def activation_attention(
    service: Service, body: dict[str, Any], gone: Gone
) -> dict[str, Any]:
    """One head's attention weights (`attn_probs`) as a sparse matrix: the top keys of each
    query row, each as `q * seqLen + k`, in (q, k) order; `maxActivation` leaves out row 0 and
    column 0 (the BOS sink)."""
    import torch

    facts = service.model.facts
    layer, head = body["layer"], body["head"]
    if not 0 <= layer < facts.n_layers or not 0 <= head < facts.n_heads:
        message = (
            f"layer {layer}, head {head}: this model has layers 0..{facts.n_layers - 1} and "
            f"heads 0..{facts.n_heads - 1}"
        )
        raise InvalidArgument(message)
    ids, strings, _ = await _prompt(service, body["prompt"])
    address = f"attn_probs.{layer}"
    cache = await service.capture([ids], [address], [], gone=gone)
    pattern = cache[address][0, head].float().cpu()  # [query, key]
    seq = int(pattern.shape[0])
    top = torch.topk(pattern, k=min(KEYS_PER_ROW, seq), dim=-1)
    entries = sorted(
        (q, int(k), float(v))
        for q in range(seq)
        for k, v in zip(top.indices[q].tolist(), top.values[q].tolist(), strict=True)
        if v > 0
    )
    interior = pattern[1:, 1:]
    return {
        "seqLen": seq,
        "attentionIndices": [q * seq + k for q, k, _ in entries],
        "attentionValues": [v for _, _, v in entries],
        "maxActivation": float(interior.max()) if interior.numel() else 0.0,
        "tokens": strings,
    }

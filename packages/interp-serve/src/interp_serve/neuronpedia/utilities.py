"""Neuronpedia's utility routes: tokenize, an SAE's decoder vector and its nearest neighbours,
what this server serves, and health."""

from __future__ import annotations

import asyncio
from typing import Any

from interp_core.errors import InvalidArgument
from interp_serve.neuronpedia.sources import hook_name, pick_source, set_of
from interp_serve.service import Gone, Service

__all__ = ["capabilities", "decoder_cossim", "sae_vector", "steer_health", "tokenize"]

# Neuronpedia's server clamps the neighbours it returns to this many.
MAX_NEIGHBOURS = 128


async def tokenize(service: Service, body: dict[str, Any], gone: Gone) -> dict[str, Any]:
    """The text's ids and strings; `prependBos` omitted follows the model (as every other
    route tokenizes), and the answer says whether a BOS was in fact prepended."""
    wanted = body.get("prependBos")
    ids = (await service.tokenize(body["text"], prepend_bos=wanted is not False))[0]
    bare = (await service.tokenize(body["text"], prepend_bos=False))[0]
    strings = await service.str_tokens(ids) if ids else []
    return {
        "tokens": ids,
        "tokenStrings": [str(s) for s in strings],
        "prependBos": len(ids) > len(bare),
    }


async def sae_vector(service: Service, body: dict[str, Any], gone: Gone) -> dict[str, Any]:
    sae = pick_source(service.saes, body["source"])
    return {"vector": sae.decoder_row(body["index"]).tolist(), "hookName": hook_name(sae)}


async def decoder_cossim(service: Service, body: dict[str, Any], gone: Gone) -> dict[str, Any]:
    """The `numResults` features of `source` whose decoder rows have the largest cosine with a
    feature's decoder row (`feature`) or with `vector`, most similar first."""
    import torch

    sae = pick_source(service.saes, body["source"])
    feature, vector = body.get("feature"), body.get("vector")
    if (feature is None) == (vector is None):
        message = "send exactly one of feature (model, source, index) or vector"
        raise InvalidArgument(message)
    if feature is not None:
        query = pick_source(service.saes, feature["source"]).decoder_row(feature["index"])
    else:
        query = torch.tensor(vector, dtype=torch.float32)
    width = int(sae.W_dec.shape[-1])
    if query.shape[0] != width:
        message = (
            f"the query has {query.shape[0]} values, but {body['source']!r}'s decoder rows have "
            f"{width}; compare against a source at a point of the same width"
        )
        raise InvalidArgument(message)
    wanted = body["numResults"]
    if wanted < 1:
        message = f"numResults={wanted}: ask for at least 1 neighbour"
        raise InvalidArgument(message)
    wanted = min(wanted, MAX_NEIGHBOURS, sae.d_sae)

    def rank() -> list[dict[str, Any]]:
        rows = sae.W_dec.detach().float().cpu()
        cosines = torch.nn.functional.cosine_similarity(rows, query[None, :].float(), dim=-1)
        order = torch.sort(cosines, descending=True, stable=True).indices[:wanted]
        return [
            {
                "feature": {"model": body["model"], "source": body["source"], "index": int(i)},
                "cosineSimilarity": float(cosines[i]),
            }
            for i in order.tolist()
        ]

    return {"feature": feature, "topkDecoderCossimFeatures": await asyncio.to_thread(rank)}


def _supports(service: Service, point: str) -> bool:
    supports = getattr(service.model, "supports", None)
    return bool(supports(point)) if supports is not None else False


def capabilities(service: Service, served: list[str], refused: dict[str, str]) -> dict[str, Any]:
    """What this server is, in the keys Neuronpedia's server reports (snake_case there too: the
    webapp hides the tabs whose `endpoints` entry is false), then the sources and the routes."""
    attention = _supports(service, "attn_probs.0")
    sets = sorted({s for s in map(set_of, service.saes) if s is not None})
    return {
        "model": service.name,
        "backend": service.backend_name,
        "device": str(getattr(service.model, "device", "unknown")),
        "max_concurrent_requests": service.settings.max_concurrency,
        "max_num_results": service.settings.max_top_k,
        "num_layers": service.model.facts.n_layers,
        "sae_sets": sets,
        "endpoints": {
            "tokenize": True,
            "activation_single": True,
            "activation_all": True,
            "activation_source": True,
            "activation_raw": _supports(service, "resid_post.0"),
            "activation_topk_by_token": True,
            "activation_attention": attention,
            "dfa": attention and _supports(service, "value.0"),
            "steer_completion": True,
            "steer_completion_chat": True,
            "lens_logit": True,
            # JACOBIAN_LENS reads the fitted set installed as "default" (neuronpedia.lens).
            "lens_jacobian": "default" in service.lens_sets(),
            "neurons": False,
        },
        "server": "interp-serve",
        "sources": [
            {
                "source": name,
                "sourceSet": set_of(name),
                "hookName": hook_name(sae),
                "dSae": sae.d_sae,
                "activation": sae.activation,
            }
            for name, sae in service.saes.items()
        ],
        "routes": served,
        "refusedRoutes": refused,
    }


def initialize(service: Service, model_id: str | None) -> Any:
    """`/initialize` on a server whose model and SAEs were loaded at start."""
    from fastapi.responses import JSONResponse

    served = {service.name, str(service.model.model_id)}
    if model_id is not None and model_id not in served:
        message = (
            f"/initialize cannot load {model_id!r}: this server loads its model and SAEs at "
            f"start (interp serve MODEL --sae LAYER-SET=PATH) and serves {service.name!r}; "
            f"restart it with the other model"
        )
        return JSONResponse({"error": message}, status_code=400)
    return {"status": "initialized", "model": service.name, "sources": sorted(service.saes)}


def steer_health(service: Service) -> dict[str, Any]:
    engine = service.engine
    return {
        "status": "healthy",
        "backend": service.backend_name,
        "running": getattr(engine, "running", None),
        "queued": getattr(engine, "queued", None),
    }

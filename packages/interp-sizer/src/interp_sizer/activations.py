"""How much memory do a forward pass and the requested captures take, beyond weights and KV?

Three things are priced here. The points a user captures or steers, expanded to one `Site` per
(point, layer) with its width from `interp_core.shapes.point_width` (bytes per token = width ×
dtype). vLLM's profile-run activation peak, which vLLM subtracts from its pool before sizing the
KV cache. And the HF eager forward's live tensors: logits (plus their fp32 upcast), hidden and
MLP intermediates, attention matrices when `attn_implementation="eager"` materialises them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from interp_core.address import Address
from interp_core.facts import ModelFacts
from interp_core.points import POINTS, require_point
from interp_core.shapes import point_width
from interp_sizer import calibration as cal

__all__ = [
    "Site",
    "eager_activation_bytes",
    "expand_points",
    "site_bytes_per_token",
    "vllm_activation_peak_bytes",
]


@dataclass(frozen=True)
class Site:
    """One captured or steered tensor: a point at a layer (or a trunk point)."""

    address: str
    name: str
    layer: int | None
    width: int  # values per token (attention matrices: heads × key length)
    tensor_parallel_sharded: bool  # head- or column-sharded on vLLM TP (z, q/k/v, mlp_act ...)


_SHARDED_WIDTHS = frozenset(
    {"n_heads*head_dim", "n_kv_heads*head_dim", "n_heads*v_head_dim", "d_mlp"}
)


def _site(facts: ModelFacts, name: str, layer: int | None, stream: int | None, seq: int) -> Site:
    spec = require_point(name, facts, layer, stream)
    width = point_width(
        Address(name, layer, stream) if stream is not None else name, facts, layer, seq=seq
    )
    address = str(Address(name, layer, stream)) if layer is not None or stream is not None else name
    return Site(address, name, layer, width, spec.width.rule in _SHARDED_WIDTHS)


def expand_points(facts: ModelFacts, points: Iterable[str], seq: int) -> tuple[Site, ...]:
    """Sites for each requested point: a bare layer point means every layer that has it.

    An address ('resid_post.10', 'resid_post.5.stream-2') names one site. A point the model
    lacks refuses with the registry's reason (`PointUnsupported`), so nothing is priced that the
    model could not serve.
    """
    sites: dict[str, Site] = {}
    for raw in points:
        text = str(raw).strip()
        if not text:
            continue
        spec = POINTS.get(text)
        if spec is not None and spec.is_layer_point:
            layers = [layer for layer in range(facts.n_layers) if spec.is_present(facts, layer)]
            if not layers:
                require_point(text, facts)  # raises with the registry's reason
            if facts.n_streams > 1 and spec.accepts_stream:
                found = [
                    _site(facts, text, layer, stream, seq)
                    for layer in range(facts.n_layers)
                    for stream in range(facts.n_streams)
                ]
            else:
                found = [_site(facts, text, layer, None, seq) for layer in layers]
        else:
            address = Address.parse(text)  # malformed text refuses with the parser's hint
            found = [_site(facts, address.name, address.layer, address.stream, seq)]
        for site in found:
            sites.setdefault(site.address, site)
    return tuple(sites.values())


def site_bytes_per_token(sites: Iterable[Site], value_bytes: int, tensor_parallel: int = 1) -> int:
    """Bytes one token's captures take on one rank."""
    total = 0
    for site in sites:
        width = site.width // tensor_parallel if site.tensor_parallel_sharded else site.width
        total += width * value_bytes
    return total


def _mlp_width(facts: ModelFacts) -> int:
    """Intermediate width one token runs through: dense MLP, or its routed + shared experts."""
    width = facts.d_mlp
    if facts.moe is not None:
        routed = facts.moe.experts_per_token * facts.moe.d_expert
        width = max(width, routed + (facts.moe.d_shared_expert or 0))
    return width


def vllm_activation_peak_bytes(
    facts: ModelFacts,
    value_bytes: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    tensor_parallel: int,
) -> int:
    """vLLM's profile-run activation peak on one rank (calibrated margin included).

    `T_b · b · (2·I/TP + (q + 2·kv)/TP + c·d) + S · V · 4 · 2`: the gate/up intermediate, the
    q/k/v projections, `c` residual-width copies, and the sampler's fp32 logits (twice: logits
    and their softmax) for `max_num_seqs` rows.
    """
    tokens = max_num_batched_tokens
    projections = (facts.q_width + 2 * facts.kv_width) // tensor_parallel
    per_token = (
        2 * _mlp_width(facts) // tensor_parallel
        + projections
        + int(cal.ACTIVATION_RESIDUAL_COPIES.value) * facts.d_model
    )
    forward = tokens * value_bytes * per_token
    sampler = max_num_seqs * facts.vocab_size * 4 * 2
    return int((forward + sampler) * cal.ACTIVATION_MARGIN.value)


def eager_activation_bytes(
    facts: ModelFacts,
    value_bytes: int,
    batch: int,
    seq: int,
    attn_implementation: str,
) -> dict[str, int]:
    """Live tensors of one HF forward over `batch × seq` tokens, by term."""
    tokens = batch * seq
    terms = {
        # Logits at the model dtype, then upcast to fp32 by the loss/softmax path.
        "logits": tokens * facts.vocab_size * (value_bytes + 4),
        "hidden": tokens * facts.d_model * value_bytes,
        "mlp": 2 * tokens * max(_mlp_width(facts), 4 * facts.d_model) * value_bytes,
    }
    if attn_implementation == "eager":
        widest = 0
        for layer in range(facts.n_layers):
            if facts.attends(layer):
                keys = seq
                if facts.layer_kind(layer) != "full" and facts.sliding_window:
                    keys = min(seq, facts.sliding_window)
                # DeepSeek-V4's compressed layers read their entries after the window's tokens.
                keys += seq // (facts.compress_rate(layer) or seq + 1)
                widest = max(widest, keys)
        # Scores and probabilities of the widest layer, both live while softmax runs.
        terms["attention_matrices"] = 2 * batch * facts.n_heads * seq * widest * value_bytes
    return terms

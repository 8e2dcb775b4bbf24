"""How much of the card does HF transformers (the eager backend) need?

Eager is one sum that must stay under the card: weights, a KV cache for the whole batch at full
length, the forward's activations (the attention matrices when they are materialised), captured
activations kept for the whole forward, and fixed overheads.
"""

from __future__ import annotations

from interp_sizer import calibration as cal
from interp_sizer.activations import eager_activation_bytes, site_bytes_per_token
from interp_sizer.gpus import GpuSpec
from interp_sizer.pricing import (
    GIB,
    fragmentation_term,
    gib,
    gpu_problems,
    kv_layout_for,
    largest,
    lens_term,
    overhead_term,
    speed,
    weights_term,
)
from interp_sizer.report import GpuFit, Term
from interp_sizer.settings import ATTENTION_MATRIX_POINTS, Settings
from interp_sizer.source import ResolvedModel

__all__ = ["eager_fit"]


def eager_fit(model: ResolvedModel, s: Settings, gpu: GpuSpec, n: int) -> GpuFit:
    facts = model.facts
    card = gpu.memory_bytes
    layout = kv_layout_for(model, s, 1)
    terms = [weights_term(model, s, n)]

    def kv_bytes(length: int, sequences: int) -> int:
        return sequences * layout.sequence_bytes(length) // n

    def activation_terms(length: int, sequences: int) -> list[Term]:
        found = eager_activation_bytes(
            facts, s.value_bytes, sequences, length, s.attn_implementation or "sdpa"
        )
        return [
            Term(
                f"act_{k}",
                k.replace("_", " "),
                v,
                "activations",
                "card",
                "computed",
                f"batch {sequences} × {length:,} tokens",
            )
            for k, v in found.items()
        ]

    def capture_bytes(length: int, sequences: int) -> int:
        rows = sequences * length
        return rows * site_bytes_per_token(s.capture, s.value_bytes) + site_bytes_per_token(
            s.steer, s.value_bytes
        )

    fixed = [
        overhead_term("workspace", "workspace", gib(cal.EAGER_WORKSPACE.value), "card"),
        overhead_term("cuda_context", "CUDA context", gib(cal.EAGER_CUDA_CONTEXT.value), "card"),
        fragmentation_term(card, "card"),
    ]
    lens = lens_term(model, s, "card")
    if lens is not None:
        fixed.append(lens)

    def needed(length: int, sequences: int) -> int:
        return (
            terms[0].bytes
            + kv_bytes(length, sequences)
            + sum(t.bytes for t in activation_terms(length, sequences))
            + capture_bytes(length, sequences)
            + sum(t.bytes for t in fixed)
        )

    length, sequences = s.max_model_len, s.concurrency
    terms.append(
        Term(
            "kv_cache",
            "KV cache (generation)",
            kv_bytes(length, sequences),
            "kv",
            "card",
            "computed",
            f"{sequences} × {length:,} tokens, {layout.bytes_per_token / 1024:.1f} KiB/token",
        )
    )
    terms.extend(activation_terms(length, sequences))
    captured = capture_bytes(length, sequences)
    if captured:
        terms.append(
            Term(
                "captures",
                "captured activations",
                captured,
                "capture",
                "card",
                "computed",
                f"{len(s.capture)} sites kept for the whole forward",
            )
        )
    terms.extend(fixed)
    used = sum(t.bytes for t in terms)
    problems = gpu_problems(model, s, gpu)
    if used > card:
        problems.append(
            f"needs {used / GIB:.1f} GiB per GPU; {gpu.name} has {gpu.memory_gib:g} GiB"
        )
    room = card - (used - terms[1].bytes)
    per_token = layout.bytes_per_token // n if layout.bytes_per_token else 0
    kv_tokens = max(0, room) // per_token if per_token else 0
    per_sequence = layout.sequence_bytes(length) // n
    max_concurrency = max(0, room) / per_sequence if per_sequence else 0.0
    max_context = largest(
        1, facts.max_position_embeddings or length, lambda L: needed(L, sequences) <= card
    )
    capture_per_token = site_bytes_per_token(s.capture, s.value_bytes)
    throughput = speed(model, s, gpu, n, layout, sequences, capture_per_token)
    advice = []
    if problems:
        if 0 < max_context < length:
            advice.append(f"max_model_len={max_context} fits batch {sequences}")
        if s.attn_implementation == "eager" and not any(
            site.name in ATTENTION_MATRIX_POINTS for site in s.capture
        ):
            advice.append("attn_implementation='sdpa' drops the attention matrices")
        if s.quantization is None and model.inventory.checkpoint_quantization is None:
            advice.append("quantization='bnb-4bit' quarters the linear weights")
        advice.append("a vLLM backend pages the KV cache and keeps activations small")
        advice.append("more GPUs (num_gpus) split the layers")
    return GpuFit(
        gpu=gpu,
        num_gpus=n,
        fits=not problems,
        problems=tuple(problems),
        terms=tuple(terms),
        budget_bytes=card,
        margin_bytes=0,
        kv_tokens=int(kv_tokens),
        kv_block_tokens=0,
        max_concurrency=max_concurrency,
        max_context=max_context,
        max_num_batched_tokens=None,
        throughput=throughput,
        advice=tuple(advice),
    )

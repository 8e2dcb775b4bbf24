"""Which layers, weights and KV cache does each pipeline stage hold on each of its GPUs?

Under `pipeline_parallel=P`, vLLM gives each of P stages a contiguous run of decoder layers and
splits every layer of a stage over its `num_gpus / P` GPUs (tensor parallelism). The layers are
divided as vLLM's `get_pp_indices` divides them (vllm/distributed/utils.py): equal runs, the
remainder going to the stages before the last, from the second-to-last backwards. The first
stage also holds the input embeddings, the last the final norm and lm_head; a model with tied
embeddings builds the embedding again on the last stage for its head, and a few model classes
build it on every stage (below). Sites (captured, steered or static tap points) belong to the
stage that owns their layer.
"""

from __future__ import annotations

from collections.abc import Sequence

from interp_sizer.activations import Site
from interp_sizer.kv import KVLayout
from interp_sizer.report import Stage
from interp_sizer.settings import Settings
from interp_sizer.source import ResolvedModel
from interp_sizer.weights import WeightPart

__all__ = ["nodes", "stage_layout", "stage_ranges", "stage_sites", "stages"]

# vLLM model classes that build the input embedding on every pipeline stage rather than only on
# the first (vllm 0.32 model_executor/models/gemma2.py, gemma3.py, gpt2.py build it without a
# pipeline check), so every stage pays for it.
_EMBEDDING_ON_EVERY_STAGE = frozenset(
    {
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration",
        "GPT2LMHeadModel",
    }
)


def stage_ranges(n_layers: int, pipeline_parallel: int) -> tuple[range, ...]:
    """The decoder layers of each stage, as vLLM partitions them."""
    counts = [n_layers // pipeline_parallel] * pipeline_parallel
    for i in range(2, n_layers % pipeline_parallel + 2):
        counts[-i] += 1
    starts = [sum(counts[:i]) for i in range(pipeline_parallel)]
    return tuple(range(start, start + count) for start, count in zip(starts, counts, strict=True))


def nodes(num_gpus: int, gpus_per_node: int | None) -> int:
    """Machines `num_gpus` GPUs take at `gpus_per_node` each (None: one machine)."""
    per_node = gpus_per_node or num_gpus
    return -(-num_gpus // per_node)


def stage_layout(layout: KVLayout, layers: range) -> KVLayout:
    """The KV layout of the layers one stage holds (recurrent state shared out by layer)."""
    held = tuple(layer for layer in layout.layers if layer.layer in layers)
    all_state = sum(1 for layer in layout.layers if layer.kind == "state")
    state_here = sum(1 for layer in held if layer.kind == "state")
    state = layout.state_bytes_per_sequence * state_here // all_state if all_state else 0
    return KVLayout(held, state, layout.backend_family)


def stage_sites(sites: Sequence[Site], layers: range, index: int, count: int) -> tuple[Site, ...]:
    """The sites a stage serves: those at its layers; a layerless site on the first stage when it
    is an embedding point, else on the last."""

    def owner(site: Site) -> int:
        if site.layer is not None:
            return index if site.layer in layers else -1
        return 0 if "embed" in site.name else count - 1

    return tuple(site for site in sites if owner(site) == index)


def stages(model: ResolvedModel, s: Settings, num_gpus: int, layout: KVLayout) -> tuple[Stage, ...]:
    """Every stage of `num_gpus` GPUs in `s.pipeline_parallel` stages, weights and KV priced.

    `layout` is the whole model's KV layout on one tensor-parallel rank.
    """
    facts = model.facts
    inventory = model.inventory
    count = s.pipeline_parallel
    tp = num_gpus // count
    ranges = stage_ranges(facts.n_layers, count)
    tied_head = WeightPart(float_elements=facts.vocab_size * facts.d_model)
    every_stage = facts.architecture in _EMBEDDING_ON_EVERY_STAGE
    found = []
    for index, layers in enumerate(ranges):
        first, last = index == 0, index == count - 1
        part = WeightPart()
        for layer, weights in inventory.layer_parts.items():
            # Layers past the decoder (a checkpoint's MTP layers) are priced on the last stage.
            if layer in layers or (last and layer >= facts.n_layers):
                part = part + weights
        holds: list[str] = []
        if first or every_stage:
            part = part + inventory.input_part
            holds.append("embeddings")
        if last:
            part = part + inventory.output_part
            if facts.tied_embeddings and not (first or every_stage):
                part = part + tied_head  # the head reuses an embedding this stage builds
            holds.extend(("final norm", "lm_head"))
        found.append(
            Stage(
                index=index,
                first_layer=layers.start,
                stop_layer=layers.stop,
                holds=tuple(holds),
                weights_bytes=part.load_bytes(s.dtype, s.quantization),
                tensor_parallel=tp,
                kv_bytes_per_token=stage_layout(layout, layers).bytes_per_token,
            )
        )
    return tuple(found)

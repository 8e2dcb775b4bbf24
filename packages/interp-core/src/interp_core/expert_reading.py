"""Which layers route through experts, and how wide they are, read from a model's config: the
part of `ModelFacts`' reader that turns a family's way of stating its mixture of experts into
`MoEFacts`.

Families name the expert count, top-k and widths with different keys, and state which layers are
routed in eight ways (an `mlp_layer_types` list, Llama-4's `moe_layers` or interleave step,
DeepSeek's dense prefix and frequency, ERNIE-4.5's start/end/interval, Qwen-MoE's sparse step
with dense exceptions, Jamba's period and offset, Nemotron-H's block list, or every layer).
`ExpertReading` is mixed into the reader in `interp_core.facts`, whose `get`/`positive_int`/
`optional_int`/`_checked_int`/`_layer_indices`/`_per_layer_list`/`block_types` it uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interp_core import family_conventions as conventions
from interp_core.errors import ConfigError
from interp_core.family_conventions import FamilyConventions

__all__ = ["ExpertReading", "MoEFacts"]


@dataclass(frozen=True)
class MoEFacts:
    """Mixture-of-experts layout."""

    n_experts: int
    experts_per_token: int
    d_expert: int  # intermediate width of one routed expert
    n_shared_experts: int = 0
    d_shared_expert: int | None = None  # total intermediate width of the shared expert(s), if any
    sparse_layers: tuple[int, ...] = ()  # layer indices whose MLP is routed; the rest are dense


class ExpertReading:
    """`MoEFacts` (or None for a dense model), however the config states its experts."""

    cfg: Mapping[str, Any]
    model_type: str
    family: FamilyConventions

    def moe(self, n_layers: int) -> MoEFacts | None:
        key, n_experts = self.get(
            "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"
        )
        if key is None or n_experts == 0 or self.get("enable_moe_block")[1] is False:
            # Dense members of MoE-capable families say 0 experts (Granite-4.0-H-1B), or switch
            # the experts off (Gemma-4's enable_moe_block).
            return None
        if self.family.single_sublayer:
            if "moe" not in (self.block_types()[1] or ()):
                # Nemotron-H's dense members: transformers saves the class's expert count anyway.
                return None
        n_experts = self._checked_int(key, n_experts, "an expert count", minimum=1)
        experts_per_token = self.positive_int(
            "how many experts each token uses",
            "num_experts_per_tok",
            "num_experts_per_token",
            "experts_per_token",
            "moe_k",  # ERNIE-4.5
            "moe_topk",  # Hunyuan
            "moe_top_k",  # DBRX
            "top_k_experts",  # Gemma-4
        )
        if experts_per_token > n_experts:
            message = (
                f"the {self.model_type} config routes each token to {experts_per_token} of "
                f"{n_experts} experts: a token cannot use more experts than exist. Fix "
                f"`num_experts_per_tok`"
            )
            raise ConfigError(message)
        # Mixtral, gpt-oss and Granite-MoE have no separate expert width: intermediate_size is it.
        d_expert = self.positive_int(
            "the width of one expert",
            "moe_intermediate_size",
            "intermediate_size",
            "ffn_hidden_size",
        )
        n_shared = (
            self.optional_int(
                "n_shared_experts", "num_shared_experts", "moe_num_shared_experts", minimum=0
            )
            or 0
        )
        shared_width = self.optional_int(
            "shared_expert_intermediate_size",
            "shared_intermediate_size",
            "moe_shared_expert_intermediate_size",  # Nemotron-H
            minimum=0,
        )
        if self.family.shared_mlp:
            # Hunyuan-MoE: one shared MLP of the dense width beside the experts, always.
            n_shared, shared_width = 1, self.positive_int("the MLP width", "intermediate_size")
        if shared_width:
            n_shared = n_shared or 1  # Qwen2-MoE / Qwen3-Next: one shared expert of that width
        elif n_shared:
            shared_width = n_shared * d_expert  # DeepSeek: shared experts are routed-sized
        return MoEFacts(
            n_experts=n_experts,
            experts_per_token=experts_per_token,
            d_expert=d_expert,
            n_shared_experts=n_shared,
            d_shared_expert=shared_width or None,
            sparse_layers=self._sparse_layers(n_layers),
        )

    def _sparse_layers(self, n_layers: int) -> tuple[int, ...]:
        if self.family.single_sublayer:
            # Nemotron-H: the layers its block list calls `moe`.
            blocks = self.block_types()[1] or ()
            return tuple(i for i, name in enumerate(blocks) if name == "moe")
        _, mlp_layer_types = self.get("mlp_layer_types")
        if mlp_layer_types is not None:
            return self._named_sparse_layers(mlp_layer_types, n_layers)
        if self.get("moe_layers")[0] is not None:
            # Llama-4: the routed layers listed outright.
            return tuple(sorted(self._layer_indices("moe_layers", n_layers)))
        if self.get("interleave_moe_layer_step")[0] is not None:
            # Llama-4 without a list: every `step`-th layer, counted from 1.
            step = self.positive_int("the MoE layer step", "interleave_moe_layer_step")
            return tuple(range(step - 1, n_layers, step))
        if self.get("first_k_dense_replace")[0] is not None:
            # DeepSeek: a dense prefix, then every `moe_layer_freq`-th layer, counted from 0.
            first_dense = self.optional_int("first_k_dense_replace", minimum=0) or 0
            every = self.optional_int("moe_layer_freq") or 1
            return tuple(i for i in range(first_dense, n_layers) if i % every == 0)
        if self.get("moe_layer_start_index")[0] is not None:
            # ERNIE-4.5: every `moe_layer_interval`-th layer (counted from 1) between the start
            # and end indices, both included.
            start = self.optional_int("moe_layer_start_index", minimum=0) or 0
            end = self.optional_int("moe_layer_end_index", minimum=0)
            last = n_layers - 1 if end is None else end
            every = self.optional_int("moe_layer_interval") or 1
            return tuple(i for i in range(start, last + 1) if (i + 1) % every == 0)
        if self.get("decoder_sparse_step")[0] is not None:
            # Qwen-MoE: every `decoder_sparse_step`-th layer, counted from 1, except the layers
            # `mlp_only_layers` keeps dense.
            step = self.positive_int("the sparse-layer step", "decoder_sparse_step")
            dense = self._layer_indices("mlp_only_layers", n_layers)
            return tuple(i for i in range(n_layers) if (i + 1) % step == 0 and i not in dense)
        if self.get("expert_layer_period")[0] is not None:
            # Jamba: every `expert_layer_period`-th layer from `expert_layer_offset`.
            period = self.positive_int("the expert-layer period", "expert_layer_period")
            offset = self.optional_int("expert_layer_offset", minimum=0) or 0
            return tuple(i for i in range(n_layers) if i % period == offset)
        return tuple(range(n_layers))

    def _named_sparse_layers(self, mlp_layer_types: Any, n_layers: int) -> tuple[int, ...]:
        names = self._per_layer_list(mlp_layer_types, "mlp_layer_types", n_layers)
        sparse = []
        for layer, name in enumerate(names):
            if name in conventions.SPARSE_MLP_NAMES:
                sparse.append(layer)
            elif name not in conventions.DENSE_MLP_NAMES:
                known = ", ".join(
                    sorted(conventions.SPARSE_MLP_NAMES | conventions.DENSE_MLP_NAMES)
                )
                message = (
                    f"`mlp_layer_types[{layer}]` is {name!r}, which says neither dense nor "
                    f"routed: known names are {known}. Fix the entry, or teach "
                    f"interp_core.facts the new name"
                )
                raise ConfigError(message)
        return tuple(sparse)

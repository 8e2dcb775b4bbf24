"""Widths that differ from layer to layer, and layers that reuse another layer's keys and values.

Most families build every layer alike: one head width, one K/V head count, one MLP width, and
each attention layer projects its own keys and values. Gemma-4 does not: its full-attention
layers have wider heads (`global_head_dim`) and, where keys double as values
(`attention_k_eq_v`), their own K/V head count (`num_global_key_value_heads`); transformers
saves both as `per_layer_config`, a sparse map from layer index to the overridden keys. Its last
`num_kv_shared_layers` layers (Gemma-3n's too) compute no keys or values at all: each attends
over those of the last earlier layer of its own kind, and with Gemma-4's `use_double_wide_mlp`
their MLPs are twice as wide.

`LayerWidthReading` is mixed into the reader in `interp_core.facts`, whose `get`,
`positive_int`, `optional_int` and `_checked_int` it uses. Every method returns `()` when the
model is uniform, so `ModelFacts` of every other family stay exactly as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interp_core.errors import ConfigError
from interp_core.family_conventions import FamilyConventions
from interp_core.layer_kind_reading import is_int

__all__ = ["LayerWidthReading"]

# The keys a `per_layer_config` entry may override that `ModelFacts` tracks per layer. Any other
# override would change the layer in a way the facts cannot say, so it is refused.
_TRACKED_OVERRIDES = ("head_dim", "num_key_value_heads", "intermediate_size")


class LayerWidthReading:
    """Per-layer head widths, K/V head counts, MLP widths and K/V sources, where they vary."""

    cfg: Mapping[str, Any]
    model_type: str
    family: FamilyConventions

    def layer_overrides(self, n_layers: int) -> dict[int, Mapping[str, Any]]:
        """Each layer's overridden keys: `per_layer_config` as stated, or Gemma-4's rule."""
        _, stated = self.get("per_layer_config")
        if stated is not None:
            return self._stated_overrides(stated, n_layers)
        if not self.family.global_heads:
            return {}
        # Gemma-4 as published: the class derives the overrides of the full-attention layers
        # from `global_head_dim` and, only when keys double as values, from
        # `num_global_key_value_heads`.
        overrides: dict[str, Any] = {
            "head_dim": self.positive_int("the full layers' head width", "global_head_dim")
        }
        if self.get("attention_k_eq_v")[1]:
            kv = self.optional_int("num_global_key_value_heads")
            if kv is not None:
                overrides["num_key_value_heads"] = kv
        kinds = self.layer_kinds(n_layers)
        return {layer: overrides for layer, kind in enumerate(kinds) if kind == "full"}

    def _stated_overrides(self, stated: Any, n_layers: int) -> dict[int, Mapping[str, Any]]:
        if not isinstance(stated, Mapping):
            message = (
                f"`per_layer_config` is {stated!r}, not a mapping from layer index to the keys "
                "that layer overrides. Fix `per_layer_config`"
            )
            raise ConfigError(message)
        overrides: dict[int, Mapping[str, Any]] = {}
        for key, entry in stated.items():
            layer = int(key) if isinstance(key, str) and key.isdigit() else key
            if not is_int(layer) or not 0 <= layer < n_layers:
                message = (
                    f"`per_layer_config` has an entry for {key!r}, but its keys must be layer "
                    f"indices 0..{n_layers - 1}. Fix `per_layer_config`"
                )
                raise ConfigError(message)
            if not isinstance(entry, Mapping):
                message = f"`per_layer_config[{key!r}]` is {entry!r}, not a mapping of keys"
                raise ConfigError(message)
            unknown = sorted(set(entry) - set(_TRACKED_OVERRIDES))
            if unknown:
                message = (
                    f"`per_layer_config[{key!r}]` overrides {', '.join(unknown)}, which "
                    f"interp-core cannot track per layer (it tracks "
                    f"{', '.join(_TRACKED_OVERRIDES)}), so that layer's points are unknown. "
                    "Teach interp_core.layer_widths the key"
                )
                raise ConfigError(message)
            overrides[layer] = entry
        return overrides

    def _per_layer(
        self, overrides: dict[int, Mapping[str, Any]], key: str, base: int, n_layers: int
    ) -> tuple[int, ...]:
        values = []
        for layer in range(n_layers):
            value = overrides.get(layer, {}).get(key, base)
            name = f"per_layer_config[{layer}].{key}"
            values.append(self._checked_int(name, value, "a width", minimum=1))
        return tuple(values) if len(set(values)) > 1 else ()

    def layer_head_dims(
        self, overrides: dict[int, Mapping[str, Any]], head_dim: int, n_layers: int
    ) -> tuple[int, ...]:
        return self._per_layer(overrides, "head_dim", head_dim, n_layers)

    def layer_kv_heads(
        self, overrides: dict[int, Mapping[str, Any]], kv_heads: int, n_heads: int, n_layers: int
    ) -> tuple[int, ...]:
        values = self._per_layer(overrides, "num_key_value_heads", kv_heads, n_layers)
        for layer, value in enumerate(values):
            if n_heads % value:
                message = (
                    f"layer {layer} of the {self.model_type} config has {value} K/V heads, which "
                    f"do not divide its {n_heads} query heads into whole groups. Fix "
                    "`per_layer_config` or `num_global_key_value_heads`"
                )
                raise ConfigError(message)
        return values

    def kv_source_layers(self, kinds: tuple[str, ...]) -> tuple[int, ...]:
        """Per layer, the layer whose keys and values it attends over; () when none shares."""
        shared = self.optional_int("num_kv_shared_layers", minimum=0) or 0
        n_layers = len(kinds)
        first = n_layers - shared
        if shared == 0:
            return ()
        if first <= 0:
            message = (
                f"`num_kv_shared_layers` is {shared} but the config has {n_layers} layers: at "
                "least the first layer must compute its own keys and values. Fix "
                "`num_kv_shared_layers`"
            )
            raise ConfigError(message)
        sources = list(range(first))
        for layer in range(first, n_layers):
            # The last earlier layer of the same kind stores the keys and values it reuses.
            owners = [i for i in range(first) if kinds[i] == kinds[layer]]
            if not owners:
                message = (
                    f"layer {layer} reuses keys and values (`num_kv_shared_layers` {shared}) "
                    f"but no earlier layer is a {kinds[layer]} layer to take them from. Fix "
                    "`num_kv_shared_layers` or `layer_types`"
                )
                raise ConfigError(message)
            sources.append(owners[-1])
        return tuple(sources)

    def layer_d_mlp(
        self,
        overrides: dict[int, Mapping[str, Any]],
        d_mlp: int,
        sources: tuple[int, ...],
        n_layers: int,
    ) -> tuple[int, ...]:
        if not d_mlp:
            return ()
        widths = [
            overrides.get(layer, {}).get("intermediate_size", d_mlp) for layer in range(n_layers)
        ]
        if sources and self.get("use_double_wide_mlp")[1]:
            # Gemma-4 doubles the MLP of every layer that reuses another's keys and values.
            widths = [w * 2 if sources[i] != i else w for i, w in enumerate(widths)]
        return tuple(widths) if len(set(widths)) > 1 else ()

    def per_layer_input_width(self) -> int:
        """Gemma-4's per-layer input width (`hidden_size_per_layer_input`); 0 when it has none."""
        if not self.family.per_layer_inputs:
            return 0
        return self.optional_int("hidden_size_per_layer_input", minimum=0) or 0

"""Which kind each layer of a model is, read from its config: the part of `ModelFacts`' reader
that turns a family's way of stating its layer pattern into one kind per layer.

Families state the pattern in a dozen ways (an explicit `layer_types` list, Kimi Linear's
`linear_attn_config`, Bamba's and LFM2's index lists, Jamba's period and offset, Llama-4's NoPE
flags and chunk size, MiniMax's and Gemma-2's fixed alternation, EXAONE-4's letter pattern,
Gemma-3's global-layer period, Qwen3-Next's full-attention interval, a sliding window that some
families apply from `max_window_layers` on). `LayerKindReading` is mixed into the reader in
`interp_core.facts`, whose `get`/`positive_int`/`optional_int`/`_layer_indices` it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from interp_core import family_conventions as conventions
from interp_core.errors import ConfigError
from interp_core.family_conventions import FamilyConventions

__all__ = ["LayerKindReading", "is_int"]


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class LayerKindReading:
    """One kind per layer (`interp_core.facts.LAYER_KINDS`), however the config states it."""

    cfg: Mapping[str, Any]
    model_type: str
    family: FamilyConventions

    def layer_count(self) -> int:
        keys = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
        if self.family.single_sublayer and self.get(*keys)[0] is None:
            # transformers 5 saves Nemotron-H's count only as the length of its block list.
            key, blocks = self.block_types()
            if key is not None:
                if isinstance(blocks, str) or not isinstance(blocks, Sequence) or not blocks:
                    message = f"`{key}` is {blocks!r}, not a list with one entry per layer. Fix it"
                    raise ConfigError(message)
                return len(blocks)
        return self.positive_int("the number of layers", *keys)

    def block_types(self) -> tuple[str | None, Any]:
        """A single-sublayer family's per-layer block names, with the key that states them.

        Nemotron-H states them as `layers_block_type` (transformers 5) or, in its published
        configs, as `hybrid_override_pattern`, one letter per layer.
        """
        key, listed = self.get("layers_block_type", "layer_types")
        if key is not None:
            return key, listed
        key, pattern = self.get("hybrid_override_pattern")
        if key is None:
            return None, None
        letters = conventions.SINGLE_SUBLAYER_PATTERN_LETTERS
        if not isinstance(pattern, str) or not set(pattern) <= set(letters):
            message = (
                f"`hybrid_override_pattern` is {pattern!r}: it must be a string of the letters "
                f"{', '.join(letters)} (one per layer: {', '.join(letters.values())}). Fix it"
            )
            raise ConfigError(message)
        return key, [letters[letter] for letter in pattern]

    def layer_kinds(self, n_layers: int) -> tuple[str, ...]:
        if self.family.single_sublayer:
            key, blocks = self.block_types()
            if key is None:
                message = (
                    f"the {self.model_type} config states neither `layers_block_type` nor "
                    "`hybrid_override_pattern`, so which sublayer each layer is is unknown. Add "
                    "one of them"
                )
                raise ConfigError(message)
            return self._named_layer_kinds(blocks, n_layers, key)
        _, layer_types = self.get("layer_types")
        if layer_types is not None:
            kinds = self._named_layer_kinds(layer_types, n_layers)
            if self.family.last_layer_full and kinds[-1] != "full":
                # Gemma4TextConfig forces its last layer to full attention whatever the list
                # says (with a warning), so that is the layer the model builds.
                kinds = (*kinds[:-1], "full")
            return kinds
        fixed = self.family.layer_pattern
        if fixed is not None:
            # The family's config class fixes the pattern when `layer_types` is not stated.
            return _FIXED_PATTERNS[fixed](self, n_layers)
        _, linear_attn = self.get("linear_attn_config")
        if isinstance(linear_attn, Mapping) and linear_attn.get("full_attn_layers") is not None:
            # Kimi Linear's published config: MLA at these layers, counted from 1; Kimi Delta
            # Attention (linear) everywhere else.
            full = linear_attn["full_attn_layers"]
            if isinstance(full, str) or not isinstance(full, Sequence):
                message = (
                    f"`linear_attn_config.full_attn_layers` is {full!r}, not a list of layer "
                    "numbers. Fix it"
                )
                raise ConfigError(message)
            for number in full:
                if not is_int(number) or not 1 <= number <= n_layers:
                    message = (
                        f"`linear_attn_config.full_attn_layers` names layer {number!r}, but it "
                        f"counts layers from 1 to {n_layers}. Fix the entry"
                    )
                    raise ConfigError(message)
            return tuple("full" if i + 1 in full else "linear_attention" for i in range(n_layers))
        if self.get("attn_layer_indices")[0] is not None:
            # Bamba: softmax attention at the listed layers, Mamba-2 mixers everywhere else.
            attends = self._layer_indices("attn_layer_indices", n_layers)
            return tuple("full" if i in attends else "mamba" for i in range(n_layers))
        if self.get("attn_layer_period")[0] is not None:
            # Jamba: every `attn_layer_period`-th layer from `attn_layer_offset` attends.
            period = self.positive_int("the attention-layer period", "attn_layer_period")
            offset = self.optional_int("attn_layer_offset", minimum=0) or 0
            return tuple("full" if i % period == offset else "mamba" for i in range(n_layers))
        if self.get("full_attn_idxs")[0] is not None:
            # LFM2 (older configs): attention at the listed layers, short convolutions elsewhere.
            attends = self._layer_indices("full_attn_idxs", n_layers)
            return tuple("full" if i in attends else "conv" for i in range(n_layers))
        _, pattern = self.get("sliding_window_pattern")
        if isinstance(pattern, str) and pattern and set(pattern) <= {"L", "G"}:
            # EXAONE-4 spells the pattern out, one letter per layer, repeated: "LLLG" is three
            # local (sliding) layers, then a global one.
            return tuple(
                "sliding" if pattern[i % len(pattern)] == "L" else "full" for i in range(n_layers)
            )
        if self.get("sliding_window_pattern", "_sliding_window_pattern")[0] is not None:
            # Gemma-3 / Cohere-2: every `pattern`-th layer, counted from 1, is global.
            pattern = self.positive_int(
                "the sliding-window pattern", "sliding_window_pattern", "_sliding_window_pattern"
            )
            return tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(n_layers))
        if self.get("full_attention_interval")[0] is not None:
            # Qwen3-Next: every `interval`-th layer, counted from 1, is softmax attention; the
            # rest are gated delta-net layers.
            interval = self.positive_int("the full-attention interval", "full_attention_interval")
            return tuple(
                "full" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layers)
            )
        window_stated = self.get("sliding_window")[0] is not None
        use_window = self.cfg.get("use_sliding_window")
        if window_stated and use_window is not False:
            if not self.family.window_from_max_layers:
                return ("sliding",) * n_layers
            if use_window:
                first = self.optional_int("max_window_layers", minimum=0) or 0
                return tuple("sliding" if i >= first else "full" for i in range(n_layers))
        return ("full",) * n_layers

    def _deepseek_v4_layer_kinds(self, n_layers: int) -> tuple[str, ...]:
        # DeepSeek-V4 configs without `layer_types`: the published checkpoints list one
        # compression ratio per layer (`compress_ratios`), with the multi-token-prediction
        # layers' entries after the trunk's; with neither, transformers' default is two HCA
        # layers, then CSA and HCA alternating.
        _, ratios = self.get("compress_ratios")
        if ratios is None:
            return tuple(
                "heavily_compressed" if i < 2 or i % 2 == 0 else "compressed_sparse"
                for i in range(n_layers)
            )
        if isinstance(ratios, str) or not isinstance(ratios, Sequence) or len(ratios) < n_layers:
            message = (
                f"`compress_ratios` is {ratios!r}, not a list with one entry per layer "
                f"({n_layers}). Fix `compress_ratios`"
            )
            raise ConfigError(message)
        kinds = []
        for layer, ratio in enumerate(ratios[:n_layers]):
            kind = conventions.COMPRESS_RATIO_KINDS.get(ratio) if is_int(ratio) else None
            if kind is None:
                message = (
                    f"`compress_ratios[{layer}]` is {ratio!r}; DeepSeek-V4 knows 0 "
                    "(sliding-only), 4 (CSA) and 128 (HCA). Fix the entry, or state `layer_types` "
                    "and `compress_rates`"
                )
                raise ConfigError(message)
            kinds.append(kind)
        return tuple(kinds)

    def compress_rates(self, layer_kinds: Sequence[str]) -> tuple[tuple[str, int], ...]:
        """DeepSeek-V4's tokens per compressed entry, per compressed kind present."""
        names = self.family.layer_type_names
        present = [
            (name, kind)
            for name, kind in names.items()
            if name in conventions.LEGACY_COMPRESS_RATE_KEYS and kind in layer_kinds
        ]
        if not present:
            return ()
        _, stated = self.get("compress_rates")
        if not isinstance(stated, Mapping):
            message = f"`compress_rates` is {stated!r}, not a mapping of layer type to rate"
            raise ConfigError(message)
        rates = []
        for name, kind in present:
            # An older scalar key (`compress_rate_csa`) overrides, as in transformers.
            legacy = self.cfg.get(conventions.LEGACY_COMPRESS_RATE_KEYS[name])
            rate = legacy if legacy is not None else stated.get(name)
            if not is_int(rate) or rate < 1:
                message = (
                    f"the compression rate of `{name}` is {rate!r}, not a positive number of "
                    "tokens per compressed entry. Fix `compress_rates`"
                )
                raise ConfigError(message)
            rates.append((kind, rate))
        return tuple(rates)

    def _llama4_layer_kinds(self, n_layers: int) -> tuple[str, ...]:
        # Llama-4 configs without `layer_types`: the rotary layers (a 1 in `no_rope_layers`,
        # else all but every `no_rope_layer_interval`-th) attend within chunks of
        # `attention_chunk_size`, the NoPE layers globally; no chunk size means no chunking.
        _, flags = self.get("no_rope_layers")
        if flags:
            ropes = [bool(flag) for flag in self._per_layer_list(flags, "no_rope_layers", n_layers)]
        else:
            interval = self.optional_int("no_rope_layer_interval") or 4
            ropes = [(i + 1) % interval != 0 for i in range(n_layers)]
        chunked = self.get("attention_chunk_size")[1] is not None
        return tuple("chunked" if rope and chunked else "full" for rope in ropes)

    def _named_layer_kinds(
        self, layer_types: Any, n_layers: int, key: str = "layer_types"
    ) -> tuple[str, ...]:
        names = self._per_layer_list(layer_types, key, n_layers)
        kinds = []
        known_names = {
            **conventions.LAYER_TYPE_NAMES,
            **self.family.layer_type_names,
        }
        for layer, name in enumerate(names):
            kind = known_names.get(name) if isinstance(name, str) else None
            if kind is None:
                known = ", ".join(sorted(known_names))
                message = (
                    f"`{key}[{layer}]` is {name!r}, a layer kind interp-core does not "
                    f"know, so which points exist on that layer is unknown: known names are "
                    f"{known}. Fix the entry, or teach interp_core.facts the new kind"
                )
                raise ConfigError(message)
            kinds.append(kind)
        return tuple(kinds)

    def _per_layer_list(self, value: Any, key: str, n_layers: int) -> list[Any]:
        if isinstance(value, str) or not isinstance(value, Sequence):
            message = f"`{key}` is {value!r}, not a list: it needs one entry per layer. Fix `{key}`"
            raise ConfigError(message)
        if len(value) != n_layers:
            message = (
                f"`{key}` has {len(value)} entries but the {self.model_type} config has "
                f"{n_layers} layers: each layer needs exactly one. Fix `{key}` or "
                f"`num_hidden_layers`"
            )
            raise ConfigError(message)
        return list(value)


def _minimax_alternating(_reader: LayerKindReading, n_layers: int) -> tuple[str, ...]:
    # MiniMax's config class: softmax on even layers, lightning (linear) attention on odd ones.
    return tuple("full" if i % 2 == 0 else "linear_attention" for i in range(n_layers))


def _gemma4_sixth_global(_reader: LayerKindReading, n_layers: int) -> tuple[str, ...]:
    # Gemma4TextConfig: every 6th layer global, and the last one global whatever the pattern says.
    return tuple(
        "full" if (i + 1) % 6 == 0 or i == n_layers - 1 else "sliding" for i in range(n_layers)
    )


def _gemma2_alternating(_reader: LayerKindReading, n_layers: int) -> tuple[str, ...]:
    # Gemma-2 alternates, starting with a sliding layer.
    return tuple("sliding" if i % 2 == 0 else "full" for i in range(n_layers))


# `FamilyConventions.layer_pattern` -> how that family's config class lays out its layers.
_FIXED_PATTERNS: dict[str, Callable[[LayerKindReading, int], tuple[str, ...]]] = {
    "compress-ratios": LayerKindReading._deepseek_v4_layer_kinds,
    "llama4-nope": LayerKindReading._llama4_layer_kinds,
    "minimax-alternating": _minimax_alternating,
    "gemma4-sixth-global": _gemma4_sixth_global,
    "gemma2-alternating": _gemma2_alternating,
}

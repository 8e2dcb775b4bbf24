"""How is a `config.json` read into the fields of `ModelFacts`? Key by key, with its family's row.

Reading is literal where the config speaks and falls back, key by key, to what transformers'
config class for that `model_type` assumes when it does not (the row's `class_defaults`, in
`interp_core.family_conventions`). A key that is missing with no default, or present with a value
that cannot be right, is a `ConfigError` naming the key; nothing is guessed. The layer pattern,
the per-layer widths and the experts are read by the mixins this reader combines
(`interp_core.layer_kind_reading`, `.layer_widths`, `.expert_reading`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from interp_core.errors import ConfigError
from interp_core.expert_reading import ExpertReading, MoEFacts
from interp_core.fact_parts import COMPRESSED_LAYER_KINDS, AltUpFacts, MLAFacts
from interp_core.family_conventions import conventions_for
from interp_core.layer_kind_reading import LayerKindReading, is_int
from interp_core.layer_widths import LayerWidthReading

__all__ = ["read_fields"]

# --- reading a config -------------------------------------------------------------------------
_NOT_STATED = object()


def read_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `ModelFacts` fields a config states or its family implies, by name."""
    if not isinstance(config, Mapping):
        message = (
            f"a model config must be a mapping (the parsed `config.json`), not "
            f"{type(config).__name__}: `ModelFacts.from_config` reads keys from it. Pass "
            f"`json.load(open('config.json'))`, or `PretrainedConfig.to_dict()` for a live config"
        )
        raise ConfigError(message)
    reader = _Reader(config)

    n_layers = reader.layer_count()
    d_model = reader.positive_int("the residual width", "hidden_size", "n_embd", "d_model")
    n_heads = reader.n_heads()
    vocab_size = reader.positive_int("the vocabulary size", "vocab_size", "padded_vocab_size")
    mla = reader.mla()
    moe = reader.moe(n_layers)
    layer_kinds = reader.layer_kinds(n_layers)
    # Compressed layers slide too: their token keys are a window, beside the compressed entries.
    slides = bool({"sliding", "chunked", *COMPRESSED_LAYER_KINDS} & set(layer_kinds))
    model_type = reader.model_type
    family = reader.family
    n_kv_heads = reader.kv_heads(n_heads)
    head_dim = reader.head_dim(d_model, n_heads, mla)
    d_mlp = reader.d_mlp(d_model, n_layers, moe)
    overrides = reader.layer_overrides(n_layers)
    kv_sources = reader.kv_source_layers(layer_kinds)

    return dict(
        architecture=reader.architecture,
        model_type=model_type,
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        d_mlp=d_mlp,
        vocab_size=vocab_size,
        tied_embeddings=reader.tied_embeddings(),
        layer_kinds=layer_kinds,
        sliding_window=reader.sliding_window() if slides else None,
        moe=moe,
        mla=mla,
        qk_norm=reader.qk_norm(),
        sandwich_norms=family.sandwich_norms,
        parallel_attn_mlp=reader.parallel_attn_mlp(),
        gated_mlp=not family.ungated_mlp,
        biases=family.biases,
        learned_positions=family.learned_positions,
        gated_attn_output=bool(reader.get("attn_output_gate")[1]) or family.gated_attn_output,
        qkv_clip=reader.number("clip_qkv"),
        attn_logit_softcap=reader.number("attn_logit_softcapping"),
        final_logit_softcap=reader.number("final_logit_softcapping"),
        logit_multiplier=reader.logit_multiplier(),
        residual_multiplier=reader.number("residual_multiplier"),
        embedding_multiplier=reader.embedding_multiplier(d_model),
        n_streams=reader.n_streams(),
        compress_rates=reader.compress_rates(layer_kinds),
        index_topk=reader.positive_int("the indexer's top-k", "index_topk")
        if family.indexed_attention
        else None,
        altup=reader.altup(n_layers),
        layer_head_dims=reader.layer_head_dims(overrides, head_dim, n_layers),
        layer_kv_heads=reader.layer_kv_heads(overrides, n_kv_heads, n_heads, n_layers),
        layer_d_mlp=reader.layer_d_mlp(overrides, d_mlp, kv_sources, n_layers),
        kv_source_layers=kv_sources,
        per_layer_input_width=reader.per_layer_input_width(),
        max_position_embeddings=reader.optional_int(
            # Kimi Linear saves its context length as `model_max_length`.
            "max_position_embeddings",
            "n_positions",
            "max_sequence_length",
            "max_seq_len",
            "model_max_length",
        ),
        torch_dtype=reader.torch_dtype(),
        # A copy, so later edits to the caller's dict do not change facts already read.
        extras=dict(config),
    )


class _Reader(LayerKindReading, LayerWidthReading, ExpertReading):
    """Looks keys up in the text model's config, then in its family's class defaults."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.outer = config
        self.cfg = self._text_config(config)
        self.model_type = self._model_type()
        self.architecture = self._architecture()
        self.family = conventions_for(self.model_type)
        self.defaults = self.family.class_defaults
        for nested in self.family.nested_config_keys:
            inner = self.cfg.get(nested)
            if isinstance(inner, Mapping):
                # A key stated at the top wins (the nested ones carry an empty model_type).
                self.cfg = {**inner, **self.cfg}

    # --- lookups ---------------------------------------------------------------------------
    def get(self, *keys: str) -> tuple[str | None, Any]:
        """The first of `keys` the config states, with its value; `(None, None)` if none is.

        A key written as null counts as stated-as-absent: transformers passes the None to the
        config class, which derives the value itself, so the class default does not apply.
        """
        stated_null = False
        for key in keys:
            value = self.cfg.get(key, _NOT_STATED)
            if value is None:
                stated_null = True
            elif value is not _NOT_STATED:
                return key, value
        if not stated_null:
            for key in keys:
                if key in self.defaults:
                    return key, self.defaults[key]
        return None, None

    def positive_int(self, what: str, *keys: str) -> int:
        key, value = self.get(*keys)
        if key is None:
            tried = ", ".join(f"`{k}`" for k in keys)
            message = (
                f"the {self.model_type} config states {what} under none of {tried}: every model "
                f"needs it and no default stands in. Add `{keys[0]}` with the checkpoint's value"
            )
            raise ConfigError(message)
        return self._checked_int(key, value, what, minimum=1)

    def optional_int(self, *keys: str, minimum: int = 1) -> int | None:
        key, value = self.get(*keys)
        if key is None:
            return None
        return self._checked_int(key, value, "an integer", minimum=minimum)

    def number(self, key: str) -> float | None:
        _, value = self.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            message = (
                f"`{key}` is {value!r} in the {self.model_type} config, which is not a number: "
                f"it must be a number or null. Fix `{key}`"
            )
            raise ConfigError(message)
        return float(value)

    def _checked_int(self, key: str, value: Any, what: str, minimum: int) -> int:
        if not is_int(value) or value < minimum:
            bound = "a positive" if minimum == 1 else "a non-negative"
            message = (
                f"`{key}` is {value!r} in the {self.model_type} config, which cannot be {what}: "
                f"it must be {bound} integer. Fix `{key}`"
            )
            raise ConfigError(message)
        return value

    # --- identity ----------------------------------------------------------------------------
    @staticmethod
    def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
        nested = config.get("text_config")
        if nested is None:
            return config
        if not isinstance(nested, Mapping):
            message = (
                f"`text_config` is a {type(nested).__name__}, not a mapping: a multimodal "
                f"wrapper keeps its language model's keys there. Fix `text_config`, or pass the "
                f"text model's own mapping"
            )
            raise ConfigError(message)
        return nested

    def _model_type(self) -> str:
        # The text model's type decides every trait read below; the wrapper's is a fallback.
        for source in (self.cfg, self.outer):
            value = source.get("model_type")
            if isinstance(value, str) and value:
                return value
        message = (
            "the config has no `model_type`: it names the family whose conventions fill the "
            "keys a published config leaves out. Add the `model_type` the checkpoint was saved "
            "with (e.g. `llama`, `qwen3`)"
        )
        raise ConfigError(message)

    def _architecture(self) -> str:
        architectures = self.outer.get("architectures")
        if isinstance(architectures, Sequence) and not isinstance(architectures, str):
            if architectures and isinstance(architectures[0], str):
                return architectures[0]
        return self.model_type

    def torch_dtype(self) -> str | None:
        # Wrappers often state the dtype once, at the top.
        for source in (self.cfg, self.outer):
            for key in ("torch_dtype", "dtype"):
                value = source.get(key)
                if isinstance(value, str):
                    return value
        return None

    # --- attention ---------------------------------------------------------------------------
    def n_heads(self) -> int:
        keys = ("num_attention_heads", "n_head", "n_heads")
        if self.get(*keys)[0] is None and self.family.routed_attention:
            # JetMoE derives it: each of a token's routed experts brings one query per K/V head.
            kv = self.positive_int("the number of K/V heads", "num_key_value_heads")
            return kv * self.positive_int("how many experts each token uses", "num_experts_per_tok")
        return self.positive_int("the number of attention heads", *keys)

    def kv_heads(self, n_heads: int) -> int:
        key, value = self.get("num_key_value_heads")
        if key is None:
            if self.cfg.get("new_decoder_architecture"):
                # Falcon-40B style: grouped K/V, counted by `num_kv_heads`.
                key, value = self.get("num_kv_heads")
            elif self.cfg.get("multi_query"):
                # GPT-BigCode and Falcon-7B attend with one K/V head whatever else is stated.
                return 1
            else:
                key, value = self.get("num_kv_heads", "n_head_kv", "kv_n_heads")
        if key is None:
            return n_heads
        if not is_int(value) or value <= 0 or n_heads % value:
            message = (
                f"`{key}` is {value!r} in the {self.model_type} config: it must be a positive "
                f"integer dividing the {n_heads} attention heads, since each K/V head serves a "
                f"whole group of query heads. Fix `{key}`"
            )
            raise ConfigError(message)
        return value

    def head_dim(self, d_model: int, n_heads: int, mla: MLAFacts | None) -> int:
        if mla is not None:
            # MLA has no single head width; q and k are the nope and rope parts side by side.
            return mla.qk_head_dim
        head_dim = self.optional_int("head_dim", "kv_channels")  # JetMoE: kv_channels
        if head_dim is not None:
            return head_dim
        if d_model % n_heads:
            message = (
                f"the {self.model_type} config has no `head_dim` and its width {d_model} does "
                f"not split into {n_heads} equal heads, so the per-head width is unknown. Add "
                f"`head_dim`"
            )
            raise ConfigError(message)
        return d_model // n_heads

    def mla(self) -> MLAFacts | None:
        if self.get("kv_lora_rank")[0] is None:
            return None
        what = "a multi-head latent attention width"
        return MLAFacts(
            kv_lora_rank=self.positive_int(what, "kv_lora_rank"),
            qk_nope_head_dim=self.positive_int(what, "qk_nope_head_dim"),
            qk_rope_head_dim=self.positive_int(what, "qk_rope_head_dim"),
            v_head_dim=self.positive_int(what, "v_head_dim"),
            # Null on DeepSeek-V2-Lite: the query is projected directly, without a low rank.
            q_lora_rank=self.optional_int("q_lora_rank"),
        )

    def qk_norm(self) -> bool:
        if self.family.qk_norm_after_rope:
            # Llama-4 states `use_qk_norm`, but its norm follows rotary: no QK-norm points.
            return False
        for key in ("qk_layernorm", "use_qk_norm", "qk_norm"):
            found, value = self.get(key)
            if found is not None:
                return bool(value)
        return self.family.qk_norm

    def parallel_attn_mlp(self) -> bool:
        if self.family.parallel_with_new_decoder and self.get("new_decoder_architecture")[1]:
            # Falcon-40B's decoder is parallel whatever `parallel_attn` says.
            return True
        for key in ("use_parallel_residual", "parallel_attn"):
            found, value = self.get(key)
            if found is not None:
                return bool(value)
        return self.family.always_parallel or self.family.parallel_by_default

    # --- layer kinds -------------------------------------------------------------------------
    def sliding_window(self) -> int | None:
        return self.optional_int("sliding_window", "attention_chunk_size")

    # --- MLP ---------------------------------------------------------------------------------
    def d_mlp(self, d_model: int, n_layers: int, moe: MoEFacts | None) -> int:
        dense_beside = self.family.dense_beside_experts
        if moe is not None and len(moe.sparse_layers) == n_layers and not dense_beside:
            return 0
        if self.family.single_sublayer:
            if "mlp" not in (self.block_types()[1] or ()):
                return 0  # Nemotron-3: its MLP layers are all mixtures of experts
        # Llama-4 states its dense width apart: intermediate_size is one expert's there.
        keys: tuple[str, ...] = (
            "intermediate_size_mlp",
            "intermediate_size",
            "n_inner",
            "ffn_dim",
            "ffn_hidden_size",
        )
        own_key = self.family.dense_mlp_width_key
        if own_key is not None:
            keys = (own_key,)
        key, stated = self.get(*keys)
        if isinstance(stated, list) and self.family.altup:
            # Gemma-3n states one width per layer, the same on every published checkpoint;
            # differing widths are read only from Gemma-4's per_layer_config (layer_widths).
            if not stated or len(set(stated)) != 1:
                message = (
                    f"`{key}` is {stated!r}: per-layer MLP widths that differ are not read "
                    f"from a Gemma-3n list (every published Gemma-3n states one width). State "
                    f"one width for every layer"
                )
                raise ConfigError(message)
            return self._checked_int(key, stated[0], "the MLP width", minimum=1)
        if key is not None:
            width = self.positive_int("the MLP width", *keys)
            if self.get("block_auto_adjust_ff_dim")[1]:
                width = self._lfm2_width(width)
            return width
        if self.family.ungated_mlp:
            # GPT-2-era families leave the width null and build 4 * d_model.
            return 4 * d_model
        tried = ", ".join(f"`{k}`" for k in keys)
        message = (
            f"the {self.model_type} config states the MLP width under none of {tried}, and the "
            f"family has no default width. Add `{keys[0]}`"
        )
        raise ConfigError(message)

    def _lfm2_width(self, stated: int) -> int:
        # LFM2 builds its gated MLP Llama-style from the stated width: two thirds of it, times
        # `block_ffn_dim_multiplier` when set (and only then rounded up to `block_multiple_of`).
        width = int(2 * stated / 3)
        multiplier = self.number("block_ffn_dim_multiplier")
        if multiplier is not None:
            width = int(multiplier * width)
            multiple = self.optional_int("block_multiple_of") or 1
            width = multiple * ((width + multiple - 1) // multiple)
        return width

    def _layer_indices(self, key: str, n_layers: int) -> frozenset[int]:
        _, value = self.get(key)
        if value is None:
            return frozenset()
        if isinstance(value, str) or not isinstance(value, Sequence):
            message = f"`{key}` is {value!r}, not a list of layer indices. Fix `{key}`"
            raise ConfigError(message)
        for index in value:
            if not is_int(index) or not 0 <= index < n_layers:
                message = (
                    f"`{key}` names layer {index!r}, but this config's layers run "
                    f"0..{n_layers - 1}. Fix `{key}`"
                )
                raise ConfigError(message)
        return frozenset(value)

    # --- embeddings, logits, residual --------------------------------------------------------
    def tied_embeddings(self) -> bool:
        # Wrappers may state tying for the whole model at the top instead of in text_config.
        for source in (self.cfg, self.outer):
            value = source.get("tie_word_embeddings")
            if value is None:
                continue
            if not isinstance(value, bool):
                message = (
                    f"`tie_word_embeddings` is {value!r}, not true or false: it says whether "
                    f"the unembedding reuses the embedding matrix. Fix `tie_word_embeddings`"
                )
                raise ConfigError(message)
            return value
        return not self.family.untied_by_default

    def logit_multiplier(self) -> float | None:
        divisor = self.number("logits_scaling")
        if divisor is not None:
            # Granite divides the logits by `logits_scaling`.
            if divisor == 0:
                message = (
                    "`logits_scaling` is 0: Granite divides the logits by it, so it cannot be "
                    "zero. Fix `logits_scaling` (Granite-3 8B ships 16.0)"
                )
                raise ConfigError(message)
            return 1.0 / divisor
        for key in ("logit_scale", "lm_head_multiplier"):
            value = self.number(key)
            if value is not None:
                return value
        return None

    def embedding_multiplier(self, d_model: int) -> float | None:
        value = self.number("embedding_multiplier")
        if value is not None:
            return value
        if self.family.sqrt_embed_scale:
            return math.sqrt(d_model)
        return None

    def altup(self, n_layers: int) -> AltUpFacts | None:
        if not self.family.altup:
            return None
        active = self.optional_int("altup_active_idx", minimum=0) or 0
        if active >= self.n_streams():
            message = (
                f"`altup_active_idx` is {active}, but the trunk has {self.n_streams()} AltUp "
                f"streams (`altup_num_inputs`). Fix `altup_active_idx`"
            )
            raise ConfigError(message)
        return AltUpFacts(
            active_stream=active,
            laurel_rank=self.optional_int("laurel_rank"),
            activation_sparsity=self.activation_sparsity(n_layers),
        )

    def activation_sparsity(self, n_layers: int) -> tuple[float, ...]:
        _, pattern = self.get("activation_sparsity_pattern")
        if pattern is None:
            # The class default: 0.95 on the first 10 layers of a model deeper than 10.
            sparse = 10 if n_layers > 10 else 0
            return (0.95,) * sparse + (0.0,) * (n_layers - sparse)
        if isinstance(pattern, int | float) and not isinstance(pattern, bool):
            return (float(pattern),) * n_layers
        values = self._per_layer_list(pattern, "activation_sparsity_pattern", n_layers)
        if not all(isinstance(v, int | float) and 0 <= v < 1 for v in values):
            message = (
                f"`activation_sparsity_pattern` is {pattern!r}: each entry must be a number in "
                f"[0, 1). Fix `activation_sparsity_pattern`"
            )
            raise ConfigError(message)
        return tuple(float(v) for v in values)

    def n_streams(self) -> int:
        if self.family.altup:
            return self.optional_int("altup_num_inputs") or 1
        if self.get("mhc_enabled")[1] is False:
            return 1
        return self.optional_int("hc_mult", "mhc_expansion_rate") or 1

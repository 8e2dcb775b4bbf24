"""What is one family, as far as its config leaves it unsaid? One `FamilyConventions` row each.

`interp_core.facts_reading` reads a config literally where it speaks; a family's row holds only
what the config does not say for itself: the config class's defaults and the traits its
modelling code hard-wires. Wherever a config states a fact, the config wins. "What is Gemma-4?"
is `conventions_for("gemma4_text")`: one row, every trait. The trait tables the readers used to
keep (`QK_NORM_TYPES`, ...) are views derived from the rows, so a family is written once.
Plain data, standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "ALTUP_TYPES",
    "ALWAYS_PARALLEL_TYPES",
    "BIASED_TYPES",
    "CLASS_DEFAULTS",
    "COMPRESS_RATIO_KINDS",
    "DENSE_BESIDE_EXPERTS_TYPES",
    "DENSE_MLP_NAMES",
    "DENSE_MLP_WIDTH_KEYS",
    "FAMILY_ROWS",
    "GATED_ATTN_OUTPUT_TYPES",
    "GLOBAL_HEAD_TYPES",
    "INDEXED_ATTENTION_TYPES",
    "INLINE_SHARED_MLP_TYPES",
    "LAST_LAYER_FULL_TYPES",
    "LAYER_TYPE_NAMES",
    "LAYER_TYPE_NAMES_BY_FAMILY",
    "LEARNED_POSITION_TYPES",
    "LEGACY_COMPRESS_RATE_KEYS",
    "NESTED_CONFIG_KEYS",
    "NORMED_SKIP_TYPES",
    "PARALLEL_BY_DEFAULT",
    "PARALLEL_SSM_TYPES",
    "PER_LAYER_INPUT_TYPES",
    "POST_NORM_ONLY_TYPES",
    "QK_NORM_AFTER_ROPE_TYPES",
    "QK_NORM_TYPES",
    "ROUTED_ATTENTION_TYPES",
    "ROUTER_LOGITS_MODULES",
    "ROUTER_OUTPUT_LAYOUTS",
    "SANDWICH_NORM_TYPES",
    "SHARED_KEY_VALUE_TYPES",
    "SHARED_MLP_TYPES",
    "SINGLE_SUBLAYER_PATTERN_LETTERS",
    "SINGLE_SUBLAYER_TYPES",
    "SPARSE_MLP_NAMES",
    "SQRT_EMBED_SCALE_TYPES",
    "UNGATED_MLP_TYPES",
    "UNTIED_BY_DEFAULT",
    "VALUE_NORM_TYPES",
    "WINDOW_FROM_MAX_LAYERS_TYPES",
    "FamilyConventions",
    "MambaKeyedMixer",
    "conventions_for",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class MambaKeyedMixer:
    """A Mamba-2 mixer stated by `mamba_n_heads` / `mamba_d_state` / ... keys (Bamba, Falcon-H1):
    where its inner width comes from, whether its gated norm depends on a flag, and which key
    gives out_proj its bias. Read by the sizer."""

    inner_from_d_ssm: bool  # `mamba_d_ssm` (True) or `mamba_expand` x d_model
    norm_only_with_flag: bool  # the gated norm exists only with `mamba_rms_norm`
    out_bias_key: str


@dataclass(frozen=True)
class FamilyConventions:
    """What one `model_type` leaves unsaid in its config. Every trait defaults to "as Llama"."""

    model_type: str
    # What the transformers config class assumes for keys a published config may leave out. Only
    # families whose published configs actually omit them list any; everything else must state
    # its dimensions.
    class_defaults: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, hash=False)
    # `tie_word_embeddings` defaults to False when the config leaves it out (the config class's
    # own default); families without it inherit PretrainedConfig's True.
    untied_by_default: bool = False
    # Linear layers with biases and LayerNorms with a bias beside the gain (the GPT-2 era); the
    # others use bias-free linears and RMSNorm (a config's `attention_bias` adds q/k/v biases).
    biases: bool = False
    # A learned absolute position embedding added to the token embeddings (no rotary, no ALiBi).
    learned_positions: bool = False
    # A plain fc -> act -> proj MLP; every other family multiplies a gate into the up projection.
    ungated_mlp: bool = False
    # Attention and MLP read the same resid_pre in every layer, with no config switch to say so.
    always_parallel: bool = False
    # The parallel switch defaults to on when the config leaves it out.
    parallel_by_default: bool = False
    # Falcon-40B's `new_decoder_architecture` is parallel whatever `parallel_attn` says.
    parallel_with_new_decoder: bool = False
    # RMSNorm on the queries and keys before attention, with no config switch to say so.
    qk_norm: bool = False
    # A per-head norm on the queries and keys applied after rotary embedding (Hunyuan; Llama-4's
    # weightless L2 norm, whose `use_qk_norm` says only that it runs), where the QK-norm points
    # are defined before it: the norm exists, but not at those points.
    qk_norm_after_rope: bool = False
    # One shared MLP of `intermediate_size` beside the routed experts on every sparse layer, with
    # no config key to say so (Hunyuan-MoE's shared_mlp, Llama-4's shared_expert).
    shared_mlp: bool = False
    # A router whose output is not (logits, weights, indices) and whose experts module receives
    # no routing tensors, so the choices are read from the router's output, by its layout:
    # "scores-logits" (Llama-4): dense per-expert scores, zero off the top-k, then the logits
    # (the experts read inputs already scaled by the scores); "sorted" (JetMoE's ScatterMoE
    # gating): the token-expert pairs sorted by expert (order, token of each, weight of each,
    # tokens per expert), then the logits.
    router_output_layout: str | None = None
    # A router that returns probabilities instead of logits, with the child module whose output
    # is the raw logits (Gemma-4's router: norm, scale, `proj`, softmax, top-k).
    router_logits_module: str | None = None
    # How the router's choices are rebuilt from its logits where a kernel hides them (vLLM's
    # fused MoE): "softmax-topk" (renormalised when `norm_topk_prob`), the same always
    # renormalised ("softmax-topk-renormalized", Mixtral), or "topk-softmax" (top-k of the raw
    # logits, then a softmax over those k). None: no rebuild is verified for this router.
    router_rule: str | None = None
    # A mixture of attention heads (JetMoE): each token's routed experts bring their own query
    # and output projections, so attention head h is a different expert's head at each token.
    routed_attention: bool = False
    # Each layer is ONE sublayer behind one pre-norm and one residual add (Nemotron-H): a Mamba-2
    # mixer, softmax attention, a dense MLP or a mixture of experts, as the per-layer block list
    # (`layers_block_type`, or the older `hybrid_override_pattern` string) names it. No layer
    # has both a mixer and an MLP, and none has a second residual add.
    single_sublayer: bool = False
    # Sparse layers sum the routed experts and a shared MLP inline in the decoder block
    # (Granite-4.0-H: `block_sparse_moe(x) + shared_mlp(x)`), so no module returns the MLP's
    # output.
    inline_shared_mlp: bool = False
    # The key holding the dense MLP's width where it is not `intermediate_size`: Granite-4.0-H's
    # dense members build only `shared_mlp`, of `shared_intermediate_size`, and leave
    # `intermediate_size` (the routed experts' width) at a value no layer uses.
    dense_mlp_width_key: str | None = None
    # Norms on the sublayer outputs, inside the residual branch; `post_norms_only`: with no norm
    # before attention or the MLP (OLMo-2/3, EXAONE-4, FlexOlmo).
    sandwich_norms: bool = False
    post_norms_only: bool = False
    # The embedding output is multiplied by sqrt(d_model).
    sqrt_embed_scale: bool = False
    # How q.k is scaled where it is not by head_dim ** -0.5: "query_pre_attn_scalar" (Gemma,
    # VaultGemma, when the config states it), "attention_multiplier" (Granite), "gpt2-divide"
    # (divided by sqrt(head_dim), and by layer + 1 with `scale_attn_by_inverse_layer_idx`).
    score_scale: str | None = None
    # ALiBi position bias: "slopes" (BLOOM's slopes, added to the scores) or "variant" (MPT's,
    # which a rebuild from q and k does not reproduce). Other families' `alibi` config switch
    # also means a variant.
    alibi: str | None = None
    # The MLP's GELU is the tanh approximation the model was trained with (BLOOM), where an
    # engine may compute it exactly.
    tanh_gelu_mlp: bool = False
    # Full-attention layers with their own head width (`global_head_dim`) and, where keys double
    # as values, their own K/V head count (Gemma-4); read by `interp_core.layer_widths`.
    global_heads: bool = False
    # The config class makes the last layer full attention even when `layer_types` says
    # otherwise (Gemma-4).
    last_layer_full: bool = False
    # How the layer pattern is read when the config states no `layer_types`, where the family's
    # config class fixes it (`interp_core.layer_kind_reading`): "compress-ratios" (DeepSeek-V4),
    # "llama4-nope", "minimax-alternating", "gemma4-sixth-global", "gemma2-alternating".
    layer_pattern: str | None = None
    # A per-layer input (a slice of a per-token table plus a projection of the embedding) gated
    # by each block's output and added to the residual after the MLP (Gemma-4; Gemma-3n adds it
    # to the AltUp streams other than the active one).
    per_layer_inputs: bool = False
    # Routed experts beside a dense MLP in the same layer, each read through its own norm from
    # resid_mid and the two outputs normed and summed inside the block (Gemma-4): the dense
    # MLP's neurons exist on every layer, but no module returns the sum, and no single tensor is
    # the input.
    dense_beside_experts: bool = False
    # Values normalised after their projection (Gemma-3n's and Gemma-4's weightless v_norm): the
    # value point is the norm's output, which attention mixes, not v_proj's.
    value_norm: bool = False
    # An output gate multiplies the attention result before o_proj.
    gated_attn_output: bool = False
    # DeepSeek Sparse Attention: a lightning indexer scores every visible key and each query
    # attends only to the `index_topk` best (DeepSeek-V3.2), on every layer.
    indexed_attention: bool = False
    # Attention whose keys and values are one projected tensor (K = V): no value projection.
    shared_key_value: bool = False
    # AltUp trunks (Gemma-3n): `altup_num_inputs` residual streams, predicted and corrected
    # around each block, with attention and MLP on the active one; LAuReL beside attention,
    # per-layer inputs, KV sharing and activation sparsity come with them.
    altup: bool = False
    # A Mamba-2 mixer beside the attention in every layer, reading the same normed input, the
    # two outputs scaled and summed inside the block before the residual add (Falcon-H1).
    parallel_ssm: bool = False
    # A Mamba-2 mixer laid out by its own `mamba_*` keys (Bamba, Falcon-H1), for the sizer.
    mamba_keyed_mixer: MambaKeyedMixer | None = None
    # Slides only from `max_window_layers` on, and only with `use_sliding_window`; every other
    # family that states a window slides on every layer (Mistral, Phi-3, Starcoder2).
    window_from_max_layers: bool = False
    # Blocks whose skip path carries the sublayer's normed input rather than the residual: each
    # sublayer leaves alpha * norm(x) + beta * sublayer(norm(x)) (MiniMax, DeepNorm-style
    # factors per mixer kind and for the MLP), so no state is "the residual plus a write".
    normed_skip: bool = False
    # Sub-mappings whose keys are read as if stated at the top (DBRX keeps its attention and MoE
    # settings in `attn_config` and `ffn_config`).
    nested_config_keys: tuple[str, ...] = ()
    # Where the family's `layer_types` names mean something narrower than LAYER_TYPE_NAMES says
    # (transformers 5 spells Granite-4.0-H's and Nemotron-H's Mamba-2 layers `linear_attention`;
    # Nemotron-H names its two mixerless kinds; DeepSeek-V4's compressed kinds).
    layer_type_names: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False)
    # How a fused q|k|v projection splits where a config flag decides it: "falcon-flags" (per K/V
    # group with `new_decoder_architecture`, [q | k | v] with `multi_query`, else per head;
    # Falcon), "thirds-only-multi-query" ([q | k | v] only with `multi_query`, else per head;
    # GPT-BigCode). Other fused projections are split by their module's name.
    fused_qkv_split: str | None = None
    # The eager backend's FP8 path runs through a hub kernel built for one GPU generation
    # (DeepSeek-V4's deep-gemm), refused before a load whose first forward would die in it.
    fp8_hub_kernel: bool = False


def _row(model_type: str, **traits: Any) -> FamilyConventions:
    for name in ("class_defaults", "layer_type_names"):
        if name in traits:
            traits[name] = MappingProxyType(dict(traits[name]))
    return FamilyConventions(model_type, **traits)


# One row per model_type the engine knows; a family absent here has every trait at its default.
FAMILY_ROWS: Mapping[str, FamilyConventions] = MappingProxyType(
    {
        row.model_type: row
        for row in (
            _row("apertus", untied_by_default=True, ungated_mlp=True, qk_norm=True),
            _row("arcee", untied_by_default=True, ungated_mlp=True),
            _row(
                "bamba",
                untied_by_default=True,
                mamba_keyed_mixer=MambaKeyedMixer(
                    inner_from_d_ssm=False,
                    norm_only_with_flag=False,
                    out_bias_key="mamba_proj_bias",
                ),
            ),
            _row("bloom", biases=True, ungated_mlp=True, alibi="slopes", tanh_gelu_mlp=True),
            _row(
                "codegen",
                untied_by_default=True,
                biases=True,
                learned_positions=True,
                ungated_mlp=True,
                always_parallel=True,
            ),
            _row("cohere", always_parallel=True),
            _row("cohere2", always_parallel=True),
            _row("cohere2_moe", always_parallel=True),
            _row("dbrx", untied_by_default=True, nested_config_keys=("attn_config", "ffn_config")),
            _row("deepseek_v2", untied_by_default=True),
            _row("deepseek_v3", untied_by_default=True),
            _row(
                "deepseek_v32",
                untied_by_default=True,
                indexed_attention=True,
                class_defaults={"index_topk": 2048},
            ),
            _row(
                "deepseek_v4",
                shared_key_value=True,
                class_defaults={
                    "compress_rates": {
                        "compressed_sparse_attention": 4,
                        "heavily_compressed_attention": 128,
                    }
                },
                layer_type_names={
                    "compressed_sparse_attention": "compressed_sparse",
                    "heavily_compressed_attention": "heavily_compressed",
                },
                layer_pattern="compress-ratios",
                fp8_hub_kernel=True,
            ),
            _row("dots1", untied_by_default=True, qk_norm=True),
            _row("ernie4_5"),
            _row("ernie4_5_moe"),
            _row(
                "exaone4",
                untied_by_default=True,
                qk_norm=True,
                sandwich_norms=True,
                post_norms_only=True,
            ),
            _row(
                "falcon",
                biases=True,
                ungated_mlp=True,
                parallel_by_default=True,
                parallel_with_new_decoder=True,
                fused_qkv_split="falcon-flags",
            ),
            _row(
                "falcon_h1",
                untied_by_default=True,
                parallel_ssm=True,
                mamba_keyed_mixer=MambaKeyedMixer(
                    inner_from_d_ssm=True, norm_only_with_flag=True, out_bias_key="projectors_bias"
                ),
            ),
            _row(
                "flex_olmo",
                untied_by_default=True,
                qk_norm=True,
                sandwich_norms=True,
                post_norms_only=True,
            ),
            _row("gemma", sqrt_embed_scale=True, score_scale="query_pre_attn_scalar"),
            _row(
                "gemma2",
                sandwich_norms=True,
                sqrt_embed_scale=True,
                class_defaults={
                    "head_dim": 256,
                    "sliding_window": 4096,
                    "attn_logit_softcapping": 50.0,
                    "final_logit_softcapping": 30.0,
                },
                layer_pattern="gemma2-alternating",
                score_scale="query_pre_attn_scalar",
            ),
            _row(
                "gemma3",
                qk_norm=True,
                sandwich_norms=True,
                sqrt_embed_scale=True,
                score_scale="query_pre_attn_scalar",
            ),
            _row(
                "gemma3_text",
                qk_norm=True,
                sandwich_norms=True,
                sqrt_embed_scale=True,
                class_defaults={
                    "vocab_size": 262208,
                    "hidden_size": 2304,
                    "intermediate_size": 9216,
                    "num_hidden_layers": 26,
                    "num_attention_heads": 8,
                    "num_key_value_heads": 4,
                    "head_dim": 256,
                    "max_position_embeddings": 131072,
                    "sliding_window": 4096,
                    "sliding_window_pattern": 6,
                },
                score_scale="query_pre_attn_scalar",
            ),
            _row(
                "gemma3n_text",
                qk_norm=True,
                sandwich_norms=True,
                sqrt_embed_scale=True,
                per_layer_inputs=True,
                value_norm=True,
                altup=True,
                class_defaults={
                    "head_dim": 256,
                    "sliding_window": 512,
                    "final_logit_softcapping": 30.0,
                    "altup_num_inputs": 4,
                    "altup_active_idx": 0,
                    "num_kv_shared_layers": 15,
                    "laurel_rank": 64,
                },
                score_scale="query_pre_attn_scalar",
            ),
            _row(
                "gemma4_text",
                qk_norm=True,
                sandwich_norms=True,
                sqrt_embed_scale=True,
                global_heads=True,
                last_layer_full=True,
                per_layer_inputs=True,
                dense_beside_experts=True,
                value_norm=True,
                class_defaults={
                    "head_dim": 256,
                    "global_head_dim": 512,
                    "sliding_window": 512,
                    "hidden_size_per_layer_input": 256,
                    "num_kv_shared_layers": 0,
                    "attention_k_eq_v": False,
                    "enable_moe_block": False,
                    "use_double_wide_mlp": False,
                },
                router_logits_module="proj",
                layer_pattern="gemma4-sixth-global",
                score_scale="query_pre_attn_scalar",
            ),
            _row("glm", untied_by_default=True),
            _row("glm4", untied_by_default=True, sandwich_norms=True),
            _row("glm4_moe", untied_by_default=True),
            _row(
                "gpt2",
                biases=True,
                learned_positions=True,
                ungated_mlp=True,
                score_scale="gpt2-divide",
            ),
            _row(
                "gpt_bigcode",
                fused_qkv_split="thirds-only-multi-query",
                biases=True,
                learned_positions=True,
                ungated_mlp=True,
            ),
            _row("gpt_neo", biases=True, learned_positions=True, ungated_mlp=True),
            _row(
                "gpt_neox",
                untied_by_default=True,
                biases=True,
                ungated_mlp=True,
                parallel_by_default=True,
            ),
            _row(
                "gpt_oss",
                untied_by_default=True,
                class_defaults={"sliding_window": 128},
                router_rule="topk-softmax",
            ),
            _row(
                "gptj", untied_by_default=True, biases=True, ungated_mlp=True, always_parallel=True
            ),
            _row("granite", untied_by_default=True, score_scale="attention_multiplier"),
            _row(
                "granitemoe",
                untied_by_default=True,
                router_rule="topk-softmax",
                score_scale="attention_multiplier",
            ),
            _row(
                "granitemoehybrid",
                untied_by_default=True,
                inline_shared_mlp=True,
                dense_mlp_width_key="shared_intermediate_size",
                layer_type_names={"linear_attention": "mamba"},
                score_scale="attention_multiplier",
            ),
            _row(
                "granitemoeshared", router_rule="topk-softmax", score_scale="attention_multiplier"
            ),
            _row("helium", untied_by_default=True),
            _row("hunyuan_v1_dense", untied_by_default=True, qk_norm_after_rope=True),
            _row(
                "hunyuan_v1_moe", untied_by_default=True, qk_norm_after_rope=True, shared_mlp=True
            ),
            _row("jamba", untied_by_default=True),
            _row("jetmoe", routed_attention=True, router_output_layout="sorted"),
            _row("kimi_linear", untied_by_default=True),
            _row("lfm2", qk_norm=True),
            _row("llama", untied_by_default=True),
            _row(
                "llama4_text",
                untied_by_default=True,
                qk_norm_after_rope=True,
                shared_mlp=True,
                router_output_layout="scores-logits",
                layer_pattern="llama4-nope",
            ),
            _row(
                "minimax",
                untied_by_default=True,
                normed_skip=True,
                layer_pattern="minimax-alternating",
            ),
            _row("ministral", untied_by_default=True),
            _row("ministral3", untied_by_default=True),
            _row("mistral", untied_by_default=True),
            _row("mixtral", untied_by_default=True, router_rule="softmax-topk-renormalized"),
            _row("mpt", ungated_mlp=True, alibi="variant"),
            _row("nemotron", untied_by_default=True, ungated_mlp=True),
            _row(
                "nemotron_h",
                untied_by_default=True,
                ungated_mlp=True,
                single_sublayer=True,
                layer_type_names={"linear_attention": "mamba", "mlp": "mlp", "moe": "mlp"},
            ),
            _row("olmo"),
            _row(
                "olmo2",
                untied_by_default=True,
                qk_norm=True,
                sandwich_norms=True,
                post_norms_only=True,
            ),
            _row(
                "olmo3",
                untied_by_default=True,
                qk_norm=True,
                sandwich_norms=True,
                post_norms_only=True,
            ),
            _row("olmoe", qk_norm=True, router_rule="softmax-topk"),
            _row("opt", biases=True, learned_positions=True, ungated_mlp=True),
            _row("persimmon", ungated_mlp=True),
            _row(
                "phi", untied_by_default=True, biases=True, ungated_mlp=True, always_parallel=True
            ),
            _row("phi3", untied_by_default=True),
            _row("phimoe", untied_by_default=True),
            _row("qwen2", untied_by_default=True, window_from_max_layers=True),
            _row(
                "qwen2_moe",
                untied_by_default=True,
                window_from_max_layers=True,
                router_rule="softmax-topk",
            ),
            _row("qwen3", untied_by_default=True, qk_norm=True, window_from_max_layers=True),
            _row("qwen3_5_moe_text", untied_by_default=True, qk_norm=True, gated_attn_output=True),
            _row("qwen3_5_text", untied_by_default=True, qk_norm=True, gated_attn_output=True),
            _row(
                "qwen3_moe",
                untied_by_default=True,
                qk_norm=True,
                window_from_max_layers=True,
                router_rule="softmax-topk",
            ),
            _row(
                "qwen3_next",
                untied_by_default=True,
                qk_norm=True,
                gated_attn_output=True,
                class_defaults={"full_attention_interval": 4},
                router_rule="softmax-topk",
            ),
            _row("seed_oss", untied_by_default=True),
            _row("smollm3"),
            _row("stablelm"),
            _row("starcoder2", biases=True, ungated_mlp=True),
            _row("vaultgemma", sqrt_embed_scale=True, score_scale="query_pre_attn_scalar"),
        )
    }
)


def conventions_for(model_type: str) -> FamilyConventions:
    """The row of `model_type`; a family without one has every trait at its default."""
    row = FAMILY_ROWS.get(model_type)
    return row if row is not None else FamilyConventions(model_type)


# --- derived views: the trait tables, computed from the rows ------------------------------------


def _with(trait: str) -> frozenset[str]:
    return frozenset(t for t, row in FAMILY_ROWS.items() if getattr(row, trait))


def _by_family(trait: str) -> Mapping[str, Any]:
    return MappingProxyType(
        {t: getattr(r, trait) for t, r in FAMILY_ROWS.items() if getattr(r, trait)}
    )


CLASS_DEFAULTS = _by_family("class_defaults")
UNTIED_BY_DEFAULT = _with("untied_by_default")
BIASED_TYPES = _with("biases")
LEARNED_POSITION_TYPES = _with("learned_positions")
UNGATED_MLP_TYPES = _with("ungated_mlp")
ALWAYS_PARALLEL_TYPES = _with("always_parallel")
PARALLEL_BY_DEFAULT = _with("parallel_by_default")
QK_NORM_TYPES = _with("qk_norm")
QK_NORM_AFTER_ROPE_TYPES = _with("qk_norm_after_rope")
SHARED_MLP_TYPES = _with("shared_mlp")
ROUTER_OUTPUT_LAYOUTS = _by_family("router_output_layout")
ROUTED_ATTENTION_TYPES = _with("routed_attention")
SINGLE_SUBLAYER_TYPES = _with("single_sublayer")
INLINE_SHARED_MLP_TYPES = _with("inline_shared_mlp")
DENSE_MLP_WIDTH_KEYS = _by_family("dense_mlp_width_key")
SANDWICH_NORM_TYPES = _with("sandwich_norms")
POST_NORM_ONLY_TYPES = _with("post_norms_only")
SQRT_EMBED_SCALE_TYPES = _with("sqrt_embed_scale")
GLOBAL_HEAD_TYPES = _with("global_heads")
LAST_LAYER_FULL_TYPES = _with("last_layer_full")
PER_LAYER_INPUT_TYPES = _with("per_layer_inputs")
DENSE_BESIDE_EXPERTS_TYPES = _with("dense_beside_experts")
VALUE_NORM_TYPES = _with("value_norm")
ROUTER_LOGITS_MODULES = _by_family("router_logits_module")
GATED_ATTN_OUTPUT_TYPES = _with("gated_attn_output")
INDEXED_ATTENTION_TYPES = _with("indexed_attention")
SHARED_KEY_VALUE_TYPES = _with("shared_key_value")
ALTUP_TYPES = _with("altup")
PARALLEL_SSM_TYPES = _with("parallel_ssm")
WINDOW_FROM_MAX_LAYERS_TYPES = _with("window_from_max_layers")
NORMED_SKIP_TYPES = _with("normed_skip")
NESTED_CONFIG_KEYS = _by_family("nested_config_keys")
LAYER_TYPE_NAMES_BY_FAMILY = _by_family("layer_type_names")


# --- the config vocabulary: names configs use, whatever the family -------------------------------
# The letters of Nemotron-H's `hybrid_override_pattern`, as the block-list names they stand for.
SINGLE_SUBLAYER_PATTERN_LETTERS: dict[str, str] = {
    "M": "linear_attention",
    "*": "full_attention",
    "-": "mlp",
    "E": "moe",
}

# Names configs use in `layer_types`, mapped to LAYER_KINDS.
LAYER_TYPE_NAMES: dict[str, str] = {
    "full_attention": "full",
    "attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    # DeepSeek-V3.2's sparse attention: causal softmax attention over the keys its lightning
    # indexer keeps (`ModelFacts.index_topk` of them); the cache holds every token, as "full".
    "indexed_attention": "full",
    "linear_attention": "linear_attention",
    "recurrent": "recurrent",
    "mamba": "mamba",
    "mamba2": "mamba",
    "conv": "conv",
    "short_conv": "conv",
}

# DeepSeek-V4's per-layer `compress_ratios` (published configs), read by value as transformers
# reads them; and the older scalar key that overrides each compressed kind's rate.
COMPRESS_RATIO_KINDS = {0: "sliding", 4: "compressed_sparse", 128: "heavily_compressed"}
LEGACY_COMPRESS_RATE_KEYS = {
    "compressed_sparse_attention": "compress_rate_csa",
    "heavily_compressed_attention": "compress_rate_hca",
}

# Names configs use in `mlp_layer_types`.
SPARSE_MLP_NAMES = frozenset({"sparse", "moe", "hash_moe"})
DENSE_MLP_NAMES = frozenset({"dense", "mlp"})

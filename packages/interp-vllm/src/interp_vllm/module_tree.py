"""Where are a vLLM model's decoder layers, attention, MLP, norms and router?

Found by attribute names (the vocabularies below, across vLLM's native models and its
Transformers modeling backend) and forward signatures, not by per-model tables; `parts_of`
collects one decoder layer's modules into `Parts`. vLLM's Transformers modeling backend calls
its attention kernel's `forward` directly, bypassing hooks, so `hookable_kernel` installs a
hookable stand-in there (`KernelCall`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from interp_core.facts import ModelFacts
from interp_vllm.site_kinds import Arg

__all__ = [
    "BEFORE_LAYER_0",
    "FINAL_NORMS",
    "TOKEN_EMBEDDINGS",
    "KernelCall",
    "Parts",
    "arg_named",
    "defers_residual",
    "find_module",
    "first_arg",
    "hookable_kernel",
    "is_transformers_backend",
    "parts_of",
]


def find_module(node: Any, *paths: str) -> Any:
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


def arg_named(module: torch.nn.Module, name: str, fallback: int) -> Arg:
    """Where `module.forward` takes `name`: its positional index, read off the signature."""
    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return Arg(fallback, name)
    if name in params:
        return Arg(params.index(name), name)
    return Arg(fallback, name)


def first_arg(module: torch.nn.Module) -> Arg:
    """A module's first parameter (the hidden states of an MLP, norm or projection)."""
    try:
        params = [
            p
            for p in inspect.signature(module.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return Arg(0, params[0].name if params else "hidden_states")


def _takes(module: torch.nn.Module, name: str) -> bool:
    try:
        return name in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return False


def defers_residual(layer: torch.nn.Module) -> bool:
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


TOKEN_EMBEDDINGS = ("embed_tokens", "wte", "word_embeddings", "embed_in")
# Anything the trunk adds to the token embeddings before layer 0: then layer 0's input is not the
# embeddings point and the embedding module's own output must be read instead.
BEFORE_LAYER_0 = ("wpe", "embed_positions", "word_embeddings_layernorm", "embed_layer_norm")
FINAL_NORMS = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "norm_f")
# The token mixer, whatever its kind: Granite-4.0-H's Mamba-2 layers hold `mamba`, whose input
# and output are attn_in / attn_out (the registry keeps the attention-only points off them).
_ATTENTIONS = ("self_attn", "attn", "attention", "self_attention", "linear_attn", "mixer", "mamba")
_O_PROJS = ("o_proj", "c_proj", "dense", "out_proj")
# Granite-4.0-H's dense members hold only `shared_mlp`, [gate | up] fused in `input_linear`.
_MLPS = ("mlp", "block_sparse_moe", "feed_forward", "shared_mlp")
_GATE_UPS = ("gate_up_proj", "input_linear")
_PLAIN_UPS = ("c_fc", "fc1", "fc_in", "dense_h_to_4h", "up_proj")
_DOWNS = ("down_proj", "c_proj", "fc2", "fc_out", "dense_4h_to_h", "output_linear")
_PRE_MLP_NORMS = (
    "post_attention_layernorm",
    "ln_2",
    "ln_mlp",
    "final_layer_norm",
    "pre_ff_layernorm",  # Falcon-H1
)
# OPT inlines its MLP into the layer: fc1, activation, fc2, with no module around them.
_INLINE_UP, _INLINE_DOWN = "fc1", "fc2"


@dataclass
class Parts:
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


def parts_of(
    layer: torch.nn.Module, facts: ModelFacts, kernel_of: Any, index: int | None = None
) -> Parts:
    attn = find_module(layer, *_ATTENTIONS)
    mlp = find_module(layer, *_MLPS)
    if facts.single_sublayer and index is not None:
        # Nemotron-H: the layer's one module, `mixer`, is its token mixer or, on the layers the
        # facts call "mlp", its MLP or experts.
        single = find_module(layer, "mixer")
        attn, mlp = (single, None) if facts.has_mixer(index) else (None, single)
    inline = mlp is None and find_module(layer, _INLINE_UP) is not None
    experts = find_module(mlp, "experts")
    router = find_module(mlp, "gate", "router") if experts is not None else None
    gate_up = find_module(mlp, *_GATE_UPS)
    sandwich = facts.sandwich_norms
    pre_mlp = find_module(layer, "pre_feedforward_layernorm")
    if pre_mlp is None and not sandwich and not facts.parallel_attn_mlp:
        pre_mlp = find_module(layer, *_PRE_MLP_NORMS)
    return Parts(
        block=layer,
        fused_residual=defers_residual(layer),
        attn=attn,
        kernel=kernel_of(attn),
        o_proj=find_module(attn, *_O_PROJS),
        q_norm=find_module(attn, "q_norm", "q_layernorm"),
        k_norm=find_module(attn, "k_norm", "k_layernorm"),
        mlp=mlp,
        mlp_entry=find_module(layer, _INLINE_UP) if inline else mlp,
        mlp_exit=find_module(layer, _INLINE_DOWN) if inline else mlp,
        gate_up=gate_up,
        up=(
            find_module(layer, _INLINE_UP)
            if inline
            else None
            if gate_up is not None or experts is not None
            else find_module(mlp, *_PLAIN_UPS)
        ),
        down=(
            find_module(layer, _INLINE_DOWN)
            if inline
            else None
            if experts is not None
            else find_module(mlp, *_DOWNS)
        ),
        router=router,
        router_fused=bool(getattr(experts, "_fse_fuse_gate", False)),
        post_attn_norm=find_module(layer, "post_attention_layernorm") if sandwich else None,
        pre_mlp_norm=pre_mlp,
        post_mlp_norm=find_module(layer, "post_feedforward_layernorm") if sandwich else None,
    )


# --- attention kernels ---------------------------------------------------------------------------
class KernelCall(torch.nn.Module):
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


def hookable_kernel(kernel: torch.nn.Module | None) -> torch.nn.Module | None:
    """`kernel` itself where vLLM calls it as a module, else its (idempotent) `KernelCall`."""
    if kernel is None:
        return None
    shadow = kernel.__dict__.get("forward")
    if isinstance(shadow, KernelCall):
        return shadow
    shadow = KernelCall(kernel)
    object.__setattr__(kernel, "forward", shadow)
    return shadow


def is_transformers_backend(model: torch.nn.Module) -> bool:
    return ".models.transformers" in type(model).__module__

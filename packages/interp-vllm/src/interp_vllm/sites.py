"""Where does each standardized point live in vLLM's module tree, family by family?

`resolve_sites(model, config)` walks a loaded vLLM `*ForCausalLM` and returns a `Resolution`: for
every (point, layer) it can serve, a `Site` naming the module to hook, the side (forward pre-hook
or forward hook), how to read the point out of what the hook sees as a flat `[num_tokens, ...]`
tensor, and how to add a delta so that every later computation sees `read() + delta`; for every
point the family has but vLLM cannot give, a one-sentence reason. It runs inside vLLM's worker
process and relies on module attribute names and forward signatures, not on vLLM internals.
What vLLM serves per family, and how closely each was checked, is `interp_vllm.support`; the
site kinds are `interp_vllm.site_kinds`, the module lookups `interp_vllm.module_tree`, the router
rules `interp_vllm.routing`.

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
  `resolve_sites` installs a hookable stand-in there (`module_tree.KernelCall`).

Tensor parallelism: everything here assumes tensor_parallel_size 1. At TP>1 the d_model points
(and router_logits, from a replicated gate) are whole on every rank, but `z`, `value`,
`attn_gate`, `q_norm_*`/`k_norm_*`, `_q_rot`/`_k_rot`/`_sinks`, `mlp_pre`, `mlp_pre_linear` and
`mlp_act` are head- or neuron-sharded per rank and `lm_head` is vocab-sharded (its weight here
is the rank's shard); the caller must refuse or gather those.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from interp_core.facts import ModelFacts
from interp_core.points import absence_reason, point_names
from interp_vllm.attention import scaling_for
from interp_vllm.attention import unsupported_reason as attention_unsupported
from interp_vllm.module_tree import (
    BEFORE_LAYER_0,
    FINAL_NORMS,
    TOKEN_EMBEDDINGS,
    KernelCall,
    Parts,
    arg_named,
    find_module,
    first_arg,
    hookable_kernel,
    is_transformers_backend,
    parts_of,
)
from interp_vllm.routing import routing_rule
from interp_vllm.site_kinds import (
    NORM_RESIDUAL,
    NORM_X,
    Arg,
    Reader,
    Site,
    as_rows,
    columns_site,
    index_site,
    input_site,
    output_site,
    output_tensor,
    read_only,
    sum_input_site,
    sum_output_site,
)
from interp_vllm.support import RECOMPUTED

__all__ = ["Resolution", "Site", "resolve_sites"]


@dataclass(frozen=True)
class Resolution:
    """Every site vLLM serves on this model, and why the rest of the family's points are not."""

    sites: dict[tuple[str, int | None], Site]
    refused: dict[str, str] = field(default_factory=dict)


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
    `KernelCall` shadow that makes the kernel's inputs hookable (see its docstring).
    """
    facts = ModelFacts.from_config(config)
    shadow = is_transformers_backend(model)
    build = _Builder(facts, dict(config), batched=shadow)
    trunk = find_module(model, "model.decoder", "model", "transformer", "gpt_neox")
    layers = find_module(trunk, "layers", "h")
    if trunk is None or layers is None or len(layers) != facts.n_layers:
        why = (
            f"vLLM's {type(model).__name__} has no decoder-layer list of {facts.n_layers} layers "
            "where interp-vllm looks for one, so no point can be placed on it"
        )
        for name in point_names():
            build.refuse(name, why)
        return Resolution({}, build.refused)

    def kernel_of(attn: Any) -> Any:
        kernel = find_module(attn, "attn")
        if kernel is None or kernel is attn:
            return None
        return hookable_kernel(kernel) if shadow else kernel

    routing = routing_rule(facts, build.config) if facts.moe is not None else None
    for index, layer in enumerate(layers):
        if absent(layer):  # another pipeline stage's layer
            continue
        _layer_sites(build, index, parts_of(layer, facts, kernel_of, index), routing)
    _trunk_sites(build, model, trunk, layers)
    _refuse_the_rest(build)
    return Resolution(build.sites, build.refused)


def absent(module: Any) -> bool:
    """Under pipeline parallelism vLLM puts a stand-in (`PPMissingLayer`, an identity) where a
    module lives on another stage: no site can be placed there. By name, so this module stays
    importable without vLLM."""
    return type(module).__name__ in ("PPMissingLayer", "StageMissingLayer")


def _trunk_sites(build: _Builder, model: Any, trunk: Any, layers: Any) -> None:
    b = build.batched
    embed = find_module(trunk, *TOKEN_EMBEDDINGS)
    if absent(embed) or absent(layers[0]):
        pass  # a later pipeline stage: the embeddings live on the first
    elif any(find_module(trunk, name) is not None for name in BEFORE_LAYER_0):
        # Learned positions or an embedding norm come between the table and layer 0.
        build.put("embeddings", None, output_site(embed, batched=b) if embed is not None else None)
    else:
        # Layer 0's input is the embeddings after any multiplier the trunk applies outside the
        # embedding module (Gemma's sqrt(d_model), Granite's embedding_multiplier, in place).
        first = layers[0]
        build.put(
            "embeddings", None, input_site(first, arg_named(first, "hidden_states", 0), batched=b)
        )
    norm = find_module(trunk, *FINAL_NORMS)
    # An earlier pipeline stage: the final norm that runs is the last stage's (some families
    # build the module on every stage and leave it idle on all but the last).
    if norm is None or absent(norm) or absent(layers[-1]):
        return
    build.put("final_norm", None, output_site(norm, batched=b))
    head = find_module(model, "lm_head")
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
        hidden = as_rows(output_tensor(out), batched, False)
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


def _layer_sites(build: _Builder, index: int, p: Parts, route: Any) -> None:
    facts = build.facts
    block = p.block
    b = build.batched
    hidden = arg_named(block, "hidden_states", 1 if p.fused_residual else 0)
    multiplier = facts.residual_multiplier if facts.residual_multiplier not in (None, 1) else None

    # The residual stream.
    if p.fused_residual:
        build.put(
            "resid_pre", index, sum_input_site(block, hidden, arg_named(block, "residual", 2))
        )
        build.put("resid_post", index, sum_output_site(block))
    else:
        build.put("resid_pre", index, input_site(block, hidden, batched=b))
        build.put("resid_post", index, output_site(block, batched=b))
    if p.pre_mlp_norm is not None:
        if p.fused_residual:
            # The fused add-norm: (attention write, residual) in, their sum formed inside.
            build.put("resid_mid", index, sum_input_site(p.pre_mlp_norm, NORM_X, NORM_RESIDUAL))
        else:
            build.put("resid_mid", index, _plain_resid_mid(p.pre_mlp_norm, b, facts))
    elif facts.post_norms_only and p.mlp is not None:
        build.put("resid_mid", index, _plain_resid_mid(p.mlp, b, facts))

    # Attention.
    if p.attn is not None:
        build.put(
            "attn_in", index, input_site(p.attn, arg_named(p.attn, "hidden_states", 0), batched=b)
        )
        build.put("attn_out", index, output_site(p.attn, batched=b))
        if p.post_attn_norm is not None:
            build.put(
                "attn_out_post", index, output_site(p.post_attn_norm, scale=multiplier, batched=b)
            )
        else:
            build.put("attn_out_post", index, output_site(p.attn, scale=multiplier, batched=b))
    if facts.gated_attn_output and getattr(p.attn, "attn_output_gate", False):
        qkv = find_module(p.attn, "qkv_proj")
        if qkv is not None:
            # q_proj's doubled output, laid out per head as [query_h | gate_h] (HF's layout,
            # which vLLM's fused qkv_proj keeps in its first 2 * q_size columns).
            d, heads = facts.head_dim, facts.n_heads
            columns = [h * 2 * d + d + i for h in range(heads) for i in range(d)]
            build.put("attn_gate", index, index_site(qkv, columns, batched=b))
    if p.o_proj is not None:
        build.put("z", index, input_site(p.o_proj, first_arg(p.o_proj), flatten=True, batched=b))
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
                f"{stem}_in", index, input_site(norm, first_arg(norm), flatten=True, batched=b)
            )
            build.put(f"{stem}_out", index, output_site(norm, flatten=True, batched=b))
    if p.kernel is not None:
        build.put("value", index, input_site(p.kernel, Arg(2, "value"), flatten=True))
        why = attention_unsupported(build.config) or _kernel_mismatch(p.kernel, build, index)
        patterns = any(absence_reason(name, facts, index) is None for name in RECOMPUTED)
        if why is not None and patterns:
            build.attention_refusal = build.attention_refusal or why
        elif why is None:
            q = input_site(p.kernel, Arg(0, "query"), flatten=True)
            k = input_site(p.kernel, Arg(1, "key"), flatten=True)
            build.put("_q_rot", index, read_only(q, _INTERNAL))
            build.put("_k_rot", index, read_only(k, _INTERNAL))
            sinks = getattr(p.attn, "sinks", None)
            if isinstance(sinks, torch.Tensor):
                build.put("_sinks", index, _sinks_site(p.kernel, sinks))

    # MLP.
    if p.mlp_entry is not None and p.mlp_exit is not None:
        entry, exit_ = p.mlp_entry, p.mlp_exit
        build.put("mlp_in", index, input_site(entry, first_arg(entry), batched=b))
        build.put("mlp_out", index, output_site(exit_, batched=b))
        if p.post_mlp_norm is not None:
            build.put(
                "mlp_out_post", index, output_site(p.post_mlp_norm, scale=multiplier, batched=b)
            )
        else:
            build.put("mlp_out_post", index, output_site(exit_, scale=multiplier, batched=b))
    if p.gate_up is not None:
        # This rank's half: under tensor parallelism each rank holds [gate_r | up_r].
        fused = getattr(p.gate_up, "output_size_per_partition", 2 * facts.d_mlp)
        width = int(fused) // 2
        build.put("mlp_pre", index, columns_site(p.gate_up, 0, width, batched=b))
        build.put("mlp_pre_linear", index, columns_site(p.gate_up, width, width, batched=b))
    elif p.up is not None:
        build.put("mlp_pre", index, output_site(p.up, batched=b))
    if p.down is not None:
        build.put("mlp_act", index, input_site(p.down, first_arg(p.down), batched=b))
    if p.router is not None and route is not None:
        if p.router_fused:
            _fused_router_sites(build, index, p, route)
        else:
            build.put("router_logits", index, output_site(p.router, batched=b))
            _routing_sites(
                build, index, p.router, "post", output_site(p.router, batched=b).read, route
            )


def _fused_router_sites(build: _Builder, index: int, p: Parts, route: Any) -> None:
    """The router logits rebuilt where vLLM folds the router into one matmul with another gate.

    With the shared expert fused into the routed ones (`fuse_shared_experts`, not taken on CPU),
    the MoE runner multiplies the hidden states by the router and shared-expert gate weights
    stacked together, so the router module is never called; its input is the MoE block's.
    """
    router = p.router
    assert p.mlp is not None and router is not None
    arg = first_arg(p.mlp)

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


def _plain_resid_mid(module: torch.nn.Module, batched: bool, facts: ModelFacts) -> Site:
    """resid_mid where the block adds its residual in Python before the pre-MLP norm."""
    # Falcon-H1 has no attn_out_post (its block sums attention and Mamba-2 itself); its
    # attention's own output, scaled by attention_out_multiplier, moves resid_mid there.
    instead = "attn_out" if facts.ssm_beside_attention else "attn_out_post"
    why = (
        "this block adds the attention output to the residual in Python before the pre-MLP norm, "
        f"so a write here would reach the norm but not the residual that skips the MLP; steer "
        f"{instead}, which moves resid_mid and everything after it"
    )
    return read_only(input_site(module, first_arg(module), batched=batched), why)


_INTERNAL = "internal attention-recompute input; write value or z instead"


def _sinks_site(kernel: torch.nn.Module, sinks: torch.Tensor) -> Site:
    """The per-head attention-sink logits (gpt-oss), one row per token: `[T, heads]`.

    A parameter, not an activation, served as a site so the client receives it alongside the
    `_q_rot` / `_k_rot` rows it rebuilds attn_probs from.
    """
    query = Arg(0, "query")

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
    target = kernel._target[0] if isinstance(kernel, KernelCall) else kernel
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
        served |= RECOMPUTED
    else:
        why = (
            build.attention_refusal
            or attention_unsupported(build.config)
            or "vLLM's attention kernel for this family is not reachable by a hook, so the q and k "
            "it receives cannot be captured to rebuild the attention matrix"
        )
        for name in sorted(RECOMPUTED):
            build.refuse(name, why)
    for name in point_names():
        if name in served:
            continue
        build.refuse(
            name,
            f"interp-vllm does not place {name} on vLLM's module tree for "
            f"{build.facts.architecture}",
        )

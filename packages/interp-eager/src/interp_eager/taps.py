"""Which tensor, at which module, is each standardized point on this model?

`resolve_tap(address, tree, facts)` returns a `Tap`: a module, a side (its input or its output),
how to pick the tensor out of what the hook sees, how to put a replacement back, and a `View`
that turns the raw tensor into the point's canonical `[batch, seq, ...]` form. Views are linear
(reshape, slice, scale, select a stream), so every write can be made as a delta in canonical
space and embedded back into the raw tensor: steering never needs the inverse of a norm.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from interp_core.address import Address
from interp_core.errors import PointUnsupported
from interp_core.facts import ModelFacts
from interp_core.points import require_point
from interp_eager.tree import LayerParts, ModelTree, QKVLayout

__all__ = ["LINEAR", "SCORES", "Tap", "View", "resolve_tap", "write_site"]

SCORES = "scores"  # side of the softmax-intercepting tap behind attn_scores
LINEAR = "linear"  # side of a write applied to a module's first linear projection (hooks.py)


# --- views: raw tensor <-> canonical [batch, seq, ...] ------------------------------------------
class View:
    """A linear map from a raw module tensor to the point's canonical form, with its embedding."""

    def read(self, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        return raw

    def embed(self, delta: torch.Tensor, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        """The raw-space tensor that moves `read(raw)` by exactly `delta`."""
        return delta


def _head_major(raw: torch.Tensor, batch: int, seq: int) -> bool:
    """Is a 4-D `raw` laid out `[b, heads, s, d]` rather than `[b, s, heads, d]`?"""
    if raw.dim() != 4 or raw.shape[0] != batch:
        return False
    if raw.shape[1] != seq or raw.shape[2] != seq:
        return raw.shape[2] == seq and raw.shape[1] != seq
    # [b, n, n, d] with n == seq == heads: the shape cannot tell (a 4-token prompt on a 4-head
    # model). The strides can: projections emit token-major memory and head-major tensors are
    # transposed views of it (Gemma-3 normalises q and k after `.transpose(1, 2)`), so their
    # head axis is the inner one; elementwise ops such as the norms keep those strides.
    return raw.stride(1) < raw.stride(2)


@dataclass(frozen=True)
class TokenMajor(View):
    """`[b*s, ...]`, `[b, s, ...]` or head-major `[b, h, s, d]` -> `[b, s, width]`."""

    def read(self, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        if _head_major(raw, batch, seq):
            return raw.transpose(1, 2).reshape(batch, seq, -1)
        return raw.reshape(batch, seq, -1)

    def embed(self, delta: torch.Tensor, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        if _head_major(raw, batch, seq):
            heads, dim = raw.shape[1], raw.shape[3]
            return delta.reshape(batch, seq, heads, dim).transpose(1, 2)
        return delta.reshape(raw.shape)


@dataclass(frozen=True)
class Scale(View):
    factor: float

    def read(self, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        return raw * self.factor

    def embed(self, delta: torch.Tensor, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        return delta / self.factor


@dataclass(frozen=True)
class Columns(View):
    """A set of last-axis features, described as an index tensor over the flattened width."""

    index: tuple[int, ...]

    def _idx(self, raw: torch.Tensor) -> torch.Tensor:
        return torch.tensor(self.index, device=raw.device)

    def read(self, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        flat = raw.reshape(batch, seq, -1)
        return flat.index_select(-1, self._idx(raw))

    def embed(self, delta: torch.Tensor, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        flat = torch.zeros(batch, seq, raw.shape[-1], dtype=delta.dtype, device=delta.device)
        flat.index_copy_(-1, self._idx(raw), delta)
        return flat.reshape(raw.shape)


@dataclass(frozen=True)
class Stream(View):
    """One residual stream `k` of a `[b, s, n_streams, d]` stack."""

    k: int

    def read(self, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        return raw[:, :, self.k, :]

    def embed(self, delta: torch.Tensor, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        full = torch.zeros_like(raw)
        full[:, :, self.k, :] = delta
        return full


@dataclass(frozen=True)
class StreamMajor(View):
    """AltUp's `[n_streams, b, s, d]` stack: stream `k`, or (k None) the stack as `[b, s, n, d]`."""

    k: int | None = None

    def read(self, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        return raw.permute(1, 2, 0, 3) if self.k is None else raw[self.k]

    def embed(self, delta: torch.Tensor, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        if self.k is None:
            return delta.permute(2, 0, 1, 3)
        full = torch.zeros_like(raw)
        full[self.k] = delta
        return full


@dataclass(frozen=True)
class Chain(View):
    views: tuple[View, ...]

    def read(self, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        for view in self.views:
            raw = view.read(raw, batch, seq)
        return raw

    def embed(self, delta: torch.Tensor, raw: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
        stages = [raw]
        for view in self.views[:-1]:
            stages.append(view.read(stages[-1], batch, seq))
        for view, stage in zip(reversed(self.views), reversed(stages), strict=True):
            delta = view.embed(delta, stage, batch, seq)
        return delta


def _chain(*views: View | None) -> View:
    kept = tuple(v for v in views if v is not None)
    if not kept:
        return View()
    return kept[0] if len(kept) == 1 else Chain(kept)


# --- picking the tensor out of what a hook sees --------------------------------------------------
def _first_tensor(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str | int, Any]:
    if isinstance(kwargs.get("hidden_states"), torch.Tensor):
        return "hidden_states", kwargs["hidden_states"]
    for index, value in enumerate(args):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() >= 2:
            return index, value
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() >= 2:
            return key, value
    message = "the module received no floating-point tensor input to read"
    raise PointUnsupported(message)


def pick_input(value: Any) -> torch.Tensor:
    args, kwargs = value
    return _first_tensor(args, kwargs)[1]


def put_input(value: Any, new: torch.Tensor) -> Any:
    args, kwargs = value
    where, _ = _first_tensor(args, kwargs)
    if isinstance(where, int):
        args = (*args[:where], new, *args[where + 1 :])
    else:
        kwargs = {**kwargs, where: new}
    return args, kwargs


def _pick_output(index: int) -> Callable[[Any], torch.Tensor]:
    def pick(value: Any) -> torch.Tensor:
        if isinstance(value, tuple | list):
            picked = value[index] if index < len(value) else None
        elif index != 0:
            message = f"the module returned one tensor, not a tuple with element {index}"
            raise PointUnsupported(message)
        else:
            picked = value
        if not isinstance(picked, torch.Tensor):
            # e.g. path.model: the trunk returns a ModelOutput; a raw address reads tensors only.
            what = type(value).__name__
            if isinstance(value, tuple | list):
                what += f" whose element {index} is a {type(picked).__name__}"
            message = (
                f"the module returned a {what}, not a tensor; address a module that returns a "
                f"tensor (path.<module> of a decoder layer, a norm or a projection), or a "
                f"standardized point"
            )
            raise PointUnsupported(message)
        return picked

    return pick


def _put_output(index: int) -> Callable[[Any, torch.Tensor], Any]:
    def put(value: Any, new: torch.Tensor) -> Any:
        if isinstance(value, tuple | list):
            items = list(value)
            items[index] = new
            return type(value)(items) if isinstance(value, tuple) else items
        return new

    return put


def _pick_router_choice(layout: str, indices: bool, k: int) -> Callable[[Any], torch.Tensor]:
    """The [tokens, k] choices of a router whose output is laid out as `layout` says.

    "scores-logits" (Llama-4): the router ranks its logits with `torch.topk` and keeps the
    top-k scores in place, zero elsewhere; the same top-k of the same logits names the experts,
    best first, and the scores there are their weights. "sorted" (JetMoE): the token-major flat
    (token, slot) pairs were sorted by expert; `order` maps each sorted entry back to its flat
    pair, and the sorted experts are each expert's id repeated for its token count, so both
    scatter back into the router's own token-major choices.
    """

    def pick(value: Any) -> torch.Tensor:
        if layout == "scores-logits":
            scores, logits = value
            chosen = torch.topk(logits, k, dim=-1).indices
            return chosen if indices else scores.gather(-1, chosen)
        order, _, gates, counts, logits = value
        if indices:
            experts = torch.arange(len(counts), device=order.device)
            sorted_values = experts.repeat_interleave(torch.as_tensor(counts, device=order.device))
        else:
            sorted_values = gates
        flat = torch.empty_like(sorted_values)
        flat[order] = sorted_values
        return flat.view(logits.shape[0], k)

    return pick


def _pick_float_arg(predicate: Callable[[torch.Tensor], bool]) -> Callable[[Any], torch.Tensor]:
    def pick(value: Any) -> torch.Tensor:
        args, kwargs = value
        for item in (*args, *kwargs.values()):
            if isinstance(item, torch.Tensor) and predicate(item):
                return item
        message = "the experts module received no routing tensor of the expected kind"
        raise PointUnsupported(message)

    return pick


@dataclass
class Tap:
    """Where one address lives: a module, a side, pick/put, and the canonical view."""

    address: Address
    module: Any
    side: str  # "input", "output" or SCORES
    pick: Callable[[Any], torch.Tensor]
    put: Callable[[Any, torch.Tensor], Any] | None
    view: View = field(default_factory=View)
    module_name: str = ""
    strip_columns: int = 0  # attn_scores on sink families: trailing sink logits to drop


def _input(address: Address, module: Any, view: View | None = None, name: str = "") -> Tap:
    return Tap(address, module, "input", pick_input, put_input, _chain(view), name)


def _output(
    address: Address, module: Any, view: View | None = None, index: int = 0, name: str = ""
) -> Tap:
    return Tap(
        address, module, "output", _pick_output(index), _put_output(index), _chain(view), name
    )


def _missing(address: Address, role: str, facts: ModelFacts) -> PointUnsupported:
    message = (
        f"cannot serve {address} on this {facts.architecture}: its block has no module the "
        f"eager backend recognises as the {role}; read path.<module> for the raw tensor instead"
    )
    return PointUnsupported(message)


def _multiplier(facts: ModelFacts) -> View | None:
    factor = facts.residual_multiplier
    return Scale(factor) if factor not in (None, 1.0) else None


def _adds_own_residual(mixer: Any) -> bool:
    # BLOOM and MPT pass the residual into the attention module, which adds it before returning.
    try:
        return "residual" in inspect.signature(mixer.forward).parameters
    except (TypeError, ValueError):
        return False


def _value_columns(parts: LayerParts, facts: ModelFacts) -> View:
    d = facts.head_dim
    q, kv = facts.n_heads, facts.n_kv_heads
    layout = parts.qkv_layout
    if layout == QKVLayout.THIRDS:
        start = q * d + kv * d
        return Columns(tuple(range(start, start + kv * d)))
    if layout == QKVLayout.MULTI_QUERY:
        start = q * d + d
        return Columns(tuple(range(start, start + d)))
    if layout == QKVLayout.PER_HEAD:  # [head, (q, k, v), d]
        return Columns(tuple(h * 3 * d + 2 * d + i for h in range(q) for i in range(d)))
    group = q // kv  # PER_KV_GROUP: [kv, (q * group, k, v), d]
    stride = (group + 2) * d
    return Columns(tuple(g * stride + (group + 1) * d + i for g in range(kv) for i in range(d)))


def _gate_half(first: bool, width: int) -> Columns:
    start = 0 if first else width
    return Columns(tuple(range(start, start + width)))


def resolve_tap(address: Address, tree: ModelTree, facts: ModelFacts) -> Tap:
    """The tap serving `address`; refuses (PointUnsupported) what this model cannot serve."""
    if address.is_path:
        path = address.module_path or ""
        try:
            module = tree.root.get_submodule(path)
        except AttributeError as error:
            message = f"{address} names no module of this {facts.architecture}: {error}"
            raise PointUnsupported(message) from error
        return _output(address, module, name=path)

    name, layer = address.name, address.layer
    require_point(name, facts, layer, address.stream)

    if name == "embeddings":
        scale = facts.embedding_multiplier
        inside = hasattr(tree.embed, "embed_scale")  # Gemma's scaled embedding applies it itself
        view = Scale(scale) if scale not in (None, 1.0) and not inside else None
        return _output(address, tree.embed, view, name="embeddings")
    if name == "final_norm":
        return _output(address, tree.final_norm, name="final_norm")
    if name == "lm_head":
        return _output(address, tree.lm_head, name="lm_head")

    assert layer is not None
    parts = tree.layer(layer)
    stream: View | None = Stream(address.stream) if address.stream is not None else None
    # AltUp (Gemma-3n) stacks its streams first: [n_streams, b, s, d].
    stream_major = facts.altup_active_stream is not None
    if stream_major and address.stream is not None:
        stream = StreamMajor(address.stream)
    where = parts.names

    if name == "resid_pre":
        return _input(address, parts.block, stream, f"{where.get('mixer', 'block')} (block input)")
    if name == "resid_post":
        return _output(address, parts.block, stream, name=f"layer {layer} output")
    if name == "resid_streams":
        view = StreamMajor() if stream_major else None
        return _output(address, parts.block, view, name=f"layer {layer} output")
    if name == "resid_mid":
        if parts.mlp_hc is not None:
            return _input(address, parts.mlp_hc, stream, where.get("mlp_hc", ""))
        # TokenMajor: OPT flattens the tokens to [b*s, d] before its pre-MLP norm.
        if parts.pre_mlp_norm is not None:
            return _input(address, parts.pre_mlp_norm, TokenMajor(), "pre-MLP norm input")
        if parts.post_mlp_norm is not None and parts.mlp_entry is not None:
            # Post-norm-only blocks (OLMo-2): nothing normalises the MLP's input.
            return _input(address, parts.mlp_entry, TokenMajor(), where.get("mlp", ""))
        raise _missing(address, "pre-MLP norm", facts)

    if name in {"attn_stream_collapse", "attn_stream_write", "attn_stream_mix"}:
        hc = parts.attn_hc
    elif name in {"mlp_stream_collapse", "mlp_stream_write", "mlp_stream_mix"}:
        hc = parts.mlp_hc
    else:
        hc = None
    if name.endswith(("_stream_collapse", "_stream_write", "_stream_mix")):
        if hc is None:
            raise _missing(address, "hyper-connection module", facts)
        index = {"write": 0, "mix": 1, "collapse": 2}[name.rsplit("_", 1)[1]]
        return _output(address, hc, index=index, name=f"{name} ({index})")

    mixer = parts.mixer
    if name == "attn_in":
        if mixer is None:
            raise _missing(address, "token mixer", facts)
        return _input(address, mixer, None, where.get("mixer", ""))
    if name in {"q_norm_in", "q_norm_out", "k_norm_in", "k_norm_out"}:
        norm = parts.q_norm if name.startswith("q") else parts.k_norm
        if norm is None:
            raise _missing(address, name[:6], facts)
        tap = _input if name.endswith("_in") else _output
        return tap(address, norm, TokenMajor(), name=name)
    if name == "value":
        if parts.v_norm is not None:
            # Gemma-3n and -4 normalise the values after projecting them (v_proj, or k_proj
            # where keys double as values); attention mixes the norm's output.
            return _output(address, parts.v_norm, TokenMajor(), name=where.get("v_norm", ""))
        if parts.v_proj is not None:
            return _output(address, parts.v_proj, TokenMajor(), name=where.get("v_proj", ""))
        if parts.kv_proj is not None:
            # A fused [keys | values] projection (JetMoE's kv_proj): the second half.
            width = facts.n_kv_heads * facts.head_dim
            view = _chain(TokenMajor(), Columns(tuple(range(width, 2 * width))))
            return _output(address, parts.kv_proj, view, name=where.get("kv_proj", ""))
        if parts.qkv_proj is not None:
            view = _chain(TokenMajor(), _value_columns(parts, facts))
            return _output(address, parts.qkv_proj, view, name=where.get("qkv_proj", ""))
        raise _missing(address, "value projection", facts)
    if name == "attn_scores":
        if mixer is None:
            raise _missing(address, "attention", facts)
        sinks = 1 if getattr(mixer, "sinks", None) is not None else 0
        return Tap(address, mixer, SCORES, lambda v: v, None, View(), "attention softmax", sinks)
    if name == "attn_probs":
        if mixer is None:
            raise _missing(address, "attention", facts)
        tap = _output(address, mixer, index=1, name=where.get("mixer", ""))
        tap.put = None
        return tap
    if name == "z":
        if parts.o_proj is None:
            raise _missing(address, "attention output projection", facts)
        return _input(address, parts.o_proj, TokenMajor(), where.get("o_proj", ""))
    if name == "attn_gate":
        if parts.q_proj is None:
            raise _missing(address, "gated query projection", facts)
        d, heads = facts.head_dim, facts.n_heads
        gate = Columns(tuple(h * 2 * d + d + i for h in range(heads) for i in range(d)))
        return _output(address, parts.q_proj, _chain(TokenMajor(), gate), name="q_proj gate half")
    if name in {"attn_out", "attn_out_post"}:
        if mixer is None:
            raise _missing(address, "token mixer", facts)
        if name == "attn_out_post" and parts.post_attn_norm is not None:
            return _output(address, parts.post_attn_norm, _multiplier(facts), name="post-attn norm")
        view = _multiplier(facts) if name == "attn_out_post" else None
        if _adds_own_residual(mixer):
            if parts.o_proj is None:
                raise _missing(address, "attention output projection", facts)
            return _output(address, parts.o_proj, view, name=where.get("o_proj", ""))
        return _output(address, mixer, view, name=where.get("mixer", ""))

    if name == "mlp_in":
        if parts.mlp_entry is None:
            raise _missing(address, "MLP", facts)
        return _input(address, parts.mlp_entry, TokenMajor(), where.get("mlp", ""))
    if name in {"mlp_out", "mlp_out_post"}:
        if parts.mlp_exit is None:
            raise _missing(address, "MLP", facts)
        if name == "mlp_out_post" and parts.post_mlp_norm is not None:
            view = _chain(TokenMajor(), _multiplier(facts))
            return _output(address, parts.post_mlp_norm, view, name="post-MLP norm")
        view = _chain(TokenMajor(), _multiplier(facts) if name == "mlp_out_post" else None)
        if parts.mlp is not None and _adds_own_residual(parts.mlp):
            # BLOOM's MLP adds the residual before returning: its raw write is the down_proj output.
            if parts.down_proj is None:
                raise _missing(address, "MLP down projection", facts)
            return _output(address, parts.down_proj, view, name=where.get("down_proj", ""))
        return _output(address, parts.mlp_exit, view, name=where.get("mlp", ""))
    if name == "mlp_act":
        if parts.down_proj is None:
            raise _missing(address, "down projection", facts)
        return _input(address, parts.down_proj, TokenMajor(), where.get("down_proj", ""))
    if name in {"mlp_pre", "mlp_pre_linear"}:
        if parts.gate_up_proj is not None:
            view = _chain(TokenMajor(), _gate_half(name == "mlp_pre", facts.d_mlp))
            return _output(address, parts.gate_up_proj, view, name=where.get("gate_up_proj", ""))
        if name == "mlp_pre":
            module = parts.gate_proj if parts.gate_proj is not None else parts.up_proj
            role = "gate_proj" if parts.gate_proj is not None else "up_proj"
        else:
            module, role = (parts.up_proj if parts.gate_proj is not None else None), "up_proj"
        if module is None:
            raise _missing(address, role, facts)
        return _output(address, module, TokenMajor(), name=where.get(role, ""))
    if name == "router_logits":
        if parts.router is None:
            raise _missing(address, "router", facts)
        experts = facts.moe.n_experts if facts.moe else -1
        logits_module = facts.family.router_logits_module
        if logits_module is not None:
            # A router returning probabilities: its logits are this child projection's output.
            proj = getattr(parts.router, logits_module, None)
            if proj is None:
                raise _missing(address, f"router's {logits_module} projection", facts)
            return _output(address, proj, TokenMajor(), name=f"router.{logits_module}")

        def pick_logits(value: Any) -> torch.Tensor:
            items = value if isinstance(value, tuple | list) else (value,)
            if facts.family.router_output_layout is not None:
                # The logits come last, after tensors that may share their shape.
                items = items[-1:]
            for item in items:
                if (
                    isinstance(item, torch.Tensor)
                    and item.is_floating_point()
                    and item.shape[-1] == experts
                ):
                    return item
            message = f"the router of layer {layer} returned no [tokens, {experts}] logits"
            raise PointUnsupported(message)

        def put_logits(value: Any, new: torch.Tensor) -> Any:
            if not isinstance(value, tuple | list):
                return new
            items = list(value)
            for i, item in enumerate(items):
                if isinstance(item, torch.Tensor) and item is pick_logits(value):
                    items[i] = new
            return tuple(items)

        return Tap(address, parts.router, "output", pick_logits, put_logits, TokenMajor(), "router")
    if name in {"expert_weights", "expert_indices"}:
        k = facts.moe.experts_per_token if facts.moe else -1
        router_layout = facts.family.router_output_layout
        if router_layout is not None:
            if parts.router is None:
                raise _missing(address, "router", facts)
            pick = _pick_router_choice(router_layout, name == "expert_indices", k)
            return Tap(address, parts.router, "output", pick, None, TokenMajor(), "router output")
        if parts.experts is None:
            raise _missing(address, "experts", facts)
        if name == "expert_indices":
            predicate = lambda t: not t.is_floating_point() and t.dim() >= 1  # noqa: E731
        else:
            predicate = lambda t: t.is_floating_point() and t.dim() == 2 and t.shape[-1] == k  # noqa: E731
        tap = Tap(address, parts.experts, "input", _pick_float_arg(predicate), None, TokenMajor())
        tap.module_name = "experts input"
        return tap
    message = f"the eager backend has no rule for {address}"
    raise PointUnsupported(message)


def write_site(tap: Tap) -> Tap:
    """Where a write at `tap` must land for the model to use it (usually where it is read)."""
    if tap.address.name == "router_logits":
        # The router ranks and weighs experts inside its own forward and returns the logits only
        # as a by-product; the edit must reach its projection's output (see hooks.LINEAR).
        return dataclasses.replace(tap, side=LINEAR, pick=_whole, put=_replace)
    if tap.address.name == "resid_mid" and tap.address.stream is None and tap.side == "input":
        # HF blocks keep the mid-layer residual in a local (`residual = hidden_states`) that is
        # the very tensor handed to the pre-MLP norm (or the MLP). Replacing the norm's argument
        # would steer only the MLP's input and leave the skip path unsteered; writing into that
        # tensor steers the residual stream itself, as a resid_mid edit means (TransformerLens
        # semantics, and what vLLM's fused add-norm does).
        # The delta is computed from a copy: a projection op saves its input for backward, which
        # the in-place write would otherwise invalidate when gradients are on.
        original = tap.pick
        return dataclasses.replace(
            tap, pick=lambda value: original(value).clone(), put=_in_place(original)
        )
    return tap


def _in_place(pick: Callable[[Any], torch.Tensor]) -> Callable[[Any, torch.Tensor], Any]:
    def put(value: Any, new: torch.Tensor) -> Any:
        pick(value).copy_(new)
        return value

    return put


def _whole(value: torch.Tensor) -> torch.Tensor:
    return value


def _replace(value: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    return new

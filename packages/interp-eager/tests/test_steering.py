"""Does steering make exactly the edit a hand-written HF hook makes?

Every family: the three operations (add with a scale, orthogonal, projection_cap with min and
max) and a positions-limited add at a middle layer's resid_post, each compared with the same
edit written as a plain `register_forward_hook` on the HF decoder layer, on the logits and on a
capture downstream of the edit. A few families also at other writable points: attn_out, mlp_out,
z, mlp_act, embeddings, router_logits on mixtures of experts, and the stream points of
DeepSeek-V4. Plus the identities: a zero vector changes nothing (bit for bit), a capture at a
steered point returns the steered activation, and `steer(model, spec)` equals `steering=spec`.

Tolerances. The reference arithmetic is written independently (`h @ u` rather than the
backend's elementwise product and sum), so the two round differently in the last bit of float32;
after the remaining layers the worst case measured over every case here is 8e-6 on logits of
size ~5 (`add` matches bit for bit). `_ATOL`/`_RTOL` allow that and nothing more: a wrong scale,
sign, position or site moves the logits by 1e-2 or more, and every case also asserts that the
edit moved the logits by at least 1e-3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
import torch
from eager_helpers import (
    decoder_layers,
    forward_hook,
    hf_logits,
    layer_output,
    model,
    prompt_ids,
    resid_address,
    set_layer_output,
)
from torch.overrides import TorchFunctionMode

from interp_core.address import Address
from interp_core.steering import SteeringSpec, apply_reference, steer
from interp_eager.model import EagerModel
from interp_testmodels.families import FAMILY_NAMES

# float32 rounding of independently ordered arithmetic, propagated through <= 4 layers.
_ATOL = 2e-5
_RTOL = 1e-5

Edit = Callable[[torch.Tensor], torch.Tensor]


def _direction(width: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(width, generator=generator)


def _unit(vector: torch.Tensor) -> torch.Tensor:
    return vector / torch.linalg.vector_norm(vector)


# --- the reference arithmetic, written from the definitions --------------------------------------
def _add(vector: torch.Tensor, scale: float, positions: tuple[int, ...] | None = None) -> Edit:
    def edit(h: torch.Tensor) -> torch.Tensor:
        if positions is None:
            return h + scale * vector
        out = h.clone()
        out[:, list(positions)] += scale * vector
        return out

    return edit


def _orthogonal(vector: torch.Tensor, scale: float) -> Edit:
    unit = _unit(vector)

    def edit(h: torch.Tensor) -> torch.Tensor:
        along = h @ unit
        return h - (1.0 - scale) * along.unsqueeze(-1) * unit

    return edit


def _cap(vector: torch.Tensor, low: float, high: float) -> Edit:
    unit = _unit(vector)

    def edit(h: torch.Tensor) -> torch.Tensor:
        along = h @ unit
        return h + (along.clamp(low, high) - along).unsqueeze(-1) * unit

    return edit


def _cases(m: EagerModel, address: Address, plain: torch.Tensor) -> list[tuple[str, Any, Edit]]:
    """(name, spec, reference edit) for every operation at `address`; `plain` sets cap bounds."""
    width = plain.shape[-1]
    vector = _direction(width, seed=7)
    along = (plain @ _unit(vector)).flatten()
    # Bounds inside the observed range, so the cap clamps some rows from below and some from
    # above and leaves others alone.
    low, high = (float(q) for q in torch.quantile(along, torch.tensor([0.3, 0.7])))
    seq = plain.shape[1]
    positions = (1, seq - 3)
    return [
        ("add", SteeringSpec(address, vector, scale=2.5), _add(vector, 2.5)),
        (
            "orthogonal",
            SteeringSpec(address, vector, op="orthogonal", scale=0.0),
            _orthogonal(vector, 0.0),
        ),
        (
            "orthogonal-scaled",
            SteeringSpec(address, vector, op="orthogonal", scale=-1.5),
            _orthogonal(vector, -1.5),
        ),
        (
            "projection_cap",
            SteeringSpec(address, vector, op="projection_cap", min=low, max=high),
            _cap(vector, low, high),
        ),
        (
            "add-positions",
            SteeringSpec(address, vector, scale=1.5, positions=positions),
            _add(vector, 1.5, positions),
        ),
    ]


# --- HF-side hooks --------------------------------------------------------------------------------
def _stream_index(stream: int, stream_major: bool) -> tuple[Any, ...]:
    # DeepSeek-V4 stacks its streams as [b, s, n, d]; Gemma-3n's AltUp as [n, b, s, d].
    return (stream,) if stream_major else (slice(None), slice(None), stream)


def _edit_layer_output(
    edit: Edit, stream: int | None, stream_major: bool = False
) -> Callable[..., Any]:
    def hook(module: Any, args: Any, output: Any) -> Any:
        hidden = layer_output(output)
        if stream is None:
            return set_layer_output(output, edit(hidden))
        hidden = hidden.clone()
        index = _stream_index(stream, stream_major)
        hidden[index] = edit(hidden[index])
        return set_layer_output(output, hidden)

    return hook


def _record_layer_output(
    store: dict[str, torch.Tensor], stream: int | None, stream_major: bool = False
) -> Callable[..., Any]:
    def hook(module: Any, args: Any, output: Any) -> None:
        hidden = layer_output(output)
        if stream is not None:
            hidden = hidden[_stream_index(stream, stream_major)]
        store["last"] = hidden.detach().clone()

    return hook


def _stream_major(m: EagerModel) -> bool:
    return m.facts.altup_active_stream is not None


def _reference(
    m: EagerModel, ids: torch.Tensor, sites: list[tuple[torch.nn.Module, Callable[..., Any]]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, last layer's output) of a plain HF forward with `sites` hooked."""
    hf = m.hf_model
    layers = decoder_layers(hf)
    stream = resid_address(m, 0).stream
    store: dict[str, torch.Tensor] = {}
    with ExitStack() as stack:
        for module, hook in sites:
            stack.enter_context(forward_hook(module, hook))
        record = _record_layer_output(store, stream, _stream_major(m))
        stack.enter_context(forward_hook(layers[-1], record))
        logits = hf_logits(hf, ids)
    return logits, store["last"]


def _steered(m: EagerModel, ids: torch.Tensor, spec: Any) -> tuple[torch.Tensor, torch.Tensor]:
    last = resid_address(m, m.n_layers - 1)
    cache = m.run_with_cache(ids, [last], steering=spec)
    return cache.output.logits, cache[last]


def _assert_matches(
    ours: tuple[torch.Tensor, torch.Tensor],
    theirs: tuple[torch.Tensor, torch.Tensor],
    plain_logits: torch.Tensor,
    what: str,
) -> None:
    torch.testing.assert_close(ours[0], theirs[0], atol=_ATOL, rtol=_RTOL, msg=f"{what}: logits")
    torch.testing.assert_close(
        ours[1], theirs[1], atol=_ATOL, rtol=_RTOL, msg=f"{what}: last layer's output"
    )
    # The edit must have done something, or the comparison proves nothing.
    assert (ours[0] - plain_logits).abs().max() > 1e-3, f"{what} left the logits unchanged"


# --- resid_post on every family -------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_resid_post_steering_equals_a_hand_written_hook(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    layer = m.n_layers // 2
    address = resid_address(m, layer)
    plain = m.run_with_cache(ids, [address])
    block = decoder_layers(m.hf_model)[layer]
    for name, spec, edit in _cases(m, address, plain[address]):
        hook = _edit_layer_output(edit, address.stream, _stream_major(m))
        theirs = _reference(m, ids, [(block, hook)])
        ours = _steered(m, ids, spec)
        _assert_matches(ours, theirs, plain.output.logits, f"{family} {name} at {address}")


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_positions_limit_the_edit(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    address = resid_address(m, m.n_layers // 2)
    width = m.d_model
    spec = SteeringSpec(address, _direction(width, 3), scale=4.0, positions=(5,))
    plain = m.run_with_cache(ids, [address])
    steered = m.run_with_cache(ids, [address], steering=spec)
    # Causal attention: the positions before the edit see nothing of it, bit for bit. Chunked
    # linear attention (Qwen3-Next's gated delta rule) is causal too, but it multiplies whole
    # chunks at once, so later values can move earlier sums by rounding: 1e-6 there (measured
    # up to ~1e-7 depending on the thread count), far below any leak of the +4 edit.
    before, after = steered.output.logits[:, :5], plain.output.logits[:, :5]
    if all(m.facts.attends(layer) for layer in range(m.n_layers)):
        assert torch.equal(before, after)
    else:
        torch.testing.assert_close(before, after, rtol=0, atol=1e-6)
    assert not torch.allclose(steered.output.logits[:, 5:], plain.output.logits[:, 5:])
    changed = (steered[address] != plain[address]).any(dim=-1)[0]
    assert changed.tolist() == [i == 5 for i in range(ids.shape[1])]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_zero_vector_is_the_identity(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    layer = m.n_layers // 2
    points = [resid_address(m, layer), resid_address(m, m.n_layers - 1), Address("lm_head")]
    for point in (resid_address(m, layer), Address("embeddings")):
        zero = SteeringSpec(point, torch.zeros(m.d_model))
        plain = m.run_with_cache(ids, points)
        steered = m.run_with_cache(ids, points, steering=zero)
        assert torch.equal(steered.output.logits, plain.output.logits), point
        for address in points:
            assert torch.equal(steered[address], plain[address]), f"{address} under zero {point}"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_capture_at_the_steered_point_is_the_steered_activation(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    address = resid_address(m, m.n_layers // 2)
    vector = _direction(m.d_model, 11)
    plain = m.run_with_cache(ids, [address])[address]
    steered = m.run_with_cache(ids, [address], steering=SteeringSpec(address, vector, scale=2.0))
    assert torch.equal(steered[address], plain + 2.0 * vector)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_the_steer_context_equals_per_call_steering(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    first = resid_address(m, 0)
    last = resid_address(m, m.n_layers - 1)
    specs = [
        SteeringSpec(first, _direction(m.d_model, 1), scale=1.5),
        SteeringSpec(last, _direction(m.d_model, 2), op="orthogonal", scale=0.0),
    ]
    explicit = m.run_with_cache(ids, [first, last], steering=specs)
    with steer(m, specs):
        inside = m.run_with_cache(ids, [first, last])
    after = m.run_with_cache(ids, [first, last])
    plain_logits = m.forward_logits(ids)
    assert torch.equal(inside.output.logits, explicit.output.logits)
    for address in (first, last):
        assert torch.equal(inside[address], explicit[address])
    assert torch.equal(after.output.logits, plain_logits)
    assert not torch.equal(explicit.output.logits, plain_logits)
    # Active specs come first, explicit ones after: the same list split across both routes.
    with steer(m, specs[0]):
        split = m.run_with_cache(ids, [first, last], steering=specs[1])
    assert torch.equal(split.output.logits, explicit.output.logits)


# --- other writable points on a few families ------------------------------------------------------
def _attention(layer: torch.nn.Module) -> torch.nn.Module:
    for name in ("self_attn", "attn", "self_attention", "attention"):
        if isinstance(getattr(layer, name, None), torch.nn.Module):
            return getattr(layer, name)
    raise AssertionError(f"no attention module in {type(layer).__name__}")


def _output_site(edit: Edit) -> Callable[..., Any]:
    """A hook editing a module's output (or its first element)."""

    def hook(module: Any, args: Any, output: Any) -> Any:
        if isinstance(output, tuple):
            return (edit(output[0]), *output[1:])
        return edit(output)

    return hook


def _input_site(edit: Edit) -> Callable[..., Any]:
    """A pre-hook editing a module's first positional input."""

    def hook(module: Any, args: Any) -> Any:
        return (edit(args[0]), *args[1:])

    return hook


def _pre_hook_reference(
    m: EagerModel, ids: torch.Tensor, module: torch.nn.Module, edit: Edit
) -> tuple[torch.Tensor, torch.Tensor]:
    handle = module.register_forward_pre_hook(_input_site(edit))
    try:
        return _reference(m, ids, [])
    finally:
        handle.remove()


POINT_CASES: list[tuple[str, str, Callable[[torch.nn.Module], torch.nn.Module], str]] = [
    # family, point, module of the layer the hand-written hook goes on, hook kind
    ("llama", "attn_out", lambda layer: layer.self_attn, "output"),
    ("gpt2", "attn_out", lambda layer: layer.attn, "output"),
    ("gemma2", "attn_out", lambda layer: layer.self_attn, "output"),
    ("granite", "attn_out", lambda layer: layer.self_attn, "output"),
    # BLOOM's attention adds the residual itself; its own write is the dense projection's output.
    ("bloom", "attn_out", lambda layer: layer.self_attention.dense, "output"),
    ("llama", "mlp_out", lambda layer: layer.mlp, "output"),
    ("gpt_neox", "mlp_out", lambda layer: layer.mlp, "output"),
    ("qwen3_moe", "mlp_out", lambda layer: layer.mlp, "output"),
    ("llama", "z", lambda layer: layer.self_attn.o_proj, "input"),
    ("gpt2", "z", lambda layer: layer.attn.c_proj, "input"),
    ("falcon", "z", lambda layer: layer.self_attention.dense, "input"),
    ("llama", "mlp_act", lambda layer: layer.mlp.down_proj, "input"),
    ("gpt2", "mlp_act", lambda layer: layer.mlp.c_proj, "input"),
    ("phi3", "mlp_act", lambda layer: layer.mlp.down_proj, "input"),
]


@pytest.mark.parametrize(("family", "point", "site", "kind"), POINT_CASES)
def test_steering_at_other_points_equals_a_hand_written_hook(
    family: str, point: str, site: Callable[[torch.nn.Module], torch.nn.Module], kind: str
) -> None:
    m = model(family)
    ids = prompt_ids(m)
    layer = m.n_layers // 2
    address = Address(point, layer)
    plain = m.run_with_cache(ids, [address])
    module = site(decoder_layers(m.hf_model)[layer])
    for name, spec, edit in _cases(m, address, plain[address]):
        if kind == "output":
            theirs = _reference(m, ids, [(module, _output_site(edit))])
        else:
            theirs = _pre_hook_reference(m, ids, module, edit)
        ours = _steered(m, ids, spec)
        _assert_matches(ours, theirs, plain.output.logits, f"{family} {name} at {address}")


@pytest.mark.parametrize("family", ["llama", "gpt2", "gemma", "granite", "opt"])
def test_embedding_steering_equals_a_hand_written_hook(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    address = Address("embeddings")
    plain = m.run_with_cache(ids, [address])
    layers = decoder_layers(m.hf_model)
    embed = m.hf_model.get_input_embeddings()
    multiplier = m.hf_model.config.to_dict().get("embedding_multiplier")
    for name, spec, edit in _cases(m, address, plain[address]):
        if multiplier is not None:
            # Granite multiplies the table row after the lookup; with no position embeddings or
            # embedding norm, the first layer's input is exactly the embeddings point.
            theirs = _pre_hook_reference(m, ids, layers[0], edit)
        else:
            # Gemma scales inside its embedding module, so its output is already the point.
            theirs = _reference(m, ids, [(embed, _output_site(edit))])
        ours = _steered(m, ids, spec)
        _assert_matches(ours, theirs, plain.output.logits, f"{family} {name} at embeddings")


# --- routing --------------------------------------------------------------------------------------
class _RouterLogitsEdit(TorchFunctionMode):
    """Edits the output of every F.linear call made while active (the router's projection)."""

    def __init__(self, edit: Edit, width: int) -> None:
        super().__init__()
        self.edit, self.width, self.calls = edit, width, 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        output = func(*args, **(kwargs or {}))
        if func is torch.nn.functional.linear and output.shape[-1] == self.width:
            self.calls += 1
            batch_seq = output.shape[:-1]
            return self.edit(output.reshape(1, -1, self.width)).reshape(*batch_seq, self.width)
        return output


@contextmanager
def _router_edit(router: torch.nn.Module, edit: Edit, width: int) -> Iterator[_RouterLogitsEdit]:
    mode = _RouterLogitsEdit(edit, width)

    def enter(module: Any, args: Any) -> None:
        mode.__enter__()

    def leave(module: Any, args: Any, output: Any) -> None:
        mode.__exit__(None, None, None)

    handles = [router.register_forward_pre_hook(enter), router.register_forward_hook(leave)]
    try:
        yield mode
    finally:
        for handle in handles:
            handle.remove()


def _router(layer: torch.nn.Module) -> torch.nn.Module:
    mlp = layer.mlp if hasattr(layer, "mlp") else layer.block_sparse_moe
    return mlp.router if hasattr(mlp, "router") else mlp.gate


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral", "deepseek_v3", "gpt_oss", "olmoe"])
def test_router_logit_steering_reroutes_like_a_hand_written_edit(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    layer = m.n_layers - 1
    address = Address("router_logits", layer)
    indices = Address("expert_indices", layer)
    plain = m.run_with_cache(ids, [address, indices])
    router = _router(decoder_layers(m.hf_model)[layer])
    experts = plain[address].shape[-1]
    for name, spec, edit in _cases(m, address, plain[address]):
        with _router_edit(router, edit, experts) as mode:
            theirs = _reference(m, ids, [])
        assert mode.calls == 1, f"the reference edit ran {mode.calls} times"
        ours = _steered(m, ids, spec)
        what = f"{family} {name} at {address}"
        _assert_matches(ours, theirs, plain.output.logits, what)
        steered = m.run_with_cache(ids, [address, indices], steering=spec)
        torch.testing.assert_close(steered[address], edit(plain[address]), atol=1e-6, rtol=1e-6)
    # A strong push towards expert 0 must actually change the choice of experts.
    push = torch.full((experts,), -20.0)
    push[0] = 20.0
    forced = m.run_with_cache(ids, [indices], steering=SteeringSpec(address, push))
    assert not torch.equal(forced[indices], plain[indices])
    if family != "deepseek_v3":  # group-limited routing may keep expert 0's group out
        assert bool((forced[indices] == 0).any(dim=-1).all())


def test_router_logit_steering_equals_a_router_bias_on_gpt_oss() -> None:
    # gpt_oss's router has a bias: adding the vector to it is the same edit, with no hooks at all.
    m = model("gpt_oss")
    ids = prompt_ids(m)
    layer = m.n_layers - 1
    address = Address("router_logits", layer)
    router = _router(decoder_layers(m.hf_model)[layer])
    vector = _direction(router.bias.shape[0], 5)
    plain = m.forward_logits(ids)
    original = router.bias.detach().clone()
    try:
        with torch.no_grad():
            router.bias += 3.0 * vector
        theirs = _reference(m, ids, [])
    finally:
        with torch.no_grad():
            router.bias.copy_(original)
    ours = _steered(m, ids, SteeringSpec(address, vector, scale=3.0))
    _assert_matches(ours, theirs, plain, f"gpt_oss router bias at {address}")


# --- the hyper-connection trunk -------------------------------------------------------------------
def test_stream_point_steering_on_deepseek_v4() -> None:
    m = model("deepseek_v4")
    ids = prompt_ids(m)
    layer = 0
    block = decoder_layers(m.hf_model)[layer]
    for point in ("attn_stream_collapse", "mlp_stream_collapse"):
        address = Address(point, layer)
        plain = m.run_with_cache(ids, [address])
        hc = block.attn_hc if point.startswith("attn") else block.ffn_hc

        def collapse_site(edit: Edit) -> Callable[..., Any]:
            def hook(module: Any, args: Any, output: Any) -> Any:
                post, comb, collapsed = output
                return post, comb, edit(collapsed)

            return hook

        for name, spec, edit in _cases(m, address, plain[address]):
            theirs = _reference(m, ids, [(hc, collapse_site(edit))])
            ours = _steered(m, ids, spec)
            _assert_matches(ours, theirs, plain.output.logits, f"deepseek_v4 {name} at {address}")
    # Each stream of resid_post separately, and the whole stack through resid_streams.
    for stream in (0, 3):
        address = Address("resid_post", layer, stream)
        plain = m.run_with_cache(ids, [address])
        for name, spec, edit in _cases(m, address, plain[address])[:2]:
            theirs = _reference(m, ids, [(block, _edit_layer_output(edit, stream))])
            ours = _steered(m, ids, spec)
            _assert_matches(ours, theirs, plain.output.logits, f"deepseek_v4 {name} at {address}")
    stack = Address("resid_streams", layer)
    vector = _direction(m.facts.n_streams * m.d_model, 9)
    plain_logits = m.forward_logits(ids)

    def edit_stack(module: Any, args: Any, output: Any) -> Any:
        hidden = layer_output(output)
        return set_layer_output(output, hidden + vector.reshape(hidden.shape[-2:]))

    theirs = _reference(m, ids, [(block, edit_stack)])
    ours = _steered(m, ids, SteeringSpec(stack, vector))
    _assert_matches(ours, theirs, plain_logits, f"deepseek_v4 add at {stack}")


def test_altup_stack_steering_on_gemma3n() -> None:
    """resid_streams is [b, s, n, d] while Gemma-3n's blocks pass [n, b, s, d]: a write lands per
    stream, the same as a hand-written hook on the stack."""
    m = model("gemma3n")
    ids = prompt_ids(m)
    layer = 1
    block = decoder_layers(m.hf_model)[layer]
    vector = _direction(m.facts.n_streams * m.d_model, 9)

    def edit_stack(module: Any, args: Any, output: Any) -> Any:
        hidden = layer_output(output)  # [n, b, s, d]
        return set_layer_output(output, hidden + vector.reshape(hidden.shape[0], 1, 1, -1))

    stack = Address("resid_streams", layer)
    theirs = _reference(m, ids, [(block, edit_stack)])
    ours = _steered(m, ids, SteeringSpec(stack, vector))
    _assert_matches(ours, theirs, m.forward_logits(ids), f"gemma3n add at {stack}")


# --- resid_mid writes steer the residual stream, not only the MLP input ---------------------------
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_resid_mid_add_equals_the_same_add_at_attn_out_post(family: str) -> None:
    # Adding d to the mid-layer residual and adding d to what attention writes into it are the
    # same edit: both the MLP's input and the skip path see resid_mid + d.
    from interp_core.errors import InterpError
    from interp_core.points import absence_reason

    m = model(family)
    ids = prompt_ids(m)
    layer = m.n_layers // 2
    vector = _direction(m.d_model, 3)
    at_mid = SteeringSpec(Address("resid_mid", layer), vector)
    if absence_reason("resid_mid", m.facts, layer) or m.facts.n_streams > 1:
        # Parallel blocks have no mid-layer residual; multi-stream trunks name a stream.
        with pytest.raises(InterpError):
            m.run_with_cache(ids, [], steering=at_mid)
        return
    last = Address("resid_post", m.n_layers - 1)
    mid = m.run_with_cache(ids, [last], steering=at_mid)
    plain = m.run_with_cache(ids, [last])
    at_write = SteeringSpec(Address("attn_out_post", layer), vector)
    if absence_reason("attn_out_post", m.facts, layer):
        # Falcon-H1 sums attention and Mamba-2 inside the block: no write to steer there.
        with pytest.raises(InterpError):
            m.run_with_cache(ids, [last], steering=at_write)
        assert (mid[last] - plain[last]).abs().max().item() > 1e-3  # the edit took effect
        return
    out = m.run_with_cache(ids, [last], steering=at_write)
    scale = max(1.0, out[last].abs().max().item())
    assert (mid[last] - out[last]).abs().max().item() <= 1e-5 * scale, family
    assert (mid[last] - plain[last]).abs().max().item() > 1e-3  # the edit took effect


def test_resid_mid_projection_write_keeps_gradients_usable() -> None:
    from interp_core.backends import load_model
    from interp_testmodels.families import build_family

    m = load_model(str(build_family("llama")), backend="eager", requires_grad=True)
    ids = prompt_ids(m)
    direction = _direction(m.d_model, 4)
    spec = SteeringSpec(Address("resid_mid", 0), direction, op="orthogonal", scale=0.0)
    cache = m.run_with_cache(ids, [Address("resid_post", 1)], steering=spec, detach=False)
    cache[Address("resid_post", 1)].sum().backward()  # no in-place version error


# --- batches: every row is steered on its own ---------------------------------------------------
def _batch_rows(m: EagerModel) -> torch.Tensor:
    """Three different, equally long prompts: the test prompt, reversed, and rotated by 3."""
    ids = prompt_ids(m)
    return torch.cat([ids, ids.flip(-1), ids.roll(3, dims=-1)])


def _batch_cases(address: Address, plain: torch.Tensor) -> list[tuple[str, SteeringSpec]]:
    width, seq = plain.shape[-1], plain.shape[1]
    vector = _direction(width, seed=13)
    along = (plain @ _unit(vector)).flatten()
    low, high = (float(q) for q in torch.quantile(along, torch.tensor([0.3, 0.7])))
    positions = (1, seq - 2)
    return [
        ("add", SteeringSpec(address, vector, scale=2.5)),
        ("orthogonal", SteeringSpec(address, vector, op="orthogonal", scale=0.0)),
        ("orthogonal-scaled", SteeringSpec(address, vector, op="orthogonal", scale=-1.5)),
        ("projection_cap", SteeringSpec(address, vector, op="projection_cap", min=low, max=high)),
        ("add-positions", SteeringSpec(address, vector, scale=1.5, positions=positions)),
        (
            "orthogonal-positions",
            SteeringSpec(address, vector, op="orthogonal", scale=0.5, positions=positions),
        ),
        (
            "projection_cap-positions",
            SteeringSpec(
                address, vector, op="projection_cap", min=low, max=high, positions=positions
            ),
        ),
    ]


def _reference_rows(spec: SteeringSpec, plain: torch.Tensor) -> torch.Tensor:
    """`interp_core.steering.apply_reference` (float64) on every row of `plain` [batch, seq, w]."""
    rows = [
        [apply_reference(spec, token, position) for position, token in enumerate(row.tolist())]
        for row in plain.to(torch.float64)
    ]
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen3_next", "deepseek_v4"])
def test_each_row_of_a_batch_is_steered_as_if_alone(family: str) -> None:
    # Every op's projection is per row: a batch of three different prompts under one spec gives
    # each row the steered activation that row gets alone, and the float64 reference applied to
    # that row's own unsteered activation. (A projection averaged over the batch moves the rows
    # by the spread of their projections, O(1) here.)
    m = model(family)
    batch = _batch_rows(m)
    address = resid_address(m, m.n_layers // 2)
    plain = m.run_with_cache(batch, [address])[address]
    tolerance = 1e-5 * max(1.0, plain.abs().max().item())
    for name, spec in _batch_cases(address, plain):
        steered = m.run_with_cache(batch, [address], steering=spec)[address]
        expected = _reference_rows(spec, plain)
        what = f"{family} {name} at {address}"
        assert (steered.to(torch.float64) - expected).abs().max().item() <= tolerance, what
        assert (steered - plain).abs().max().item() > 1e-3, f"{what} changed nothing"
        for row in range(batch.shape[0]):
            alone = m.run_with_cache(batch[row : row + 1], [address], steering=spec)[address]
            torch.testing.assert_close(
                steered[row : row + 1], alone, atol=tolerance, rtol=0, msg=f"{what}, row {row}"
            )


def test_a_point_read_where_nothing_can_be_replaced_is_point_not_writable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The one class every backend raises for this refusal (vLLM's: tests/test_vllm_write_path.py),
    # a subclass of both classes the backends once raised, so old except clauses still catch it.
    from interp_core.errors import CapabilityUnsupported, PointNotWritable, SteeringSpecError

    m = model("llama")
    address = Address("resid_post", 0)
    tap = m.tap(address)
    monkeypatch.setattr(tap, "put", None)  # as a point whose module leaves no tensor to replace
    spec = SteeringSpec(address, [0.1] * m.d_model, "add")
    with pytest.raises(PointNotWritable, match="no tensor can be replaced") as caught:
        m.run_with_cache(prompt_ids(m), [], steering=spec)
    assert isinstance(caught.value, SteeringSpecError)
    assert isinstance(caught.value, CapabilityUnsupported)

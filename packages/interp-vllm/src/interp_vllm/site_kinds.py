"""What is a site, and how is a point read from, and added to, what a forward hook sees?

A `Site` names the module to hook, the side (forward pre-hook or forward hook), how to read the
point out of the hook's arguments or output as a flat `[num_tokens, ...]` tensor, and how to add
a delta so that every later computation sees `read() + delta`. The constructors here build one
from a module's tensor argument, its output, columns of a fused projection's output, or the two
halves of a deferred residual; `interp_vllm.sites` chooses which, point by point. Reads compute
new tensors and keep none of vLLM's (its fused norms overwrite their inputs in place); adds
return replacements and never write into vLLM's tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch

__all__ = [
    "NORM_RESIDUAL",
    "NORM_X",
    "Adder",
    "Arg",
    "Reader",
    "Site",
    "as_rows",
    "columns_site",
    "index_site",
    "input_site",
    "output_site",
    "output_tensor",
    "output_value",
    "read_only",
    "site_groups",
    "sum_input_site",
    "sum_output_site",
    "watch_group",
    "with_output",
]

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
class Arg:
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


def output_tensor(out: Any) -> torch.Tensor:
    """A module's main output: the tensor itself, or element 0 of vLLM's `(out, bias)` pairs."""
    return out[0] if isinstance(out, tuple | list) else out


def output_value(out: Any) -> torch.Tensor:
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


def with_output(out: Any, value: torch.Tensor) -> Any:
    if isinstance(out, tuple | list):
        return type(out)([value, *out[1:]]) if isinstance(out, tuple) else [value, *out[1:]]
    return value


def as_rows(tensor: torch.Tensor, batched: bool, flatten: bool) -> torch.Tensor:
    """The point's `[T, ...]` form of a module tensor.

    `batched`: the module sees HF's `[1, T, ...]` (vLLM's Transformers modeling backend runs the
    HF modules on the flat batch as one sequence), so the leading 1 goes. `flatten`: per-head
    `[T, heads, head_dim]` becomes `[T, heads*head_dim]`, as the eager backend reports heads.
    """
    if batched:
        tensor = tensor.reshape(-1, *tensor.shape[2:])
    return tensor.reshape(tensor.shape[0], -1) if flatten else tensor


def input_site(
    module: torch.nn.Module,
    arg: Arg,
    *,
    flatten: bool = False,
    scale: float | None = None,
    batched: bool = False,
) -> Site:
    """A tensor argument of `module`, optionally flattened over heads or scaled."""

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        value = as_rows(arg.get(args, kwargs), batched, flatten)
        return value * scale if scale is not None else value

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = arg.get(args, kwargs)
        step = delta / scale if scale is not None else delta
        return arg.put(args, kwargs, value + step.reshape(value.shape).to(value.dtype))

    return Site(module, "pre", read, add)


def output_site(
    module: torch.nn.Module,
    *,
    flatten: bool = False,
    scale: float | None = None,
    batched: bool = False,
) -> Site:
    """A module's main output (element 0 of a tuple), optionally flattened or scaled."""

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        value = as_rows(output_value(out), batched, flatten)
        return value * scale if scale is not None else value

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = output_tensor(out)
        step = delta / scale if scale is not None else delta
        return with_output(out, value + step.reshape(value.shape).to(value.dtype))

    return Site(module, "post", read, add)


def columns_site(module: torch.nn.Module, start: int, width: int, *, batched: bool = False) -> Site:
    """Columns `start:start+width` of a fused projection's output (a gate or up half)."""

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        return as_rows(output_value(out), batched, False)[..., start : start + width]

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = output_tensor(out)
        full = torch.zeros_like(value)
        full[..., start : start + width] = delta.reshape(*value.shape[:-1], width).to(value.dtype)
        return with_output(out, value + full)

    return Site(module, "post", read, add)


def index_site(module: torch.nn.Module, columns: list[int], *, batched: bool = False) -> Site:
    """Scattered columns of a fused projection's output (Qwen3-Next's per-head gate halves)."""
    index = torch.tensor(columns, dtype=torch.long)

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        value = as_rows(output_value(out), batched, False)
        return value.index_select(-1, index.to(value.device))

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = output_tensor(out)
        full = torch.zeros_like(value)
        step = delta.reshape(*value.shape[:-1], len(columns)).to(value.dtype)
        full.index_copy_(-1, index.to(value.device), step)
        return with_output(out, value + full)

    return Site(module, "post", read, add)


def sum_input_site(module: torch.nn.Module, hidden: Arg, residual: Arg) -> Site:
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


def sum_output_site(module: torch.nn.Module) -> Site:
    """A deferred-residual layer's output `(hidden, residual)`: the residual is their sum."""

    def read(args: tuple, kwargs: dict, out: Any) -> torch.Tensor:
        if isinstance(out, tuple | list):
            if len(out) > 1 and isinstance(out[1], torch.Tensor):
                return out[0] + out[1]
            return out[0]
        return out

    def add(args: tuple, kwargs: dict, out: Any, delta: torch.Tensor) -> Any:
        value = output_tensor(out)
        return with_output(out, value + delta.to(value.dtype))

    return Site(module, "post", read, add)


def site_groups(
    sites: Mapping[str, Site], keys: Iterable[str]
) -> dict[tuple[int, str], tuple[torch.nn.Module, str, list[str]]]:
    """The `keys` that have a site, grouped by (module, side): one hook serves each group."""
    groups: dict[tuple[int, str], tuple[torch.nn.Module, str, list[str]]] = {}
    for key in sorted(keys):
        site = sites.get(key)
        if site is not None:
            gid = (id(site.module), site.phase)
            groups.setdefault(gid, (site.module, site.phase, []))[2].append(key)
    return groups


def watch_group(module: torch.nn.Module, phase: str, body: Callable[[Any, Any, Any], Any]) -> Any:
    """Register `body(args, kwargs, output)` as `module`'s forward pre-hook ("pre", output None)
    or forward hook ("post"); what it returns is the hook's return value. Returns the handle."""
    if phase == "pre":
        return module.register_forward_pre_hook(
            lambda m, a, kw: body(a, kw, None), with_kwargs=True
        )
    return module.register_forward_hook(lambda m, a, kw, o: body(a, kw, o), with_kwargs=True)


def read_only(site: Site, why: str) -> Site:
    return Site(site.module, site.phase, site.read, None, why)


NORM_X = Arg(0, "x")  # vLLM norms: (x, residual)
NORM_RESIDUAL = Arg(1, "residual")

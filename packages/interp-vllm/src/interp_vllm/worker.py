"""What runs inside a vLLM worker process to read and write the residual stream?

`InterpWorkerExtension` is mixed into vLLM's Worker class (`worker_extension_cls`), and the client
calls its methods by name through `LLM.collective_rpc`, so no pickled callable ever travels and
`VLLM_ALLOW_INSECURE_SERIALIZATION` stays off. Arguments arrive as plain lists and ints; tensors
leave as `(bytes, shape, dtype)` triples, because vLLM's RPC serializer does not carry tensors.

The hooks sit on the decoder layers. vLLM's Llama-style layers are called as
`layer(positions, hidden, residual)` and return `(hidden, residual)` with the residual add deferred
to the next layer's fused add-norm, so `resid_post = out[0] + out[1]` (forward hook) and
`resid_pre = hidden + residual`, or `hidden` alone at layer 0 where residual is None (forward
pre-hook). Adding a vector to `out[0]` adds it to `resid_post` without touching the fused
arithmetic.

Nothing here may raise while a forward runs: an exception in a hook kills the engine (multiprocess)
or hangs the next request (in-process). The client validates every argument before it is sent;
the hook bodies still catch everything and record the failure, which the client reads back with
`interp_collect` and raises as a library error on its side.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["InterpWorkerExtension", "decode_tensor", "encode_tensor"]

_LAYER_LISTS = ("model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers")


def encode_tensor(tensor: torch.Tensor) -> tuple[bytes, list[int], str]:
    """A tensor as raw bytes, shape and dtype name: what vLLM's RPC can carry."""
    flat = tensor.detach().to("cpu").contiguous()
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return raw, list(flat.shape), str(flat.dtype).removeprefix("torch.")


def decode_tensor(raw: bytes, shape: list[int], dtype: str) -> torch.Tensor:
    """The inverse of `encode_tensor`: a fresh, writable tensor owned by the caller."""
    kind = getattr(torch, dtype)
    if not raw:
        return torch.empty(shape, dtype=kind)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(kind).reshape(shape).clone()


def _find_layers(model: torch.nn.Module, n_layers: int) -> torch.nn.ModuleList | None:
    for path in _LAYER_LISTS:
        node: Any = model
        for part in path.split("."):
            node = getattr(node, part, None)
            if node is None:
                break
        if isinstance(node, torch.nn.ModuleList) and len(node) == n_layers:
            return node
    return None


def _residual(out: Any) -> torch.Tensor:
    if isinstance(out, tuple):
        if len(out) > 1 and isinstance(out[1], torch.Tensor):
            return out[0] + out[1]
        return out[0]
    return out


class InterpWorkerExtension:
    """Methods vLLM adds to its Worker; every one is called by name over `collective_rpc`.

    State lives on the worker object (`_interp_*` attributes), so it persists between RPCs.
    """

    # --- set-up ---------------------------------------------------------------------------------
    def interp_install(self, n_layers: int) -> str | None:
        """Hook every decoder layer once; None on success, else why the layers were not found."""
        if getattr(self, "_interp_handles", None):
            return None
        model = self.model_runner.model  # type: ignore[attr-defined]
        layers = _find_layers(model, n_layers)
        if layers is None:
            return (
                f"no decoder-layer list of length {n_layers} under {', '.join(_LAYER_LISTS)} in "
                f"{type(model).__name__}"
            )
        self._interp_capture: set[tuple[str, int]] = set()
        self._interp_rows: dict[str, list[torch.Tensor]] = {}
        self._interp_steer: dict[int, list[tuple[torch.Tensor, torch.Tensor | None]]] = {}
        self._interp_errors: list[str] = []
        self._interp_handles = []
        for i, layer in enumerate(layers):
            self._interp_handles.append(
                layer.register_forward_pre_hook(self._interp_pre_hook(i), with_kwargs=True)
            )
            self._interp_handles.append(
                layer.register_forward_hook(self._interp_hook(i), with_kwargs=True)
            )
        return None

    def interp_uninstall(self) -> None:
        for handle in getattr(self, "_interp_handles", None) or []:
            handle.remove()
        self._interp_handles = []

    # --- per request ----------------------------------------------------------------------------
    def interp_arm(
        self,
        capture: list[tuple[str, int]],
        steering: list[tuple[int, list[float], list[int] | None]],
    ) -> None:
        """Set what the next forwards capture and steer; clears earlier rows and errors.

        `capture` holds `(point, layer)` pairs, point being "resid_pre" or "resid_post".
        `steering` holds `(layer, vector, positions)`: an `add` at `resid_post.layer`, limited to
        those absolute positions when given. The client has checked widths and finiteness.
        """
        self._interp_capture = {(str(name), int(layer)) for name, layer in capture}
        self._interp_rows = {}
        self._interp_errors = []
        steer: dict[int, list[tuple[torch.Tensor, torch.Tensor | None]]] = {}
        for layer, vector, positions in steering:
            where = None if positions is None else torch.tensor(positions, dtype=torch.long)
            steer.setdefault(layer, []).append((torch.tensor(vector), where))
        self._interp_steer = steer

    def interp_disarm(self) -> None:
        self._interp_capture = set()
        self._interp_steer = {}

    def interp_collect(self) -> dict[str, Any]:
        """The rows captured since `interp_arm` ("point.layer" keys), any hook failure; clears."""
        captured = {
            key: encode_tensor(torch.cat(rows)) for key, rows in self._interp_rows.items() if rows
        }
        errors = list(self._interp_errors)
        self._interp_rows = {}
        self._interp_errors = []
        return {"captured": captured, "errors": errors}

    # --- the hooks ------------------------------------------------------------------------------
    def _interp_pre_hook(self, layer: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> None:
            try:
                if ("resid_pre", layer) in self._interp_capture:
                    hidden = args[1] if len(args) > 1 else kwargs["hidden_states"]
                    residual = args[2] if len(args) > 2 else kwargs.get("residual")
                    row = hidden if residual is None else hidden + residual
                    self._interp_keep(f"resid_pre.{layer}", row)
            except Exception as exc:  # never let a hook take the engine down
                self._interp_errors.append(f"layer {layer} (pre): {type(exc).__name__}: {exc}")

        return hook

    def _interp_keep(self, key: str, row: torch.Tensor) -> None:
        self._interp_rows.setdefault(key, []).append(row.detach().to("cpu", copy=True))

    def _interp_hook(self, layer: int) -> Any:
        def hook(module: Any, args: Any, kwargs: Any, out: Any) -> Any:
            try:
                return self._interp_at(layer, args, kwargs, out)
            except Exception as exc:  # never let a hook take the engine down
                self._interp_errors.append(f"layer {layer}: {type(exc).__name__}: {exc}")
                return None

        return hook

    def _interp_at(self, layer: int, args: Any, kwargs: Any, out: Any) -> Any:
        specs = self._interp_steer.get(layer)
        replaced = None
        if specs:
            hidden = out[0] if isinstance(out, tuple) else out
            positions = kwargs.get("positions", args[0] if args else None)
            delta = torch.zeros_like(hidden)
            for vector, where in specs:
                vec = vector.to(device=hidden.device, dtype=hidden.dtype)
                if where is None:
                    delta += vec
                else:
                    mask = torch.isin(positions.reshape(-1), where.to(positions.device))
                    delta += mask.unsqueeze(-1).to(hidden.dtype) * vec
            hidden = hidden + delta
            replaced = (hidden, *out[1:]) if isinstance(out, tuple) else hidden
            out = replaced
        if ("resid_post", layer) in self._interp_capture:
            self._interp_keep(f"resid_post.{layer}", _residual(out))
        return replaced

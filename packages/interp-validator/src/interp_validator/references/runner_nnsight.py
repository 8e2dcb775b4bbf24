"""Reference runner for nnsight (`LanguageModel`) and nnterp (`StandardizedTransformer`).
Executed with a reference environment's python; imports only nnsight / nnterp, transformers,
torch, safetensors and the standard library.

nnsight mirrors the HF module tree, whose names differ per family, so reads arrive as *sites*
(`role:io[:element]`, e.g. `v_proj:output`, `mixer:output:1`) and are resolved here on the live
model by attribute-name vocabularies. nnterp reads arrive as its standardized accessors
(`layers_input[3]`, `attention_probabilities[0]`, `ln_final.output`, `logits`).

Both engines require that, within one trace, modules are touched in execution order and that
the trace body lives in a real file (this one). Reads are sorted by layer and by a fixed order of
sites within a block; if a family runs its modules in another order, the grouped trace fails and
every site is read in a trace of its own instead, so an unusual order costs time, never results.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _runner_common as common

# Attribute vocabularies (names as transformers spells them).
TRUNK_CONTAINERS = ("model", "transformer", "gpt_neox", "language_model", "decoder")
LAYER_LISTS = ("layers", "h", "blocks")
EMBEDS = ("embed_tokens", "wte", "embed_in", "word_embeddings")
FINAL_NORMS = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "norm_f")
LM_HEADS = ("lm_head", "embed_out")
ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
    # role: (parent role, attribute names)
    # DBRX nests its attention and both norms in norm_attn_norm (dotted names reach inside).
    "mixer": ("layer", ("self_attn", "self_attention", "attention", "attn", "norm_attn_norm.attn")),
    "q_proj": ("mixer", ("q_proj", "query")),
    "k_proj": ("mixer", ("k_proj", "key")),
    "v_proj": ("mixer", ("v_proj", "value")),
    "qkv_proj": ("mixer", ("qkv_proj", "c_attn", "query_key_value", "Wqkv")),
    "o_proj": ("mixer", ("o_proj", "c_proj", "out_proj", "dense")),
    "q_norm": ("mixer", ("q_norm", "q_layernorm")),
    "k_norm": ("mixer", ("k_norm", "k_layernorm")),
    "mlp": ("layer", ("mlp", "feed_forward", "block_sparse_moe", "ffn")),
    "gate_proj": ("mlp", ("gate_proj", "w1")),
    "up_proj": ("mlp", ("up_proj", "c_fc", "dense_h_to_4h", "fc_in", "fc1", "w3")),
    "down_proj": ("mlp", ("down_proj", "c_proj", "dense_4h_to_h", "fc_out", "fc2", "w2")),
    "gate_up_proj": ("mlp", ("gate_up_proj",)),
    "router": ("mlp", ("gate", "router")),
    "pre_attn_norm": ("layer", ("input_layernorm", "ln_1", "norm_attn_norm.norm_1")),
    "post_mlp_norm": ("layer", ("post_feedforward_layernorm",)),
}
# Execution order inside one decoder block, for (role, io).
ORDER = [
    ("layer", "input"),
    ("pre_attn_norm", "output"),
    ("mixer", "input"),
    ("qkv_proj", "output"),
    ("q_proj", "output"),
    ("q_norm", "input"),
    ("q_norm", "output"),
    ("k_proj", "output"),
    ("k_norm", "input"),
    ("k_norm", "output"),
    ("v_proj", "output"),
    ("o_proj", "input"),
    ("mixer", "output"),
    ("post_attn_norm", "output"),
    ("pre_mlp_norm", "input"),
    ("mlp", "input"),
    ("router", "output"),
    ("gate_up_proj", "output"),
    ("gate_proj", "output"),
    ("up_proj", "output"),
    ("down_proj", "input"),
    ("mlp", "output"),
    ("post_mlp_norm", "output"),
    ("layer", "output"),
]
_RANK = {site: rank for rank, site in enumerate(ORDER)}


class Missing(LookupError):
    """A role has no module on this family."""


def _child(module: Any, names: tuple[str, ...]) -> tuple[str, Any] | None:
    for name in names:
        child = module
        for part in name.split("."):
            child = getattr(child, part, None)
        if isinstance(child, torch.nn.Module):
            return name, child
    return None


def _find_layers(model: torch.nn.Module) -> tuple[str, torch.nn.ModuleList]:
    queue: list[tuple[str, Any]] = [("", model)]
    while queue:
        path, module = queue.pop(0)
        for name in LAYER_LISTS:
            blocks = getattr(module, name, None)
            if isinstance(blocks, torch.nn.ModuleList) and len(blocks) > 0:
                return (f"{path}.{name}" if path else name), blocks
        for name in TRUNK_CONTAINERS:
            child = getattr(module, name, None)
            if isinstance(child, torch.nn.Module):
                queue.append((f"{path}.{name}" if path else name, child))
    message = f"cannot find the decoder layers of {type(model).__name__}"
    raise common.Unsupported(message)


class Tree:
    """Dotted module paths for each role, resolved on the HF model."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.layers_path, self.layers = _find_layers(model)
        trunk_path = self.layers_path.rpartition(".")[0]
        trunk = model.get_submodule(trunk_path) if trunk_path else model
        self.trunk: dict[str, str] = {}
        for role, names, owner, prefix in (
            ("embed", EMBEDS, trunk, trunk_path),
            ("final_norm", FINAL_NORMS, trunk, trunk_path),
            ("lm_head", LM_HEADS, model, ""),
        ):
            found = _child(owner, names)
            if found:
                self.trunk[role] = f"{prefix}.{found[0]}" if prefix else found[0]

    def path(self, role: str, layer: int | None) -> str:
        if role in self.trunk:
            return self.trunk[role]
        if layer is None:
            message = f"no module for the trunk role {role!r}"
            raise Missing(message)
        base = f"{self.layers_path}.{layer}"
        block = self.layers[layer]
        if role == "layer":
            return base
        sandwich = getattr(block, "post_feedforward_layernorm", None) is not None
        if role in ("post_attn_norm", "pre_mlp_norm"):
            names = (
                ("post_attention_layernorm",)
                if role == "post_attn_norm"
                else ("pre_feedforward_layernorm", "ln_2")
            )
            if role == "pre_mlp_norm" and not sandwich:
                names = ("post_attention_layernorm", "ln_2", "norm_attn_norm.norm_2")
            if role == "post_attn_norm" and not sandwich:
                message = "the block has no post-attention norm (no sandwich norms)"
                raise Missing(message)
            return _child_path(block, base, role, names)
        parent_role, names = ROLES[role]
        parent_path = self.path(parent_role, layer)
        parent = self.model.get_submodule(parent_path)
        if role == "router" and getattr(parent, "experts", None) is None:
            message = "the MLP has no experts, so no router"
            raise Missing(message)
        return _child_path(parent, parent_path, role, names, f" under {parent_path}")


def _child_path(
    parent: Any, parent_path: str, role: str, names: tuple[str, ...], where: str = ""
) -> str:
    """The path of `parent`'s first child among `names` playing `role`; Missing when none is."""
    found = _child(parent, names)
    if found is None:
        message = f"no {role} module among {names}{where}"
        raise Missing(message)
    return f"{parent_path}.{found[0]}"


def _torch_module(envoy: Any) -> torch.nn.Module:
    """The torch model an nnsight wrapper holds (`_module` on 0.7 and 0.8, `_model` earlier)."""
    for name in ("_module", "_model"):
        try:
            module = object.__getattribute__(envoy, name)
        except AttributeError:
            continue
        if isinstance(module, torch.nn.Module):
            return module
    message = f"cannot find the torch model inside {type(envoy).__name__}"
    raise common.Unsupported(message)


def _envoy(root: Any, path: str) -> Any:
    node = root
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


def _adds_own_residual(module: torch.nn.Module) -> bool:
    try:
        return "residual" in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return False


def _element(value: Any, element: int | None) -> Any:
    if element is None:
        return value
    if isinstance(value, (tuple, list)):
        if element >= len(value):
            message = f"the module returns {len(value)} values, not {element + 1}"
            raise Missing(message)
        return value[element]
    if element == 0:
        return value  # a module returning a bare tensor (transformers 5 layers and MLPs)
    message = f"the module returns a single tensor, so element {element} does not exist"
    raise Missing(message)


# --- nnsight --------------------------------------------------------------------------------


def _site(read: dict[str, Any]) -> tuple[str, str, int | None]:
    role, io, *rest = read["target"].split(":")
    return role, io, int(rest[0]) if rest else None


def _plan_nnsight(job: common.Job, tree: Tree) -> dict[tuple, list[tuple[dict, Any]]]:
    """Group reads by the module access they need: (sort key, path, io) → [(read, extract)]."""
    groups: dict[tuple, list[tuple[dict, Any]]] = {}
    for read in job.reads:
        role, io, element = _site(read)
        layer = read["layer"]
        opts = read.get("options") or {}
        extract: Any = element
        try:
            if role == "v_proj":
                try:
                    path = tree.path("v_proj", layer)
                except Missing:
                    path = tree.path("qkv_proj", layer)
                    role, extract = "qkv_proj", ("qkv", path, opts)
            elif role in ("gate_proj", "up_proj") and "gate_up_half" in opts:
                try:
                    path = tree.path(role, layer)
                except Missing:
                    path = tree.path("gate_up_proj", layer)
                    role, extract = "gate_up_proj", ("half", opts["gate_up_half"])
            elif (
                read["point"] in ("attn_out", "attn_out_post", "mlp_out", "mlp_out_post")
                and role in ("mixer", "mlp")
                and _adds_own_residual(tree.model.get_submodule(tree.path(role, layer)))
            ):
                # BLOOM / MPT modules add the residual before returning; the raw write is the
                # output projection's output.
                role = "o_proj" if role == "mixer" else "down_proj"
                io, extract = "output", None
                path = tree.path(role, layer)
            else:
                path = tree.path(role, layer)
        except Missing as exc:
            job.not_expressible(read, f"nnsight: {exc}")
            continue
        if layer is None:
            key = (0 if role == "embed" else 2, 0, 0 if role == "final_norm" else 1)
        else:
            key = (1, layer, _RANK.get((role, io), 99))
        groups.setdefault((key, path, io), []).append((read, extract))
    return dict(sorted(groups.items(), key=lambda item: item[0][0]))


def _split_qkv(value: torch.Tensor, path: str, opts: dict, model_type: str) -> torch.Tensor:
    heads, kv, dim = opts["n_heads"], opts["n_kv_heads"], opts["head_dim"]
    name = path.rpartition(".")[2]
    if name == "query_key_value" and model_type == "gpt_neox":
        # GPT-NeoX packs per head: [b, s, heads, (q, k, v), d].
        b, s, _ = value.shape
        return value.view(b, s, heads, 3, dim)[:, :, :, 2, :].reshape(b, s, heads * dim)
    if name in ("c_attn", "qkv_proj", "Wqkv"):
        start = heads * dim + kv * dim
        return value[..., start : start + kv * dim]
    message = f"fused projection {path} of {model_type} has an unknown q/k/v packing"
    raise Missing(message)


def _finish(job: common.Job, read: dict, extract: Any, value: Any, path: str) -> None:
    opts = read.get("options") or {}
    try:
        if isinstance(extract, tuple) and extract[0] == "qkv":
            value = _split_qkv(value, path, opts, job.facts.get("model_type", ""))
            source = f"{path}.output[v slice]"
        elif isinstance(extract, tuple) and extract[0] == "half":
            value = value.chunk(2, dim=-1)[extract[1]]
            source = f"{path}.output[{'gate' if extract[1] == 0 else 'up'} half]"
        else:
            value = _element(value, extract)
            source = path
        multiplier = opts.get("multiplier")
        if multiplier is not None and read["point"] == "embeddings":
            module = job_model(job).get_submodule(path)
            if "scaled" in type(module).__name__.lower():
                source += " (module applies the multiplier)"
            else:
                value = value * torch.tensor(multiplier, dtype=value.dtype)
                source += f" × {multiplier}"
    except Missing as exc:
        job.not_expressible(read, f"nnsight: {exc}")
        return
    job.put(read, value, source=source)


_MODELS: dict[int, torch.nn.Module] = {}


def job_model(job: common.Job) -> torch.nn.Module:
    return _MODELS[job.index]


def _snapshot(value: Any) -> Any:
    """A copy taken when the module hands the value over: some families modify a module's
    output in place afterwards (Falcon adds the attention output into the MLP output), and a
    saved reference would then show the modified tensor."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_snapshot(item) for item in value)
    return value


def _trace(lm: Any, ids: torch.Tensor, groups: list[tuple[tuple, str, str]]) -> dict:
    import nnsight

    saved: dict[tuple[str, str], Any] = {}
    with lm.trace(ids):
        for _key, path, io in groups:
            node = _envoy(lm, path)
            value = node.input if io == "input" else node.output
            saved[(path, io)] = nnsight.save(_snapshot(value))
    return saved


def _execution_order(model: torch.nn.Module, ids: torch.Tensor, paths: set[str]) -> list:
    """(path, io) in the order the model touches them, from one plain forward with torch hooks.

    Families order their submodules differently (Gemma-3 runs v_proj before q_norm, Qwen3 after
    k_norm), and nnsight needs reads in execution order; asking the model is exact.
    """
    events: list[tuple[str, str]] = []
    handles = []

    def watch(path: str) -> None:
        module = model.get_submodule(path)

        def before(*_: Any) -> None:
            events.append((path, "input"))

        def after(*_: Any) -> None:
            events.append((path, "output"))

        handles.append(module.register_forward_pre_hook(before))
        handles.append(module.register_forward_hook(after))

    for path in paths:
        watch(path)
    try:
        model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return list(dict.fromkeys(events))


def _read_groups(job: common.Job, lm: Any, groups: dict[tuple, list]) -> None:
    ids = job.ids()
    try:
        seen = _execution_order(job_model(job), ids, {path for _, path, _ in groups})
        position = {event: index for index, event in enumerate(seen)}
        order = sorted(groups, key=lambda g: (position.get((g[1], g[2]), len(position)), g[0]))
    except Exception as exc:
        job.notes.append(f"could not record the execution order ({common.describe(exc)})")
        order = list(groups)
    try:
        saved = _trace(lm, ids, order)
    except Exception as exc:
        job.notes.append(
            f"one trace over all reads failed ({common.describe(exc)[:300]}); "
            "reading each site in its own trace"
        )
        saved = {}
        for group in order:
            try:
                saved.update(_trace(lm, ids, [group]))
            except Exception as single:
                for read, _ in groups[group]:
                    reason = f"trace of {group[1]}.{group[2]} failed: {common.describe(single)}"
                    job.error(read, reason)
    for group in order:
        _key, path, io = group
        if (path, io) not in saved:
            continue
        for read, extract in groups[group]:
            _finish(job, read, extract, saved[(path, io)], path)


def run_nnsight(job: common.Job) -> None:
    from nnsight import LanguageModel

    try:
        lm = LanguageModel(
            job.model_dir,
            device_map="cpu",
            dispatch=True,
            attn_implementation="eager",
            dtype=torch.float32,
        )
    except Exception as exc:
        message = f"nnsight LanguageModel failed to load the model: {common.describe(exc)}"
        raise common.Unsupported(message) from exc
    model = _torch_module(lm)
    model.eval()
    _MODELS[job.index] = model
    try:
        _read_groups(job, lm, _plan_nnsight(job, Tree(model)))
    finally:
        del _MODELS[job.index]  # one model at a time: a sweep loads dozens


# --- nnterp ---------------------------------------------------------------------------------

_NNTERP_RANK = {
    "token_embeddings": (0, 0),
    "layers_input": (1, 0),
    "attentions_input": (1, 2),
    "attention_probabilities": (1, 11),
    "attentions_output": (1, 12),
    "mlps_input": (1, 15),
    "mlps_output": (1, 21),
    "layers_output": (1, 23),
    "ln_final": (2, 0),
    "logits": (2, 1),
}
_ACCESSOR = re.compile(r"([a-z_]+)(?:\[(\d+)\])?(?:\.(input|output))?\Z")


def _nnterp_get(st: Any, name: str, index: str | None, attr: str | None) -> Any:
    import nnsight

    node = getattr(st, name)
    if index is not None:
        node = node[int(index)]
    if attr is not None:
        node = getattr(node, attr)
    return nnsight.save(_snapshot(node))


def run_nnterp(job: common.Job) -> None:
    from nnterp import StandardizedTransformer

    probs_error = None
    try:
        st = StandardizedTransformer(
            job.model_dir, device_map="cpu", dtype=torch.float32, enable_attention_probs=True
        )
    except Exception as exc:
        probs_error = common.describe(exc)
        try:
            st = StandardizedTransformer(
                job.model_dir,
                device_map="cpu",
                dtype=torch.float32,
                attn_implementation="eager",
            )
        except Exception as exc2:
            message = f"nnterp StandardizedTransformer failed to load: {common.describe(exc2)}"
            raise common.Unsupported(message) from exc2
        job.notes.append(
            f"enable_attention_probs=True failed ({probs_error}); loaded without it, eager"
        )
    plan: list[tuple[tuple, str, list[dict]]] = []
    by_target: dict[str, list[dict]] = {}
    for read in job.reads:
        match = _ACCESSOR.match(read["target"])
        if match is None or match.group(1) not in _NNTERP_RANK:
            job.not_expressible(read, f"nnterp: unknown accessor {read['target']!r}")
            continue
        if match.group(1) == "attention_probabilities" and probs_error is not None:
            job.not_expressible(
                read,
                "nnterp cannot enable attention probabilities on this family: " + probs_error,
            )
            continue
        by_target.setdefault(read["target"], []).append(read)
    for target, reads in by_target.items():
        match = _ACCESSOR.match(target)
        assert match is not None
        group, rank = _NNTERP_RANK[match.group(1)]
        layer = int(match.group(2)) if match.group(2) else 0
        plan.append(((group, layer, rank), target, reads))
    plan.sort(key=lambda item: item[0])

    def trace(targets: list[str]) -> dict[str, Any]:
        saved: dict[str, Any] = {}
        with st.trace(job.ids()):
            for target in targets:
                m = _ACCESSOR.match(target)
                assert m is not None
                saved[target] = _nnterp_get(st, m.group(1), m.group(2), m.group(3))
        return saved

    targets = [target for _, target, _ in plan]
    try:
        saved = trace(targets)
    except Exception as exc:
        job.notes.append(
            f"one trace over all reads failed ({common.describe(exc)[:300]}); "
            "reading each accessor in its own trace"
        )
        saved = {}
        for target in targets:
            try:
                saved.update(trace([target]))
            except Exception as single:
                # nnterp's own accessor does not reach this module on this family.
                for read in by_target[target]:
                    reason = f"nnterp cannot read {target} here: {common.describe(single)}"
                    job.not_expressible(read, reason)
    model = _torch_module(st)
    for _, target, reads in plan:
        if target not in saved:
            continue
        for read in reads:
            value = _element(saved[target], 0)
            multiplier = (read.get("options") or {}).get("multiplier")
            source = target
            if multiplier is not None:
                embed = model.get_input_embeddings()
                if "scaled" in type(embed).__name__.lower():
                    source += " (module applies the multiplier)"
                else:
                    value = value * torch.tensor(multiplier, dtype=value.dtype)
                    source += f" × {multiplier}"
            job.put(read, value, source=source)


def run(mode: str, job: common.Job) -> None:
    if mode == "nnsight":
        run_nnsight(job)
    elif mode == "nnterp":
        run_nnterp(job)
    else:
        message = f"runner_nnsight.py has no mode {mode!r}"
        raise ValueError(message)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(common.main(run))

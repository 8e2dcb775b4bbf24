"""Which dtype names does `load_model(dtype=...)` accept, and which dtype does each one mean?

One table for every reader: the eager backend maps the canonical names to torch dtypes, the vLLM
backend passes them to vLLM, and the sizer prices them, so a spelling one of them accepts means
the same dtype in all of them. Names only: the core imports no tensor library.

`auto` means the checkpoint's own dtype, as its config states it (`torch_dtype`, or `dtype` in
newer configs); a config that states none, or states one outside the table, means bfloat16, the
dtype checkpoints of the models users load are published in.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "AUTO_DTYPE",
    "DTYPES",
    "DTYPE_ALIASES",
    "DTYPE_BYTES",
    "UNSTATED_DTYPE",
    "accepted_dtype_names",
    "canonical_dtype",
    "resolve_dtype",
]

# The dtypes a model's activations and unquantized weights load in; narrower weights are a
# quantization choice, not a dtype.
DTYPES = ("float32", "bfloat16", "float16")
AUTO_DTYPE = "auto"
# Bytes per value of each, for whoever prices activations (the sizer, the server's precheck).
DTYPE_BYTES: Mapping[str, int] = MappingProxyType({"float32": 4, "bfloat16": 2, "float16": 2})
# What `auto` means when the config states no dtype in DTYPES.
UNSTATED_DTYPE = "bfloat16"

# Other spellings users bring, each mapped to its canonical name. `float` and `half` are torch's
# own aliases (torch.float, torch.half); the short forms are the usual shorthand.
DTYPE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "fp32": "float32",
        "f32": "float32",
        "float": "float32",
        "bf16": "bfloat16",
        "fp16": "float16",
        "f16": "float16",
        "half": "float16",
    }
)


def canonical_dtype(name: object) -> str | None:
    """The canonical name (one of DTYPES, or "auto") for any accepted spelling, else None.

    Case and surrounding space do not matter, and a `torch.` prefix is dropped, so `str()` of a
    torch dtype (`"torch.bfloat16"`) is accepted too.
    """
    if name is None:
        return None
    text = str(name).strip().lower().removeprefix("torch.")
    text = DTYPE_ALIASES.get(text, text)
    return text if text in DTYPES or text == AUTO_DTYPE else None


def resolve_dtype(name: object, stated: str | None) -> str | None:
    """The dtype a load computes in (one of DTYPES), with "auto" read from the config's `stated`.

    None when `name` is not an accepted spelling; the caller refuses it with its own error.
    """
    found = canonical_dtype(name)
    if found != AUTO_DTYPE:
        return found
    native = canonical_dtype(stated)
    return native if native in DTYPES else UNSTATED_DTYPE


def accepted_dtype_names() -> tuple[str, ...]:
    """Every accepted spelling: the canonical names, "auto", then the aliases."""
    return (*DTYPES, AUTO_DTYPE, *DTYPE_ALIASES)

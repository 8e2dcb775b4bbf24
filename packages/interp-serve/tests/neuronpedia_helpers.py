"""What the Neuronpedia tests share: the sources the mount serves, its secret, and the check
that an answer fits the contract (`interp_serve.neuronpedia.contract`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import serve_helpers

from interp_serve.neuronpedia import contract

D_SAE = 64
SECRET = "np-secret-0123456789"
L1, L0 = "1-res-test", "0-res-test"
Z1 = "1-att-test"  # an SAE on layer 1's z (attn.hook_z): the one DFA is computed for


def write_sources(root: Path, d_model: int, z_width: int) -> dict[str, Path]:
    """The suite's two residual SAEs, and one on layer 1's z."""
    dirs = serve_helpers.write_saes(root, d_model, D_SAE)
    from sae_files import write_saelens  # importable once write_saes ran

    hook = "blocks.1.attn.hook_z"
    write_saelens(root / "z1", "standard", d_in=z_width, d_sae=D_SAE, hook_name=hook, seed=3)
    return {**dirs, "z1": root / "z1"}


def source_args(dirs: dict[str, Path]) -> tuple[str, ...]:
    return (
        *("--sae", f"{L1}={dirs['relu']}", "--sae", f"{L0}={dirs['jr0']}"),
        *("--sae", f"{Z1}={dirs['z1']}"),
    )


def start_with_secret(model_path: Path, logs: Path, args: tuple[str, ...], **options: Any) -> Any:
    """A server whose mount wants SECRET (set for the server's process only)."""
    previous = os.environ.get("INTERP_NEURONPEDIA_SECRET")
    os.environ["INTERP_NEURONPEDIA_SECRET"] = SECRET
    try:
        return serve_helpers.start_server(model_path, logs, args=args, **options)
    finally:
        if previous is None:
            del os.environ["INTERP_NEURONPEDIA_SECRET"]
        else:
            os.environ["INTERP_NEURONPEDIA_SECRET"] = previous


def response_schema(path: str, method: str = "post") -> dict[str, Any]:
    operation = contract.contract()["paths"][path][method]
    return operation["responses"]["200"]["content"]["application/json"]["schema"]


def ok(client: Any, path: str, body: dict[str, Any]) -> Any:
    """POST `body`, assert 200 and that the answer fits the contract's response schema."""
    answer = client.post(path, json=body)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert contract.problems(got, response_schema(path)) == []
    return got

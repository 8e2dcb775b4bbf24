"""The worker side of SAE encoding on vLLM (`interp_vllm.sae_worker`), run on this CPU.

The mixin's methods are what the vLLM workers run; here they run on a bare host object exactly
as the worker extension would call them, over chunks of rows arriving out of position order (a
recomputed prefix) as a worker's forward steps deliver them. The answer must equal the SAE's own
top-k of the rows in position order, with identical indices, after the RPC's tensor encoding.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from interp_sae import load_sae
from interp_sae.bench import bytes_moved
from sae_files import write_saelens

from interp_core.errors import InvalidArgument
from interp_vllm.sae_worker import SAEWorkerMixin, collect_features, decode_features
from interp_vllm.worker_state import WorkerState

D_IN, D_SAE, K = 32, 128, 6


class _Host(SAEWorkerMixin):
    device = torch.device("cpu")
    _interp_state = WorkerState()  # what interp_install creates on a real worker


def test_worker_side_top_k_equals_encode_of_the_rows(tmp_path: Path) -> None:
    write_saelens(
        tmp_path / "a", "jumprelu", d_in=D_IN, d_sae=D_SAE, hook_name="blocks.1.hook_resid_post"
    )
    write_saelens(
        tmp_path / "b",
        "topk",
        d_in=D_IN,
        d_sae=D_SAE,
        hook_name="blocks.1.hook_resid_post",
        k=10,
        seed=3,
    )
    host = _Host()
    loaded = host.interp_sae_load(
        [{"name": "a", "path": str(tmp_path / "a")}, {"name": "b", "path": str(tmp_path / "b")}]
    )
    assert [(x["address"], x["d_sae"]) for x in loaded] == [("resid_post.1", D_SAE)] * 2
    first = host._interp.saes["a"]
    host.interp_sae_load([{"name": "a", "path": str(tmp_path / "a")}])
    assert host._interp.saes["a"] is first  # loaded once, not again per request
    rows = torch.randn(9, D_IN, generator=torch.Generator().manual_seed(0))
    wanted = [("a", K), ("b", K)]
    # Prefill of positions 0..5, then a recompute of 4..8: position 4 and 5 arrive twice.
    steps = [(torch.arange(0, 6), rows[:6]), (torch.arange(4, 9), rows[4:])]
    chunks = {"resid_post.1": [(w, host.interp_sae_encode_rows(wanted, r)) for w, r in steps]}
    got = decode_features(collect_features(chunks))
    for name in ("a", "b"):
        part = got[("resid_post.1", name)]
        assert part["positions"] == list(range(9))
        expected = load_sae(tmp_path / name).encode(rows).topk(K, dim=-1)
        assert torch.equal(part["indices"], expected.indices)
        assert float((part["values"] - expected.values).abs().max()) <= 1e-5
    assert bytes_moved(9, K, D_IN, 2) == {
        "worker_side": 9 * K * 8,
        "capture_then_encode": 9 * D_IN * 2,
    }


def test_an_sae_not_loaded_is_refused_naming_the_loaded_ones(tmp_path: Path) -> None:
    write_saelens(
        tmp_path / "a", "standard", d_in=D_IN, d_sae=D_SAE, hook_name="blocks.0.hook_resid_post"
    )
    host = _Host()
    host.interp_sae_load([{"name": "a", "path": str(tmp_path / "a")}])
    with pytest.raises(InvalidArgument, match=r"no SAE called 'z'.*loaded: a"):
        host.interp_sae_encode_rows([("z", 3)], torch.zeros(2, D_IN))
    assert host.interp_sae_unload(["a", "z"]) == ["a"]

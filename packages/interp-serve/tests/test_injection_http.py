"""Prompt embeddings and LoRA adapters over HTTP: the remote backend equals eager in-process.

One server started with `--lora tiny=PATH` (an adapter the test writes): embedding rows travel
as base64 safetensors, the adapter by name; captures, captured generations and completions
equal the same calls on the local eager model, and an adapter the server does not serve is
refused with the names it does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import serve_helpers
import torch

from interp_core import load_model, sync
from interp_core.errors import InterpError
from interp_testmodels.lora import write_lora_adapter
from interp_testmodels.tokenizer import TEST_PROMPT

_POINTS = ["embeddings", "resid_post.1"]


@pytest.fixture(scope="module")
def adapter(local: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lora_adapter(local.hf_model, tmp_path_factory.mktemp("lora") / "tiny")


@pytest.fixture(scope="module")
def lora_remote(
    model_path: Path, adapter: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    logs = tmp_path_factory.mktemp("serve-lora-logs")
    server = serve_helpers.start_server(
        model_path, logs, name="lora", args=("--lora", f"tiny={adapter}")
    )
    model = load_model(server.url, backend="remote", api_key=serve_helpers.KEY)
    yield model
    sync.shutdown(model)
    server.stop()


def test_embeds_and_lora_round_trip(lora_remote: Any, local: Any, adapter: Path) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    vector = torch.randn(local.d_model, generator=torch.Generator().manual_seed(0)) * 3
    rows = torch.randn(6, local.d_model, generator=torch.Generator().manual_seed(1))
    greedy = {"max_new_tokens": 5, "temperature": 0.0}
    cases = [(None, rows, None), (ids, {2: vector}, "tiny"), (ids, None, "tiny")]
    for tokens, embeds, lora in cases:
        # The server names the adapter; in-process the same folder is passed by path.
        here = None if lora is None else str(adapter)
        ours = sync.capture(lora_remote, tokens, _POINTS, prompt_embeds=embeds, lora=lora)
        want = sync.capture(local, tokens, _POINTS, prompt_embeds=embeds, lora=here)
        for point in _POINTS:
            assert torch.equal(ours[point], want[point]), point
        generated = sync.generate(lora_remote, tokens, prompt_embeds=embeds, lora=lora, **greedy)
        expected = sync.generate(local, tokens, prompt_embeds=embeds, lora=here, **greedy)
        assert generated.token_ids == expected.token_ids
        assert tuple(generated.prompt_token_ids) == tuple(expected.prompt_token_ids)
    generation, cache = sync.capture_generation(
        lora_remote, None, ["resid_post.1"], max_new_tokens=4, prompt_embeds=rows
    )
    local_generation, local_cache = sync.capture_generation(
        local, None, ["resid_post.1"], max_new_tokens=4, prompt_embeds=rows
    )
    assert generation.token_ids == local_generation.token_ids
    assert torch.equal(cache["resid_post.1"], local_cache["resid_post.1"])
    with pytest.raises(InterpError, match="tiny"):
        sync.capture(lora_remote, ids, _POINTS, lora="other")


def test_a_stream_carries_the_embeds_and_the_adapter(lora_remote: Any, local: Any) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    vector = torch.randn(local.d_model, generator=torch.Generator().manual_seed(2)) * 3
    greedy = {"max_new_tokens": 5, "temperature": 0.0, "prompt_embeds": {1: vector}}
    steps = list(sync.generate_stream(lora_remote, ids, lora="tiny", **greedy))
    whole = sync.generate(lora_remote, ids, lora="tiny", **greedy)
    assert [s.token_id for s in steps] == list(whole.token_ids)

"""Bounded memory: the activations job's peak RSS at 4x the tokens is at most 1.1x its peak at
1x, each measured in a fresh process (`ru_maxrss`) that runs the job in both layouts. The
budgets are sized so the test can fail: the extra bytes the 4x run writes in either layout are
over 12% of the 1x process's whole peak, so a job that kept its output (or anything
proportional to it) in memory would break the bound."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harvest_helpers import documents, write_jsonl_corpus

_SCRIPT = Path(__file__).with_name("_rss_harvest.py")
ONE_X = 4096  # tokens: 64 contexts of 64, 28 MiB of float32 rows at ten points


def _peak(model_path: str, corpus: Path, out: Path, tokens: int) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, str(_SCRIPT), model_path, str(corpus), str(out), str(tokens)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_peak_rss_at_four_times_the_tokens_is_within_ten_percent(
    model_path: str, tmp_path: Path
) -> None:
    corpus = write_jsonl_corpus(tmp_path / "big.jsonl", documents(1500))
    one = _peak(model_path, corpus, tmp_path / "one", ONE_X)
    four = _peak(model_path, corpus, tmp_path / "four", 4 * ONE_X)
    for layout in ("safetensors", "saelens"):
        # the corpus held the budget
        assert one["tokens"][layout] == ONE_X and four["tokens"][layout] == 4 * ONE_X
        # holding one layout's output would cost at least its bytes: over the 10% allowed
        extra = four["written"][layout] - one["written"][layout]
        assert extra > 0.12 * one["peak_kib"] * 1024
    assert four["peak_kib"] <= 1.1 * one["peak_kib"], (one, four)

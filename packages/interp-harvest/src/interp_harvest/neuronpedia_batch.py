"""Dashboards written as the batch JSON Neuronpedia imports.

The layout is the one sae-dashboard's NeuronpediaRunner writes (its `NeuronpediaDashboardBatch`):
files `batch-N.json`, each `{model_id, layer, sae_set, sae_id_suffix, features: [...]}` for a
run of consecutive features. Per feature: `feature_index`; `pos_str`/`pos_values` and
`neg_str`/`neg_values` (the logit table); `frac_nonzero`; `freq_hist_data_bar_values` (bin
centres) / `_bar_heights` (counts) for the firing activations; `logits_hist_data_bar_values` /
`_bar_heights` over the vocabulary; `n_prompts_total`, `n_tokens_in_prompt`, `dataset`; and
`activations`, one entry per example with `bin_min`, `bin_max`, `bin_contains`, `tokens`
(vocabulary strings), `values` and `qualifying_token_index`: first the top examples
(`bin_min` −1, `bin_max` the feature's max, `bin_contains` −1), then each interval's samples from
the highest interval down (`bin_contains` the fraction of tokens in it). Values are rounded to
3 decimals, as sae-dashboard rounds them. Fields this job does not compute (neuron alignment,
correlated neurons and features, decoder weight distribution, DFA) are written empty.

An example's window is its whole context, less a first token the job ignores (the BOS the
packer puts there), which sae-dashboard drops as well; `qualifying_token_index` counts from
the window's start.

Beside the batches, each SAE's folder holds `statistics.safetensors` (per feature, unrounded:
max, mean over firing tokens, mean over all tokens, density, firing count) and
`dashboards.json` (what was run and what was written).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interp_harvest.dashboards import FeatureDashboards
from interp_harvest.shards import atomic_write_bytes, atomic_write_json

__all__ = ["feature_record", "token_strings", "write_dashboards", "write_neuronpedia_batches"]

# Byte-level BPE stores some characters as stand-ins (a space as "Ġ", a newline as "Ċ", UTF-8
# punctuation as three stand-ins); the batch files carry the characters themselves, as
# sae-dashboard's NeuronpediaRunner writes them (its zero-width space is written as a space).
_STAND_INS = (
    ("âĢĶ", "\u2014"),
    ("âĢĵ", "\u2013"),
    ("âĢľ", "\u201c"),
    ("âĢĿ", "\u201d"),
    ("âĢĺ", "\u2018"),
    ("âĢĻ", "\u2019"),
    ("âĢĭ", " "),
    ("Ġ", " "),
    ("Ċ", "\n"),
    ("ĉ", "\t"),
)


def token_strings(tokenizer: Any) -> Callable[[list[int]], list[str]]:
    """Token ids to the vocabulary strings Neuronpedia shows.

    Each id is spelled once and remembered: a dashboards job writes hundreds of thousands of
    windows over one vocabulary, and the tokenizer's conversion per window dominated writing."""
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    known: dict[int, str] = {}

    def spell(ids: list[int]) -> None:
        raw = (
            [str(t) for t in convert(ids)]
            if convert is not None
            else [tokenizer.decode([i]) for i in ids]
        )
        for i, text in zip(ids, raw, strict=True):
            for stand_in, character in _STAND_INS:
                text = text.replace(stand_in, character)
            known[i] = text

    def strings(ids: list[int]) -> list[str]:
        missing = list(dict.fromkeys(i for i in ids if i not in known))
        if missing:
            spell(missing)
        return [known[i] for i in ids]

    return strings


def bin_centres(low: float, high: float, bins: int) -> list[float]:
    step = (high - low) / bins
    return [low + (i + 0.5) * step for i in range(bins)]


def _r(value: float) -> float:
    return round(float(value), 3)


def _rounded(values: Any) -> list[Any]:
    """`values` (a float32 tensor) rounded to 3 decimals, as nested lists of floats.

    numpy's rounding (rint(x · 1000) / 1000 in float64) equals Python's `round(x, 3)` here:
    a float32 times 1000 is exact in float64, so both round the same exact value half to even
    and return the double nearest the result — at a few ns a value instead of a call."""
    import numpy as np

    return np.round(values.detach().to("cpu").numpy().astype(np.float64), 3).tolist()


def _examples(
    dash: FeatureDashboards,
    selection: Any,
    feature: int,
    bounds: tuple[float, float, float],
    strings: Callable[[list[int]], list[str]],
) -> list[dict[str, Any]]:
    """The selected tokens of one feature, best first, as Neuronpedia examples."""
    keep = selection.score[:, feature] > float("-inf")
    rows = keep.nonzero().flatten()
    if not len(rows):
        return []
    tokens = selection.token[rows, feature].tolist()
    values = _rounded(selection.values[rows, feature])
    windows = selection.ids[rows, feature].tolist()
    out = []
    for token, row_values, ids in zip(tokens, values, windows, strict=True):
        position = token % dash.context_size
        start = 1 if ids and ids[0] in dash.ignored and position > 0 else 0
        out.append(
            {
                "bin_min": bounds[0],
                "bin_max": bounds[1],
                "bin_contains": bounds[2],
                "tokens": strings(ids[start:]),
                "values": row_values[start:],
                "qualifying_token_index": position - start,
            }
        )
    return out


def feature_record(
    dash: FeatureDashboards,
    feature: int,
    strings: Callable[[list[int]], list[str]],
    *,
    dataset: str = "",
) -> dict[str, Any]:
    """One feature's entry of a Neuronpedia batch."""
    settings = dash.settings
    totals = dash.totals
    maximum = float(totals.max[feature])
    examples = _examples(dash, dash.top, feature, (-1, _r(maximum), -1), strings)
    for j in reversed(range(settings.intervals)):
        low, high = maximum * j / settings.intervals, maximum * (j + 1) / settings.intervals
        share = float(dash.interval_tokens[j, feature]) / max(totals.tokens, 1)
        bounds = (_r(low), _r(high), round(share, 5))
        examples += _examples(dash, dash.samples[j], feature, bounds, strings)
    fired = int(totals.fired[feature]) > 0
    record: dict[str, Any] = {
        "feature_index": feature,
        "neuron_alignment_indices": [],
        "neuron_alignment_values": [],
        "neuron_alignment_l1": [],
        "correlated_neurons_indices": [],
        "correlated_neurons_l1": [],
        "correlated_neurons_pearson": [],
        "correlated_features_indices": [],
        "correlated_features_l1": [],
        "correlated_features_pearson": [],
        "neg_str": [],
        "neg_values": [],
        "pos_str": [],
        "pos_values": [],
        "frac_nonzero": float(totals.density[feature]),
        "freq_hist_data_bar_values": [],
        "freq_hist_data_bar_heights": [],
        "logits_hist_data_bar_heights": [],
        "logits_hist_data_bar_values": [],
        "n_prompts_total": dash.contexts,
        "n_tokens_in_prompt": dash.context_size,
        "dataset": dataset,
        "decoder_weights_dist": [],
        "activations": examples,
        "vector": [],
    }
    if fired:
        low, high = float(dash.hist_low[feature]), float(dash.hist_high[feature])
        record["freq_hist_data_bar_values"] = [_r(c) for c in bin_centres(low, high, settings.bins)]
        record["freq_hist_data_bar_heights"] = [int(h) for h in dash.histogram[feature].tolist()]
    if dash.logit_top_ids is not None:
        record["pos_str"] = strings(dash.logit_top_ids[feature].tolist())
        record["pos_values"] = [_r(v) for v in dash.logit_top_values[feature].tolist()]
        record["neg_str"] = strings(dash.logit_bottom_ids[feature].tolist())
        record["neg_values"] = [_r(v) for v in dash.logit_bottom_values[feature].tolist()]
        low, high = float(dash.logit_low[feature]), float(dash.logit_high[feature])
        record["logits_hist_data_bar_values"] = [
            _r(c) for c in bin_centres(low, high, settings.bins)
        ]
        record["logits_hist_data_bar_heights"] = [int(h) for h in dash.logit_hist[feature].tolist()]
    return record


def write_neuronpedia_batches(
    dash: FeatureDashboards,
    folder: str | Path,
    tokenizer: Any,
    *,
    model_id: str,
    sae_set: str | None = None,
    dataset: str = "",
    features_per_batch: int = 128,
) -> list[Path]:
    """`batch-N.json` files of `features_per_batch` consecutive features each."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    strings = token_strings(tokenizer)
    layer = dash.sae.address.layer
    written = []
    for number, start in enumerate(range(0, dash.d_sae, features_per_batch)):
        batch = {
            "model_id": model_id,
            "layer": int(layer) if layer is not None else 0,
            "sae_set": sae_set or dash.name,
            "sae_id_suffix": None,
            "features": [
                feature_record(dash, f, strings, dataset=dataset)
                for f in range(start, min(start + features_per_batch, dash.d_sae))
            ],
        }
        path = target / f"batch-{number}.json"
        atomic_write_bytes(path, json.dumps(batch).encode())
        written.append(path)
    return written


def write_dashboards(
    results: list[FeatureDashboards],
    out: str | Path,
    tokenizer: Any,
    *,
    model_id: str,
    dataset: str = "",
    features_per_batch: int = 128,
    sae_sets: list[str] | None = None,
) -> dict[str, Any]:
    """Each SAE's batches, statistics and summary under `out/<sae name>/`; returns the summary."""
    import torch
    from safetensors.torch import save

    root = Path(out)
    summary: dict[str, Any] = {"format": "interp-harvest/dashboards", "saes": []}
    for index, dash in enumerate(results):
        folder = root / dash.name
        sae_set = sae_sets[index] if sae_sets else None
        batches = write_neuronpedia_batches(
            dash,
            folder,
            tokenizer,
            model_id=model_id,
            sae_set=sae_set,
            dataset=dataset,
            features_per_batch=features_per_batch,
        )
        totals = dash.totals
        tensors = {
            "max": totals.max.clone(),
            "mean_when_firing": totals.mean_when_firing,
            "mean": totals.mean,
            "density": totals.density,
            "fired": totals.fired.clone(),
            "tokens": torch.tensor(totals.tokens, dtype=torch.int64),
        }
        atomic_write_bytes(folder / "statistics.safetensors", save(tensors))
        entry = {
            "name": dash.name,
            "source": str(dash.sae.source),
            "address": str(dash.sae.address),
            "d_sae": dash.d_sae,
            "contexts": dash.contexts,
            "context_size": dash.context_size,
            "tokens_considered": totals.tokens,
            "ignored_token_ids": list(dash.ignored),
            "settings": vars(dash.settings),
            "dead_features": int((totals.fired == 0).sum()),
            "batches": [p.name for p in batches],
            "mean_density": float(totals.density.mean()),
        }
        atomic_write_json(folder / "dashboards.json", entry)
        summary["saes"].append(entry)
    return summary

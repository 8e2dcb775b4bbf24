"""sae-dashboard's own `NeuronpediaRunner`, run on the harvest tests' tiny model, one SAE and the
token contexts our dashboards job packed; executed with the sae-dashboard environment's python.

argv: a JSON file {"model", "sae", "tokens", "work", "settings": {top_k, intervals,
samples_per_interval, forward_batch, features_per_batch}}. `tokens` is a `.pt` file holding the
packed contexts `[contexts, context_size]` (int64). Two runs, each in its own folder: `default`
(the model loaded as the runner loads it, with TransformerLens's default weight processing) and
`unprocessed` (fold_ln, center_writing_weights and center_unembed off). Each writes to
`work/out/<run>/`: the runner's `batch-N.json` files, `resid.pt` (what TransformerLens computes at
the SAE's hook for the same tokens), `W_U.pt` (its unembedding) and `vocab.json` (the token
strings its JSON uses, by id).

What the runner needs that a local folder does not give it, and how it gets it here (none of it
changes what is computed):
- the tokens: the runner loads `tokens_<n>.pt` from its output folder when that file is there, so
  our contexts are written there and its own dataset sampling never runs (its activation store is
  still built, over a one-line local jsonl);
- the model: `HookedTransformer.from_pretrained` refuses any name that is not in TransformerLens's
  list before its own local-folder support is reached, so that check lets an existing folder
  through; the folder is a copy of links named `model` (TransformerLens takes any local path
  containing "llama" for a hub Llama and never reads its config), whose tokenizer config is
  rewritten in the transformers 4 spelling (`additional_special_tokens`, not the list-valued
  `extra_special_tokens` transformers 5 writes);
- torchvision: decode-clt (a sae-dashboard dependency) pulls a torchvision built for another torch
  that fails to import, and transformers imports it when it is there; it is hidden from this
  process.
"""

from __future__ import annotations

import sys

sys.modules["torchvision"] = None  # type: ignore[assignment]
sys.modules["torchaudio"] = None  # type: ignore[assignment]

import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, ClassVar  # noqa: E402

import sae_lens  # noqa: E402
import torch  # noqa: E402
import transformer_lens.loading_from_pretrained as loading  # noqa: E402
from sae_dashboard.neuronpedia.neuronpedia_runner import (  # noqa: E402
    NeuronpediaRunner,
    NeuronpediaRunnerConfig,
)

_MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json")


def _local_model(source: Path, folder: Path) -> None:
    folder.mkdir(parents=True)
    for name in _MODEL_FILES:
        if (source / name).exists():
            (folder / name).symlink_to(source / name)
    config = json.loads((source / "tokenizer_config.json").read_text())
    extra = config.pop("extra_special_tokens", None)
    if isinstance(extra, list):
        config["additional_special_tokens"] = extra
    config.pop("backend", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def _local_sae(source: Path, folder: Path, model_id: str) -> None:
    folder.mkdir(parents=True)
    config = json.loads((source / "cfg.json").read_text())
    metadata = config.setdefault("metadata", {})
    metadata["model_name"] = model_id
    # without a version SAELens reads the file as a pre-6 config and drops its metadata
    metadata.setdefault("sae_lens_version", sae_lens.__version__)
    (folder / "cfg.json").write_text(json.dumps(config))
    (folder / "sae_weights.safetensors").symlink_to(source / "sae_weights.safetensors")


class _Runner(NeuronpediaRunner):  # type: ignore[misc]
    """The runner, with `from_pretrained` keyword arguments for the model.

    They are what an SAE's `model_from_pretrained_kwargs` are for; the runner reads them from the
    top level of `sae.cfg.to_dict()`, where SAELens 6 never puts them (it keeps them under
    `metadata`), so with SAELens 6 it always loads the model with TransformerLens's defaults."""

    extra: ClassVar[dict[str, Any]] = {}

    def _initialize_model(self) -> None:
        self.sae_from_pretrained_kwargs = {**self.sae_from_pretrained_kwargs, **self.extra}
        super()._initialize_model()


def _run(job: dict[str, Any], tokens: Any, name: str, extra: dict[str, Any]) -> None:
    """One `NeuronpediaRunner.run()` in its own folder (its activation cache is named by model,
    SAE and hook only, so two runs in one folder would share it)."""
    work = Path(job["work"]) / name
    work.mkdir()
    os.chdir(work)  # the runner keeps its activation cache under ./cached_activations
    _local_model(Path(job["model"]), work / "model")
    _local_sae(Path(job["sae"]), work / "sae", "model")
    (work / "data").mkdir()
    (work / "data" / "docs.jsonl").write_text(json.dumps({"text": "unused"}) + "\n")
    settings = job["settings"]
    config = NeuronpediaRunnerConfig(
        sae_set="tiny-set",
        sae_path=str(work / "sae"),
        from_local_sae=True,
        outputs_dir=str(work / "runner"),
        huggingface_dataset_path=str(work / "data"),
        hf_model_path="model",
        model_dtype="float32",
        sae_dtype="float32",
        prepend_bos=True,  # as our contexts are packed (used only by its unused sampling)
        n_prompts_total=tokens.shape[0],
        n_tokens_in_prompt=tokens.shape[1],
        n_prompts_in_forward_pass=settings["forward_batch"],
        n_features_at_a_time=settings["features_per_batch"],
        top_acts_group_size=settings["top_k"],
        n_quantiles=settings["intervals"],
        quantile_group_size=settings["samples_per_interval"],
    )
    _Runner.extra = extra
    runner = _Runner(config)
    # its output folder is made by the constructor; the tokens go where `get_tokens` looks
    torch.save(tokens, Path(runner.cfg.outputs_dir) / f"tokens_{tokens.shape[0]}.pt")
    hook = runner.hook_name
    with torch.no_grad():
        _, cache = runner.model.run_with_cache(tokens, names_filter=hook)
    out = Path(job["work"]) / "out" / name
    out.mkdir(parents=True)
    torch.save(cache[hook].detach().clone(), out / "resid.pt")
    torch.save(runner.model.W_U.detach().clone(), out / "W_U.pt")
    (out / "vocab.json").write_text(json.dumps(runner.vocab_dict))
    runner.run()
    for batch in sorted(Path(runner.cfg.outputs_dir).glob("batch-*.json")):
        (out / batch.name).write_bytes(batch.read_bytes())


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    Path(job["work"]).mkdir(parents=True, exist_ok=True)
    tokens = torch.load(job["tokens"]).to(torch.int64)
    official = loading.get_official_model_name

    def local_or_official(name: str) -> str:
        return name if Path(name, "config.json").is_file() else official(name)

    loading.get_official_model_name = local_or_official
    # as a user gets it (TransformerLens's default weight processing), and without it
    _run(job, tokens, "default", {})
    unprocessed = {"fold_ln": False, "center_writing_weights": False, "center_unembed": False}
    _run(job, tokens, "unprocessed", unprocessed)


if __name__ == "__main__":
    main()

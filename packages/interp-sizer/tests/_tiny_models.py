"""Tiny randomly initialised checkpoints, built with transformers and saved as safetensors.

Each is a real `save_pretrained` folder (config.json + model.safetensors) a few hundred KB in
size, so the sizer's header reading and vLLM's loader see exactly what a published repo holds.
Head dims are 32 or more where vLLM's CPU attention will load the model (it refuses 16).
"""

from __future__ import annotations

from pathlib import Path

COMMON = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}


def build(kind: str, folder: Path, dtype: str = "float32") -> Path:
    """Save one tiny model of `kind` ('llama-64', 'llama', 'qwen3', 'gemma3') into `folder`."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    if kind == "llama-64":
        # Half the width, two layers, a smaller vocabulary and context: the smallest model saved.
        small = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}
        config = tf.LlamaConfig(
            **{**COMMON, **small, "vocab_size": 500, "max_position_embeddings": 256}
        )
        model = tf.LlamaForCausalLM(config)
    elif kind == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**{**COMMON, "num_hidden_layers": 2}))
    elif kind == "qwen3":
        model = tf.Qwen3ForCausalLM(tf.Qwen3Config(**COMMON, head_dim=64))
    elif kind == "gemma3":
        layer_types = ["sliding_attention"] * 3 + ["full_attention"]
        config = tf.Gemma3TextConfig(
            **COMMON, head_dim=32, sliding_window=64, layer_types=layer_types
        )
        model = tf.Gemma3ForCausalLM(config)
    else:
        raise ValueError(kind)
    model = model.to(getattr(torch, dtype))
    model.save_pretrained(folder)
    return folder

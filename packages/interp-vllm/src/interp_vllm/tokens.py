"""The vLLM model's tokenizer conveniences (to_tokens and friends), which it delegates to.

vLLM runs prompts unpadded, so strings of different token lengths are refused rather than padded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from interp_core.chat import check_chat_template
from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = ["PromptTokens"]


class PromptTokens:
    """A collaborator of `VLLMModel`: its tokenizer (loaded on first use) and its prompt check."""

    def __init__(self, tokenizer: Callable[[], Any], prompts: Callable[[Any], list[list[int]]]):
        self._tokenizer = tokenizer
        self._prompts = prompts

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer()

    def to_tokens(self, text: str | list[str], *, prepend_bos: bool = True) -> Any:
        import torch

        texts = [text] if isinstance(text, str) else list(text)
        rows = [self._encode(t, prepend_bos) for t in texts]
        if len({len(r) for r in rows}) > 1:
            msg = (
                f"to_tokens got strings of {sorted({len(r) for r in rows})} tokens; vLLM runs "
                f"prompts unpadded, so call to_tokens (and capture) once per string"
            )
            raise CapabilityUnsupported(msg)
        return torch.tensor(rows, dtype=torch.long)

    def _encode(self, text: str, prepend_bos: bool) -> list[int]:
        if not isinstance(text, str):
            msg = f"to_tokens takes strings, got {type(text).__name__}"
            raise InvalidArgument(msg)
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        bos = self.tokenizer.bos_token_id
        if prepend_bos and bos is not None and (not ids or ids[0] != bos):
            ids = [bos, *ids]
        return ids

    def to_str_tokens(self, text: Any, *, prepend_bos: bool = True) -> list[str]:
        if isinstance(text, str):
            ids = self._encode(text, prepend_bos)
        else:
            ids = self._prompts(text)[0]
        return [self.tokenizer.decode([i]) for i in ids]

    def to_string(self, tokens: Any) -> str | list[str]:
        ids = tokens.tolist() if hasattr(tokens, "tolist") else tokens
        if isinstance(ids, list) and ids and isinstance(ids[0], list):
            return [self.tokenizer.decode(row) for row in ids]
        return self.tokenizer.decode(ids)

    def apply_chat_template(self, messages: Sequence[dict[str, str]], **kwargs: Any) -> Any:
        check_chat_template(self.tokenizer)
        kwargs.setdefault("add_generation_prompt", True)
        return self.tokenizer.apply_chat_template(list(messages), **kwargs)

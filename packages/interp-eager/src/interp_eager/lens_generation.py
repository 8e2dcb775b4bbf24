"""The eager model's lens over a generation: the KV-cache decoding loop, read at every forward.

The lens's residual taps ride in each step's own hook session (`interp_eager.generation`), so the
read-out of a position comes from the very forward that sampled the next token, steered exactly
as the generation is. Each forward's rows are decoded once its hooks are removed (the final norm
and the head must see no write of the step), still under the model's lock; the steps are yielded
after the lock is released, so a stream suspended between tokens holds nothing.

The read-out is the logit lens's own (`EagerModel._decode_residuals`: the hyper head on a
multi-stream trunk, the final norm, the head, the model's multiplier and softcap), through a
fitted lens's `J_bar` first where the `LensSpec` asks for one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import torch

from interp_core.address import Address
from interp_core.lens_generation import LensStep, check_lens_generation, check_skip_reach
from interp_core.model_base import StreamCall, check_lens_sampling
from interp_eager.arguments import gen_defaults
from interp_torch.lens import masked_top_tokens

__all__ = ["lens_stream"]


async def lens_stream(
    model: Any, tokens: Any, lenses: Any, call: StreamCall
) -> AsyncIterator[LensStep]:
    """`generate_with_lens` (its keywords read by `ModelBase.generate_with_lens`): `call.read`
    what the lens decodes, `call.sampling` max_new_tokens and the knobs of `LENS_SAMPLING`."""
    check_lens_sampling(call.sampling)
    pending: list[tuple[list[int], list[tuple[torch.Tensor, torch.Tensor]]]] = []
    with model._serving():
        plan = check_lens_generation(
            lenses,
            n_layers=model.n_layers,
            vocab_size=model.facts.vocab_size,
            held=model.lens_sets(),
            **call.read,
        )
        for spec in plan.lenses:
            if spec.jacobian:
                model._readouts.check_fitted(spec, list(spec.layers))
        read = plan.point
        if model.facts.n_streams > 1 and read == "resid_post":
            read = "resid_streams"  # decoded through the hyper head, as the logit lens does
        addresses = {layer: model._check_address(Address(read, layer)) for layer in plan.layers}
        mask = None
        if plan.word_mask is not None:
            mask = torch.as_tensor(plan.word_mask, dtype=torch.bool)

        def decode(session: Any, positions: torch.Tensor, is_prompt: bool) -> None:
            keep = positions >= plan.skip_before  # rows before skip_before are never decoded
            if not bool(keep.any()):
                return
            rows = {
                layer: session.result(address)[:, keep.to(session.result(address).device)]
                for layer, address in addresses.items()
            }
            blocks = []
            for spec in plan.lenses:
                fitted = spec if spec.jacobian else None
                stacked = torch.cat(
                    [
                        model._readouts.fitted_rows(fitted, addresses[layer], rows[layer])
                        for layer in spec.layers
                    ]
                )  # [n_layers, seq, ...]: one decode for every layer of the lens
                logits = model._decode_residuals(stacked, raw=False)
                top = masked_top_tokens(logits, plan.top_n, mask)
                blocks.append((top.ids.transpose(0, 1).cpu(), top.probs.transpose(0, 1).cpu()))
            pending.append((positions[keep].tolist(), blocks))

        arguments = gen_defaults({**call.sampling, "steering": call.steering})
        ids = model._tokens(tokens)
        taps = [model.tap(a) for a in addresses.values()]
        decided, steps = model._prepare_decoding(ids, reads=(taps, decode), **arguments)
        prompt = ids[0].tolist()
        check_skip_reach(plan, len(prompt), decided.max_new_tokens)
    eos = model._eos_ids()
    sequence = list(prompt)
    for step in steps:
        sequence.append(step.token)
        finish = ("stop" if step.token in eos else "length") if step.last else None
        ready = [
            (position, index, blocks)
            for where, blocks in pending
            for index, position in enumerate(where)
        ]
        pending.clear()
        for n, (position, index, blocks) in enumerate(ready):
            yield LensStep(
                position=position,
                token_id=sequence[position],
                is_generated=position >= len(prompt),
                top_ids=tuple(block_ids[index] for block_ids, _ in blocks),
                top_probs=tuple(block_probs[index] for _, block_probs in blocks),
                next_token_id=sequence[position + 1],
                finish_reason=finish if n == len(ready) - 1 else None,
            )
        await asyncio.sleep(0)

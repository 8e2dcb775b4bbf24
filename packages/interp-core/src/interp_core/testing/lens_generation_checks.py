"""Does a backend's lens over a generation read what its own prompt lens and captures read?

`check_generate_with_lens` runs one greedy `generate_with_lens` and holds every streamed step to
what the backend answers by other routes:

* the steps cover the prompt and every generated token but the last, in order, each with its own
  token, the one that followed it and `is_generated` right; the last carries `finish_reason`;
* unsteered, each step equals the backend's `logit_lens` over the same sequence at that position
  (top-k ids identical, probabilities within 1e-5), for two lenses in one call;
* steered (an add at a residual point), each step equals `decode_residuals(top_k)` of the rows
  `capture_generation` returns under the same steering, and differs from the unsteered read-out;
* `skip_before` starts the stream there, a word mask ranks only the ids it allows with the
  unmasked probabilities, and an unknown lens name, a non-residual point and a layer the model
  lacks are refused as `InvalidArgument` before any step.
"""

from __future__ import annotations

import itertools
from typing import Any

from interp_core import sync
from interp_core.address import Address
from interp_core.errors import InvalidArgument
from interp_core.readouts import LensSpec
from interp_core.steering import SteeringSpec
from interp_core.testing.compare import to_nested

__all__ = ["check_generate_with_lens"]

PROMPT = "The quick brown fox jumps over the lazy dog"


def _fail(model: Any, problems: list[str]) -> None:
    if problems:
        who = f"{getattr(model, 'backend_name', '?')} model {getattr(model, 'model_id', '?')}"
        lines = "\n  - ".join(problems[:8])
        msg = f"check_generate_with_lens failed on the {who}:\n  - {lines}"
        raise AssertionError(msg)


def _differs(got: list[float], want: list[float], atol: float) -> bool:
    return any(abs(g - w) > atol for g, w in zip(got, want, strict=True))


def _structure(steps: list[Any], prompt: list[int], problems: list[str]) -> list[int]:
    """The sequence the steps read (prompt + generated - 1), checked position by position."""
    sequence = [s.token_id for s in steps]
    if [s.position for s in steps] != list(range(len(steps))):
        problems.append(f"positions {[s.position for s in steps]} are not 0..{len(steps) - 1}")
    if sequence[: len(prompt)] != prompt:
        problems.append("the prompt steps do not carry the prompt's tokens")
    for step in steps:
        if step.is_generated != (step.position >= len(prompt)):
            problems.append(f"position {step.position}: is_generated={step.is_generated}")
    for a, b in itertools.pairwise(steps):
        if a.next_token_id != b.token_id:
            problems.append(f"position {a.position}: next_token_id is not the next step's token")
    if steps and steps[-1].finish_reason not in ("stop", "length"):
        problems.append(f"the last step's finish_reason is {steps[-1].finish_reason!r}")
    if any(s.finish_reason is not None for s in steps[:-1]):
        problems.append("a step before the last carries a finish_reason")
    return sequence


def _run(model: Any, tokens: Any, lenses: Any, options: dict[str, Any]) -> list[Any]:
    return list(sync.generate_with_lens(model, tokens, lenses, **options))


def _refused(call: Any) -> bool:
    try:
        call()
    except InvalidArgument:
        return True
    return False


def check_generate_with_lens(
    model: Any,
    *,
    prompt: str = PROMPT,
    max_new_tokens: int = 4,
    top_n: int = 3,
    decode_equals_prefill: bool = True,
) -> None:
    """`decode_equals_prefill=False` for a family whose forward over a longer sequence changes
    the outputs of earlier positions (so one forward over prompt + generation is no reference):
    the prompt's steps are then held to the lens over the prompt alone, the generated steps to
    their structure only."""
    problems: list[str] = []
    tokens = model.to_tokens(prompt)
    nested = to_nested(tokens)
    row = [int(t) for t in (nested[0] if isinstance(nested[0], list) else nested)]
    last = model.n_layers - 1
    lenses = [LensSpec(None), LensSpec([last, 0])]
    options = {"top_n": top_n, "max_new_tokens": max_new_tokens, "temperature": 0.0}
    steps = list(sync.generate_with_lens(model, tokens, lenses, **options))
    sequence = _structure(steps, row, problems)
    if not steps:
        problems.append("generate_with_lens streamed no step")
        _fail(model, problems)
    full = tokens.new_tensor([sequence]) if hasattr(tokens, "new_tensor") else [sequence]
    lens = sync.logit_lens(model, full if decode_equals_prefill else tokens, top_k=top_n)
    for step in steps:
        if step.is_generated and not decode_equals_prefill:
            continue
        for index, spec in enumerate(lenses):
            ids, probs = to_nested(step.top_ids[index]), to_nested(step.top_probs[index])
            layers = list(spec.layers) if spec.layers is not None else list(lens.layers)
            if len(ids) != len(layers):
                problems.append(f"lens {index} holds {len(ids)} rows for {len(layers)} layers")
                continue
            for n, layer in enumerate(layers):
                want = lens.predictions[layer][step.position]
                if ids[n] != [p.token_id for p in want] or _differs(
                    probs[n], [p.prob for p in want], 1e-5
                ):
                    problems.append(
                        f"position {step.position}, layer {layer}: {ids[n]} {probs[n]}, the "
                        f"prompt lens {[p.token_id for p in want]} {[p.prob for p in want]}"
                    )
    if decode_equals_prefill:
        _check_steered(model, tokens, row, steps, options, problems)
    skipped = list(
        sync.generate_with_lens(model, tokens, [LensSpec([0])], skip_before=3, **options)
    )
    if [s.position for s in skipped] != [s.position for s in steps][3:]:
        problems.append(f"skip_before=3 streamed positions {[s.position for s in skipped]}")
    _check_mask(model, tokens, steps, options, problems)
    for what, kwargs in (
        ("an unknown lens name", {"lenses": ["no-such-lens"]}),
        ("a non-residual point", {"lenses": [LensSpec([0])], "point": "attn_probs"}),
        ("a layer the model lacks", {"lenses": [LensSpec([model.n_layers])]}),
    ):
        arguments = {**options, **kwargs}
        chosen = arguments.pop("lenses")
        if not _refused(lambda c=chosen, a=arguments: _run(model, tokens, c, a)):
            problems.append(f"{what} was not refused as InvalidArgument")
    _fail(model, problems)


def _check_steered(
    model: Any, tokens: Any, row: list[int], plain: list[Any], options: dict, problems: list[str]
) -> None:
    from interp_core.shapes import point_width

    target = Address("resid_post", 0)
    if model.facts.n_streams > 1 or not model.supports(target):
        return
    width = int(point_width(target, model.facts))
    spec = SteeringSpec(target, [((i % 7) - 3) / 2.0 for i in range(width)], scale=4.0)
    layer = model.n_layers - 1
    steered = list(
        sync.generate_with_lens(model, tokens, [LensSpec([layer])], steering=spec, **options)
    )
    _generation, cache = sync.capture_generation(
        model,
        tokens,
        [Address("resid_post", layer)],
        max_new_tokens=options["max_new_tokens"],
        temperature=0.0,
        steering=spec,
    )
    rows = cache[Address("resid_post", layer)][0]
    top = sync.decode_residuals(model, rows, top_k=options["top_n"])
    want_ids, want_probs = to_nested(top.ids), to_nested(top.probs)
    if len(steered) != len(want_ids):
        problems.append(f"steered: {len(steered)} steps, capture_generation {len(want_ids)} rows")
        return
    changed = False
    for step in steered:
        ids, probs = to_nested(step.top_ids[0])[0], to_nested(step.top_probs[0])[0]
        if ids != want_ids[step.position] or _differs(probs, want_probs[step.position], 1e-5):
            problems.append(
                f"steered, position {step.position}: {ids}, decode of capture_generation's row "
                f"{want_ids[step.position]}"
            )
        if step.position < len(plain):
            before = to_nested(plain[step.position].top_probs[0])[layer]  # LensSpec(None): all
            changed = changed or _differs(probs, before, 1e-4)
    if not changed:
        problems.append("the steering changed no step's read-out")


def _check_mask(
    model: Any, tokens: Any, plain: list[Any], options: dict, problems: list[str]
) -> None:
    vocab = int(model.facts.vocab_size)
    mask = [i % 2 == 0 for i in range(vocab)]
    masked = list(
        sync.generate_with_lens(model, tokens, [LensSpec([0])], word_mask=mask, **options)
    )
    for step in masked:
        ids = to_nested(step.top_ids[0])[0]
        probs = to_nested(step.top_probs[0])[0]
        if any(i % 2 for i in ids):
            problems.append(f"word mask, position {step.position}: odd ids {ids} were ranked")
            return
        best = to_nested(plain[step.position].top_probs[0])[0][0]
        if probs[0] > best + 1e-6 or probs != sorted(probs, reverse=True):
            problems.append(f"word mask, position {step.position}: probabilities {probs}")
            return
    short = {**options, "word_mask": mask[:-1]}
    if _refused(lambda: _run(model, tokens, [LensSpec([0])], short)):
        return
    problems.append("a word mask one entry short was not refused")

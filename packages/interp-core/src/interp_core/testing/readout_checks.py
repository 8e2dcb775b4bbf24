"""Do a backend's weight read-outs, residual decoding, probes and fitted lenses equal their
formulas, checked against the backend's own captures?

Each check compares one call with the same quantity rebuilt by hand, in Python floats, from the
model's own captures and rows, so a backend passes only when the call means what its name says:

* `check_unembed_rows`: `lm_head[t] == final_norm[t] @ unembed_rows(ids).T` (lm_head is the raw
  logits; as differences between positions, so a head's bias cancels) at every position of
  the prompt, for chosen ids; tied models' `W_U == W_E`;
* `check_embed_rows`: `embeddings[t] == embed_rows([token_t])` (times the embedding multiplier)
  on a trunk without learned positions;
* `check_decode_residuals`: the last layer's resid_post decodes to lm_head's logits, a batch of
  rows keeps its shape, and `top_k` returns the ids and softmax probabilities of those logits;
* `check_project`: `project` of the unembedding rows at a residual point (with a bias and a ReLU)
  equals the capture dotted by hand;
* `check_fitted_lens`: a lens set installed with `set_lens_jacobians` decodes `J_bar @ h`, and a
  set of the wrong shape or an unknown set is refused as `InvalidArgument`.

Tensors are only ever read (`tolist`) or built like one the backend returned (`new_tensor`,
torch's spelling; a backend returning another array type skips the parts that need it).
"""

from __future__ import annotations

import math
import unittest
from typing import Any

from interp_core import sync
from interp_core.address import Address
from interp_core.errors import InterpError, InvalidArgument
from interp_core.readouts import DirectionSet, LensSpec, TopTokens
from interp_core.testing.compare import shape_of, to_nested

__all__ = [
    "READOUT_CHECKS",
    "check_decode_residuals",
    "check_embed_rows",
    "check_fitted_lens",
    "check_project",
    "check_unembed_rows",
]

PROMPT = "The quick brown fox jumps over the lazy dog"
LENS_SET = "conformance-kit"


def _fail(model: Any, check: str, problems: list[str]) -> None:
    if problems:
        who = f"{getattr(model, 'backend_name', '?')} model {getattr(model, 'model_id', '?')}"
        lines = "\n  - ".join(problems)
        message = f"{check} failed on the {who}:\n  - {lines}"
        raise AssertionError(message)


def _prompt(model: Any, prompt: str) -> tuple[Any, list[int]]:
    tokens = model.to_tokens(prompt)
    ids = to_nested(tokens)
    row = ids[0] if ids and isinstance(ids[0], list) else ids
    return tokens, [int(t) for t in row]


def _ids(model: Any, row: list[int]) -> list[int]:
    vocab = int(model.facts.vocab_size)
    return list(dict.fromkeys([row[-1], row[0], 0, vocab - 1]))


def _matmul_t(rows: list[list[float]], vectors: list[list[float]]) -> list[list[float]]:
    return [[math.fsum(a * b for a, b in zip(r, v, strict=True)) for v in vectors] for r in rows]


def _close(got: list[float], want: list[float], atol: float, rtol: float) -> float | None:
    """The worst excess over the tolerance, or None when every value is within it."""
    worst = None
    for g, w in zip(got, want, strict=True):
        excess = abs(g - w) - (atol + rtol * abs(w))
        if excess > 0 and (worst is None or excess > worst):
            worst = excess
    return worst


def _flat(nested: Any) -> list[float]:
    if isinstance(nested, list):
        return [x for item in nested for x in _flat(item)]
    return [float(nested)]


def _capture(model: Any, tokens: Any, names: list[Address]) -> dict[Address, Any]:
    cache = sync.capture(model, tokens, names)
    return {a: to_nested(cache[a])[0] for a in names}


def check_unembed_rows(model: Any, *, prompt: str = PROMPT, rtol: float = 1e-4) -> None:
    problems: list[str] = []
    tokens, row = _prompt(model, prompt)
    ids = _ids(model, row)
    rows = sync.unembed_rows(model, ids)
    if shape_of(rows) != (len(ids), model.d_model):
        problems.append(f"unembed_rows({ids}) is {shape_of(rows)}, not [{len(ids)}, d_model]")
        _fail(model, "check_unembed_rows", problems)
    facts = model.facts
    if facts.tied_embeddings:
        embedded = _flat(to_nested(sync.embed_rows(model, ids)))
        if _flat(to_nested(rows)) != embedded:
            problems.append("the model ties its embeddings, but unembed_rows != embed_rows")
    head, norm = Address("lm_head"), Address("final_norm")
    if not (model.supports(head) and model.supports(norm)):
        _fail(model, "check_unembed_rows", problems)
        return
    got = _capture(model, tokens, [head, norm])
    by_hand = _matmul_t(got[norm], to_nested(rows))
    # Compared as differences from position 0, so a head's bias (GPT-J's) cancels out.
    first, base = got[head][0], by_hand[0]
    for position, (logits, mine) in enumerate(zip(got[head], by_hand, strict=True)):
        want = [x - b for x, b in zip(mine, base, strict=True)]
        scale = max(1.0, max(abs(x) for x in want))
        worst = _close([logits[i] - first[i] for i in ids], want, rtol * scale, rtol)
        if worst is not None:
            problems.append(
                f"position {position}: lm_head's logits of {ids} differ from final_norm @ "
                f"unembed_rows.T by {worst:.3g} beyond the tolerance"
            )
            break
    _fail(model, "check_unembed_rows", problems)


def check_embed_rows(model: Any, *, prompt: str = PROMPT, rtol: float = 1e-5) -> None:
    problems: list[str] = []
    tokens, row = _prompt(model, prompt)
    rows = to_nested(sync.embed_rows(model, row))
    if shape_of(rows) != (len(row), model.d_model):
        problems.append(f"embed_rows of {len(row)} ids is {shape_of(rows)}, not [k, d_model]")
        _fail(model, "check_embed_rows", problems)
    facts = model.facts
    embeddings = Address("embeddings")
    if facts.learned_positions or facts.n_streams > 1 or not model.supports(embeddings):
        _fail(model, "check_embed_rows", problems)
        return
    multiplier = facts.embedding_multiplier or 1.0
    captured = _capture(model, tokens, [embeddings])[embeddings]
    for position, (got, want) in enumerate(zip(captured, rows, strict=True)):
        scaled = [multiplier * x for x in want]
        if _close(got, scaled, rtol * max(1.0, max(abs(x) for x in scaled)), rtol) is not None:
            problems.append(
                f"position {position}: embeddings differs from embed_rows([{row[position]}])"
            )
            break
    _fail(model, "check_embed_rows", problems)


def _softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    total = math.fsum(weights)
    return [w / total for w in weights]


def _check_top(
    top: Any, logits: list[list[float]], k: int, where: str, problems: list[str]
) -> None:
    if not isinstance(top, TopTokens):
        problems.append(f"{where}: top_k={k} returned a {type(top).__name__}, not TopTokens")
        return
    ids, probs = to_nested(top.ids), to_nested(top.probs)
    for position, (row, got_ids, got_probs) in enumerate(zip(logits, ids, probs, strict=True)):
        p = _softmax(row)
        want = sorted(range(len(p)), key=lambda i: -p[i])[:k]
        # A near tie between ranks may order either way; the probabilities must still agree.
        if [p[i] for i in got_ids] != sorted((p[i] for i in got_ids), reverse=True) or any(
            abs(p[i] - p[j]) > 1e-6 for i, j in zip(got_ids, want, strict=True)
        ):
            problems.append(f"{where} position {position}: top ids {got_ids}, by hand {want}")
            return
        if _close(got_probs, [p[i] for i in got_ids], 1e-5, 0.0) is not None:
            problems.append(f"{where} position {position}: probs {got_probs} are not softmax's")
            return


def _finish(facts: Any, raw: float) -> float:
    value = raw * (facts.logit_multiplier or 1.0)
    cap = facts.final_logit_softcap
    return math.tanh(value / cap) * cap if cap else value


def check_decode_residuals(model: Any, *, prompt: str = PROMPT, rtol: float = 1e-4) -> None:
    problems: list[str] = []
    tokens, _ = _prompt(model, prompt)
    last, head = Address("resid_post", model.n_layers - 1), Address("lm_head")
    if model.facts.n_streams > 1 or not (model.supports(last) and model.supports(head)):
        reason = "needs resid_post at the last layer and lm_head on one stream"
        raise unittest.SkipTest(reason)
    cache = sync.capture(model, tokens, [last, head])
    residual = cache[last]
    logits = sync.decode_residuals(model, residual)
    if shape_of(logits) != shape_of(cache[head]):
        problems.append(f"decode_residuals kept no shape: {shape_of(logits)}")
        _fail(model, "check_decode_residuals", problems)
    # lm_head is the raw logits; the model's own read-out scales, then caps them.
    final = [[_finish(model.facts, x) for x in row] for row in to_nested(cache[head])[0]]
    got, want = _flat(to_nested(logits)), _flat(final)
    scale = max(1.0, max(abs(x) for x in want))
    worst = _close(got, want, rtol * scale, rtol)
    if worst is not None:
        problems.append(f"the last resid_post decodes {worst:.3g} beyond lm_head's logits")
    top = sync.decode_residuals(model, residual[0], top_k=3)
    _check_top(top, final, 3, "decode_residuals(top_k=3)", problems)
    _fail(model, "check_decode_residuals", problems)


def check_project(model: Any, *, prompt: str = PROMPT, rtol: float = 1e-4) -> None:
    problems: list[str] = []
    tokens, row = _prompt(model, prompt)
    point = Address("resid_post", model.n_layers // 2)
    if model.facts.n_streams > 1 or not model.supports(point):
        reason = "needs resid_post on a one-stream trunk"
        raise unittest.SkipTest(reason)
    vectors = sync.unembed_rows(model, _ids(model, row))
    bias = vectors[:, 0]
    sets = [DirectionSet(point, vectors), DirectionSet(point, vectors, bias, "relu")]
    plain, probe = sync.project(model, tokens, sets)
    rows = to_nested(sync.capture(model, tokens, [point])[point])
    dots = [_matmul_t(r, to_nested(vectors)) for r in rows]
    offsets = _flat(to_nested(bias))
    relu = [[[max(0.0, x + b) for x, b in zip(t, offsets, strict=True)] for t in r] for r in dots]
    for name, got, want in (("plain", plain, dots), ("bias + relu", probe, relu)):
        if shape_of(got) != shape_of(want):
            problems.append(f"{name}: project is {shape_of(got)}, by hand {shape_of(want)}")
            continue
        flat = _flat(want)
        scale = max(1.0, max(abs(x) for x in flat))
        worst = _close(_flat(to_nested(got)), flat, rtol * scale, rtol)
        if worst is not None:
            problems.append(f"{name}: project differs from the capture by hand by {worst:.3g}")
    _fail(model, "check_project", problems)


def check_fitted_lens(model: Any, *, prompt: str = PROMPT, top_k: int = 3) -> None:
    problems: list[str] = []
    tokens, _ = _prompt(model, prompt)
    d, layer = int(model.d_model), 0
    point = Address("resid_post", layer)
    if model.facts.n_streams > 1 or model.facts.vocab_size < d or not model.supports(point):
        reason = "needs a one-stream trunk with a vocabulary of d_model rows"
        raise unittest.SkipTest(reason)
    matrix = sync.embed_rows(model, list(range(d)))  # any [d, d] matrix of the backend's kind
    if not hasattr(matrix, "new_tensor"):
        reason = "builds tensors with new_tensor (torch)"
        raise unittest.SkipTest(reason)
    for wrong in ({layer: matrix[:2]}, {model.n_layers: matrix}):
        try:
            sync.set_lens_jacobians(model, wrong, name=LENS_SET)
            problems.append(f"a lens of the wrong shape ({list(wrong)}) was accepted")
        except InvalidArgument:
            pass
    try:
        sync.logit_lens(model, tokens, LensSpec([layer], jacobian=True, jacobian_set=LENS_SET))
        problems.append("a lens read from a set never installed was not refused")
    except InvalidArgument:
        pass
    sync.set_lens_jacobians(model, {layer: matrix}, name=LENS_SET)
    try:
        spec = LensSpec([layer], jacobian=True, jacobian_set=LENS_SET)
        lens = sync.logit_lens(model, tokens, spec, top_k=top_k)
        h = to_nested(sync.capture(model, tokens, [point])[point])[0]
        moved = _matmul_t(h, to_nested(matrix))
        top = sync.decode_residuals(model, matrix.new_tensor(moved), top_k=top_k)
        want_ids, want_probs = to_nested(top.ids), to_nested(top.probs)
        for position, row in enumerate(lens.predictions[layer]):
            ids, probs = [p.token_id for p in row], [p.prob for p in row]
            if (
                ids != want_ids[position]
                or _close(probs, want_probs[position], 1e-5, 0) is not None
            ):
                problems.append(
                    f"position {position}: the fitted lens reads {ids}, decode(J_bar @ h) by hand "
                    f"{want_ids[position]}"
                )
                break
    except InterpError as error:
        problems.append(f"the fitted lens was refused: {error}")
    finally:
        sync.set_lens_jacobians(model, None, name=LENS_SET)
    _fail(model, "check_fitted_lens", problems)


READOUT_CHECKS = {
    "unembed_rows": check_unembed_rows,
    "embed_rows": check_embed_rows,
    "decode_residuals": check_decode_residuals,
    "project": check_project,
    "fitted_lens": check_fitted_lens,
}

"""Where does each point sit in one decoder block of a given model? Drawn as an SVG.

The drawing follows the data: the residual spine runs left to right through the middle, the
attention sublayer branches off above it and writes back, the MLP (or mixture of experts)
branches off below. Every point the model has is a marker on the path at the place its tensor is
taken, coloured by role and linked to its page; a point the model lacks is drawn faded where its
structure exists (MLA's missing value projection) and left out with the structure where it does
not (no router on a dense model), and the caption names those. Trunk points (embeddings, final
norm, logits) sit on a strip underneath.

Everything is decided from `ModelFacts` and the registry: which rows exist (QK-norm, output gate,
dense and routed MLPs, residual streams), whether the block is parallel, which norm or multiplier
separates `attn_out` from `attn_out_post`, and at which layers a point exists.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

from interp_core.facts import ModelFacts
from interp_core.point_lookup import plain_sublayers
from interp_core.points import (
    POINTS,
    Role,
    Scope,
    absence_reason,
    hyper_connection_names,
    layer_ranges,
)

__all__ = ["ROLE_COLORS", "block_diagram", "diagram_aliases"]

ROLE_COLORS = {
    Role.RESIDUAL: "#334155",
    Role.ATTENTION: "#2563eb",
    Role.MLP: "#16a34a",
    Role.ROUTING: "#9333ea",
    Role.STREAM: "#0d9488",
    Role.TRUNK: "#b45309",
}
_ABSENT = "#94a3b8"
_EDGE = "#94a3b8"
_OP_FILL = "#f1f5f9"
_OP_STROKE = "#cbd5e1"
_HIGHLIGHT = "#f59e0b"
_CHAR = 6.7  # width of one 11px monospace character, for layout only
_STEP = 40  # horizontal distance between a marker and the next operation
_GAP = 48  # between a marker and a neighbour whose label needs room
_WIDE = 54  # around tall boxes and labelled boxes
_PITCH = 44  # vertical distance between rows of one sublayer


def _stream(name: str, facts: ModelFacts) -> int | None:
    return 0 if POINTS[name].accepts_stream and facts.n_streams > 1 else None


def present_layers(name: str, facts: ModelFacts) -> list[int] | None:
    """The layers that have the point (None for a trunk point the model has, [] when absent)."""
    spec = POINTS[name]
    stream = _stream(name, facts)
    if spec.scope is Scope.TRUNK:
        return None if absence_reason(name, facts) is None else []
    return [
        layer
        for layer in range(facts.n_layers)
        if absence_reason(name, facts, layer, stream) is None
    ]


def why_absent(name: str, facts: ModelFacts) -> str | None:
    return absence_reason(name, facts, None, _stream(name, facts))


def diagram_aliases(facts: ModelFacts) -> dict[str, str]:
    """Points that are the same tensor as another on this model: name -> the other name."""
    aliases: dict[str, str] = {}
    # The registry's own alias rule (attn_out_post is attn_out without a post-norm or multiplier).
    if plain_sublayers(facts):
        aliases["attn_out_post"] = "attn_out"
        aliases["mlp_out_post"] = "mlp_out"
    if facts.post_norms_only:
        aliases["attn_in"] = "resid_pre"
        aliases["mlp_in"] = "resid_mid"
    # A point the model lacks is no alias (Falcon-H1 has no attn_out_post at all).
    return {name: other for name, other in aliases.items() if why_absent(name, facts) is None}


_GROUPS = {
    "attention": (
        "q_norm_in",
        "q_norm_out",
        "k_norm_in",
        "k_norm_out",
        "value",
        "attn_gate",
        "attn_scores",
        "attn_probs",
        "z",
    ),
    "dense": ("mlp_pre", "mlp_pre_linear", "mlp_act"),
    "routed": ("router_logits", "expert_weights", "expert_indices"),
}


@dataclass
class _Marker:
    point: str
    x: float
    y: float
    side: str  # where the label goes: above, below, right


class _Diagram:
    def __init__(
        self,
        facts: ModelFacts,
        href: Callable[[str], str] | None,
        highlight: str | None,
        uid: str,
    ) -> None:
        self.facts = facts
        self.href = href
        self.highlight = highlight
        self.uid = uid
        self.edges: list[str] = []
        self.ops: list[str] = []
        self.markers: list[_Marker] = []
        self.texts: list[str] = []
        self.drawn: set[str] = set()
        self.streams = facts.n_streams > 1
        self.aliases = diagram_aliases(facts)
        # Where a group of points that share one layer set gets its single layer note.
        self.anchors: dict[str, tuple[float, float, str]] = {}
        self.grouped: set[str] = set()

    # --- primitives ---------------------------------------------------------------------------
    def line(self, *points: tuple[float, float], dashed: bool = False, arrow: bool = True) -> None:
        path = " ".join(f"{x:.0f},{y:.0f}" for x, y in points)
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        end = f' marker-end="url(#{self.uid}-arrow)"' if arrow else ""
        self.edges.append(
            f'<polyline points="{path}" fill="none" stroke="{_EDGE}" stroke-width="1.6"'
            f"{dash}{end}/>"
        )

    def op(
        self, x: float, y: float, text: str, *, y2: float | None = None, w: float | None = None
    ) -> tuple[float, float, float, float]:
        """An operation box centred at x, spanning y..y2 (one row when y2 is None)."""
        width = w if w is not None else max(34.0, 6.2 * len(text) + 12)
        top = y - 11
        bottom = (y2 if y2 is not None else y) + 11
        self.ops.append(
            f'<rect x="{x - width / 2:.0f}" y="{top:.0f}" width="{width:.0f}" '
            f'height="{bottom - top:.0f}" rx="4" fill="{_OP_FILL}" stroke="{_OP_STROKE}"/>'
            f'<text x="{x:.0f}" y="{(top + bottom) / 2 + 3.5:.0f}" text-anchor="middle" '
            f'class="op">{html.escape(text)}</text>'
        )
        return x - width / 2, top, x + width / 2, bottom

    def same(self, x: float, y: float) -> None:
        """Marks two adjacent points as one tensor: no operation between them."""
        self.ops.append(
            f'<text x="{x:.0f}" y="{y - 5:.0f}" text-anchor="middle" class="op">=</text>'
        )

    def note(self, x: float, y: float, text: str, anchor: str = "start") -> None:
        self.texts.append(
            f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="{anchor}" class="note">'
            f"{html.escape(text)}</text>"
        )

    def mark(self, point: str, x: float, y: float, side: str = "above") -> None:
        self.markers.append(_Marker(point, x, y, side))
        self.drawn.add(point)

    # --- the block ----------------------------------------------------------------------------
    def render(self) -> str:
        f = self.facts
        gated = f.gated_attn_output
        rows_above = 4 if gated else 3
        spine = 62 + _PITCH * (rows_above - 1) + 74
        y_v = spine - 72
        y_k = y_v - _PITCH
        y_q = y_k - _PITCH
        y_g = y_q - _PITCH
        dense = f.has_dense_mlp  # Gemma-4's dense MLP runs beside its experts
        routed = f.moe is not None and bool(f.moe.sparse_layers)
        y_m = spine + 72
        y_u = y_m + _PITCH
        below = y_u if dense and f.gated_mlp else y_m
        y_r = below + _PITCH
        y_i = y_r + 42
        bottom = (y_i if routed else below) + 34

        x_pre = 60.0
        x_branch = 100.0
        self.mark("resid_pre", x_pre, spine, "above")
        attn_end = self.attention(x_branch, spine, y_q, y_k, y_v, y_g)
        if f.parallel_attn_mlp:
            mlp_end = self.mlp(x_branch, spine, y_m, y_u, y_r, y_i, dense, routed)
            x_add = max(attn_end[0], mlp_end[0]) + 30
            self.line(attn_end, (x_add, attn_end[1]), (x_add, spine - 12))
            self.line(mlp_end, (x_add, mlp_end[1]), (x_add, spine + 12))
            self.add(x_add, spine, "attn_stream_write", "attn_stream_mix")
            x_post = x_add + 62
        else:
            x_add_a = attn_end[0] + 30
            self.line(attn_end, (x_add_a, attn_end[1]), (x_add_a, spine - 12))
            self.add(x_add_a, spine, "attn_stream_write", "attn_stream_mix", below=False)
            x_mid = x_add_a + (130 if self.streams else 62)
            self.mark("resid_mid", x_mid, spine, "above")
            mlp_end = self.mlp(x_mid + 34, spine, y_m, y_u, y_r, y_i, dense, routed)
            x_add_m = mlp_end[0] + 30
            self.line(mlp_end, (x_add_m, mlp_end[1]), (x_add_m, spine + 12))
            self.add(x_add_m, spine, "mlp_stream_write", "mlp_stream_mix", below=True)
            x_post = x_add_m + (130 if self.streams else 62)
        self.mark("resid_post", x_post, spine, "above")
        x_end = x_post + 40
        if self.streams:
            x_end = x_post + 80
            self.mark("resid_streams", x_end, spine, "below")
            x_end += 40
        width = x_end + 40

        # The spine: one line per residual stream (at most four drawn).
        lanes = min(f.n_streams, 4)
        spine_lines = []
        for lane in range(lanes):
            offset = (lane - (lanes - 1) / 2) * 5
            spine_lines.append(
                f'<line x1="20" y1="{spine + offset:.1f}" x2="{x_end:.0f}" '
                f'y2="{spine + offset:.1f}" stroke="#475569" stroke-width="2.4"/>'
            )
        frame = (
            f'<rect x="34" y="22" width="{x_end - 14:.0f}" height="{bottom - 22:.0f}" rx="10" '
            f'fill="none" stroke="#cbd5e1" stroke-dasharray="6 4"/>'
        )
        self.note(
            44,
            bottom - 8,
            f"one decoder block, layer L of 0..{f.n_layers - 1}"
            + (f" ({f.n_streams} residual streams)" if self.streams else ""),
        )
        trunk_y = bottom + 44
        self.trunk(trunk_y)
        self.group_notes()
        height = trunk_y + 40
        width = max(width, 760)
        return self.svg(width, height, [frame, *spine_lines])

    def add(self, x: float, y: float, write: str, mix: str, *, below: bool = True) -> None:
        """The residual addition; on a multi-stream trunk it mixes and writes the streams."""
        if not self.streams:
            self.ops.append(
                f'<circle cx="{x:.0f}" cy="{y:.0f}" r="10" fill="#fff" stroke="#475569" '
                f'stroke-width="1.6"/><text x="{x:.0f}" y="{y + 4.5:.0f}" text-anchor="middle" '
                f'class="plus">+</text>'
            )
            return
        self.op(x, y, "mix+write", w=64)
        # The markers go on the side the sublayer came from, right of its return line, where
        # the other sublayer's branch leaves room.
        sign = 1 if below else -1
        mx = x + 16
        self.line((mx, y + sign * 11), (mx, y + sign * 64), dashed=True, arrow=False)
        self.mark(write, mx, y + sign * 34, "right")
        self.mark(mix, mx, y + sign * 62, "right")

    def entry(
        self, x: float, spine: float, y: float, sign: int, collapse: str, point: str
    ) -> float:
        """From the spine to a sublayer's input point: stream collapse (if any), then the norm.

        `sign` is -1 for a branch above the spine, 1 below. Returns the input point's x.
        """
        if self.streams:
            self.op(x, spine + sign * 34, "collapse")
            self.line((x, spine + sign * 4), (x, spine + sign * 23), arrow=False)
            cx = x + _STEP
            self.line((x, spine + sign * 45), (x, y), (cx - 8, y))
            self.mark(collapse, cx, y, "below" if sign > 0 else "above")
            prev = cx + 8
        else:
            cx = x
            prev = x
            self.line((x, spine + sign * 4), (x, y), arrow=False)
        cx += _STEP
        nxt = cx + _GAP
        if point in self.aliases:
            # No norm before this sublayer (OLMo-2): its input is the residual itself.
            self.line((prev, y), (nxt - 8, y), dashed=True, arrow=False)
            self.same((prev + nxt) / 2, y)
        else:
            left, _, right, _ = self.op(cx, y, "norm")
            self.line((prev, y), (left, y))
            self.line((right, y), (nxt - 8, y))
        self.mark(point, nxt, y, "above")
        return nxt

    def attention(
        self, xa: float, spine: float, y_q: float, y_k: float, y_v: float, y_g: float
    ) -> tuple[float, float]:
        f = self.facts
        gated = f.gated_attn_output
        y_in = y_k
        cx = self.entry(xa, spine, y_in, -1, "attn_stream_collapse", "attn_in")
        x_in = cx
        cx += _GAP
        top_row = y_g if gated else y_q
        rows = "q k v g" if gated else "q k v"
        left, _, right, _ = self.op(cx, top_row, "", y2=y_v, w=30)
        self.anchors["attention"] = (left, top_row - 30, "softmax attention")
        self.texts.append(
            f'<text x="{cx:.0f}" y="{(top_row + y_v) / 2:.0f}" text-anchor="middle" class="op" '
            f'transform="rotate(-90 {cx:.0f} {(top_row + y_v) / 2:.0f})">proj {rows}</text>'
        )
        self.line((x_in + 8, y_in), (left, y_in))
        x_proj = right
        cx += _WIDE
        x_first = cx
        has_qk = f.qk_norm
        if has_qk:
            self.mark("q_norm_in", cx, y_q, "above")
            self.mark("k_norm_in", cx, y_k, "below")
            self.line((x_proj, y_q), (cx - 8, y_q))
            self.line((x_proj, y_k), (cx - 8, y_k))
        self.mark("value", cx, y_v, "below")
        self.line((x_proj, y_v), (cx - 8, y_v))
        if gated:
            self.mark("attn_gate", cx, y_g, "above")
            self.line((x_proj, y_g), (cx - 8, y_g))
        if has_qk:
            cx += _STEP
            self.op(cx, y_q, "norm")
            self.op(cx, y_k, "norm")
            self.line((x_first + 8, y_q), (cx - 17, y_q))
            self.line((x_first + 8, y_k), (cx - 17, y_k))
            cx += _STEP
            self.mark("q_norm_out", cx, y_q, "above")
            self.mark("k_norm_out", cx, y_k, "below")
            self.line((cx - _STEP + 17, y_q), (cx - 8, y_q))
            self.line((cx - _STEP + 17, y_k), (cx - 8, y_k))
        q_from = cx + 8 if has_qk else x_proj
        cx += _WIDE
        qk_text = "q·kᵀ"
        qk_left, _, qk_right, _ = self.op(cx, y_q, qk_text, y2=y_k, w=48)
        self.line((q_from, y_q), (qk_left, y_q))
        self.line((q_from, y_k), (qk_left, y_k))
        extras = ["scale"]
        if f.attn_logit_softcap:
            extras.append(f"softcap {f.attn_logit_softcap:g}")
        extras.append("mask")
        self.note(qk_left, y_k + 26, " · ".join(extras))
        if f.sliding_window:
            where = "chunks of" if "chunked" in f.layer_kinds else "window"
            kind = "chunked" if "chunked" in f.layer_kinds else "sliding"
            self.note(qk_left, y_k + 38, f"{where} {f.sliding_window} on {kind} layers")
        y_s = (y_q + y_k) / 2
        cx += _WIDE
        self.line((qk_right, y_s), (cx - 8, y_s))
        self.mark("attn_scores", cx, y_s, "above")
        cx += _STEP
        self.op(cx, y_s, "softmax")
        self.line((cx - _STEP + 8, y_s), (cx - 27, y_s))
        cx += _GAP
        self.line((cx - _GAP + 27, y_s), (cx - 8, y_s))
        self.mark("attn_probs", cx, y_s, "above")
        cx += _WIDE
        pv_left, _, pv_right, _ = self.op(cx, y_s, "probs·v", y2=y_v, w=56)
        self.line((cx - _WIDE + 8, y_s), (pv_left, y_s))
        self.line((x_first + 8, y_v), (pv_left, y_v))
        last = pv_right
        if gated:
            cx += _WIDE + 10
            self.op(cx, y_v, "×σ(gate)")
            self.line((x_first + 8, y_g), (cx, y_g), (cx, y_v - 11))
            self.line((last, y_v), (cx - 32, y_v))
            last = cx + 32
        cx += _WIDE
        self.line((last, y_v), (cx - 8, y_v))
        self.mark("z", cx, y_v, "below")
        cx += _STEP
        self.op(cx, y_v, "o_proj")
        self.line((cx - _STEP + 8, y_v), (cx - 23, y_v))
        cx += _STEP + 5
        self.line((cx - _STEP - 5 + 23, y_v), (cx - 8, y_v))
        self.mark("attn_out", cx, y_v, "below")
        return self.post(cx, y_v, "attn_out_post", "above")

    def post(self, cx: float, y: float, name: str, side: str) -> tuple[float, float]:
        """What separates a sublayer's raw output from what it adds to the residual."""
        f = self.facts
        parts = []
        if f.sandwich_norms:
            parts.append("post-norm")
        if f.residual_multiplier not in (None, 1, 1.0):
            parts.append(f"× {f.residual_multiplier:g}")
        start = cx + 8
        if parts:
            text = " ".join(parts)
            width = max(34.0, 6.2 * len(text) + 12)
            left, _, right, _ = self.op(start + 26 + width / 2, y, text, w=width)
            self.line((start, y), (left, y))
            cx = right + 34
            self.line((right, y), (cx - 8, y))
        else:
            # No norm and no multiplier: the two points are one tensor.
            cx = start + 74
            self.line((start, y), (cx - 8, y), dashed=True, arrow=False)
            self.same((start + cx - 8) / 2, y)
        self.mark(name, cx, y, side)
        return cx + 8, y

    def mlp(
        self,
        xm: float,
        spine: float,
        y_m: float,
        y_u: float,
        y_r: float,
        y_i: float,
        dense: bool,
        routed: bool,
    ) -> tuple[float, float]:
        f = self.facts
        cx = self.entry(xm, spine, y_m, 1, "mlp_stream_collapse", "mlp_in")
        x_in = cx
        ends: list[tuple[float, float]] = []
        if dense:
            cx += _GAP
            gated = f.gated_mlp
            text = "gate up" if gated else "fc"
            if gated:
                left, _, right, _ = self.op(cx, y_m, "", y2=y_u, w=30)
                self.texts.append(
                    f'<text x="{cx:.0f}" y="{(y_m + y_u) / 2:.0f}" text-anchor="middle" '
                    f'class="op" transform="rotate(-90 {cx:.0f} {(y_m + y_u) / 2:.0f})">'
                    f"{text}</text>"
                )
            else:
                left, _, right, _ = self.op(cx, y_m, text)
            self.line((x_in + 8, y_m), (left, y_m))
            cx += _WIDE
            self.mark("mlp_pre", cx, y_m, "above")
            self.line((right, y_m), (cx - 8, y_m))
            if gated:
                self.mark("mlp_pre_linear", cx, y_u, "above")
                self.line((right, y_u), (cx - 8, y_u))
            x_pre = cx
            cx += _STEP
            self.op(cx, y_m, "act")
            self.line((x_pre + 8, y_m), (cx - 17, y_m))
            last = cx + 17
            if gated:
                cx += 45
                self.op(cx, y_m, "×", w=26)
                self.line((last, y_m), (cx - 13, y_m))
                self.line((x_pre + 8, y_u), (cx, y_u), (cx, y_m + 11))
                last = cx + 13
            cx += _STEP
            self.line((last, y_m), (cx - 8, y_m))
            self.mark("mlp_act", cx, y_m, "above")
            cx += _STEP
            self.op(cx, y_m, "down")
            self.line((cx - _STEP + 8, y_m), (cx - 20, y_m))
            ends.append((cx + 20, y_m))
            self.anchors["dense"] = (cx - 20, (y_u if gated else y_m) + 30, "dense MLP")
        if routed:
            rx = x_in + _GAP
            self.line((x_in, y_m + 8), (x_in, y_r), (rx - 24, y_r))
            self.op(rx, y_r, "router")
            rx += _GAP
            self.line((rx - _GAP + 24, y_r), (rx - 8, y_r))
            self.mark("router_logits", rx, y_r, "above")
            rx += _STEP
            self.op(rx, y_r, "top-k", y2=y_i)
            self.line((rx - _STEP + 8, y_r), (rx - 20, y_r))
            rx += 70
            self.mark("expert_weights", rx, y_r, "above")
            self.mark("expert_indices", rx, y_i, "below")
            self.line((rx - 70 + 20, y_r), (rx - 8, y_r))
            self.line((rx - 70 + 20, y_i), (rx - 8, y_i))
            moe = f.moe
            label = "experts"
            if moe is not None and moe.n_shared_experts:
                label = "experts + shared"
            width = max(60, 6.2 * len(label) + 12)
            rx += 78 + width / 2
            top = y_r if dense else y_m
            left, _, right, _ = self.op(rx, top, label, y2=y_i, w=width)
            self.line((rx - width / 2 - 78 + 8, y_r), (left, y_r), dashed=True)
            self.line((rx - width / 2 - 78 + 8, y_i), (left, y_i), dashed=True)
            if not dense:
                self.line((x_in + 8, y_m), (left, y_m))
            ends.append((right, (top + y_i) / 2 if dense else y_m))
            if moe is not None:
                self.anchors["routed"] = (
                    rx - width / 2,
                    y_i + 30,
                    f"{moe.n_experts} experts, top-{moe.experts_per_token}",
                )
            cx = max(cx, right)
        x_out = max(end[0] for end in ends) + 45
        for end in ends:
            if end[1] == y_m:
                self.line(end, (x_out - 8, y_m))
            else:
                self.line(end, (x_out - 22, end[1]), (x_out - 22, y_m + 6), (x_out - 8, y_m))
        self.mark("mlp_out", x_out, y_m, "above")
        return self.post(x_out, y_m, "mlp_out_post", "below")

    def trunk(self, y: float) -> None:
        f = self.facts
        self.mark("embeddings", 60, y, "above")
        left, _, right, _ = self.op(190, y, f"blocks 0..{f.n_layers - 1}", w=150)
        self.line((68, y), (left, y))
        self.op(330, y, "norm")
        self.line((right, y), (313, y))
        self.line((347, y), (382, y))
        self.mark("final_norm", 390, y, "above")
        self.op(470, y, "unembed")
        self.line((398, y), (443, y))
        self.line((497, y), (532, y))
        self.mark("lm_head", 540, y, "above")
        tail = []
        if f.logit_multiplier not in (None, 1, 1.0):
            tail.append(f"× {f.logit_multiplier:g}")
        if f.final_logit_softcap:
            tail.append(f"softcap {f.final_logit_softcap:g}")
        if tail:
            self.line((548, y), (600, y))
            self.op(640, y, " then ".join(tail))
            self.note(640 + 6.2 * len(" then ".join(tail)) / 2 + 16, y + 4, "sampled logits")

    # --- output -------------------------------------------------------------------------------
    def group_notes(self) -> None:
        """One layer note per group whose points all exist at the same subset of layers."""
        n = self.facts.n_layers
        for group, members in _GROUPS.items():
            if group not in self.anchors:
                continue
            x, y, title = self.anchors[group]
            sets = {
                tuple(present_layers(name, self.facts) or ())
                for name in members
                if name in self.drawn and why_absent(name, self.facts) is None
            }
            text = title
            if len(sets) == 1:
                layers = list(next(iter(sets)))
                if layers and len(layers) < n:
                    self.grouped.update(members)
                    ranges = layer_ranges(layers)
                    if len(ranges) > 36:
                        head = ranges[:30].rsplit(",", 1)[0]
                        text = f"{title}: {len(layers)} of {n} layers ({head}, …)"
                    else:
                        text = f"{title}: layers {ranges}"
            if group == "routed" or text != title:
                self.note(x, y, text)

    def marker_svg(self, m: _Marker) -> str:
        spec = POINTS[m.point]
        reason = why_absent(m.point, self.facts)
        layers = present_layers(m.point, self.facts)
        color = ROLE_COLORS[spec.role] if reason is None else _ABSENT
        label = m.point
        alias = self.aliases.get(m.point)
        sub = ""
        if (
            reason is None
            and layers
            and len(layers) < self.facts.n_layers
            and m.point not in self.grouped
        ):
            ranges = layer_ranges(layers)
            sub = (
                f"layers {ranges}"
                if len(ranges) <= 14
                else f"{len(layers)} of {self.facts.n_layers} layers"
            )
            tooltip_layers = f" Present at layers {ranges}."
        else:
            tooltip_layers = ""
        if reason is not None:
            sub = "absent"
        tooltip = reason if reason is not None else spec.definition + tooltip_layers
        if alias:
            tooltip = f"same tensor as {alias} on this model. {tooltip}"
        parts = []
        classes = (
            "pt" + (" absent" if reason else "") + (" hl" if m.point == self.highlight else "")
        )
        if m.point == self.highlight:
            parts.append(
                f'<circle cx="{m.x:.0f}" cy="{m.y:.0f}" r="14" fill="#fef3c7" '
                f'stroke="{_HIGHLIGHT}" stroke-width="3"/>'
            )
        if reason is None:
            parts.append(
                f'<circle cx="{m.x:.0f}" cy="{m.y:.0f}" r="7.5" fill="{color}" stroke="#fff" '
                f'stroke-width="1.5"/>'
            )
        else:
            parts.append(
                f'<circle cx="{m.x:.0f}" cy="{m.y:.0f}" r="6.5" fill="#fff" stroke="{color}" '
                f'stroke-width="1.5" stroke-dasharray="2 2"/>'
            )
        if m.side == "above":
            lx, ly, anchor = m.x, m.y - 13, "middle"
            sy = ly - 12
        elif m.side == "below":
            lx, ly, anchor = m.x, m.y + 21, "middle"
            sy = ly + 12
        else:
            lx, ly, anchor = m.x + 13, m.y + 4, "start"
            sy = ly + 12
        weight = ' font-weight="700"' if m.point == self.highlight else ""
        parts.append(
            f'<text x="{lx:.0f}" y="{ly:.0f}" text-anchor="{anchor}" class="lbl" '
            f'fill="{color}"{weight}>{html.escape(label)}</text>'
        )
        if sub:
            parts.append(
                f'<text x="{lx:.0f}" y="{sy:.0f}" text-anchor="{anchor}" class="sub">'
                f"{html.escape(sub)}</text>"
            )
        body = "".join(parts)
        title = f"<title>{html.escape(m.point)}: {html.escape(tooltip)}</title>"
        if self.href is not None:
            body = f'<a href="{html.escape(self.href(m.point))}">{title}{body}</a>'
        else:
            body = title + body
        return f'<g class="{classes}" data-point="{m.point}">{body}</g>'

    def svg(self, width: float, height: float, background: list[str]) -> str:
        style = (
            ".lbl{font:600 11px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}"
            ".sub{font:9.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;fill:#64748b}"
            ".op{font:10px system-ui,-apple-system,Segoe UI,Roboto,sans-serif;fill:#334155}"
            ".note{font:italic 10px system-ui,-apple-system,Segoe UI,Roboto,sans-serif;"
            "fill:#64748b}"
            ".plus{font:700 15px system-ui,sans-serif;fill:#334155}"
        )
        defs = (
            f'<defs><marker id="{self.uid}-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
            f'markerWidth="6" markerHeight="6" orient="auto-start-reverse">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{_EDGE}"/></marker></defs>'
        )
        body = "".join(
            [
                *background,
                *self.edges,
                *self.ops,
                *self.texts,
                *(self.marker_svg(m) for m in self.markers),
            ]
        )
        return (
            f'<svg class="interp-diagram" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" '
            # Never drawn smaller than its own size: labels are 9.5-11 px at 1:1 and went
            # under 8 px when a wide block was shrunk into the column; the wrap scrolls.
            f'style="min-width:{width:.0f}px" '
            f'role="img" aria-label="block diagram with the standardized points">'
            f"<style>{style}</style>{defs}{body}</svg>"
        )


def block_diagram(
    facts: ModelFacts,
    *,
    href: Callable[[str], str] | None = None,
    highlight: str | None = None,
    uid: str = "ie",
) -> tuple[str, list[str]]:
    """The SVG of one block of this model, and the points it leaves out with their structure.

    `href(point)` gives each marker's link; `highlight` rings one point.
    """
    diagram = _Diagram(facts, href, highlight, uid)
    svg = diagram.render()
    left_out = [name for name in POINTS if name not in diagram.drawn]
    # Single-stream models never draw the hyper-connection machinery; that is not news.
    if facts.n_streams <= 1:
        left_out = [name for name in left_out if name not in hyper_connection_names()]
    return svg, left_out

"""Each engine gauge on /metrics reads its own engine counter when scraped (no server needed)."""

from __future__ import annotations

from types import SimpleNamespace

from interp_serve.metrics import Metrics


def _samples(metrics: Metrics) -> dict[str, float]:
    lines = metrics.render().decode().splitlines()
    pairs = (line.rsplit(" ", 1) for line in lines if line and not line.startswith("#"))
    return {name: float(value) for name, value in pairs}


def test_engine_gauges_read_the_engine_at_scrape_time() -> None:
    engine = SimpleNamespace(
        waiting=2, running=1, aborted_streams=3, cancelled=4, steps_produced=5, dead=None
    )
    metrics = Metrics(engine)
    want = {
        "interp_serve_queue_depth": 2,
        "interp_serve_running": 1,
        "interp_serve_streams_aborted": 3,
        "interp_serve_calls_cancelled": 4,
        "interp_serve_stream_steps_produced": 5,
        "interp_serve_engine_dead": 0,
    }
    assert {name: _samples(metrics)[name] for name in want} == want
    engine.waiting, engine.dead = 7, "killed"
    now = _samples(metrics)
    assert (now["interp_serve_queue_depth"], now["interp_serve_engine_dead"]) == (7, 1)

def test_the_sae_rows_judge_only_the_worker_side_against_the_goal() -> None:
    from interp_validator.bench.sae_features import GOAL, _rows

    rows = _rows(
        {"in-process client": 800.0, "in-process worker": 1000.0},
        spread={"in-process": (0.9, 1.4)},
        layer=4,
        worker_bytes={"in-process client": 262144.0, "in-process worker": 32768.0},
        http_bytes={},
        sides=("in-process",),
    )
    assert [(r.variant.split(",")[0], r.ratio, r.goal) for r in rows] == [
        ("in-process: capture resid_post", 1.0, None),
        ("in-process: top-32 encoded in the worker", 1.25, GOAL),
    ]
    assert rows[1].note == "32,768 bytes out of the worker per request; ratio per round 0.90–1.40×"

"""Reading corpora: every file kind in a fixed order, a saved HF dataset's Arrow files only, and
refusals that name the fix. pyarrow is in the suite's test group, so the Arrow kinds always run."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interp_harvest.corpus import Corpus

from interp_core.errors import ConfigError, InvalidArgument


def test_a_folder_is_read_file_by_file_in_sorted_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "a.txt").write_text("first document\nstill the first")
    (tmp_path / "b" / "c.jsonl").write_text(
        json.dumps({"text": "second"}) + "\n\n" + json.dumps({"text": "third"}) + "\n"
    )
    pq.write_table(pa.table({"text": ["fourth", "fifth"]}), tmp_path / "b" / "d.parquet")
    (tmp_path / "notes.md").write_text("not a corpus file")
    assert list(Corpus(tmp_path)) == [
        "first document\nstill the first",
        "second",
        "third",
        "fourth",
        "fifth",
    ]


def test_a_saved_hf_dataset_folder_reads_its_arrow_stream_files(tmp_path: Path) -> None:
    # The layout `Dataset.save_to_disk` writes: Arrow stream files, dataset_info.json, state.json.
    table = pa.table({"text": ["one", "two", "three"], "id": [1, 2, 3]})
    for index, rows in enumerate((table.slice(0, 2), table.slice(2))):
        with pa.OSFile(str(tmp_path / f"data-{index:05d}-of-00002.arrow"), "wb") as sink:
            with pa.ipc.new_stream(sink, rows.schema) as writer:
                writer.write_table(rows)
    (tmp_path / "dataset_info.json").write_text("{}")
    (tmp_path / "state.json").write_text("{}")
    (tmp_path / "extra.txt").write_text("not part of the dataset")
    assert list(Corpus(tmp_path)) == ["one", "two", "three"]
    with pytest.raises(InvalidArgument, match="no column 'body'"):
        list(Corpus(tmp_path, text_field="body"))


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Corpus(tmp_path / "missing")
    (tmp_path / "data.csv").write_text("x")
    with pytest.raises(ConfigError, match=r"suffix '\.csv'"):
        Corpus(tmp_path / "data.csv")
    with pytest.raises(ConfigError, match="holds no corpus file"):
        Corpus(tmp_path)
    (tmp_path / "d.jsonl").write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(InvalidArgument, match="--text-field"):
        list(Corpus(tmp_path / "d.jsonl"))


def test_the_fingerprint_changes_with_the_corpus(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"text": "x"}) + "\n")
    before = Corpus(path).fingerprint()
    assert Corpus(path).fingerprint() == before
    assert Corpus(path, text_field="body").fingerprint() != before
    path.write_text(json.dumps({"text": "xy"}) + "\n")
    assert Corpus(path).fingerprint() != before

"""Documents read from a corpus on disk, one string at a time, in a fixed order.

A corpus is a file or a folder. Files: `.txt` (the whole file is one document), `.jsonl` (one
JSON object a line, the document in `text_field`), `.parquet` (a string column `text_field`),
`.arrow` (an Arrow stream file as HF `datasets` writes with `save_to_disk`, same column). A
folder is read file by file in sorted path order; a folder with `dataset_info.json` or
`state.json` is a saved HF dataset and only its `.arrow` files count. The order is part of the
contract: a resumed job re-reads the corpus and must meet the same documents in the same order.

Nothing proportional to the corpus is held: text files are read one at a time, jsonl line by
line and Arrow/parquet one record batch at a time. Parquet and Arrow need pyarrow
(`pip install 'interpoint-harvest[arrow]'`), imported only when such a file is met.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_core.errors import ConfigError, InvalidArgument

__all__ = ["Corpus", "corpus_files"]

SUFFIXES = (".txt", ".jsonl", ".parquet", ".arrow")
_ARROW_INSTALL = "pip install 'interpoint-harvest[arrow]' (or pip install pyarrow)"


def corpus_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files of a corpus in the order they are read; refuses a path with none."""
    root = Path(path).expanduser()
    if not root.exists():
        message = f"the corpus {str(root)!r} does not exist; pass a file or a folder of files"
        raise ConfigError(message)
    if root.is_file():
        if root.suffix not in SUFFIXES:
            message = (
                f"cannot read {root.name!r} as a corpus: its suffix {root.suffix!r} is none of "
                f"{', '.join(SUFFIXES)}; convert it or rename it if it is one of them"
            )
            raise ConfigError(message)
        return [root]
    saved_dataset = (root / "dataset_info.json").is_file() or (root / "state.json").is_file()
    suffixes = (".arrow",) if saved_dataset else SUFFIXES
    # A saved dataset's cache files (cache-*.arrow) are derived from its data files: skipping them
    # keeps every record once.
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix in suffixes and not p.name.startswith(("cache-", "."))
    )
    if not files:
        message = (
            f"the folder {str(root)!r} holds no corpus file ({', '.join(suffixes)}); "
            f"point at a folder of text, jsonl, parquet or a saved HF dataset"
        )
        raise ConfigError(message)
    return files


@dataclass(frozen=True)
class Corpus:
    """A corpus on disk: iterate it for its documents (strings), in a fixed order."""

    path: Path
    text_field: str = "text"

    def __init__(self, path: str | os.PathLike[str], *, text_field: str = "text") -> None:
        object.__setattr__(self, "path", Path(path).expanduser())
        object.__setattr__(self, "text_field", text_field)
        corpus_files(self.path)  # refuse a bad path now, not at the first read

    def files(self) -> list[Path]:
        return corpus_files(self.path)

    def fingerprint(self) -> str:
        """What identifies the corpus for a resume: each file's relative path, size and mtime.

        Hashing every byte would read a terabyte corpus twice; a changed file nearly always
        changes its size or mtime, and a resume against a changed corpus is refused.
        """
        digest = hashlib.sha256(self.text_field.encode())
        root = self.path if self.path.is_dir() else self.path.parent
        for file in self.files():
            stat = file.stat()
            digest.update(
                f"{file.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode()
            )
        return digest.hexdigest()

    def __iter__(self) -> Iterator[str]:
        for file in self.files():
            yield from self._documents(file)

    def _documents(self, file: Path) -> Iterator[str]:
        if file.suffix == ".txt":
            yield file.read_text(encoding="utf-8")
        elif file.suffix == ".jsonl":
            yield from self._jsonl(file)
        else:
            yield from self._arrow(file)

    def _jsonl(self, file: Path) -> Iterator[str]:
        with file.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as error:
                    message = f"{file}:{number} is not a JSON object: {error}"
                    raise ConfigError(message) from error
                yield self._text(record, f"{file}:{number}")

    def _text(self, record: Any, where: str) -> str:
        if not isinstance(record, dict) or self.text_field not in record:
            keys = sorted(record) if isinstance(record, dict) else type(record).__name__
            message = (
                f"{where} has no {self.text_field!r} field (it has {keys}); "
                f"name the text field with text_field= (--text-field)"
            )
            raise InvalidArgument(message)
        text = record[self.text_field]
        if not isinstance(text, str):
            message = f"{where}: {self.text_field!r} is a {type(text).__name__}, not a string"
            raise InvalidArgument(message)
        return text

    def _arrow(self, file: Path) -> Iterator[str]:
        try:
            import pyarrow.ipc
            import pyarrow.parquet
        except ImportError as error:
            message = (
                f"reading {file.name} needs pyarrow, which is not installed ({error}); "
                f"{_ARROW_INSTALL}"
            )
            raise ConfigError(message) from error
        if file.suffix == ".parquet":
            parquet = pyarrow.parquet.ParquetFile(file)
            self._check_column(parquet.schema_arrow.names, file)
            batches = parquet.iter_batches(columns=[self.text_field])
        else:
            # HF datasets writes Arrow *stream* files; a file in the random-access format is read
            # the same way batch by batch.
            try:
                reader: Any = pyarrow.ipc.open_stream(file)
            except pyarrow.ArrowInvalid:
                reader = pyarrow.ipc.open_file(file)
            self._check_column(reader.schema.names, file)
            batches = (
                iter(reader)
                if hasattr(reader, "__iter__")
                else (reader.get_batch(i) for i in range(reader.num_record_batches))
            )
        for batch in batches:
            for text in batch.column(self.text_field).to_pylist():
                if not isinstance(text, str):
                    message = f"{file}: a {self.text_field!r} value is {type(text).__name__}"
                    raise InvalidArgument(message)
                yield text

    def _check_column(self, names: list[str], file: Path) -> None:
        if self.text_field not in names:
            message = (
                f"{file} has no column {self.text_field!r} (it has {names}); "
                f"name the text column with text_field= (--text-field)"
            )
            raise InvalidArgument(message)

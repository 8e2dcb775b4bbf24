"""`raises_saying`: pytest.raises that also checks what the message says.

Most refusals in interp-core promise a message that names the mistake and the fix; the tests pin
the phrases a reader relies on rather than the whole text, so each states only its fragments.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def raises_saying(
    expected: type[BaseException], *fragments: str
) -> Iterator[pytest.ExceptionInfo[BaseException]]:
    """Expect `expected` from the block, its message containing every fragment; yields the
    ExceptionInfo for anything further a test checks (read it after the block)."""
    with pytest.raises(expected) as caught:
        yield caught
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"

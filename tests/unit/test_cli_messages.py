"""The CLI's failure messages name a path once (``zklocks._cli.sanitise.cannot``)."""

from __future__ import annotations

from zklocks._cli.sanitise import cannot
from zklocks._errors import LockError


def test_a_library_message_that_starts_with_the_path_is_not_prefixed_again() -> None:
    error = LockError("/locks/api: semaphore contenders disagree on the permits (3 and 2)")
    assert cannot("take", "/locks/api", error) == (
        "cannot take /locks/api: semaphore contenders disagree on the permits (3 and 2)"
    )


def test_a_message_about_something_else_keeps_the_path_in_front() -> None:
    error = LockError("the client is stopped")
    assert cannot("read", "/locks/a", error) == "cannot read /locks/a: the client is stopped"
    nested = LockError("/locks/a/b: no such node")  # another path, that merely begins alike
    assert cannot("read", "/locks/a", nested) == "cannot read /locks/a: /locks/a/b: no such node"

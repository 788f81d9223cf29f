"""The contender kinds, once: what each is called, whether it excludes, what it makes a path.

Every module that used to spell a kind's properties out (node names, the rules' "what is
this path used as", the layouts' refusals, the CLI's words, the metrics' label, the
simulator's exclusivity check) reads them from ``KINDS``. Adding a lock kind is one entry
here, one rule in ``strategies`` and its tests (docs/architecture.md, "Adding a lock kind").

The name and the node prefix differ on purpose for the semaphore's kind: it was called
``lease`` until 0.2 and is now ``permit`` (a *lease* is what ``acquire`` returns, of any
kind), but its nodes keep the ``lease-`` prefix so that clients before and after the rename
stand in one line. The metrics' ``kind`` label keeps the old name for one release, so
dashboards and alert rules that match ``kind="lease"`` go on working (CHANGELOG.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Kind:
    """One contender kind and everything the rest of the library says about it."""

    name: str  # as code and ``Contender.kind`` say it: "lock", "read", "write", "permit", "elect"
    exclusive: bool  # does a holder of this kind exclude every other holder?
    use: str  # what a path of this kind is: "a lock", "a semaphore", "an election"
    what: str  # the lock it belongs to: "the kazoo layout has no <what>"
    words: str  # for people (``ls``, ``status``): "semaphore", "election", "read", ...
    prefix: str  # its node names start ``<prefix>-`` (nodes.py)
    metric_label: str  # the ``kind`` label of the client's metrics

    def __str__(self) -> str:
        return self.name


# fmt: off
LOCK = Kind(name="lock", exclusive=True, use="a lock", what="exclusive lock", words="lock",
            prefix="lock", metric_label="lock")
READ = Kind(name="read", exclusive=False, use="a lock", what="read/write lock", words="read",
            prefix="read", metric_label="read")
WRITE = Kind(name="write", exclusive=True, use="a lock", what="read/write lock", words="write",
             prefix="write", metric_label="write")
PERMIT = Kind(name="permit", exclusive=False, use="a semaphore", what="semaphore",
              words="semaphore", prefix="lease", metric_label="lease")
ELECT = Kind(name="elect", exclusive=True, use="an election", what="leader election",
             words="election", prefix="elect", metric_label="elect")
# fmt: on

KINDS: dict[str, Kind] = {kind.name: kind for kind in (LOCK, READ, WRITE, PERMIT, ELECT)}
NAMES = tuple(KINDS)
EXCLUSIVE = frozenset(kind.name for kind in KINDS.values() if kind.exclusive)
BY_PREFIX: dict[str, Kind] = {kind.prefix: kind for kind in KINDS.values()}
#: What a path is used as, in the order messages name two of them.
USE_ORDER = ("a semaphore", "an election", "a lock")


def of(name: str) -> Kind:
    """The kind called ``name``; ``ValueError`` for a name no kind has (a programming error)."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown contender kind {name!r}") from None


def use_of(name: str) -> str:
    """What a contender of kind ``name`` makes its path; a kind we do not know is a lock
    (Curator's ``foreign`` children: they block as a lock holder would)."""
    kind = KINDS.get(name)
    return kind.use if kind is not None else "a lock"


def metric_label(name: str) -> str:
    """The ``kind`` label of the client's metrics for kind ``name`` (unknown: as is)."""
    kind = KINDS.get(name)
    return kind.metric_label if kind is not None else name


def words_for(name: str) -> str:
    """The kind ``name`` as ``ls`` and ``status`` say it (unknown kinds as they are)."""
    kind = KINDS.get(name)
    return kind.words if kind is not None else name

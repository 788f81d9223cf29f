"""Contender node names: how a node says its kind, its attempt token and its place in line.

A contender is one child of the lock path (the lock's directory), named

    <prefix>-<attempt>-<sequence>            prefix: lock | read | write | elect
    lease-<permits>-<attempt>-<sequence>     a semaphore permit, with the permits it expects

The prefix is the kind's (``zklocks._core.kinds``): the kind ``permit`` keeps the
``lease-`` prefix it had when the kind was called ``lease``, so clients from before and
after the rename stand in one line.

``attempt`` is 32 hex digits, fresh for every acquire call: after a connection drop
during ``create`` it finds our node again ("protected create"). ``sequence`` is the
suffix ZooKeeper appends: the parent's ``cversion`` as ``%010d``, a *signed* 32-bit
counter that wraps to negative numbers after 2**31 changes. It is parsed as an integer
and ordered by serial-number arithmetic (RFC 1982), never compared as a string.

The one-node exclusive lock (``fair=False``) is the single child ``lock``
(no suffix); it is always the head of the line while it exists.
Any other child name is foreign: ignored, never a contender. That includes a name that
looks like ours but whose sequence ZooKeeper cannot have issued (outside 32 bits): anyone
who can create a node under the lock path could write one, and it must not stop the
contenders that can be ordered.

Node data (``Payload``) is written by us but read from anyone: ``decode_payload`` is
total, so a foreign node's bytes always give an identifier, never an exception.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from zklocks._core import kinds as _kinds

SINGLE_NODE = "lock"

_PLAIN_PREFIXES = "|".join(k.prefix for k in _kinds.KINDS.values() if k is not _kinds.PERMIT)
_SEQUENTIAL = re.compile(rf"^({_PLAIN_PREFIXES})-([0-9a-f]{{32}})-(-?[0-9]{{9,10}})$")
_LEASE = re.compile(
    rf"^{_kinds.PERMIT.prefix}-([1-9][0-9]{{0,8}})-([0-9a-f]{{32}})-(-?[0-9]{{9,10}})$"
)
_WRAP = 1 << 32
_HALF = 1 << 31


@dataclass(frozen=True, slots=True)
class NodeName:
    """A parsed contender node name."""

    name: str
    kind: str
    attempt: str
    sequence: int
    permits: int | None = None
    dialect: str = "zklocks"  # whose naming it follows (``zklocks._core.dialects``)

    @property
    def single(self) -> bool:
        """Is this the one-node exclusive lock (``fair=False``)?"""
        return self.name == SINGLE_NODE


def new_attempt() -> str:
    """A fresh per-attempt token."""
    return os.urandom(16).hex()  # uuid4().hex without the UUID object: a third of the cost


def sequential_prefix(kind: str, attempt: str, permits: int | None = None) -> str:
    """The name to create (ZooKeeper appends the sequence)."""
    prefix = _kinds.of(kind).prefix
    if kind == _kinds.PERMIT.name:
        if permits is None:
            raise ValueError("a semaphore permit needs its permits")
        return f"{prefix}-{permits}-{attempt}-"
    return f"{prefix}-{attempt}-"


#: Names remembered by ``parse``. A waiter re-lists the whole line after every wake, so
#: the names of a busy lock are parsed again and again; every attempt has a new name, so
#: an unbounded (or very large) cache grows for as long as the process lives. This many
#: entries (a few hundred kB) cover the line of any lock of reasonable size.
PARSE_CACHE_SIZE = 1024


@functools.lru_cache(maxsize=PARSE_CACHE_SIZE)
def parse(name: str) -> NodeName | None:
    """The contender a child name denotes, or ``None`` for a foreign child (cached)."""
    if name == SINGLE_NODE:
        return NodeName(name=name, kind=_kinds.LOCK.name, attempt="", sequence=0)
    match = _SEQUENTIAL.match(name)
    if match:
        prefix, attempt, text = match.groups()
        sequence = int(text)
        if not -_HALF <= sequence < _HALF:
            return None  # no ZooKeeper issued it: foreign
        return NodeName(name, _kinds.BY_PREFIX[prefix].name, attempt, sequence)
    match = _LEASE.match(name)
    if match:
        permits, attempt, text = match.groups()
        sequence = int(text)
        if not -_HALF <= sequence < _HALF:
            return None
        return NodeName(name, _kinds.PERMIT.name, attempt, sequence, int(permits))
    return None


def sequence_precedes(a: int, b: int) -> bool:
    """Was sequence ``a`` issued before ``b``? Serial-number order, correct across the wrap."""
    return 0 < (b - a) % _WRAP < _HALF


def queue(children: Iterable[str]) -> list[NodeName]:
    """The contenders among ``children``, in line order (foreign children dropped).

    Live sequences under one parent span far less than half the 32-bit space, so the
    distance from any one of them, taken modulo 2**32 and shifted by half the space,
    orders them exactly as serial-number arithmetic does: a plain integer sort key.
    """
    parsed = [node for node in map(parse, children) if node is not None]
    if not parsed:
        return parsed
    reference = parsed[0].sequence - _HALF

    def key(node: NodeName) -> tuple[int, str]:
        if node.single:
            return (-1, "")
        return ((node.sequence - reference) % _WRAP, node.name)

    parsed.sort(key=key)
    return parsed


def line_up_to(me: NodeName, children: Iterable[str]) -> list[NodeName] | None:
    """The whole line, in order, as ``me`` sees it; None if ``me`` is no longer in it.

    What a contender decides on. Ordered by each node's signed distance from ``me``
    (an integer, so the sort is cheap even for a thousand waiters re-listing).
    """
    found = False
    keyed: list[tuple[int, NodeName]] = []
    for name in children:
        node = parse(name)
        if node is None:
            continue
        if node.single:
            keyed.append((-_WRAP, node))
            continue
        found = found or name == me.name
        keyed.append(((node.sequence - me.sequence + _HALF) % _WRAP - _HALF, node))
    if not found:
        return None
    keyed.sort(key=lambda pair: pair[0])
    return [node for _, node in keyed]


@dataclass(frozen=True, slots=True)
class Payload:
    """What a contender node's data says about who created it."""

    identifier: str
    attempt: str = ""
    host: str = ""
    pid: int = 0


def encode_payload(payload: Payload) -> bytes:
    """Node data: small JSON, readable with any ZooKeeper tool."""
    fields = {"identifier": payload.identifier, "host": payload.host, "pid": payload.pid}
    if payload.attempt:
        fields["attempt"] = payload.attempt
    return json.dumps(fields, separators=(",", ":")).encode()


def decode_payload(data: bytes) -> Payload:
    """What a node's data says; total: any bytes give a ``Payload``, never an exception.

    Our own JSON gives every field. Anything else (another tool's node, a forgery) gives
    its text as the identifier, or a readable rendering of bytes that are not UTF-8
    (``\\xff``). Fields of the wrong type are dropped rather than trusted: a ``pid``
    must be a whole number that fits a process id.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Payload(identifier=data.decode("utf-8", errors="backslashreplace"))
    try:
        # NaN and Infinity are not JSON; nesting deep enough fails with RecursionError
        fields = json.loads(text, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return Payload(identifier=text)
    if not isinstance(fields, dict):
        return Payload(identifier=text)
    return Payload(
        identifier=_field_text(fields.get("identifier")),
        attempt=_field_text(fields.get("attempt")),
        host=_field_text(fields.get("host")),
        pid=_field_pid(fields.get("pid")),
    )


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not JSON")


def _field_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, dict | list):
        return ""
    return str(value)  # a bool, an int (json caps its digits) or a finite float


def _field_pid(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value if 0 <= value < 2**63 else 0

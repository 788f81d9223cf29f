"""Contender node names: how a node says its kind, its attempt token and its place in line.

A contender is one child of the lock path (the lock's directory), named

    <kind>-<attempt>-<sequence>            kind: lock | read | write
    lease-<permits>-<attempt>-<sequence>   a semaphore lease, with the permits it expects

``attempt`` is 32 hex digits, fresh for every acquire call: after a connection drop
during ``create`` it finds our node again ("protected create"). ``sequence`` is the
suffix ZooKeeper appends: the parent's ``cversion`` as ``%010d``, a *signed* 32-bit
counter that wraps to negative numbers after 2**31 changes. It is parsed as an integer
and ordered by serial-number arithmetic (RFC 1982), never compared as a string.

The one-node exclusive lock (``fair=False``) is the single child ``lock``
(no suffix); it is always the head of the line while it exists.
Any other child name is foreign: ignored, never a contender.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

KINDS = ("lock", "read", "write", "lease")
EXCLUSIVE_KINDS = frozenset({"lock", "write"})
SINGLE_NODE = "lock"

_SEQUENTIAL = re.compile(r"^(lock|read|write)-([0-9a-f]{32})-(-?[0-9]{9,10})$")
_LEASE = re.compile(r"^lease-([1-9][0-9]{0,8})-([0-9a-f]{32})-(-?[0-9]{9,10})$")
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

    @property
    def single(self) -> bool:
        """Is this the one-node exclusive lock (``fair=False``)?"""
        return self.name == SINGLE_NODE


def new_attempt() -> str:
    """A fresh per-attempt token."""
    return uuid.uuid4().hex


def sequential_prefix(kind: str, attempt: str, permits: int | None = None) -> str:
    """The name to create (ZooKeeper appends the sequence)."""
    if kind == "lease":
        if permits is None:
            raise ValueError("a lease needs its permits")
        return f"lease-{permits}-{attempt}-"
    if kind not in KINDS:
        raise ValueError(f"unknown contender kind {kind!r}")
    return f"{kind}-{attempt}-"


@functools.lru_cache(maxsize=1 << 16)
def parse(name: str) -> NodeName | None:
    """The contender a child name denotes, or ``None`` for a foreign child (cached)."""
    if name == SINGLE_NODE:
        return NodeName(name=name, kind="lock", attempt="", sequence=0)
    match = _SEQUENTIAL.match(name)
    if match:
        kind, attempt, sequence = match.groups()
        return NodeName(name, kind, attempt, _to_int32(sequence))
    match = _LEASE.match(name)
    if match:
        permits, attempt, sequence = match.groups()
        return NodeName(name, "lease", attempt, _to_int32(sequence), int(permits))
    return None


def _to_int32(text: str) -> int:
    value = int(text)
    if not -_HALF <= value < _HALF:
        raise ValueError(f"sequence {text} is outside ZooKeeper's 32-bit range")
    return value


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
    """Best effort: a node written by another tool still yields its data as identifier."""
    try:
        fields = json.loads(data.decode())
        return Payload(
            identifier=str(fields.get("identifier", "")),
            attempt=str(fields.get("attempt", "")),
            host=str(fields.get("host", "")),
            pid=int(fields.get("pid", 0)),
        )
    except (ValueError, AttributeError, TypeError):
        return Payload(identifier=data.decode(errors="replace"))

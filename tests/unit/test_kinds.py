"""The kinds table (``zklocks._core.kinds``) is the one place a kind's properties live."""

from __future__ import annotations

import pytest

from zklocks._core import kinds, nodes, strategies
from zklocks._core.dialects import DIALECTS


def test_every_kind_has_a_rule_a_distinct_prefix_and_parses_back_to_itself() -> None:
    assert set(strategies.ZKLOCKS_RULES.table) == set(kinds.KINDS)
    assert len(kinds.BY_PREFIX) == len(kinds.KINDS)
    attempt = "a" * 32
    for kind in kinds.KINDS.values():
        permits = 3 if kind is kinds.PERMIT else None
        name = nodes.sequential_prefix(kind.name, attempt, permits) + "0000000007"
        parsed = nodes.parse(name)
        assert parsed is not None and parsed.kind == kind.name, name
        assert name.startswith(kind.prefix + "-")


def test_the_semaphore_kind_is_permit_but_its_nodes_and_metrics_keep_the_old_word() -> None:
    assert kinds.PERMIT.name == "permit"
    assert nodes.sequential_prefix("permit", "b" * 32, 2) == f"lease-2-{'b' * 32}-"
    assert kinds.metric_label("permit") == "lease"
    assert "lease" not in kinds.KINDS  # the old name is no kind: no code path takes it


def test_exclusive_kinds_and_uses_come_from_the_table() -> None:
    assert {"lock", "write", "elect"} == kinds.EXCLUSIVE
    assert kinds.use_of("permit") == "a semaphore"
    assert kinds.use_of("elect") == "an election"
    assert kinds.use_of("foreign") == "a lock"  # a Curator child of no kind blocks as a lock
    assert {kinds.use_of(name) for name in kinds.KINDS} == set(kinds.USE_ORDER)


def test_every_dialect_speaks_only_kinds_of_the_table() -> None:
    for dialect in DIALECTS.values():
        assert dialect.kinds <= set(kinds.KINDS), dialect


def test_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown contender kind 'lease'"):
        nodes.sequential_prefix("lease", "c" * 32, 1)

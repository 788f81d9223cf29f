"""The in-memory ZooKeeper model: nodes, stats, sequence numbers, sessions, watches, errors."""

from __future__ import annotations

import pytest

from zklocks._core.lock_delay import count_data, unaccounted, unmarked
from zklocks._protocol.errors import (
    BadArgumentsError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from zklocks._protocol.records import (
    Children,
    Create,
    Created,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Multi,
    NodeData,
    SetData,
    Stat,
)
from zklocks._vocabulary import WatchEvent, WatchKind
from zklocks.sim.model import (
    ClientWatches,
    Model,
    Notification,
    int32,
    sequence_suffix,
)


@pytest.fixture
def model() -> Model:
    return Model()


def created(reply: object) -> Created:
    assert isinstance(reply, Created), reply
    return reply


def test_sequence_suffix_is_signed_32_bit_percent_010d() -> None:
    assert sequence_suffix(0) == "0000000000"
    assert sequence_suffix(42) == "0000000042"
    assert sequence_suffix(2**31 - 1) == "2147483647"
    assert sequence_suffix(2**31) == "-2147483648"
    assert sequence_suffix(-5) == "-000000005"
    assert int32(2**31 - 1 + 1) == -(2**31)


def test_sequential_names_count_every_child_created(model: Model) -> None:
    s = model.open_session(10).id
    model.create(s, "/p")
    assert created(model.create(s, "/p/n-", sequential=True)).path == "/p/n-0000000000"
    model.create(s, "/p/plain")
    model.delete(s, "/p/plain")  # a delete does not move the sequence counter
    assert created(model.create(s, "/p/n-", sequential=True)).path == "/p/n-0000000002"
    assert model.nodes["/p"].cversion == 3  # creates
    assert model.nodes["/p"].pzxid == model.zxid
    model.delete(s, "/p/n-0000000000")
    stat = model.exists(s, "/p")
    assert isinstance(stat, Stat) and stat.num_children == 1
    assert model.nodes["/p"].full_stat().cversion == 5  # what clients read: 2*3 - 1


def test_sequence_numbers_wrap_negative_after_2_to_the_31(model: Model) -> None:
    s = model.open_session(10).id
    model.create(s, "/p")
    model.set_cversion("/p", 2**31 - 2)
    names = [created(model.create(s, "/p/n-", sequential=True)).path for _ in range(3)]
    assert names == ["/p/n-2147483646", "/p/n-2147483647", "/p/n--2147483648"]
    assert model.nodes["/p"].cversion == -(2**31) + 1
    model.delete(s, "/p/n--2147483648")
    assert created(model.create(s, "/p/n-", sequential=True)).path == "/p/n--2147483647"


def test_errors_as_the_server_returns_them(model: Model) -> None:
    s = model.open_session(10).id
    assert isinstance(model.create(s, "/a/b"), NoNodeError)
    model.create(s, "/a")
    assert isinstance(model.create(s, "/a"), NodeExistsError)
    model.create(s, "/a/b")
    assert isinstance(model.delete(s, "/a"), NotEmptyError)
    assert isinstance(model.delete(s, "/nope"), NoNodeError)
    model.create(s, "/e", ephemeral=True)
    assert isinstance(model.create(s, "/e/child"), NoChildrenForEphemeralsError)
    assert isinstance(model.create(s, "relative"), BadArgumentsError)
    assert isinstance(model.get_data(s, "/nope"), NoNodeError)
    assert isinstance(model.get_children(s, "/nope"), NoNodeError)
    assert model.exists(s, "/nope") is None


def test_node_exists_is_checked_before_ephemeral_parent(model: Model) -> None:
    s = model.open_session(10).id
    model.create(s, "/e", ephemeral=True)
    assert isinstance(model.create(s, "/e"), NodeExistsError)


def test_stat_fields(model: Model) -> None:
    s = model.open_session(10).id
    model.now = 1.5
    a = created(model.create(s, "/a", b"x"))
    b = created(model.create(s, "/a/b", ephemeral=True))
    assert a.stat.czxid < b.stat.czxid == model.zxid
    assert b.stat.ephemeral_owner == s and a.stat.ephemeral_owner == 0
    assert a.stat.ctime_ms == model.epoch_ms + 1500
    full = model.nodes["/a"].full_stat()
    assert (full.num_children, full.cversion, full.pzxid) == (1, 1, b.stat.czxid)
    model.delete(s, "/a/b")
    assert model.nodes["/a"].full_stat().cversion == 2
    stat = model.set_data(s, "/a", b"yz")
    assert isinstance(stat, Stat) and stat.version == 1 and stat.mzxid == model.zxid
    assert model.nodes["/a"].full_stat().data_length == 2


def test_container_nodes_and_the_sweep(model: Model) -> None:
    s = model.open_session(10).id
    c = created(model.create(s, "/c", container=True))
    assert c.stat.ephemeral_owner == 0 and model.nodes["/c"].container
    model.create(s, "/never-used", container=True)
    model.create(s, "/c/child", ephemeral=True)  # children allowed under a container
    assert model.sweep_containers() == []  # not empty
    model.delete(s, "/c/child")
    assert model.sweep_containers() == ["/c"]  # empty and once had a child
    assert "/never-used" in model.nodes


def test_apply_runs_ops_requests(model: Model) -> None:
    s = model.open_session(10).id
    assert created(model.apply(s, Create("/l", ephemeral=False, container=True))).path == "/l"
    node = created(model.apply(s, Create("/l/lock-", b"d", ephemeral=True, sequential=True)))
    assert node.path == "/l/lock-0000000000"
    assert model.apply(s, GetChildren("/l")) == ["lock-0000000000"]
    data = model.apply(s, GetData(node.path))
    assert isinstance(data, NodeData) and data.data == b"d"
    assert isinstance(model.apply(s, Exists(node.path)), Stat)
    assert model.apply(s, Delete(node.path)) is None


def test_apply_replies_with_every_stat_field_it_keeps(model: Model) -> None:
    s = model.open_session(10).id
    model.apply(s, Create("/p", b"abc", ephemeral=False))
    model.apply(s, Create("/p/c", ephemeral=False))
    stat = model.apply(s, Exists("/p"))
    assert isinstance(stat, Stat)
    full = model.nodes["/p"].full_stat()
    assert (stat.data_length, stat.cversion, stat.pzxid) == (3, full.cversion, full.pzxid)
    assert stat.pzxid == model.zxid and stat.mtime_ms == full.mtime_ms


@pytest.mark.parametrize(
    "request_",
    [
        Create("/t", ephemeral=False, ttl_ms=1000),
        Delete("/t", version=0),
        Multi((Delete("/t"),)),
    ],
)
def test_apply_refuses_what_the_model_does_not_keep(model: Model, request_: object) -> None:
    s = model.open_session(10).id
    model.apply(s, Create("/t", ephemeral=False))
    before = model.zxid
    with pytest.raises(ValueError, match="simulator"):
        model.apply(s, request_)  # type: ignore[arg-type]
    assert model.zxid == before and "/t" in model.nodes  # nothing applied


def test_a_marked_release_deletes_and_counts_on_the_directory_in_one_zxid(model: Model) -> None:
    """The lock-delay's mark (zklocks._core.lock_delay): the directory's data version
    counts clean releases, and getChildren2 shows it; a plain delete leaves it."""
    s = model.open_session(10).id
    model.apply(s, Create("/d", ephemeral=False))
    model.apply(s, Create("/d/a", ephemeral=True))
    model.apply(s, Create("/d/b", ephemeral=True))
    reply = model.apply(s, Multi((Delete("/d/a"), SetData("/d", b""))))
    assert isinstance(reply, list) and reply[0] is None
    listing = model.apply(s, GetChildren("/d", with_stat=True))
    assert isinstance(listing, Children) and listing.names == ["b"]
    assert listing.stat.version == 1 and listing.stat.mzxid == listing.stat.pzxid == model.zxid
    model.apply(s, Delete("/d/b"))
    listing = model.apply(s, GetChildren("/d", with_stat=True))
    assert isinstance(listing, Children) and listing.names == [] and listing.stat.version == 1
    gone = model.apply(s, Multi((Delete("/d/b"), SetData("/d", b""))))
    assert isinstance(gone, NoNodeError)


def test_the_directory_stat_counts_unmarked_deletions_and_the_data_the_taken_over(
    model: Model,
) -> None:
    """What lock-delay reads from a listing alone: ``unmarked`` from cversion,
    numChildren and version; the taken-over count from the data's length. A removal
    records whether its own session deleted it (the invariants' ground truth)."""
    s = model.open_session(10).id
    t = model.open_session(10).id
    model.apply(s, Create("/d", ephemeral=False))
    for name in ("a", "b", "c", "d"):
        model.apply(t if name == "c" else s, Create(f"/d/{name}", ephemeral=True))
    model.apply(s, Multi((Delete("/d/a"), SetData("/d", b""))))  # marked
    model.apply(t, Delete("/d/b"))  # another session's delete: unmarked
    model.expire(t)  # the server's at the session's end: unmarked
    listing = model.apply(s, GetChildren("/d", with_stat=True))
    assert isinstance(listing, Children) and listing.names == ["d"]
    assert unmarked(listing.stat) == 2 and unaccounted(listing.stat) == 2
    model.apply(s, Multi((Delete("/d/d"), SetData("/d", count_data(2)))))
    listing = model.apply(s, GetChildren("/d", with_stat=True))
    assert isinstance(listing, Children) and unaccounted(listing.stat) == 0
    assert [(r.name, r.marked, r.own) for r in model.removals] == [
        ("a", True, True),
        ("b", False, False),
        ("c", False, False),
        ("d", True, True),
    ]
    model.set_cversion("/d", 2**31 - 1)  # a history of clean departures up to the wrap
    listing = model.apply(s, GetChildren("/d", with_stat=True))
    assert isinstance(listing, Children) and unmarked(listing.stat) == 2


def test_sessions_expire_after_their_timeout_of_silence(model: Model) -> None:
    s = model.open_session(2.0).id
    t = model.open_session(2.0).id
    model.create(s, "/e", ephemeral=True)
    model.now = 1.9
    model.touch(t)
    assert model.expire_due() == []
    model.now = 2.0
    assert model.expire_due() == [s]
    assert "/e" not in model.nodes
    assert isinstance(model.create(s, "/x"), SessionExpiredError)
    assert model.alive(t) and model.expiry_due(t) == 3.9


def test_closing_a_session_removes_its_ephemerals_and_watches(model: Model) -> None:
    s = model.open_session(10).id
    other = model.open_session(10).id
    model.create(s, "/e", ephemeral=True)
    model.exists(s, "/elsewhere", watch=True)
    model.exists(other, "/e", watch=True)
    model.close_session(s)
    assert "/e" not in model.nodes
    assert model.take_outbox() == [Notification(other, WatchKind.DELETED, "/e")]
    model.create(other, "/elsewhere")
    assert model.take_outbox() == []  # the closed session's watch went with it


def test_watch_firing_rules(model: Model) -> None:
    s = model.open_session(10).id
    w = model.open_session(10).id
    model.exists(w, "/a", watch=True)  # missing: fires on create
    model.create(s, "/a")
    assert model.take_outbox() == [Notification(w, WatchKind.CREATED, "/a")]
    model.get_children(w, "/a", watch=True)
    model.get_data(w, "/a", watch=True)
    model.create(s, "/a/b")
    assert model.take_outbox() == [Notification(w, WatchKind.CHILD, "/a")]
    model.set_data(s, "/a", b"1")
    assert model.take_outbox() == [Notification(w, WatchKind.CHANGED, "/a")]
    model.set_data(s, "/a", b"2")
    assert model.take_outbox() == []  # one-shot
    model.get_data(w, "/a/b", watch=True)
    model.get_children(w, "/a/b", watch=True)
    model.get_children(w, "/a", watch=True)
    model.delete(s, "/a/b")
    assert model.take_outbox() == [
        Notification(w, WatchKind.DELETED, "/a/b"),  # once, for data and child watch
        Notification(w, WatchKind.CHILD, "/a"),
    ]


def test_no_watch_is_set_by_a_failed_read(model: Model) -> None:
    s = model.open_session(10).id
    model.get_data(s, "/a", watch=True)
    model.get_children(s, "/a", watch=True)
    assert model.watch_count() == 0
    model.exists(s, "/a", watch=True)
    assert model.watch_count() == 1


def test_client_watches_materialize_like_the_java_client() -> None:
    watches = ClientWatches()
    seen: list[tuple[str, WatchEvent]] = []
    watches.add_data("/a", lambda e: seen.append(("data", e)))
    watches.add_child("/a", lambda e: seen.append(("child", e)))
    assert watches.deliver(Notification(1, WatchKind.CHILD, "/a")) == 1
    assert seen == [("child", WatchEvent(WatchKind.CHILD, "/a"))]
    watches.add_child("/a", lambda e: seen.append(("child", e)))
    assert watches.deliver(Notification(1, WatchKind.DELETED, "/a")) == 2
    assert watches.deliver(Notification(1, WatchKind.DELETED, "/a")) == 0  # one-shot
    both = seen.append
    watches.add_data("/c", both)
    watches.add_data("/c", both)
    watches.add_child("/c", both)
    assert watches.deliver(Notification(1, WatchKind.DELETED, "/c")) == 1  # once
    watches.add_data("/b", lambda e: None)
    assert [path for path, _ in watches.drain()] == ["/b"]
    assert watches.drain() == []

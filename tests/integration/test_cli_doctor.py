"""``zklocks doctor`` on real servers: a healthy ensemble (exit 0), a version from the
known-issues table fed through the seam on the version read (exit 1), a planted ghost
holder found and cleared by ``zklocks break``, one member stopped (exit 1), an ensemble
as shipped (``srvr`` alone: what could not be checked is named), nothing reachable (69);
with no PATH, every lock of the tree (each test in a chroot of its own): a healthy tree
(exit 0, the locks walked listed), a lock directory left behind empty (a note), a child
of no known layout's shape (a finding).
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

from zklocks._frontend import server_check
from zklocks._transport import four_letter
from zklocks.cli import main
from zklocks.server import ZooKeeperEnsemble


@pytest.fixture(scope="module")
def ensemble() -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(3, tick_time=200, max_session_timeout=60_000) as made:
        yield made


@pytest.fixture
def version() -> Iterator[Any]:
    """Feeds ``srvr``'s version (the servers are asked for real; only the version is
    replaced): 3.9.4 has no transaction-loss bug in the table, the test servers' 3.8.0 has."""
    remembered = dict(server_check._seen)

    def feed(text: str) -> None:
        def reader(
            host: str, port: int, context: ssl.SSLContext | None, timeout: float
        ) -> four_letter.SrvrAnswer | None:
            real = four_letter.parse_srvr(four_letter.ask(host, port, "srvr", timeout=timeout))
            return None if real is None else four_letter.SrvrAnswer(text, real.mode)

        server_check.forget()
        four_letter.use_reader(reader)

    feed("3.9.4")
    yield feed
    four_letter.use_reader(None)
    server_check.forget()
    server_check._seen.update(remembered)


@pytest.fixture
def kazoo_on() -> Iterator[Any]:
    """kazoo clients on any hosts, to plant what no zklocks client would make."""
    from kazoo.client import KazooClient

    made: list[Any] = []

    def connect(hosts: str) -> Any:
        client = KazooClient(hosts=hosts)
        client.start(timeout=15)
        made.append(client)
        return client

    yield connect
    for client in made:
        client.stop()
        client.close()


def doctor(hosts: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["doctor", "--hosts", hosts, "--json", *args])


def checks(result: Result) -> list[dict[str, str]]:
    text = result.stdout
    return list(json.loads(text[text.index("{") :])["checks"])


def with_status(result: Result, status: str) -> list[dict[str, str]]:
    return [line for line in checks(result) if line["status"] == status]


def test_healthy_ensemble(ensemble: ZooKeeperEnsemble, version: Any) -> None:
    import zklocks

    with zklocks.Client(ensemble.hosts) as client:
        lease = client.lock("/doctor/healthy").acquire(timeout=10)
        done = doctor(ensemble.hosts, "/doctor/healthy", "--session-timeout", "5")
        lease.release()
    assert done.exit_code == 0, done.output
    members = [c for c in checks(done) if c["topic"].startswith("member ") and c["status"] == "ok"]
    assert len(members) == 3 and all("3.9.4" in c["text"] for c in members)
    assert sorted(c["text"].split(", ")[0] for c in members) == ["follower", "follower", "leader"]
    views = [c for c in checks(done) if c["topic"] == "lock /doctor/healthy"]
    assert [c["text"].split(" ")[0] for c in views if c["status"] == "ok"] == ["1", "1", "1"]
    ticks = [c for c in checks(done) if "tickTime" in c["text"]]
    # at the session timeout asked for and at the default, learnt from the servers' conf
    assert [c["topic"] for c in ticks] == [
        "lease (session timeout 5 s)",
        "lease (session timeout 10 s)",  # the servers' maximum is 60 s
    ]
    assert all("tickTime 0.2 s from conf of" in c["text"] for c in ticks)
    assert any(c["topic"] == "security" and "TLS off" in c["text"] for c in checks(done))
    assert not with_status(done, "finding") and not with_status(done, "unchecked")


def test_a_session_timeout_too_short_for_a_lease(ensemble: ZooKeeperEnsemble, version: Any) -> None:
    done = doctor(ensemble.hosts, "--session-timeout", "0.4")
    findings = with_status(done, "finding")
    assert done.exit_code == 1 and findings, done.output
    assert findings[0]["topic"] == "lease (session timeout 0.4 s)"
    assert "cannot keep a lease" in findings[0]["text"] and "…" not in findings[0]["text"]


def test_a_known_issue_version(ensemble: ZooKeeperEnsemble, version: Any) -> None:
    version("3.9.3")
    done = doctor(ensemble.hosts)
    assert done.exit_code == 1, done.output
    findings = with_status(done, "finding")
    assert len(findings) == 3  # each member
    assert all("ZOOKEEPER-4925" in f["text"] and f["fix"] == "upgrade ZooKeeper" for f in findings)


def test_a_planted_ghost_holder_is_found_and_broken(
    ensemble: ZooKeeperEnsemble, version: Any, kazoo_on: Any
) -> None:
    kazoo = kazoo_on(ensemble.hosts)
    # a persistent node where a holder's ephemeral node would be: no session owns it, so
    # no session's end removes it (its data names a session long gone)
    payload = json.dumps({"identifier": "ghost:1:dead-session-0x1234", "pid": 1, "host": "gone"})
    node = kazoo.create("/doctor/ghost/lock-" + "ab" * 16 + "-", payload.encode(),
                        sequence=True, makepath=True)  # fmt: skip
    token = kazoo.exists(node).czxid
    done = doctor(ensemble.hosts, "/doctor/ghost")
    assert done.exit_code == 1, done.output
    (ghost,) = with_status(done, "finding")
    assert node in ghost["text"] and "no session" in ghost["text"]
    assert ghost["fix"] == f"zklocks break /doctor/ghost --token {token} --yes"
    broke = CliRunner().invoke(main, [*ghost["fix"].split()[1:], "--hosts", ensemble.hosts])
    assert broke.exit_code == 0, broke.output
    assert kazoo.exists(node) is None
    again = doctor(ensemble.hosts, "/doctor/ghost")
    assert again.exit_code == 0, again.output
    kazoo.delete("/doctor/ghost")  # a directory left behind: noted by the tree's walk


def test_a_holder_whose_session_is_gone(ensemble: ZooKeeperEnsemble, version: Any) -> None:
    """A live holder's session is listed by the leader's `dump`: not a ghost."""
    import zklocks

    with zklocks.Client(ensemble.hosts) as client:
        lease = client.lock("/doctor/live").acquire(timeout=10)
        done = doctor(ensemble.hosts, "/doctor/live")
        lease.release()
    assert done.exit_code == 0, done.output
    assert not [c for c in checks(done) if "not live" in c["text"]]


def test_one_member_stopped(ensemble: ZooKeeperEnsemble, version: Any) -> None:
    stopped = ensemble.members[0]
    stopped.stop()
    try:
        done = doctor(ensemble.hosts, "/doctor/stopped")
    finally:
        stopped.start()
    assert done.exit_code == 1, done.output
    (finding,) = with_status(done, "finding")
    assert finding["topic"] == f"member {stopped.hosts}" and "unreachable" in finding["text"]


def test_a_stock_ensemble_names_what_it_could_not_check(version: Any) -> None:
    import zklocks

    with (
        ZooKeeperEnsemble(3, tick_time=200, four_letter_words="srvr") as stock,
        zklocks.Client(stock.hosts) as client,
    ):
        lease = client.lock("/doctor/stock").acquire(timeout=10)
        done = doctor(stock.hosts, "/doctor/stock")
        lease.release()
    assert done.exit_code == 0, done.output
    bounds = [c["text"] for c in checks(done) if c["text"].startswith("the servers grant")]
    assert "the servers grant sessions of 0.4 s to 4 s" in bounds  # tickTime 200 ms
    unchecked = " | ".join(c["text"] for c in with_status(done, "unchecked"))
    assert "does not allow `conf`" in unchecked
    assert "does not allow `dump`" in unchecked and lease.node in unchecked


def test_nothing_reachable_is_69() -> None:
    done = CliRunner().invoke(main, ["doctor", "--hosts", "127.0.0.1:1", "--connect-timeout", "1"])
    assert done.exit_code == 69, done.output
    assert "unreachable" in done.output


@pytest.fixture
def chroot(ensemble: ZooKeeperEnsemble, kazoo_on: Any) -> Iterator[str]:
    """A tree of the test's own (doctor walks every lock under the connect string's
    chroot), removed afterwards so that the walks of other tests never see it."""
    kazoo = kazoo_on(ensemble.hosts)
    path = f"/walk-{time.monotonic_ns()}"
    kazoo.ensure_path(path)
    yield path
    kazoo.delete(path, recursive=True)


def test_no_path_walks_every_lock_of_a_healthy_tree(
    ensemble: ZooKeeperEnsemble, version: Any, chroot: str
) -> None:
    import zklocks

    hosts = ensemble.hosts + chroot
    with zklocks.Client(hosts) as client:
        first = client.lock("/a").acquire(timeout=10)
        second = client.lock("/b/c").acquire(timeout=10)
        done = doctor(hosts)
        first.release()
        second.release()
    assert done.exit_code == 0, done.output
    (walked,) = [c for c in checks(done) if c["topic"] == "locks"]
    assert walked["status"] == "ok" and walked["text"] == "2 lock(s) walked, /a, /b/c"
    for path in ("/a", "/b/c"):  # each lock as a PATH would be: every member's view
        views = [c for c in checks(done) if c["topic"] == f"lock {path}"]
        assert [c["text"].split(" ")[0] for c in views] == ["1", "1", "1"], views
    assert not with_status(done, "finding") and not with_status(done, "unchecked")


def test_an_empty_lock_directory_left_behind_is_noted(
    ensemble: ZooKeeperEnsemble, version: Any, chroot: str
) -> None:
    import zklocks

    hosts = ensemble.hosts + chroot
    with zklocks.Client(hosts) as client:
        # kazoo's layout makes its lock directory a persistent node: it stays, empty
        client.lock("/left", layout="kazoo").acquire(timeout=10).release()
        held = client.lock("/held").acquire(timeout=10)  # a container: never left behind
        done = doctor(hosts)
        held.release()
    # a note, not a finding: ZooKeeper shows a container (which it removes by itself
    # once empty) and a persistent node alike, so a finding would flag every release
    assert done.exit_code == 0, done.output
    (note,) = [c for c in with_status(done, "note") if c["topic"] == "lock /left"]
    assert "empty lock directory left behind" in note["text"]
    assert note["fix"] == "if it stays: delete /left once nothing uses it"
    (walked,) = [c for c in checks(done) if c["topic"] == "locks"]
    assert walked["text"] == "1 lock(s) walked, /held"


def test_a_child_of_no_known_layouts_shape_is_a_finding(
    ensemble: ZooKeeperEnsemble, version: Any, kazoo_on: Any, chroot: str
) -> None:
    import zklocks

    hosts = ensemble.hosts + chroot
    kazoo = kazoo_on(hosts)
    with zklocks.Client(hosts) as client:
        lease = client.lock("/odd").acquire(timeout=10)
        kazoo.create("/odd/notes.txt", b"not a contender")
        kazoo.ensure_path("/odd/nested/dir")  # a directory below is no stranger
        walked = doctor(hosts)
        named = doctor(hosts, "/odd")
        text = CliRunner().invoke(main, ["doctor", "--hosts", hosts, "/odd"]).output
        lease.release()
    for done in (walked, named):
        assert done.exit_code == 1, done.output
        (finding,) = with_status(done, "finding")
        assert finding["topic"] == "lock /odd"
        assert "/odd/notes.txt is of a shape no known layout" in finding["text"]
    assert "  finding  lock /odd: /odd/notes.txt is of a shape no known layout" in text

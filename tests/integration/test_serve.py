"""``zklocks serve`` against a real ZooKeeper: every route, changes within 1 s, outages,
HTTPS, and a stop that leaves no thread behind.

Most tests run the server in-process (``App``, what the command runs) on port 0; the
HTTPS test runs the real executable, as an operator does, and stops it with SIGTERM.
Changes are awaited by asking the route again until a deadline, never by sleeping.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from prometheus_client.parser import text_string_to_metric_families

from helpers import ctrl_c_restored, stderr_line_matching
from zklocks import Client
from zklocks._cli.serve import App
from zklocks._cli.status_view import snapshot
from zklocks.server import ZooKeeperServer

ZKLOCKS = str(Path(sys.executable).with_name("zklocks"))
WITHIN = 1.0  # the issue's bound: a change shows within a second

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(url: str, context: ssl.SSLContext | None = None, method: str = "GET") -> tuple[int, str]:
    request = urllib.request.Request(url, method=method)
    opener = _NO_PROXY
    if context is not None:
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as answer:
        return answer.code, answer.read().decode()


def get_json(url: str) -> tuple[int, Any]:
    status, body = get(url)
    return status, json.loads(body)


def eventually(look: Callable[[], Any], within: float, what: str) -> Any:
    """Ask ``look`` until it returns something truthy; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        found = look()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within} s: {what}")
        time.sleep(0.02)  # the pace of asking, not a synchronisation


class Served:
    def __init__(self, app: App, root: str) -> None:
        self.app = app
        self.root = root
        self.url = app.url

    def lock_entry(self, path: str) -> dict[str, Any] | None:
        _, locks = get_json(self.url + "/locks")
        return next((entry for entry in locks if entry["path"] == path), None)


def start_app(hosts: str, roots: list[str]) -> App:
    app = App(roots)
    app.listen(("127.0.0.1", 0))
    client = Client(hosts)
    client.start()
    app.connect(client)
    app.start()
    return app


@pytest.fixture
def served(zk_server: ZooKeeperServer) -> Iterator[Served]:
    root = f"/serve/{uuid.uuid4().hex[:10]}"
    app = start_app(zk_server.hosts, [root])
    try:
        yield Served(app, root)
    finally:
        app.stop()


def test_locks_lists_each_lock_with_holder_and_waiter_counts_within_a_second(
    served: Served, client: Client, zk_server: ZooKeeperServer
) -> None:
    path = f"{served.root}/orders"
    assert served.lock_entry(path) is None
    lease = client.lock(path, identifier="holder").acquire()
    seen = eventually(
        lambda: (e := served.lock_entry(path)) and e["holders"] == 1 and e, WITHIN, "the holder"
    )
    assert seen["waiters"] == 0 and seen["kind"] == "lock" and seen["token"] == lease.token
    with Client(zk_server.hosts) as other:
        waiter = threading.Thread(target=lambda: other.lock(path).acquire(timeout=30))
        waiter.start()
        eventually(
            lambda: (e := served.lock_entry(path)) and e["waiters"] == 1, WITHIN, "the waiter"
        )
        lease.release()
        waiter.join(timeout=30)
        entry = eventually(
            lambda: (e := served.lock_entry(path)) and e["token"] != lease.token and e,
            WITHIN,
            "the waiter's grant",
        )
        assert entry["holders"] == 1 and entry["waiters"] == 0
        assert entry["token"] > lease.token


def test_a_lock_under_a_deeper_directory_is_listed(served: Served, client: Client) -> None:
    path = f"{served.root}/team/a/batch"
    with client.lock(path):
        eventually(lambda: served.lock_entry(path), WITHIN, "a lock three levels down")


def test_an_emptied_lock_stays_at_zero_until_its_directory_goes(
    served: Served, client: Client, kazoo: Any
) -> None:
    path = f"{served.root}/emptied"
    with client.lock(path):
        eventually(lambda: served.lock_entry(path), WITHIN, "the lock")
    entry = eventually(
        lambda: (e := served.lock_entry(path)) and e["holders"] == 0 and e, WITHIN, "released"
    )
    assert entry["waiters"] == 0 and entry["token"] is None and entry["kind"] == "lock"
    kazoo.delete(path)
    eventually(lambda: served.lock_entry(path) is None, WITHIN, "the directory's deletion")


def test_one_lock_is_what_status_json_prints(served: Served, client: Client) -> None:
    path = f"{served.root}/one"
    rw = client.read_write_lock(path, identifier="reader")
    with rw.read, client.read_write_lock(path, identifier="second").read:
        eventually(
            lambda: (e := served.lock_entry(path)) and e["holders"] == 2, WITHIN, "2 readers"
        )
        status, served_state = get_json(f"{served.url}/locks{path}")
        expected = snapshot(client, path)  # the very code of `zklocks status PATH --json`
    assert status == 200

    def steady(state: dict[str, Any]) -> dict[str, Any]:
        moving = ("at", "age_s")
        holders = [{k: v for k, v in e.items() if k not in moving} for e in state["holders"]]
        return {**{k: v for k, v in state.items() if k not in moving}, "holders": holders}

    assert steady(served_state) == steady(expected)
    assert served_state.keys() == expected.keys()
    # the lock's token is the highest holder's, as status shows it
    assert served_state["token"] == max(h["token"] for h in served_state["holders"])


def test_leader_names_the_elected_identifier_and_its_token(served: Served, client: Client) -> None:
    path = f"{served.root}/elections/cron"
    url = f"{served.url}/leader{path}"
    election = client.election(path, identifier="node-a")
    term = election.campaign(timeout=10)
    led = eventually(lambda: (a := get_json(url)[1]).get("leader") and a, WITHIN, "the leader")
    assert led == {"leader": "node-a", "token": term.token}
    election.resign()
    eventually(lambda: get_json(url) == (200, {"leader": None, "token": None}), WITHIN, "no leader")


def test_metrics_are_the_four_gauges_per_lock(served: Served, client: Client) -> None:
    path = f"{served.root}/metered"
    sem = client.semaphore(path, permits=2)
    first, second = sem.acquire(), client.semaphore(path, permits=2).acquire()
    try:

        def scrape() -> dict[str, float]:
            _, body = get(served.url + "/metrics")
            return {
                sample.name: sample.value
                for family in text_string_to_metric_families(body)
                for sample in family.samples
                if sample.labels.get("path") == path and sample.name != "zklocks_lock_kind"
            }

        values = eventually(lambda: (s := scrape()).get("zklocks_lock_holders") == 2 and s,
                            WITHIN, "two holders in /metrics")  # fmt: skip
        assert values["zklocks_lock_waiters"] == 0
        assert values["zklocks_lock_fencing_token"] == max(first.token, second.token)
        assert 0 <= values["zklocks_lock_oldest_hold_seconds"] < 60
    finally:
        first.release()
        second.release()
    # emptied, the lock stays on the board at zero while its directory exists
    values = eventually(lambda: (s := scrape()).get("zklocks_lock_holders") == 0 and s,
                        WITHIN, "zero holders")  # fmt: skip
    assert "zklocks_lock_fencing_token" not in values
    _, body = get(served.url + "/metrics")
    assert "zklocks_serve_connected 1.0" in body
    # the member it reaches, with its version read by srvr (the test server's own)
    info = [line for line in body.splitlines() if line.startswith("zklocks_server_info{")]
    assert len(info) == 1 and 'version="3.' in info[0] and info[0].endswith(" 1.0"), info
    assert f'zklocks_lock_kind{{kind="semaphore(2)",path="{path}"}} 1.0' in body


HOSTILE = "evil\x1b]0;pwned\x07\x9b2J\u202e[blink]x"
HEX = uuid.UUID(int=0xFEED).hex


def test_foreign_text_is_escaped(served: Served, kazoo: Any) -> None:
    # a contender node written by someone else, with a hostile identifier and a path
    # that needs escaping as a Prometheus label value
    path = f'{served.root}/q"\\[blink]'
    data = json.dumps({"identifier": HOSTILE, "host": HOSTILE, "pid": 1}).encode()
    kazoo.create(f"{path}/lock-{HEX}-0000000000", data, makepath=True)
    try:
        _look_at_hostile(served, path)
    finally:
        kazoo.delete(served.root, recursive=True)


def _look_at_hostile(served: Served, path: str) -> None:
    eventually(lambda: served.lock_entry(path), WITHIN, "the planted lock")
    status, raw = get(f"{served.url}/locks{urllib.parse.quote(path)}")
    assert status == 200
    assert not {"\x1b", "\x9b", "\x07", "\u202e"} & set(raw)
    assert json.loads(raw)["holders"][0]["identifier"] == HOSTILE  # escaped, not lost
    _, body = get(served.url + "/metrics")
    assert not {"\x1b", "\x9b", "\x07", "\u202e"} & set(body)
    paths = {
        sample.labels["path"]
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if family.name == "zklocks_lock_holders"
    }
    assert path in paths  # the label parses back to the path


def test_unknown_paths_and_bad_requests_get_clear_json_errors(served: Served) -> None:
    cases = {
        "/nope": (404, "no route"),
        "/locks/elsewhere/x": (404, "not under the paths served here"),
        f"/locks{served.root}/missing": (404, "no such lock"),
        f"/leader{served.root}/missing": (404, "no such lock"),
        "/leader/": (400, "root"),
        f"/locks{served.root}/bad%00path": (400, "lock path"),
    }
    for target, (status, words) in cases.items():
        answer, body = get(served.url + target)
        assert answer == status, target
        assert words in json.loads(body)["error"], target
    answer, body = get(served.url + "/locks", method="POST")
    assert answer == 405 and "read-only" in json.loads(body)["error"]


def test_leader_of_a_plain_lock_says_it_is_not_an_election(served: Served, client: Client) -> None:
    path = f"{served.root}/plain"
    with client.lock(path):
        eventually(lambda: served.lock_entry(path), WITHIN, "the lock")
        status, body = get_json(f"{served.url}/leader{path}")
    assert status == 404 and "not an election" in body["error"]


def test_credentials_show_a_protected_lock_and_their_absence_is_a_403(
    zk_server: ZooKeeperServer,
) -> None:
    root = f"/serve-acl/{uuid.uuid4().hex[:10]}"
    path = f"{root}/protected"
    alice = [("digest", "alice:serve-pw")]
    with Client(zk_server.hosts, auth=alice, acl="creator") as owner, owner.lock(path):
        app = App([root])
        app.listen(("127.0.0.1", 0))
        app.connect(Client(zk_server.hosts, auth=alice).start())
        app.start()
        stranger = start_app(zk_server.hosts, [root])
        try:
            entry = Served(app, root).lock_entry(path)
            assert entry is not None and entry["holders"] == 1
            assert Served(stranger, root).lock_entry(path) is None  # skipped, as `ls` does
            status, body = get_json(f"{stranger.url}/locks{path}")
            assert status == 403 and "cannot read" in body["error"]
            assert "serve-pw" not in json.dumps(body)
        finally:
            app.stop()
            stranger.stop()


def test_healthz_goes_503_when_zookeeper_stops_and_200_when_it_is_back(
    fresh_zk_server: ZooKeeperServer,
) -> None:
    app = start_app(fresh_zk_server.hosts, ["/serve-outage"])
    try:
        health = app.url + "/healthz"
        status, body = get_json(health)
        assert status == 200 and body["connected"] is True
        fresh_zk_server.stop()
        eventually(lambda: get(health)[0] == 503, 5.0, "503 after ZooKeeper stopped")
        assert json.loads(get(health)[1])["connected"] is False
        # the last known state is still served meanwhile
        assert get_json(app.url + "/locks") == (200, [])
        fresh_zk_server.start()
        eventually(lambda: get(health)[0] == 200, 30.0, "200 once ZooKeeper is back")
        # a new server (empty data): the feed watches again, and sees a new lock
        with Client(fresh_zk_server.hosts) as again, again.lock("/serve-outage/after"):
            after = Served(app, "/serve-outage")
            eventually(lambda: after.lock_entry("/serve-outage/after"), 5.0, "a lock made after")
    finally:
        app.stop()


def test_stop_leaves_no_thread_behind(zk_server: ZooKeeperServer) -> None:
    before = set(threading.enumerate())
    app = start_app(zk_server.hosts, ["/serve-threads"])
    for _ in range(3):
        assert get(app.url + "/healthz")[0] == 200
    app.stop()
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], left


def test_https_with_the_real_executable_and_sigterm(
    zk_server: ZooKeeperServer, tmp_path: Path
) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKLOCKS_")}
    server = subprocess.Popen(
        [ZKLOCKS, "serve", "/serve-https", "--listen", "127.0.0.1:0", "--hosts", zk_server.hosts,
         "--https-cert", str(cert_file), "--https-key", str(key_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        found = stderr_line_matching(server.stderr, r"on (https://127\.0\.0\.1:\d+) ")
        assert found
        url = found.group(1)
        trusted = ssl.create_default_context()
        ca.configure_trust(trusted)
        status, body = get(url + "/healthz", trusted)
        assert status == 200 and json.loads(body)["connected"] is True
        # a client that does not trust the certificate is refused
        with pytest.raises(urllib.error.URLError):
            get(url + "/healthz", ssl.create_default_context())
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=15)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, stderr
    assert "Traceback" not in stderr


def test_ctrl_c_stops_the_executable_with_status_0(zk_server: ZooKeeperServer) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKLOCKS_")}
    with ctrl_c_restored():  # whatever this run was started with, the child may be stopped
        server = subprocess.Popen(
            [ZKLOCKS, "serve", "/serve-ctrl-c", "--listen", "127.0.0.1:0",
             "--hosts", zk_server.hosts],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
    try:
        assert server.stderr is not None
        found = stderr_line_matching(server.stderr, r"on (http://127\.0\.0\.1:\d+) ")
        assert found
        assert get(found.group(1) + "/healthz", method="HEAD") == (200, "")
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=15)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, stderr
    assert "Traceback" not in stderr and "Aborted" not in stderr


def test_the_command_refuses_bad_options_clearly(zk_server: ZooKeeperServer) -> None:
    from click.testing import CliRunner

    from zklocks.cli import main

    runner = CliRunner()
    result = runner.invoke(main, ["serve", "/x", "--listen", "127.0.0.1:99999"])
    assert result.exit_code == 2 and "port from 0 to 65535" in result.output
    result = runner.invoke(main, ["serve", "relative/path", "--hosts", zk_server.hosts])
    assert result.exit_code == 2 and "absolute" in result.output
    result = runner.invoke(main, ["serve"])
    assert result.exit_code == 2 and "PATH" in result.output

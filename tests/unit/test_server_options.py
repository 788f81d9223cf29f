"""``ServerOptions``: the local server's settings, checked once and handed down whole.

No JVM is started here: the options, the zoo.cfg lines made from them and the
constructors that build them are all checked before anything runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import zklocks.server as zk
from zklocks.server import ServerOptions, ServerTLS, ZooKeeperEnsemble, ZooKeeperServer

TLS = ServerTLS(Path("/keys/server.pem"), Path("/keys/ca.pem"))


def test_default_options_make_the_zoo_cfg_they_always_made() -> None:
    lines = ServerOptions().config(port=2181, data_dir=Path("/data"))
    assert lines == [
        "tickTime=2000",
        "dataDir=/data",
        "clientPort=2181",
        "clientPortAddress=127.0.0.1",
        "4lw.commands.whitelist=*",
        "maxClientCnxns=0",
        "admin.enableServer=false",
    ]


def test_given_options_reach_the_zoo_cfg() -> None:
    options = ServerOptions(
        tick_time=200, min_session_timeout=400, max_session_timeout=60_000, force_sync=False
    )
    lines = options.config(port=1234, data_dir=Path("/d"))
    assert "tickTime=200" in lines
    assert "minSessionTimeout=400" in lines and "maxSessionTimeout=60000" in lines
    assert lines[-1] == "forceSync=no"


def test_tls_replaces_the_plaintext_port() -> None:
    lines = ServerOptions(tls=TLS).config(port=2281, data_dir=Path("/d"))
    assert "secureClientPort=2281" in lines
    assert not [line for line in lines if line.startswith("clientPort=")]


@pytest.mark.parametrize(
    ("tick_time", "sync_limit", "sync_ticks", "init_ticks"),
    [(2000, None, 5, 10), (200, None, 10, 50), (400, 5, 5, 25), (200, 3, 3, 50)],
)
def test_member_limits_stay_near_two_and_ten_seconds_unless_given(
    tick_time: int, sync_limit: int | None, sync_ticks: int, init_ticks: int
) -> None:
    options = ServerOptions(tick_time=tick_time, sync_limit=sync_limit)
    assert (options.sync_ticks, options.init_ticks) == (sync_ticks, init_ticks)
    lines = options.quorum_config(["server.1=127.0.0.1:1:2"])
    assert lines == [f"initLimit={init_ticks}", f"syncLimit={sync_ticks}", "server.1=127.0.0.1:1:2"]


def test_tls_members_also_talk_to_each_other_over_tls() -> None:
    lines = ServerOptions(tls=TLS).quorum_config([])
    assert "sslQuorum=true" in lines
    assert f"ssl.quorum.keyStore.location={TLS.keystore}" in lines


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("tick_time", 0),
        ("tick_time", 200.5),
        ("tick_time", True),
        ("min_session_timeout", -1),
        ("max_session_timeout", "60000"),
        ("sync_limit", 0),
        ("force_sync", "no"),
        ("heap", ""),
        ("heap", 512),
        ("startup_timeout", 0),
        ("startup_timeout", float("nan")),
        ("startup_timeout", "30"),
        ("tls", "/keys/server.pem"),
    ],
)
def test_a_bad_value_is_refused_naming_its_option(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"^{option} must be"):
        ServerOptions(**{option: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        ({"min_session_timeout": 5000, "max_session_timeout": 4000}, r"\(5000 ms\) .* \(4000 ms\)"),
        ({"tick_time": 200, "min_session_timeout": 5000}, r"\(5000 ms\) .* \(4000 ms, 20 ticks\)"),
        ({"max_session_timeout": 3000}, r"\(4000 ms, 2 ticks\) .* \(3000 ms\)"),
    ],
)
def test_session_bounds_out_of_order_are_refused_naming_both(
    bounds: dict[str, int], message: str
) -> None:
    """ZooKeeper fills in 2 and 20 ticks for a bound not given and refuses min > max."""
    with pytest.raises(ValueError, match=rf"^min_session_timeout {message}"):
        ServerOptions(**bounds)  # type: ignore[arg-type]


def test_session_bounds_may_meet() -> None:
    options = ServerOptions(tick_time=200, min_session_timeout=4000)
    assert "minSessionTimeout=4000" in options.config(port=1, data_dir=Path("/d"))


def test_options_are_a_value() -> None:
    options = ServerOptions(tick_time=200)
    assert options == ServerOptions(tick_time=200)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.tick_time = 100  # type: ignore[misc]


def test_a_server_builds_its_options_from_its_keywords() -> None:
    server = ZooKeeperServer(tick_time=200, max_session_timeout=60_000, force_sync=False)
    assert server.options == ServerOptions(
        tick_time=200, max_session_timeout=60_000, force_sync=False
    )
    assert (server.tick_time, server.max_session_timeout, server.force_sync) == (200, 60_000, False)
    assert not server.running


def test_a_server_with_a_bad_option_fails_before_any_jvm() -> None:
    with pytest.raises(ValueError, match=r"^tick_time must be"):
        ZooKeeperServer(tick_time=0)


def test_an_ensemble_hands_one_options_value_to_every_member() -> None:
    ensemble = ZooKeeperEnsemble(3, tick_time=200, sync_limit=3, startup_timeout=90.0, tls=TLS)
    assert all(member.options is ensemble.options for member in ensemble.members)
    assert ensemble.startup_timeout == 90.0
    assert [member.sync_limit for member in ensemble.members] == [3, 3, 3]
    assert ensemble.members[0].tls is TLS
    assert not ensemble.running


def test_an_ensemble_with_a_bad_option_fails_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^sync_limit must be"):
        ZooKeeperEnsemble(3, sync_limit=0)


def test_every_name_the_module_had_is_still_importable() -> None:
    """Tests, benchmarks, nemesis and docs import these from ``zklocks.server``."""
    names = [
        *zk.__all__,
        "_ephemeral_range",
        "_free_ports",
        "_port_is_free",
        "sasl_config",
        "write_jaas",
    ]
    assert [name for name in names if not hasattr(zk, name)] == []
    assert issubclass(zk.ServerStartTimeout, zk.ServerStartError)
    assert issubclass(zk.ServerStartTimeout, TimeoutError)
    assert issubclass(zk.PortInUse, zk.ServerStartError)
    assert issubclass(zk.ZooKeeperNotFound, zk.ServerSetupError)

"""A client's options are checked once, in ``ClientOptions``, and each error names its option."""

from __future__ import annotations

import math

import pytest

import zklocks
import zklocks.sim
from zklocks._frontend.options import ClientOptions, ConnectionSecurity


@pytest.mark.parametrize("option", ["session_timeout", "connect_timeout"])
@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, "5", True, None])
def test_a_bad_timeout_is_refused_by_its_own_name(option: str, bad: object) -> None:
    # connect_timeout's errors used to say "session_timeout"
    with pytest.raises(zklocks.InvalidArgument, match=f"^{option} must be"):
        zklocks.Client("127.0.0.1:2181", **{option: bad})  # type: ignore[arg-type]
    with pytest.raises(zklocks.InvalidArgument, match=f"^{option} must be"):
        zklocks.AsyncClient("127.0.0.1:2181", **{option: bad})  # type: ignore[arg-type]


def test_the_client_keeps_its_options_whole_and_shows_them() -> None:
    client = zklocks.Client("zk1:2181,zk2:2181/app", session_timeout=4, connect_timeout=2.5)
    assert client.options == ClientOptions("zk1:2181,zk2:2181/app", 4.0, 2.5)
    assert (client.hosts, client.connect_timeout) == ("zk1:2181,zk2:2181/app", 2.5)
    assert client.session_timeout == 4.0  # asked for, until a server grants one
    assert zklocks.AsyncClient().options == ClientOptions()  # one set of defaults


def test_a_session_factory_gets_the_options_whole() -> None:
    seen: list[ClientOptions] = []
    server = zklocks.sim.SimServer()
    factory = zklocks.sim.session_factory(server)

    def recording(options: ClientOptions) -> zklocks.sim.SimSession:
        seen.append(options)
        return factory(options)

    with zklocks.Client("sim", session_factory=recording, session_timeout=3, tick_time=0.5):
        pass
    assert seen == [ClientOptions("sim", 3.0, 15.0, seen[0].lease_timing)]
    assert seen[0].lease_timing.tick_time == 0.5


def test_security_never_shows_its_secrets() -> None:
    security = ConnectionSecurity(None, (("digest", b"alice:s3cret"),))
    assert "s3cret" not in repr(security)

"""``zklocks.sim``'s public names are exactly its ``__all__``."""

from __future__ import annotations

import types

import zklocks.sim


def test_all_lists_every_public_name() -> None:
    public = {
        name
        for name, value in vars(zklocks.sim).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - {"annotations"} == set(zklocks.sim.__all__)
    assert len(zklocks.sim.__all__) == len(set(zklocks.sim.__all__))


def test_the_brief_api_is_there() -> None:
    server = zklocks.sim.SimServer()
    make = zklocks.sim.session_factory(server)
    session = make(zklocks.sim.ClientOptions("sim", session_timeout=5.0, connect_timeout=5.0))
    session.start()
    try:
        assert server.model.alive(session.session_id())
        assert server.children("/") == ["zookeeper"]
        assert server.node("/zookeeper") is not None
        assert server.expire_session(session.session_id())
    finally:
        session.close()

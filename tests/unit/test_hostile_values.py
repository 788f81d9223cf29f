"""Bad input that needs no server: foreign names, foreign data, connect strings, paths,
timeouts, and what the CLI prints. (``tests/integration/test_hostile_input.py`` runs the
same hostile things against a real ZooKeeper.)"""

from __future__ import annotations

import io
import json
import tracemalloc
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

import zklocks
from zklocks._cli.sanitise import clean, text
from zklocks._core import nodes as _nodes
from zklocks._core import validate as _validate
from zklocks._errors import InvalidArgument

HEX = "0123456789abcdef" * 2

# -- 3. names that look like ours but cannot be ordered ------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        f"lock-{HEX}-9999999999",
        f"write-{HEX}-2147483648",
        f"read-{HEX}--2147483649",
        f"lease-2-{HEX}-4294967296",
    ],
)
def test_a_sequence_outside_32_bits_is_foreign(name: str) -> None:
    assert _nodes.parse(name) is None
    mine = f"lock-{HEX}-0000000007"
    assert [n.name for n in _nodes.queue([name, mine])] == [mine]
    line = _nodes.line_up_to(_nodes.parse(mine), [name, mine])  # type: ignore[arg-type]
    assert line is not None and [n.name for n in line] == [mine]


def test_the_edges_of_32_bits_are_contenders() -> None:
    assert _nodes.parse(f"lock-{HEX}-2147483647") is not None
    assert _nodes.parse(f"lock-{HEX}--2147483648") is not None


# -- 6. parsing new names for ever costs bounded memory ------------------------------------


def test_parsing_ever_new_names_keeps_memory_bounded() -> None:
    names = [f"lock-{uuid.uuid4().hex}-{i:010d}" for i in range(20_000)]
    _nodes.parse.cache_clear()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for name in names:
            _nodes.parse(name)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        _nodes.parse.cache_clear()
    assert grown < 2_000_000, f"{grown} bytes kept for 20000 names parsed once each"


# -- 4. node data from anyone --------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "identifier"),
    [
        (b'{"pid": Infinity}', '{"pid": Infinity}'),
        (b'{"pid": NaN, "identifier": "x"}', '{"pid": NaN, "identifier": "x"}'),
        (b'{"pid": 1e999, "identifier": "x"}', "x"),
        (b"1e999", "1e999"),
        (b"[" * 50_000, "[" * 50_000),
        (b"\xff\xfeid", "\\xff\\xfeid"),
        (b'{"identifier": ["a"], "pid": "12"}', ""),
        (b'{"identifier": 5, "pid": -3}', "5"),
        (b"", ""),
    ],
)
def test_decoding_a_payload_is_total(data: bytes, identifier: str) -> None:
    payload = _nodes.decode_payload(data)
    assert payload.identifier == identifier
    assert payload.pid == 0


@given(st.binary(max_size=200) | st.text(max_size=80).map(str.encode))
def test_any_bytes_decode_to_a_payload(data: bytes) -> None:
    payload = _nodes.decode_payload(data)
    assert isinstance(payload.identifier, str) and isinstance(payload.host, str)
    assert isinstance(payload.pid, int) and 0 <= payload.pid < 2**63


def test_our_own_payload_round_trips() -> None:
    mine = _nodes.Payload(identifier="worker-1", attempt=HEX, host="h", pid=42)
    assert _nodes.decode_payload(_nodes.encode_payload(mine)) == mine


# -- 9. connect strings: one parser, at construction -------------------------------------

REFUSED = ["h:notaport", "h:99999", "h:2181//x", "h:2181/chroot/", "h:2181,", "h:2181/zookeeper",
           "", "  ", "::1", "h:0", "[::1", "h:2181/a\x85b", ",h:1"]  # fmt: skip
ACCEPTED = ["[::1]:2181", "a:1,b:2,c:3", "zk1:2181,zk2:2181,zk3:2181/app/locks", "h:2181/", "h"]


@pytest.mark.parametrize("hosts", REFUSED)
def test_a_bad_connect_string_fails_the_client_at_construction(hosts: str) -> None:
    with pytest.raises(zklocks.InvalidArgument, match="not a ZooKeeper connect string"):
        zklocks.Client(hosts)
    with pytest.raises(zklocks.InvalidArgument, match="not a ZooKeeper connect string"):
        zklocks.AsyncClient(hosts)


@pytest.mark.parametrize("hosts", ACCEPTED)
def test_good_connect_strings_are_accepted(hosts: str) -> None:
    assert zklocks.Client(hosts).hosts == hosts
    assert zklocks.AsyncClient(hosts).hosts == hosts


# -- 10. paths ZooKeeper refuses -------------------------------------------------------------


@pytest.mark.parametrize(
    "ch", ["\x80", "\x85", "\x9f", "\ud800", "\ue000", "\uf8ff", "\ufff0", "\uffff", "\U0001f512"]
)
def test_a_character_zookeeper_refuses_is_named_by_code_point(ch: str) -> None:
    client = zklocks.Client()
    with pytest.raises(zklocks.InvalidPath, match=f"U\\+{ord(ch):04X}"):
        client.lock(f"/locks/a{ch}b")


@pytest.mark.parametrize("ch", ["\xa0", "é", "\u4e2d", "\uf900", "\uffef"])
def test_characters_zookeeper_takes_are_accepted(ch: str) -> None:
    assert zklocks.Client().lock(f"/locks/a{ch}b").path == f"/locks/a{ch}b"


def test_a_long_path_is_cut_in_the_message() -> None:
    with pytest.raises(zklocks.InvalidPath) as caught:
        zklocks.Client().lock("/" + "x" * 100_000 + "\x85")
    assert len(str(caught.value)) < 300
    assert "100002 characters" in str(caught.value)


# -- 7/8. blocking=False needs no timeout; infinite timeouts ---------------------------------


@pytest.mark.parametrize(
    "value", [float("inf"), 1e300, 10**400, 1e9], ids=["inf", "1e300", "10**400", "1e9"]
)
def test_an_endless_timeout_means_wait_for_ever(value: float) -> None:
    assert _validate.timeout(value) is None


def test_a_non_blocking_acquire_takes_no_timeout() -> None:
    lock = zklocks.Client().lock("/locks/x")
    with pytest.raises(zklocks.InvalidArgument, match="non-blocking"):
        lock.acquire(5, blocking=False)


# -- 5. the CLI's sanitiser ----------------------------------------------------------------

HOSTILE = (
    "\x1b]0;pwned\x07"  # OSC: window title
    "\x1b]52;c;ZXZpbA==\x07"  # OSC 52: the clipboard
    "\x1bP+q544e\x1b\\"  # DCS
    "\x9b31m"  # C1 CSI
    "\u202e"  # bidi override
    "\ud800"  # a lone surrogate (cannot even be encoded)
    "[blink]x[/blink]"
)


def test_clean_escapes_every_control_and_keeps_text() -> None:
    shown = clean(HOSTILE)
    assert shown.isprintable()
    assert "\\x1b]0;pwned\\x07" in shown and "\\x9b31m" in shown and "\\u202e" in shown
    assert "[blink]x[/blink]" in shown
    assert clean("plain é 中 text") == "plain é 中 text"
    assert clean("two\nlines", newlines=True) == "two\nlines"
    assert clean("two\nlines") == "two\\nlines"


def test_rich_shows_markup_as_text() -> None:
    out = io.StringIO()
    # height too: rich takes the given width only with a height under TERM=dumb (as in
    # make fresh-test's chroot), else 80 columns, and wraps the line
    console = Console(file=out, force_terminal=True, color_system=None, width=1000, height=25)
    console.print(text(HOSTILE))
    printed = out.getvalue()
    assert "[blink]x[/blink]" in printed
    assert "\x1b" not in printed and "\x9b" not in printed and "\x07" not in printed


def test_json_output_needs_no_sanitiser() -> None:
    encoded = json.dumps({"identifier": HOSTILE})
    assert encoded.isascii() and "\x1b" not in encoded
    assert json.loads(encoded)["identifier"] == HOSTILE


@pytest.mark.parametrize(
    "bad",
    ["worker\x85", "a\x9b31mred", "evil\u202egnp.exe", "x\u2066y", "mark\u200f", "\x7f"],
)
def test_an_identifier_with_c1_controls_or_bidi_marks_is_refused(bad: str) -> None:
    # shown by `zklocks status` to other users: it must not recolour or reorder their screen
    with pytest.raises(InvalidArgument, match="printable text"):
        _validate.identifier(bad)


def test_an_identifier_in_any_script_is_accepted() -> None:
    assert _validate.identifier("работник-1 工人 عامل") == "работник-1 工人 عامل"

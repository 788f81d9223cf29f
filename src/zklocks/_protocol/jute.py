"""Jute, ZooKeeper's record encoding: big-endian ints and longs, length-prefixed data.

Only the primitives live here; ``codec`` composes them into requests and replies.

* ``int`` is 4 bytes, ``long`` 8, ``boolean`` 1, all big-endian and signed.
* ``ustring`` and ``buffer`` are an ``int`` length followed by that many bytes; length
  ``-1`` means null (we read null as ``None`` for strings and ``b""`` for buffers).
* ``vector<T>`` is an ``int`` count (``-1`` = null) followed by the elements.

Readers take the buffer and an offset and return ``(value, new_offset)``; they work on
``bytes`` and ``bytearray`` alike, so a frame is decoded in place without a copy. Bytes
that are not a record (cut short, a string that is not UTF-8) raise ``JuteError`` and
nothing else, so a caller has one error to catch for a broken peer.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import TypeAlias

Buffer: TypeAlias = bytes | bytearray | memoryview

INT = struct.Struct(">i")
LONG = struct.Struct(">q")
BOOL = struct.Struct(">?")
INT_INT = struct.Struct(">ii")
REQUEST_HEADER = struct.Struct(">iii")  # frame length, xid, op code
REPLY_HEADER = struct.Struct(">iqi")  # xid, zxid, err
MULTI_HEADER = struct.Struct(">i?i")  # type, done, err
STAT = struct.Struct(">qqqqiiiqiiq")

NULL = INT.pack(-1)


class JuteError(ValueError):
    """The bytes are not a well-formed jute record."""


def write_string(value: str | None) -> bytes:
    if value is None:
        return NULL
    raw = value.encode("utf-8")
    return INT.pack(len(raw)) + raw


def write_buffer(value: bytes | None) -> bytes:
    if value is None:
        return NULL
    return INT.pack(len(value)) + value


def write_string_vector(values: Iterable[str] | None) -> bytes:
    if values is None:
        return NULL
    items = [write_string(v) for v in values]
    return INT.pack(len(items)) + b"".join(items)


def _number_reader(name: str, number: struct.Struct) -> Callable[[Buffer, int], tuple[int, int]]:
    """A reader of one fixed-size number: its value and the offset after it. Made per
    size rather than passed the size, so reading a field costs one call, not two."""
    size, unpack = number.size, number.unpack_from

    def read(buf: Buffer, offset: int) -> tuple[int, int]:
        end = offset + size
        if end > len(buf):
            raise JuteError(
                f"truncated record: need {size} bytes at offset {offset}, have {len(buf)}"
            )
        return unpack(buf, offset)[0], end

    read.__name__ = read.__qualname__ = name
    return read


read_int = _number_reader("read_int", INT)
read_long = _number_reader("read_long", LONG)
_length = read_int  # a length prefix is an int


def read_buffer(buf: Buffer, offset: int) -> tuple[bytes, int]:
    length, offset = _length(buf, offset)
    if length < 0:
        return b"", offset
    end = offset + length
    if end > len(buf):
        raise JuteError(f"truncated buffer: {length} bytes at offset {offset}, have {len(buf)}")
    return bytes(buf[offset:end]), end


def read_string(buf: Buffer, offset: int) -> tuple[str | None, int]:
    length, offset = _length(buf, offset)
    if length < 0:
        return None, offset
    end = offset + length
    if end > len(buf):
        raise JuteError(f"truncated string: {length} bytes at offset {offset}, have {len(buf)}")
    return _utf8(buf[offset:end]), end


def _utf8(raw: Buffer) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        why = f"a string that is not UTF-8: {exc.reason} at byte {exc.start}"
    # raised out here: the UnicodeDecodeError (which holds a view of the frame) is gone
    raise JuteError(why)


def read_string_vector(buf: Buffer, offset: int) -> tuple[list[str], int]:
    count, offset = _length(buf, offset)
    items: list[str] = []
    append = items.append
    unpack = INT.unpack_from
    size = len(buf)
    for _ in range(max(count, 0)):
        if offset + 4 > size:
            raise JuteError("truncated string vector")
        (length,) = unpack(buf, offset)
        offset += 4
        end = offset + length
        if length < 0 or end > size:
            raise JuteError("bad string in vector")
        append(_utf8(buf[offset:end]))
        offset = end
    return items, offset

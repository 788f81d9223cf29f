"""Text as it is safe to show: what a person typed, or what a server said, escaped.

The command line prints every such value through ``clean``; the settings read from the
``ZKLOCKS_*`` environment (``zklocks._frontend.settings``) quote file names with
``as_typed``. Plain Python, so that ``zklocks.exclusive`` shares the rules without the
command line's libraries.
"""

from __future__ import annotations

#: A longer value is cut (with its length said): one node's data may be a megabyte.
LIMIT = 200


def clean(value: object, *, newlines: bool = False, limit: int | None = LIMIT) -> str:
    """``value`` as text that is safe to print: unprintable characters escaped.

    ``newlines=True`` keeps line breaks (a message of several lines we wrote ourselves);
    ``limit`` cuts a long value (``None``: never).
    """
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + f"… ({len(text)} characters)"
    if text.isprintable():
        return text
    return "".join(_shown(ch, newlines) for ch in text)


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(ch: str, newlines: bool) -> str:
    if ch.isprintable() or (newlines and ch == "\n"):
        return ch
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def undecodable(value: str) -> bool:
    """Did ``value`` come from bytes that are not UTF-8? Python hands such bytes of an
    argument or an environment variable over as lone surrogates (PEP 383), which no
    encoder takes: ZooKeeper, JSON and the terminal all want UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def as_typed(value: str) -> str:
    """``value`` as the user typed it: a byte that is not UTF-8 shown as ``\\xe9``, any
    other unprintable character escaped, so the message itself prints safely."""
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return clean(value, limit=None)
    return clean(raw.decode("utf-8", "backslashreplace"), limit=None)

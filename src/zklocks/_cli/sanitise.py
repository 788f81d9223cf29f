"""The one gate between what the server says and the operator's terminal.

Node names, identifiers and hosts are written by whoever can reach the ensemble. Printed
as they are, an ESC or C1 byte would drive the terminal: OSC sets the window title or
(OSC 52) the clipboard, DCS and CSI (ESC ``[`` or U+009B) move the cursor and repaint
what the operator reads. Printed through rich, ``[blink]`` would be markup. So every
command passes such text through ``clean`` (plain output) or ``text`` (rich output):

* a character that is not printable (``str.isprintable``: controls, C1, format
  characters such as bidi overrides, lone surrogates, unassigned code points, separators
  other than the space) is shown escaped, ``\\x1b``, ``\\x9b``, ``\\u202e``;
* ``text`` returns a rich ``Text``, which rich never reads as markup.

``--json`` needs neither: ``json.dumps`` escapes every non-ASCII character.
"""

from __future__ import annotations

from rich.text import Text

from zklocks._core.shown import LIMIT, clean

__all__ = ["LIMIT", "cannot", "clean", "text"]


def text(value: object, style: str = "", *, limit: int | None = LIMIT) -> Text:
    """``value`` cleaned, as rich ``Text`` (never parsed as markup)."""
    return Text(clean(value, limit=limit), style=style)


def cannot(verb: str, path: str, error: BaseException) -> str:
    """``cannot VERB PATH: why``, naming the path once.

    The library's messages often start with the path already (``/locks/api: semaphore
    contenders disagree ...``); prefixed again, a message would print it twice.
    """
    why = str(error)
    if why.startswith(f"{path}: "):
        why = why[len(path) + 2 :]
    return f"cannot {verb} {path}: {why}"

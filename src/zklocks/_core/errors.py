"""The public exception tree: defined in ``zklocks._errors`` (below both the lock engine and
the transport, which raise them alike); named here too for the engine's modules."""

from __future__ import annotations

from zklocks._errors import *  # noqa: F403  (every name of its __all__)
from zklocks._errors import __all__ as __all__

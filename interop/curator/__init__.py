"""Apache Curator, driven from Python: see :mod:`interop.curator.harness`."""

from interop.curator.harness import (
    CuratorError,
    CuratorUnavailable,
    CuratorWorker,
    classpath,
    compiled,
    ensure_installed,
)

__all__ = [
    "CuratorError",
    "CuratorUnavailable",
    "CuratorWorker",
    "classpath",
    "compiled",
    "ensure_installed",
]

"""What must not outlive us: a JVM, its watchdog and a temporary data dir.

A ``weakref.finalize`` hook holds a ``Leftovers``, never the server object itself, so
the JVM is SIGKILLed when the server object is collected or the interpreter exits. If
Python itself is SIGKILLed, the watchdog (a tiny Python process reading a pipe from us)
sees the pipe close and kills the JVM's process group.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TAG_ENV", "Leftovers", "signal_group", "tag_option"]

#: Every JVM and watchdog carries ``-Dzklocks.tag=$ZKLOCKS_SERVER_TAG``, so a test runner
#: can find any that slipped through.
TAG_ENV = "ZKLOCKS_SERVER_TAG"

# Runs beside each JVM; our end of its stdin closes however we die, even by SIGKILL.
# Arguments: the JVM's process group, the tag, then a temporary data dir to remove.
_WATCHDOG = """\
import os, shutil, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.stdin.buffer.read()
try:
    os.killpg(int(sys.argv[1]), signal.SIGKILL)
except ProcessLookupError:
    pass
for path in sys.argv[3:]:
    shutil.rmtree(path, ignore_errors=True)
"""


def tag_option() -> str:
    """The JVM option (also the watchdog's argument) that marks a process as ours."""
    return f"-Dzklocks.tag={os.environ.get(TAG_ENV, 'zklocks')}"


def signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the process group ``process`` leads, unless it has been reaped."""
    # poll() first: once reaped, the pid (and so the group id) may belong to a stranger.
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)


@dataclass(eq=False)
class Leftovers:
    """What must not outlive us. A finalizer holds this, never the server object itself."""

    jvm: subprocess.Popen[bytes] | None = None
    watchdog: subprocess.Popen[bytes] | None = None
    temp_dir: Path | None = None

    def data_dir(self, given: Path | None, *, prefix: str) -> Path:
        """``given``, else a new temporary directory (``temp_dir``, removed with the rest)."""
        if given is not None:
            return given
        self.temp_dir = Path(tempfile.mkdtemp(prefix=prefix))
        return self.temp_dir

    def watch(self, jvm: subprocess.Popen[bytes], tag: str) -> None:
        """Own ``jvm`` and start its watchdog, which also removes ``temp_dir``."""
        self.jvm = jvm
        self.watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(jvm.pid), tag]
            + ([str(self.temp_dir)] if self.temp_dir else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def kill(self) -> None:
        if self.jvm is not None:
            signal_group(self.jvm, signal.SIGKILL)
            self.jvm.wait()
            self.jvm = None
        if self.watchdog is not None:
            self.watchdog.kill()  # not EOF: by now the JVM's group id may be reused
            self.watchdog.wait()
            if self.watchdog.stdin is not None:
                self.watchdog.stdin.close()
            self.watchdog = None

    def release(self) -> None:
        self.kill()
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None

"""Every Python and console example in README.md and docs/ runs as a test (Sybil).

Why: a reader copies the examples first. An example that drifted from the code (an
undefined name, a message we since reworded) costs a newcomer their first hour, so the
examples run in ``make test`` against a real ZooKeeper that the root conftest starts.

The conventions a page's author follows:

- **Python blocks** (```` ```python ````) run in order, one namespace per page, as
  written: every name a block uses is defined in it or in an earlier block of the page.
  ``asyncio`` examples sit inside ``asyncio.run(main())``.
- **Console blocks** (```` ```console ````): a line starting with ``$ `` is a command, run
  by bash in a scratch directory; the lines after it, up to the next ``$``, are its
  output (stdout and stderr together). A command that shows no output must exit 0. A
  line ``...`` in an output stands for any number of lines, and a line that ends in `` ...``
  for any end of that line (a server's own words that differ by its version); blank
  lines are not compared.
- **The address.** Examples say ``127.0.0.1:2181`` (what ``zklocks server`` serves on) and
  the shell's ``ZKLOCKS_HOSTS`` defaults to it. The test runs them against its own server:
  ``127.0.0.1:2181`` in a block, and ``ZKLOCKS_HOSTS``, become that server's address with
  a chroot of the page's own, so pages never see each other's locks. In outputs the
  server's real address reads back as ``127.0.0.1:2181`` and the chroot is dropped.
- **What varies between runs** is compared loosely: every number (pids, tokens, session
  ids, durations, ports) matches any number, runs of spaces match any run (tables
  re-align), the uuid in a node's name matches any uuid, and this machine's host name
  reads as ``vm``. A line ``exit status N`` is
  compared exactly: there the number is the point.
- **An example that cannot run here** (a real cluster's address, a program of the
  reader's, a command that runs until Ctrl-C) is preceded by ``<!-- skip: next -->``, and
  the text around it says why. Setup a reader need not see (a holder for a ``status``
  sample) goes in an ``<!-- invisible-code-block: python -->`` comment before it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sybil import Document, Example, Region, Sybil
from sybil.evaluators.python import pad
from sybil.parsers.markdown import ClearNamespaceParser, CodeBlockParser, SkipParser
from tests.helpers import VERSION_WARNING

DOCUMENTED_HOSTS = "127.0.0.1:2181"
COMMAND_TIMEOUT = 60.0
ANY_LINES = "..."

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_HEX = re.compile(r"\b0x[0-9a-f]+\b")
_UUID = re.compile(r"\b[0-9a-f]{32}\b")  # in node names
_SPACES = re.compile(r"[ \t]+")
_EXACT_LINE = re.compile(r"^exit status \d+$")


@dataclass(frozen=True)
class PageServer:
    """Where a page's examples connect: the test server's address and the page's chroot."""

    server_hosts: str
    chroot: str

    @property
    def hosts(self) -> str:
        return f"{self.server_hosts}{self.chroot}"

    def as_documented(self, text: str) -> str:
        """Our real address reads back as the documented one (the chroot dropped)."""
        return text.replace(self.hosts, DOCUMENTED_HOSTS).replace(
            self.server_hosts, DOCUMENTED_HOSTS
        )


def _page_server(example: Example) -> PageServer:
    """The page's chroot on the docs server, made on the page's first example."""
    namespace = example.namespace
    page = namespace.get("_page_server")
    if page is None:
        server_hosts: str = namespace["docs_zk_hosts"]
        name = re.sub(r"[^A-Za-z0-9]+", "-", str(Path(example.path).name))
        page = PageServer(server_hosts, f"/docs-{name}")
        _ensure_node(server_hosts, page.chroot)
        namespace["_page_server"] = page
    assert isinstance(page, PageServer)
    return page


def _ensure_node(server_hosts: str, path: str) -> None:
    from kazoo.client import KazooClient

    kazoo = KazooClient(hosts=server_hosts)
    kazoo.start(timeout=15)
    try:
        kazoo.ensure_path(path)
    finally:
        kazoo.stop()
        kazoo.close()


class BlocksOf(CodeBlockParser):
    """Fenced blocks of one language, attributes allowed (```` ```python title="x.py" ````).

    Sybil's own parser wants the info string to be the language alone, and would pass
    over a block with a title without a word.
    """

    def __call__(self, document: Document) -> Iterator[Region]:
        for region in self.lexers(document):
            info = str(region.lexemes["arguments"]).split()
            if info and info[0] == self.language:
                region.parsed = region.lexemes["source"]
                region.evaluator = self._evaluator
                yield region


def run_python(example: Example) -> None:
    """Runs a Python block with the documented address pointing at the test server."""
    __tracebackhide__ = True
    page = _page_server(example)
    source = str(example.parsed).replace(DOCUMENTED_HOSTS, page.hosts)
    padded = pad(source, example.line + example.parsed.line_offset)
    code = compile(padded, example.path, "exec", dont_inherit=True)
    with _working_directory(_scratch_dir(example, page)):  # files an example makes go there
        exec(code, example.namespace)
    example.namespace.pop("__builtins__", None)


@dataclass
class Command:
    line: str
    expected: list[str]


def parse_console(block: str) -> list[Command]:
    """``$ command`` lines, each with the output lines that follow it."""
    commands: list[Command] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append(Command(line[2:], []))
        elif commands:
            commands[-1].expected.append(line)
        elif line.strip():
            raise ValueError(f"a console block starts with output, not a `$ ` line: {line!r}")
    return commands


def normalise(line: str) -> str:
    line = _SPACES.sub(" ", line.rstrip()).strip()
    if _EXACT_LINE.match(line):
        return line
    return _NUMBER.sub("N", _HEX.sub("0xN", _UUID.sub("UUID", line)))


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line after :func:`normalise`; a ``...`` line matches any run of lines, and
    a line ending in `` ...`` any line that begins as it does."""
    pattern = []
    for line in expected:
        if line.strip() == ANY_LINES:
            pattern.append(r"(?:[^\n]*\n)*?")
        elif line.rstrip().endswith(" " + ANY_LINES):
            pattern.append(re.escape(normalise(line.rstrip()[: -len(ANY_LINES)])) + r"[^\n]*\n")
        else:
            pattern.append(re.escape(normalise(line)) + r"\n")
    text = "".join(normalise(line) + "\n" for line in actual)
    return re.fullmatch("".join(pattern), text) is not None


class ConsoleAgainstServer:
    """Runs a console block's commands with ZKLOCKS_HOSTS at the test server."""

    def __call__(self, example: Example) -> None:
        __tracebackhide__ = True
        page = _page_server(example)
        scratch = _scratch_dir(example, page)
        exports: list[str] = example.namespace.setdefault("_exports", [])
        for command in parse_console(str(example.parsed)):
            line = command.line.replace(DOCUMENTED_HOSTS, page.hosts)
            script = "\n".join([*exports, line])
            done = subprocess.run(
                ["bash", "-c", script],
                cwd=scratch,
                env=_shell_env(page),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
            if line.startswith("export "):
                exports.append(line)
            # the test servers' release (3.8.0) has known bugs, which every command warns of
            # once; the pages show a server without them
            shown = _as_documented(page, done.stdout).splitlines()
            actual = [out for out in shown if out and VERSION_WARNING not in out]
            expected = [shown for shown in command.expected if shown.strip()]
            if not expected and done.returncode != 0:
                raise AssertionError(
                    f"`{command.line}` exited {done.returncode}; the page shows no output, "
                    f"so it should succeed. Output:\n{done.stdout}"
                )
            if expected and not output_matches(expected, actual):
                raise AssertionError(
                    f"`{command.line}` printed (numbers, spaces and the host compared "
                    "loosely):\n"
                    + "\n".join(actual)
                    + "\nbut the page shows:\n"
                    + "\n".join(expected)
                )


@contextlib.contextmanager
def _working_directory(path: Path) -> Iterator[None]:
    """``contextlib.chdir`` for Python 3.10."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _as_documented(page: PageServer, text: str) -> str:
    text = page.as_documented(text).replace(f"{page.chroot}/", "/")
    host = socket.gethostname()
    return re.sub(rf"\b{re.escape(host)}\b", "vm", text) if host else text


def _scratch_dir(example: Example, page: PageServer) -> Path:
    """The page's working directory, made on first use (a fresh one per run)."""
    scratch = example.namespace.get("_scratch")
    if scratch is None:
        prefix = f"zklocks{page.chroot.replace('/', '-')}-"
        scratch = example.namespace["_scratch"] = Path(tempfile.mkdtemp(prefix=prefix))
    assert isinstance(scratch, Path)
    return scratch


def _shell_env(page: PageServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKLOCKS_")}
    if "ZKLOCKS_SERVER_TAG" in os.environ:  # a server a command starts is found if leaked
        env["ZKLOCKS_SERVER_TAG"] = os.environ["ZKLOCKS_SERVER_TAG"]
    env["ZKLOCKS_HOSTS"] = page.hosts
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "200"  # rich wraps at the terminal's width; docs show unwrapped lines
    env["NO_COLOR"] = "1"
    return env


def line_up(*locks: Any, within: float = 10.0) -> None:
    """Contenders for a sample output: each lock acquired in a thread of its own, in order.

    The first ones hold, the rest wait in line (a lock in ``locks`` per contender, so
    each thread is one). Returns once every one of them is in the queue; stopping the
    client that made them ends them all.
    """
    for lock in locks:
        queued = len(lock.contenders())
        threading.Thread(target=_acquire_until_closed, args=(lock,), daemon=True).start()
        deadline = time.monotonic() + within
        while len(lock.contenders()) <= queued:  # no event says "queued": look again
            if time.monotonic() > deadline:
                raise AssertionError(f"a contender for a sample never queued on {lock!r}")
            time.sleep(0.01)


def _acquire_until_closed(lock: Any) -> None:
    import zklocks

    with contextlib.suppress(zklocks.ClientClosed):
        # a holder's thread lives on while it holds: a new thread may get a finished
        # one's id, and would then count as that holder
        lock.acquire().wait_lost()


def end_page(namespace: dict[str, Any]) -> None:
    """After a page's last example: stop the clients it left running, remove its files.

    Guide pages start a client the way a reader does at a prompt, without stopping it.
    """
    import zklocks

    for value in list(namespace.values()):
        if isinstance(value, zklocks.Client):  # (asyncio examples end in asyncio.run)
            value.stop()
    scratch = namespace.get("_scratch")
    if isinstance(scratch, Path):
        shutil.rmtree(scratch, ignore_errors=True)


def doc_sybil() -> Sybil:
    """The Sybil that collects README.md and docs/**/*.md (used by the root conftest)."""
    return Sybil(
        parsers=[
            BlocksOf(language="python", evaluator=run_python),
            BlocksOf(language="console", evaluator=ConsoleAgainstServer()),
            SkipParser(),
            ClearNamespaceParser(),
        ],
        patterns=["README.md", "docs/*.md"],
        fixtures=["docs_zk_hosts"],
        teardown=end_page,
        path=str(Path(__file__).resolve().parent.parent),
    )

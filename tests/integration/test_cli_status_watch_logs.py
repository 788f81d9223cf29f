"""``zklocks status --watch`` on a terminal: the library's log lines never land inside
the table it draws.

The live table is redrawn in place; a warning written straight to stderr (the terminal
too) was glued to its last line: ``...world:anyone=cdrwazklocks: 127.0.0.1:N refused
the connection``. The real executable in a pseudo-terminal; the server is stopped to
make the library warn.
"""

from __future__ import annotations

import re
import uuid

from test_cli_status import Terminal
from test_cli_status_outage import ZKLOCKS

from zklocks import Client
from zklocks.server import ZooKeeperServer


def test_a_log_line_is_printed_above_the_live_table_not_into_it(
    fresh_zk_server: ZooKeeperServer,
) -> None:
    path = f"/cli-watch-logs/{uuid.uuid4().hex[:10]}"
    hosts = fresh_zk_server.hosts
    with Client(hosts) as holder:
        holder.lock(path, identifier="the-holder").acquire()
        terminal = Terminal([ZKLOCKS, "status", path, "--watch", "--hosts", hosts])
        try:
            terminal.wait_for(r"1 holding, 0 waiting[\s\S]*the-holder")
            fresh_zk_server.stop()
            terminal.wait_for(r"zklocks: \S+ refused the connection")
            terminal.wait_for(r"disconnected from \S+ for \d+ s")  # still drawing after it
        finally:
            status = terminal.close()
            fresh_zk_server.start()
    assert status == 0
    logged = [line for line in terminal.text().splitlines() if "zklocks: " in line]
    assert logged, terminal.text()[-2000:]
    glued = [line for line in logged if not re.match(r"^\s*zklocks: ", line)]
    assert glued == [], "a log line was written into the table"

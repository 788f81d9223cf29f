"""``zklocks ls ROOT``: a ROOT that does not exist exits 66 (as ``status`` and ``leader``
do), while one that exists with no locks under it is an empty listing, exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from kazoo.client import KazooClient

from helpers import without_version_warning
from zklocks.server import ZooKeeperServer

ZKLOCKS = str(Path(sys.executable).with_name("zklocks"))


def ls(hosts: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ZKLOCKS_HOSTS": hosts}
    return subprocess.run(
        [ZKLOCKS, "ls", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_a_missing_root_exits_66_and_an_empty_one_0(
    zk_server: ZooKeeperServer, kazoo: KazooClient
) -> None:
    missing = f"/ls-missing/{uuid.uuid4().hex[:10]}"
    done = ls(zk_server.hosts, missing)
    assert done.returncode == 66
    stderr = without_version_warning(done.stderr)  # (the test servers' release's warning)
    assert stderr == f"zklocks: no such path: {missing} does not exist\n"
    assert ls(zk_server.hosts, missing, "--json").returncode == 66
    kazoo.ensure_path(missing)
    done = ls(zk_server.hosts, missing)
    assert (done.returncode, done.stdout) == (0, f"no locks under {missing}\n")
    done = ls(zk_server.hosts, missing, "--json")
    assert (done.returncode, json.loads(done.stdout)) == (0, [])

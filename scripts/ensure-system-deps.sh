#!/usr/bin/env bash
# Install what zklocks needs from the system when it is missing: Java and Apache
# ZooKeeper (Debian's `zookeeper` package), and python3-venv. Does nothing when all are
# there, or when ZOOKEEPER_HOME points at an unpacked ZooKeeper and java is on PATH.
# Arguments name further packages, each needed when its command is missing (redis-server);
# `postgresql` (the fencing tests) is there when /usr/lib/postgresql/*/bin/initdb is.
set -euo pipefail

need=()
if [ -z "${ZOOKEEPER_HOME:-}" ] && [ ! -f /usr/share/java/zookeeper.jar ]; then
    need+=(zookeeper)
fi
if [ -z "${JAVA_HOME:-}" ] && ! command -v java >/dev/null 2>&1; then
    need+=(default-jre-headless)
fi
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    need+=(python3-venv)
fi
for extra in "$@"; do
    if [ "$extra" = postgresql ]; then
        # its commands are not on PATH: Debian keeps them per version
        compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
        continue
    fi
    command -v "$extra" >/dev/null 2>&1 || need+=("$extra")
done
[ ${#need[@]} -eq 0 ] && exit 0

echo "zklocks: installing ${need[*]} with apt-get" >&2
if ! command -v apt-get >/dev/null 2>&1; then
    echo "zklocks: apt-get not found; install Java and Apache ZooKeeper yourself and set" \
         "ZOOKEEPER_HOME (and JAVA_HOME if java is not on PATH)" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

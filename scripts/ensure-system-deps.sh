#!/usr/bin/env bash
# Install what zklocks needs from the system when it is missing: Java and Apache
# ZooKeeper (Debian's `zookeeper` package), and python3-venv. Does nothing when all are
# there, or when ZOOKEEPER_HOME points at an unpacked ZooKeeper and java is on PATH.
# Arguments name further packages, each needed when its command is missing (redis-server);
# `postgresql` (the fencing tests) is there when /usr/lib/postgresql/*/bin/initdb is.
# `prometheus` (the alert rules' test) is there when its `promtool` is on PATH.
# `kerberos` (SASL GSSAPI: the tests' KDC, and building the `kerberos` package) is there
# when krb5kdc, kadmin.local, kinit, krb5-config, gcc and Python's headers are.
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
    if [ "$extra" = kerberos ]; then
        # the GSSAPI tests' throwaway KDC (krb5kdc, kadmin.local, kinit) and what the
        # `kerberos` Python package (zklocks[kerberos]) is built with
        PATH="$PATH:/usr/sbin:/sbin" command -v krb5kdc >/dev/null 2>&1 || need+=(krb5-kdc)
        PATH="$PATH:/usr/sbin:/sbin" command -v kadmin.local >/dev/null 2>&1 \
            || need+=(krb5-admin-server)
        command -v kinit >/dev/null 2>&1 || need+=(krb5-user)
        command -v krb5-config >/dev/null 2>&1 || need+=(libkrb5-dev)
        command -v gcc >/dev/null 2>&1 || need+=(gcc)
        python3 -c 'import os, sysconfig; os.stat(sysconfig.get_path("include") + "/Python.h")' \
            >/dev/null 2>&1 || need+=(python3-dev)
        continue
    fi
    if [ "$extra" = prometheus ]; then
        # only its promtool is used: the alert rules' test (contrib/prometheus)
        command -v promtool >/dev/null 2>&1 || need+=(prometheus)
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

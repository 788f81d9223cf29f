#!/usr/bin/env bash
# Install Apache Curator (Debian's libcurator-recipes-java, which brings the framework,
# the client, Guava, SLF4J and ZooKeeper's client jar) and a JDK (javac, for the small
# Java worker in interop/curator/) when either is missing. Used by the benchmarks'
# Curator row and by the Curator interop tests; does nothing when both are there.
# CURATOR_JARS (a directory holding curator-recipes.jar) skips the Curator check.
set -euo pipefail

need=()
jars="${CURATOR_JARS:-/usr/share/java}"
if [ ! -f "$jars/curator-recipes.jar" ]; then
    need+=(libcurator-recipes-java)
fi
if [ -z "${JAVA_HOME:-}" ] && ! command -v javac >/dev/null 2>&1; then
    need+=(default-jdk-headless)
fi
[ ${#need[@]} -eq 0 ] && exit 0

echo "zklocks: installing ${need[*]} with apt-get" >&2
if ! command -v apt-get >/dev/null 2>&1; then
    echo "zklocks: apt-get not found; install Apache Curator 5 and a JDK yourself and set" \
         "CURATOR_JARS (the directory of curator-recipes.jar) and JAVA_HOME" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# Other jobs on the machine may hold dpkg's lock for a while: wait for it, not fail.
lock_wait=(-o DPkg::Lock::Timeout=600)
$sudo apt-get "${lock_wait[@]}" update -qq
$sudo apt-get "${lock_wait[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null

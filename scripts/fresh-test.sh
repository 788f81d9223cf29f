#!/usr/bin/env bash
# `make fresh-test`: the README's two commands on a fresh Debian, as a new user runs them.
#
# Builds a minimal Debian 12 (bookworm, the default) or 13 (trixie) with debootstrap, from the Debian mirror this
# machine's apt already uses (read from /etc/apt/sources.list* now, never written down
# here), copies a clean clone of this repository into it, and runs `make demo`, then
# `make test`, with SIGINT ignored, as it is under `nohup make test &`, a script's `&`,
# or some CI runners. Each run starts from a pristine copy of the base system, so what
# `make` installs with apt-get (Java, ZooKeeper, python3-venv, ...) is installed afresh.
#
# Needs root (debootstrap, chroot, mounts), and network access to the Debian mirror and
# to PyPI. The chroot trusts the certificate authorities this machine trusts (a network
# that intercepts TLS has its own), and uses its DNS servers. The first run downloads the
# base system; the whole run takes 20+ minutes. Not part of CI.
#
#   DIST=SUITE         bookworm (Debian 12, Python 3.11, ZooKeeper 3.8) or trixie
#                      (Debian 13, Python 3.13, ZooKeeper 3.9); default bookworm
#   FRESH_DIR=DIR      where the base system and the run's copy live
#                      (default /var/tmp/zklocks-fresh-SUITE: one per suite)
#   FRESH_REBUILD=1    download the base system again
#   FRESH_WORKTREE=1   also copy uncommitted changes (tracked files, and untracked files
#                      that are not ignored): to try a change before committing it
#   FRESH_MIRROR=URL   a Debian mirror to use instead of the one apt uses here
#   PYTEST_ADDOPTS=... passed to pytest in `make test` (e.g. -k NAME: only some tests)
#   FRESH_RUN=COMMAND  run this shell command in the clone instead of the README's two
#                      (`make test-trixie` runs CI's subsets this way)
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
suite="${DIST:-bookworm}"
dir="${FRESH_DIR:-/var/tmp/zklocks-fresh-$suite}"
base="$dir/base"
root="$dir/run"

say() { echo "fresh-test: $*" >&2; }

case "$suite" in
    bookworm | trixie) ;;
    *)
        say "DIST must be bookworm or trixie, not '$suite'"
        exit 2
        ;;
esac

if [ "$(id -u)" -ne 0 ]; then
    say "needs root (debootstrap, chroot and mounts): run it with sudo"
    exit 1
fi

# The first Debian archive that apt on this machine uses (a main suite, not -security),
# and its security archive if it has one: "URI" lines, main first.
apt_archives() {
    python3 - /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        /etc/apt/sources.list.d/*.sources <<'EOF'
import re
import sys

main, security = [], []
for name in sys.argv[1:]:
    try:
        text = open(name, encoding="utf-8").read()
    except OSError:
        continue
    entries = []  # (types, uris, suites)
    if name.endswith(".sources"):  # deb822 paragraphs
        for paragraph in re.split(r"\n\s*\n", text):
            fields = {}
            for line in paragraph.splitlines():
                if line.startswith("#") or ":" not in line or line[0].isspace():
                    continue
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.split()
            if fields.get("enabled", ["yes"])[0].lower() == "no":
                continue
            entries.append((fields.get("types", []), fields.get("uris", []), fields.get("suites", [])))
    else:  # one-line format: deb [options] URI SUITE COMPONENTS...
        for line in text.splitlines():
            words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
            if len(words) >= 3:
                entries.append(([words[0]], [words[1]], [words[2]]))
    for types, uris, suites in entries:
        if "deb" not in types:
            continue
        for uri in uris:
            for suite in suites:
                if suite.endswith("-security"):
                    security.append(uri)
                elif "-" not in suite and "/" not in suite:
                    main.append(uri)
if main:
    print(main[0])
    if security:
        print(security[0])
EOF
}

mirror="${FRESH_MIRROR:-}"
security=""
if [ -z "$mirror" ]; then
    mapfile -t archives < <(apt_archives)
    if [ ${#archives[@]} -eq 0 ]; then
        say "no Debian archive in /etc/apt/sources.list*; set FRESH_MIRROR=URL"
        exit 1
    fi
    mirror="${archives[0]}"
    security="${archives[1]:-}"
fi

mounted=()
unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || true
    done
    mounted=()
}
trap unmount_all EXIT

started=$(date +%s)
elapsed() { echo "$(($(date +%s) - started)) s"; }

# -- 1. the base system: downloaded once, kept pristine ----------------------------------
if [ -n "${FRESH_REBUILD:-}" ] || [ ! -f "$base/.complete" ]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
        say "installing debootstrap with apt-get"
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
            debootstrap >/dev/null
    fi
    rm -rf "$base"
    mkdir -p "$dir"
    say "debootstrap $suite from $mirror into $base"
    # minbase: apt, dpkg and the essential tools; then what the README asks for
    debootstrap --variant=minbase --include=python3,make "$suite" "$base" \
        "$mirror" >"$dir/debootstrap.log" 2>&1 || {
        tail -20 "$dir/debootstrap.log" >&2
        exit 1
    }
    {
        echo "deb $mirror $suite main"
        echo "deb $mirror $suite-updates main"
        [ -n "$security" ] && echo "deb $security $suite-security main"
    } >"$base/etc/apt/sources.list"
    # no DNS server of its own: the host's, as a fresh machine would have its network's
    cp /etc/resolv.conf "$base/etc/resolv.conf"
    touch "$base/.complete"
    say "base system ready after $(elapsed)"
fi

# -- 2. a fresh copy of it, and a clean clone of the repository --------------------------
# A run killed before its cleanup may have left mounts: never delete through them.
{ grep -o " $root/[^ ]*" /proc/mounts || true; } | sort -r | xargs -r -n1 umount -l
rm -rf --one-file-system "$root"
cp -a "$base" "$root"
user_home="$root/root"
git clone --quiet --no-hardlinks "$repo" "$user_home/zklocks"
if [ -n "${FRESH_WORKTREE:-}" ]; then
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard) |
        while IFS= read -r -d '' file; do
            if [ -e "$repo/$file" ]; then
                mkdir -p "$(dirname "$user_home/zklocks/$file")"
                cp -a "$repo/$file" "$user_home/zklocks/$file"
            else
                rm -f "$user_home/zklocks/$file"  # deleted in the working tree
            fi
        done
fi

# This machine's CAs, for pip: the one file its tools are pointed at, or the system's.
ca_bundle="${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}"
ca_env=()
if [ -f "$ca_bundle" ]; then
    mkdir -p "$root/etc/ssl/certs"
    cp "$ca_bundle" "$root/etc/ssl/certs/fresh-test-host-cas.pem"
    inside=/etc/ssl/certs/fresh-test-host-cas.pem
    ca_env=(SSL_CERT_FILE="$inside" PIP_CERT="$inside" REQUESTS_CA_BUNDLE="$inside")
fi

mount_in() {  # mount_in TARGET mount-arguments...
    local target="$root$1"
    shift
    mkdir -p "$target"
    mount "$@" "$target"
    mounted+=("$target")
}
mount_in /proc -t proc proc
mount_in /sys -t sysfs sysfs
mount_in /dev --bind /dev
mount_in /dev/pts --bind /dev/pts
mount_in /dev/shm -t tmpfs tmpfs

# -- 3. the README's commands, as a new user types them, SIGINT ignored ------------------
log="$dir/run.log"
what="make demo, then make test"
[ -n "${FRESH_RUN:-}" ] && what="$FRESH_RUN"
say "$what${PYTEST_ADDOPTS:+ (PYTEST_ADDOPTS=$PYTEST_ADDOPTS)}, in $root; log: $log"
set +e
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-}" FRESH_RUN="${FRESH_RUN:-}" "${ca_env[@]}" \
    /bin/sh -c '
        trap "" INT  # inherited across exec: make, pytest and every child start with it ignored
        cd /root/zklocks || exit 1
        if [ -n "$FRESH_RUN" ]; then
            exec /bin/sh -c "$FRESH_RUN"
        fi
        start=$(date +%s)
        make demo; demo=$?
        echo "fresh-test: make demo exited $demo after $(($(date +%s) - start)) s"
        start=$(date +%s)
        make test; tests=$?
        echo "fresh-test: make test exited $tests after $(($(date +%s) - start)) s"
        [ "$demo" -eq 0 ] && [ "$tests" -eq 0 ]
    ' 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
say "finished with status $status after $(elapsed)"
exit "$status"

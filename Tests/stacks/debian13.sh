#!/bin/bash
# A Debian 13 (trixie) root for the integration tests (PipeWire 1.x, WirePlumber 0.5), and a way to
# run a command in it as the tests do.
#
#   Tests/stacks/debian13.sh root           the root's directory, built first when missing (with sudo
#                                            when not root, said once); its packages: debian13.packages
#   Tests/stacks/debian13.sh path           the directory if built, else exit 1 (never builds)
#   Tests/stacks/debian13.sh run DIR [--file SRC:DST]... [--bind SRC:DST]... -- CMD [ARG]...
#                                            CMD inside DIR (what `root` printed), in this process
#                                            (its pid is the one the caller started), as this user;
#                                            --file copies a host file to DST in the root's writable
#                                            layer, --bind mounts a host directory over DST, for CMD only
#
# The root is cached outside the clone, in $CUED_TEST_CACHE (default /var/cache/cued-test), under a
# name made of this script's VERSION and the package list: a change to either builds a new one. It is
# built under DIR.partial and renamed when complete, so a half-built root is never used.
#
# `run` gives CMD its own mount namespace (a normal user's in a user namespace of its own, `unshare
# -r -m`: no sudo, no privilege outside it; root's without one) holding: the root as an overlay whose
# writes go to a tmpfs (the cached root is never written), /tmp and this checkout at their own paths,
# /proc, /sys and /dev of the host, a /dev/pts of its own (newinstance), /dev/shm of the host (the
# stack's processes share it), a /run of its own (tmpfs). Each step execs the next, so CMD keeps the
# caller's pid; when CMD and its children are gone, the namespace and every mount in it go too:
# nothing is left mounted. The environment is the caller's, with PATH the root's and LD_* removed.
set -euo pipefail

VERSION=1  # a change to how the root is built: bump, so that a new one is built
SUITE=trixie
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self=$here/$(basename "${BASH_SOURCE[0]}")
checkout=$(cd "$here/../.." && pwd)
cache=${CUED_TEST_CACHE:-/var/cache/cued-test}
ROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# chroot, debootstrap and friends live in sbin, which a normal user's PATH often lacks.
export PATH="$PATH:/usr/sbin:/sbin"

say() { echo "debian13.sh: $*" >&2; }
die() { say "$*"; exit 1; }

packages() { sed 's/#.*//' "$here/debian13.packages" | tr -s ' \t' '\n' | sed '/^$/d' | LC_ALL=C sort -u; }
key() { { echo "version $VERSION suite $SUITE"; packages; } | sha256sum | cut -c1-12; }
dir() { echo "$cache/debian13-$(key)"; }
built() { [ -f "$1/stamp" ] && [ -d "$1/root/usr" ]; }

# As root: debootstrap and apt-get in a mount namespace of their own (whatever they mount goes with
# it, even when killed), under DIR.partial, renamed to DIR when complete. One build at a time.
build() {
    local final tmp start
    final=$(dir); tmp=$final.partial; start=$(date +%s)
    [ -x /usr/sbin/debootstrap ] || die "debootstrap is not installed (apt-get install debootstrap; make test's packages include it)"
    mkdir -p "$cache"
    exec 9>"$cache/debian13.lock"
    flock 9
    built "$final" && return 0
    # A build killed midway: nothing of it is mounted (its namespace went with it).
    if [ -e "$tmp" ]; then
        findmnt -rno TARGET | grep -qF "$tmp/" && die "$tmp has mounts on it: a build still running? (findmnt | grep $tmp)"
        rm -rf --one-file-system "$tmp"
    fi
    mkdir -p "$tmp/root" "$tmp/mnt"
    say "building $final (debootstrap $SUITE and $(packages | wc -l) packages; a few minutes)"
    unshare --mount --propagation private -- "$self" _build "$tmp" > "$tmp/build.log" 2>&1 ||
        { tail -n 30 "$tmp/build.log" >&2; die "the build failed; its log: $tmp/build.log"; }
    mv "$tmp/versions" "$tmp/stamp"
    mv "$tmp" "$final"
    say "built $final in $(( $(date +%s) - start )) s: $(grep -E '^(pipewire|wireplumber|libc6) ' "$final/stamp" | tr '\n' ' ')"
}

# Inside build's mount namespace.
_build() {
    local tmp=$1 r=$1/root
    debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$r"
    cp /etc/resolv.conf "$r/etc/resolv.conf"
    # No service started by a package's scripts (there is no init in the root).
    printf '#!/bin/sh\nexit 101\n' > "$r/usr/sbin/policy-rc.d"; chmod 0755 "$r/usr/sbin/policy-rc.d"
    mount -t proc proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount --rbind /dev "$r/dev"
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$r/dev/pts"
    mount -t tmpfs tmpfs "$r/dev/shm"
    mount -t tmpfs tmpfs "$r/run"
    chroot "$r" apt-get update -q
    # shellcheck disable=SC2046
    DEBIAN_FRONTEND=noninteractive chroot "$r" apt-get install -y -q --no-install-recommends $(packages)
    chroot "$r" apt-get clean
    rm -rf "$r"/var/lib/apt/lists/* "$r/usr/sbin/policy-rc.d"
    # D-Bus and PulseAudio clients read the machine id.
    [ -s "$r/etc/machine-id" ] || chroot "$r" dbus-uuidgen --ensure=/etc/machine-id
    { echo "# Tests/stacks/debian13.sh version $VERSION, key $(key), built $(date -u +%FT%TZ); its packages:"
      chroot "$r" dpkg-query -W -f '${Package} ${Version}\n'; } > "$tmp/versions"
}

# The root's directory, built first when missing.
root() {
    local d; d=$(dir)
    if ! built "$d"; then
        if [ "$(id -u)" = 0 ]; then build
        else
            say "the Debian 13 root $d is missing; building it needs root (debootstrap, apt-get): running it with sudo"
            sudo "$self" _build-as-root "$cache"
        fi
    fi
    built "$d" || die "no Debian 13 root at $d"
    echo "$d"
}

# CMD in the root: a mount namespace of its own (and a user namespace, when not root), then _enter.
run() {
    [ $# -ge 1 ] || die "usage: run DIR [--file SRC:DST]... [--bind SRC:DST]... -- CMD [ARG]..."
    built "$1" || die "no Debian 13 root at $1 (Tests/stacks/debian13.sh root builds it)"
    if [ "$(id -u)" = 0 ]; then exec unshare --mount --propagation private -- "$self" _enter "$@"
    else exec unshare --user --map-root-user --mount --propagation private -- "$self" _enter "$@"
    fi
}

_enter() {
    local d=$1; shift
    local files=() binds=()
    while [ $# -gt 0 ]; do
        case $1 in
            --file) files+=("$2"); shift 2 ;;
            --bind) binds+=("$2"); shift 2 ;;
            --) shift; break ;;
            *) break ;;
        esac
    done
    [ $# -ge 1 ] || die "run: no command"
    local m=$d/mnt up=$d/mnt/upper new=$d/mnt/merged wd
    mount -t tmpfs -o mode=0755 cued-stack "$m"
    mkdir "$up" "$d/mnt/work" "$new"
    # Mount points for what is bound in at its own path, made in the overlay's upper layer before it
    # is mounted (a user cannot make them in the root's own directories, which are root's).
    mkdir -p "$up$checkout"
    local f
    for f in ${files[@]+"${files[@]}"}; do
        mkdir -p "$up$(dirname "${f#*:}")"
        cp "${f%%:*}" "$up${f#*:}"
    done
    for f in ${binds[@]+"${binds[@]}"}; do mkdir -p "$up${f#*:}"; done
    mount -t overlay -o "lowerdir=$d/root,upperdir=$up,workdir=$d/mnt/work" cued-stack "$new"
    mount --rbind /proc "$new/proc"
    mount --rbind /sys "$new/sys"
    mount --rbind /dev "$new/dev"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$new/dev/pts"
    mount --bind "$new/dev/pts/ptmx" "$new/dev/ptmx"
    mount -t tmpfs -o mode=0755 cued-run "$new/run"
    mount --rbind /tmp "$new/tmp"
    mount --rbind "$checkout" "$new$checkout"
    for f in ${binds[@]+"${binds[@]}"}; do mount --bind "${f%%:*}" "$new${f#*:}"; done
    wd=$PWD; [ -d "$new$wd" ] || wd=/
    exec chroot "$new" /usr/bin/env -C "$wd" -u LD_LIBRARY_PATH -u LD_PRELOAD PATH="$ROOT_PATH" "$@"
}

# The whole script is read before anything runs (bash reads a script as it goes: one edited while
# it ran would otherwise go on at the old offset in the new text).
main() {
    case ${1:-} in
        root) root ;;
        path) local d; d=$(dir); built "$d" || exit 1; echo "$d" ;;
        run) shift; run "$@" ;;
        _build) shift; _build "$@" ;;
        _build-as-root) cache=$2; build ;;
        _enter) shift; _enter "$@" ;;
        *) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$self" >&2; exit 2 ;;
    esac
}
main "$@"; exit

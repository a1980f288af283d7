#!/bin/sh
# sandbox.sh DRIVER.so… -- COMMAND ARG…: runs COMMAND where libcanberra's driver directory
# (compiled into libcanberra) holds its own drivers plus the given ones, in a mount namespace
# of its own (unshare -m, as root; -r -m as a user): nothing outside sees the change.
set -e
dir=$(pkg-config --variable=libdir libcanberra)/libcanberra-$(pkg-config --modversion libcanberra)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/canberra-drivers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$dir"/*.so "$tmp"/ 2>/dev/null || true
while [ $# -gt 0 ] && [ "$1" != -- ]; do cp "$1" "$tmp"/; shift; done
[ "$1" = -- ] && shift
flags="-m"; [ "$(id -u)" = 0 ] || flags="-r -m"
# Not exec: the trap removes the copy once the command ends.
unshare $flags --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$tmp" "$dir" "$@"

#!/bin/sh
# Installs the Debian packages nnbench needs (when root), or prints the one command that
# would. Extra package names may be given as arguments (make bench-peers and make fuzz
# use this: clang and libclang-rt-dev, libFuzzer's runtime, only for fuzzing).
set -eu
pkgs="build-essential pkg-config libncurses-dev libsqlite3-dev libpapi-dev papi-tools
libopenblas-dev liblapacke-dev libcmocka-dev libinih-dev zlib1g-dev tmux sqlite3 python3
dataset-fashion-mnist libmetis-dev openmpi-bin libopenmpi-dev libdnnl-dev
libmicrohttpd-dev prometheus python3-protobuf protobuf-compiler $*"
missing=""
for p in $pkgs; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = "installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing
else
    echo "deps: missing packages:$missing" >&2
    echo "deps: run as root:  apt-get install -y --no-install-recommends$missing" >&2
    exit 1
fi

#!/usr/bin/env bash
# bench/run.py on a machine with more cores and no network (the lent GPU host: 16 cores).
#
#   tools/bench_device.sh pack 0.34.0 aphrodite_engine-0.24.1   # here: wheels + release trees
#   tools/bench_device.sh setup    # there: only the venv and the trees (for other scripts)
#   tools/bench_device.sh run --versions 0.34.0 --jobs 2,4,8 --repeat 3   # there, via `run`
#
# pack fills .bench-device/ (ignored by git; carry it): cp312 wheels of libcst, pyyaml,
# ruff and Fixit 2.2.1, and one .tar.xz per release tree (its .py files and dist-info,
# from $WARMLINT_CACHE_DIR/releases). run makes a venv there, installs the wheels offline,
# unpacks the trees, runs bench/run.py on the working tree with the arguments given and
# leaves results.md, state.json and the log in $OUT (or .bench-device/out).
set -euo pipefail
cd "$(dirname "$0")/.."
HERE=.bench-device
mode=${1:?pack, setup or run}; shift
releases=${WARMLINT_CACHE_DIR:-$HOME/.cache/warmlint}/releases  # pack reads the user's
export WARMLINT_CACHE_DIR=$PWD/$HERE/cache  # setup and run use their own
setup() {  # the venv (offline wheels) and the release trees under $HERE/cache
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q --no-index --find-links "$HERE/wheels" libcst pyyaml ruff fixit
    mkdir -p "$WARMLINT_CACHE_DIR/releases"
    for archive in "$HERE"/releases/*.tar.xz; do
        name=$(basename "$archive" .tar.xz)
        [ -d "$WARMLINT_CACHE_DIR/releases/$name" ] || python3 -c 'import sys, tarfile
tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' "$archive" "$WARMLINT_CACHE_DIR/releases"
    done
}
case "$mode" in
pack)
    mkdir -p "$HERE/wheels" "$HERE/releases"
    .venv/bin/pip download -q -d "$HERE/wheels" --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 libcst==1.9.0 pyyaml ruff fixit==2.2.1
    for tree in "$@"; do
        [ -d "$releases/$tree" ] || { echo "bench_device: no $releases/$tree" >&2; exit 2; }
        tar -C "$releases" -cf - --exclude=.warmlint-complete.json "$tree" | xz -6 -T0 \
            > "$HERE/releases/$tree.tar.xz"
    done
    du -sh "$HERE"
    ;;
setup)
    setup
    ;;
run)
    out=${OUT:-$HERE/out}; mkdir -p "$out"
    setup
    export PYTHONPATH=$PWD  # the working tree's warmlint (no install: no build backend offline)
    .venv/bin/python bench/run.py --output "$out/results.md" "$@" 2>&1 | tee "$out/bench.log"
    cp /tmp/warmlint-bench/state.json "$out/state.json" 2>/dev/null || true
    ;;
*) echo "bench_device: pack, setup or run, not $mode" >&2; exit 2 ;;
esac

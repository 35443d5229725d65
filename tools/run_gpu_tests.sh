#!/usr/bin/env bash
# Run warmlint's GPU cases (tests/gpu) on the lent GPU machine; needs no network.
#
#   bash tools/run_gpu_tests.sh [pytest args, e.g. -k "test_a_ or test_d_"]
#
# From the repo root, with carry [".gpu-bundle/payload"] (built by tools/gpu_bundle.py;
# .gpu-bundle/run_gpu_tests.sh is a copy of this script, for carrying it too). Everything
# printed goes to $OUT/gpu-log.txt; results go to $OUT/gpu-results.json as each case
# finishes. Safe to run again on a warm machine: install, unpack and the FlashInfer build
# are skipped when already done.
# Knobs: WARMLINT_GPU_JOBS (cases at once, default 6), WARMLINT_FIXED_RUNNER_0_20_0 (a
# gpu_model_runner.py from `warmlint fix`; payload/fixed/ is used if unset),
# WARMLINT_SKIP_PREBUILD=1 (no FlashInfer pre-build), WARMLINT_NO_PREFLIGHT=1; for a dry
# run elsewhere: WARMLINT_PYTHON (default python3), WARMLINT_PIP_FLAGS (e.g. target tags).
set -uo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$SELF")/.." || exit 2
# The bundle's copy can be older than the tree's: the tree always travels, so prefer it.
if [ "${WARMLINT_RUN_SELF:-0}" != 1 ] && [ -f tools/run_gpu_tests.sh ] &&
   ! cmp -s "$SELF" tools/run_gpu_tests.sh; then
  WARMLINT_RUN_SELF=1 exec bash tools/run_gpu_tests.sh "$@"
fi
OUT=${OUT:-/tmp/warmlint-out}
BUNDLE=${WARMLINT_BUNDLE:-.gpu-bundle/payload}
SITE=${WARMLINT_SITE:-/tmp/site}
PY=${WARMLINT_PYTHON:-python3}
PIP_FLAGS=${WARMLINT_PIP_FLAGS:-}
export WARMLINT_RELEASES_DIR=${WARMLINT_RELEASES_DIR:-/tmp/releases}
export WARMLINT_GPU_RESULTS=${WARMLINT_GPU_RESULTS:-$OUT}
mkdir -p "$OUT"

step() { printf '\n=== [%4ss] %s\n' "$SECONDS" "$*"; }

install_wheels() {
  local stamp; stamp=$(cat "$BUNDLE/MANIFEST.json" 2>/dev/null | md5sum | cut -c1-32)
  if [ -f "$SITE/.warmlint-stamp" ] && [ "$(cat "$SITE/.warmlint-stamp")" = "$stamp" ]; then
    echo "already installed in $SITE"; return 0
  fi
  rm -rf "$SITE" && mkdir -p "$SITE"
  # shellcheck disable=SC2086
  "$PY" -m pip install -q --no-index --no-deps --no-compile $PIP_FLAGS --target "$SITE" \
    "$BUNDLE"/wheels/*.whl || return 1
  local missing=() check whl
  while read -r check whl; do
    [ -n "$check" ] || continue
    if [[ $check == cmd:* ]]; then
      command -v "${check#cmd:}" >/dev/null || missing+=("$BUNDLE/extras/$whl")
    else
      PYTHONPATH="$SITE" "$PY" -c "import $check" 2>/dev/null || missing+=("$BUNDLE/extras/$whl")
    fi
  done < "$BUNDLE/extras/extras.txt"
  if [ ${#missing[@]} -gt 0 ]; then
    echo "the machine lacks, installing: ${missing[*]##*/}"
    # shellcheck disable=SC2086
    "$PY" -m pip install -q --no-index --no-deps --no-compile $PIP_FLAGS --target "$SITE" \
      "${missing[@]}" || return 1
  fi
  echo "$stamp" > "$SITE/.warmlint-stamp"
}

unpack_releases() {
  local zip ver dest
  for zip in "$BUNDLE"/releases/vllm-*.zip; do
    [ -f "$zip" ] || { echo "no release zip in $BUNDLE/releases"; return 1; }
    ver=${zip##*/vllm-}; ver=${ver%.zip}; dest=$WARMLINT_RELEASES_DIR/$ver
    if [ ! -f "$dest/.warmlint-unpacked" ] || [ "$zip" -nt "$dest/.warmlint-unpacked" ]; then
      rm -rf "$dest" && mkdir -p "$dest" && "$PY" -m zipfile -e "$zip" "$dest" || return 1
      touch "$dest/.warmlint-unpacked"
    fi
    # Stand-ins for the compiled extension: sampling needs none of its ops.
    for stub in _C _C_stable_libtorch; do
      ls "$dest"/vllm/$stub.*.so >/dev/null 2>&1 || [ -f "$dest/vllm/$stub.py" ] ||
        echo "# warmlint stand-in: compiled ops are not shipped" > "$dest/vllm/$stub.py"
    done
    echo "vLLM $ver in $dest"
  done
}

use_fixed_runners() {
  local f ver var
  for f in "$BUNDLE"/fixed/gpu_model_runner-*.py; do
    [ -f "$f" ] || continue
    ver=${f##*/gpu_model_runner-}; ver=${ver%.py}; var=WARMLINT_FIXED_RUNNER_${ver//./_}
    if [ -z "${!var:-}" ]; then export "$var=$PWD/$f"; fi
    echo "$var=${!var}"
  done
}

preflight() {
  "$PY" - <<'EOF' || return 1
import importlib, sys
need = ["torch", "triton", "flashinfer", "tvm_ffi", "pytest", "pydantic", "numpy",
        "transformers", "warmlint.runtime.case"]
bad = []
for m in need + ["libcst"]:
    try:
        mod = importlib.import_module(m)
        print(f"  {m:24s} {getattr(mod, '__version__', '')}")
    except Exception as exc:
        (bad.append if m in need else print)(f"  {m}: {type(exc).__name__}: {exc}"
                                             + ("" if m in need else " (only case c needs it)"))
import torch
print("  cuda:", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
if bad:
    print("MISSING (add its wheel in tools/gpu_bundle.py, or WARMLINT_NO_PREFLIGHT=1):\n"
          + "\n".join(bad))
    sys.exit(1)
EOF
  local dir pids=() rc=0
  for dir in "$WARMLINT_RELEASES_DIR"/*/; do
    ( PYTHONPATH="$dir:$PYTHONPATH" "$PY" -c "
import vllm.v1.sample.sampler, vllm.platforms as p, importlib.metadata as md
print('  vllm', md.version('vllm'), 'imports; platform', type(p.current_platform).__name__)
assert p.current_platform.is_cuda(), 'vLLM did not detect CUDA (dist-info missing?)'
" 2>&1 | grep -v "^INFO\|^WARNING" | tail -n 4 ) & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  return $rc
}

prebuild_flashinfer() {
  # ~90 s once per machine (no flashinfer-cubin): cached under ~/.cache/flashinfer, so no
  # case pays it; JitEvents reports it as a build if it ever happens inside a case.
  "$PY" -c "
import time; t = time.time()
import flashinfer.sampling as s; s.get_sampling_module()
print(f'  FlashInfer sampling module ready in {time.time() - t:.1f} s')"
}

main() {
  step "bundle: $BUNDLE"; cat "$BUNDLE/MANIFEST.json" 2>/dev/null | head -c 600; echo
  nvidia-smi -L 2>/dev/null || true
  step "install wheels into $SITE"; install_wheels || { echo "install failed"; return 3; }
  export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
  step "unpack releases"; unpack_releases || return 3
  use_fixed_runners
  if [ "${WARMLINT_NO_PREFLIGHT:-0}" != 1 ]; then
    step "preflight imports"; preflight || { echo "preflight failed"; return 4; }
  fi
  if [ "${WARMLINT_SKIP_PREBUILD:-0}" != 1 ]; then
    step "pre-build FlashInfer sampling (JIT, once per machine)"
    prebuild_flashinfer || echo "WARNING: FlashInfer pre-build failed; FlashInfer cases will fail"
  fi
  local rc=0
  if [ "${WARMLINT_SKIP_PYTEST:-0}" != 1 ]; then
    step "pytest -m gpu tests/gpu $*"
    "$PY" -m pytest -m gpu tests/gpu -p no:cacheprovider -q -rA "$@"
    rc=$?
    step "done (pytest exit $rc); results in $WARMLINT_GPU_RESULTS/gpu-results.json"
    [ "$WARMLINT_GPU_RESULTS" = "$OUT" ] || cp "$WARMLINT_GPU_RESULTS"/*.json "$OUT"/ 2>/dev/null
  fi
  run_verify || rc=$((rc ? rc : 5))
  return $rc
}

# WARMLINT_VERIFY="0.20.0:original:VLLM_USE_FLASHINFER_SAMPLER=1 0.21.0:original:" runs
# `warmlint verify` for each release:warmup:env spec (warmup `fixed` = the bundled fixed
# runner), writing $OUT/verify-<n>.json and its table into the log.
run_verify() {
  local spec n=0 ver warmup env args rc=0
  for spec in ${WARMLINT_VERIFY:-}; do
    n=$((n + 1))
    IFS=: read -r ver warmup env <<< "$spec"
    if [ "$warmup" = fixed ]; then
      local var=WARMLINT_FIXED_RUNNER_${ver//./_}; warmup="file:${!var}"
    fi
    args=(--release-dir "$WARMLINT_RELEASES_DIR/$ver" --warmup "$warmup" --jobs "${WARMLINT_GPU_JOBS:-6}")
    [ -n "$env" ] && args+=(--env "$env")
    step "warmlint verify $ver $warmup $env"
    "$PY" -m warmlint.cli verify "${args[@]}" --format json -o "$OUT/verify-$n.json" || rc=1
    "$PY" -c "import json,sys; from warmlint.verify import render_text; \
print(render_text(json.load(open(sys.argv[1]))))" "$OUT/verify-$n.json" 2>&1
  done
  return $rc
}

main "$@" 2>&1 | tee -a "$OUT/gpu-log.txt"
exit "${PIPESTATUS[0]}"

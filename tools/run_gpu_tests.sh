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
# gpu_model_runner.py from `warmlint fix`; payload/fixed/ is used if unset; the v2 runner's
# is WARMLINT_FIXED_RUNNER_V2_0_26_0), WARMLINT_SKIP_PREBUILD=1 (no FlashInfer pre-build),
# WARMLINT_NO_PREFLIGHT=1, WARMLINT_SKIP_PYTEST=1, WARMLINT_VERIFY (see run_verify),
# WARMLINT_DEADLINE_S (no verify case starts later than this many seconds after this
# script started; the rest are reported as skipped, so a run under a hard time limit
# still prints its tables; WARMLINT_CASE_GRACE_S: how long a case started before it may
# run past it, default 180), WARMLINT_VERIFY_EARLY + WARMLINT_EARLY_DEADLINE_S (verify runs
# that need no FlashInfer, started while it builds; their deadline counts from the start of
# that build); for a dry run elsewhere:
# WARMLINT_PYTHON (default python3), WARMLINT_PIP_FLAGS (e.g. target tags).
set -uo pipefail
# WARMLINT_FUNCTIONS_ONLY=1 (with `source`, from the repo root): define the functions and
# run nothing (the CPU tests drive run_verify with a stand-in python).
if [ "${WARMLINT_FUNCTIONS_ONLY:-0}" != 1 ]; then
  SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
  cd "$(dirname "$SELF")/.." || exit 2
  # The bundle's copy can be older than the tree's: the tree always travels, so prefer it.
  if [ "${WARMLINT_RUN_SELF:-0}" != 1 ] && [ -f tools/run_gpu_tests.sh ] &&
     ! cmp -s "$SELF" tools/run_gpu_tests.sh; then
    WARMLINT_RUN_SELF=1 exec bash tools/run_gpu_tests.sh "$@"
  fi
fi
OUT=${OUT:-/tmp/warmlint-out}
STARTED=$(date +%s)
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
  local arc ver dest found=0
  for arc in "$BUNDLE"/releases/vllm-*.zip "$BUNDLE"/releases/vllm-*.tar.xz; do
    [ -f "$arc" ] || continue
    found=1
    ver=${arc##*/vllm-}; ver=${ver%.zip}; ver=${ver%.tar.xz}; dest=$WARMLINT_RELEASES_DIR/$ver
    if [ ! -f "$dest/.warmlint-unpacked" ] || [ "$arc" -nt "$dest/.warmlint-unpacked" ]; then
      rm -rf "$dest" && mkdir -p "$dest" || return 1
      case $arc in
        *.zip) "$PY" -m zipfile -e "$arc" "$dest" || return 1 ;;
        *) "$PY" -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" \
             "$arc" "$dest" || return 1 ;;
      esac
      touch "$dest/.warmlint-unpacked"
    fi
    # Stand-ins for the compiled extension: sampling needs none of its ops.
    for stub in _C _C_stable_libtorch; do
      ls "$dest"/vllm/$stub.*.so >/dev/null 2>&1 || [ -f "$dest/vllm/$stub.py" ] ||
        echo "# warmlint stand-in: compiled ops are not shipped" > "$dest/vllm/$stub.py"
    done
    echo "vLLM $ver in $dest"
  done
  [ "$found" = 1 ] || { echo "no release archive in $BUNDLE/releases"; return 1; }
}

use_fixed_runners() {
  local f ver var
  for f in "$BUNDLE"/fixed/gpu_model_runner-*.py "$BUNDLE"/fixed/model_runner_v2-*.py; do
    [ -f "$f" ] || continue
    case $f in
      */model_runner_v2-*) ver=${f##*/model_runner_v2-}; var=WARMLINT_FIXED_RUNNER_V2_ ;;
      *) ver=${f##*/gpu_model_runner-}; var=WARMLINT_FIXED_RUNNER_ ;;
    esac
    ver=${ver%.py}; var=$var${ver//./_}
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
import os, vllm.v1.sample.sampler, vllm.platforms as p, importlib.metadata as md
print('  vllm', md.version('vllm'), 'imports; platform', type(p.current_platform).__name__)
assert p.current_platform.is_cuda(), 'vLLM did not detect CUDA (dist-info missing?)'
if os.path.isfile('${dir}vllm/v1/worker/gpu/model_runner.py'):
    # the v2 runner's state buffers: the UVA stand-in must alias pinned memory (zero-copy)
    import torch
    from warmlint.runtime import uva
    print('  v2:', uva.install('cuda'))
    import vllm.v1.worker.gpu.sample.sampler
    from vllm.v1.worker.gpu.buffer_utils import UvaBuffer
    buf = UvaBuffer(16, torch.int32)
    buf.np[:] = range(16)
    assert buf.uva.is_cuda and buf.uva.sum().item() == 120, 'UVA view does not alias'
    buf.np[3] = 1003
    assert buf.uva[3].item() == 1003, 'UVA view is a copy, not an alias'
    print('  v2: UVA stand-in aliases pinned host memory')
" 2>&1 | grep -v "^INFO\|^WARNING" | tail -n 6
      # reported, not fatal: that release's cases then fail on their own, with a traceback
      [ "${PIPESTATUS[0]}" = 0 ] || echo "  PREFLIGHT FAILED for $dir (its cases will show why)"
    ) & pids+=($!)
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
  local rc=0 early=""
  if [ -n "${WARMLINT_VERIFY_EARLY:-}" ]; then
    # The FlashInfer build keeps one or two cores busy for ~100 s: FlashInfer-free cells
    # (VLLM_USE_FLASHINFER_SAMPLER=0) use the others meanwhile.
    step "verify while FlashInfer builds: $WARMLINT_VERIFY_EARLY"
    # its deadline counts from now: cells started within it end about when FlashInfer does
    ( STARTED=$(date +%s) WARMLINT_VERIFY=$WARMLINT_VERIFY_EARLY VERIFY_TAG=early \
      WARMLINT_DEADLINE_S=${WARMLINT_EARLY_DEADLINE_S:-${WARMLINT_DEADLINE_S:-}} run_verify ) &
    early=$!
  fi
  if [ "${WARMLINT_SKIP_PREBUILD:-0}" != 1 ]; then
    step "pre-build FlashInfer sampling (JIT, once per machine)"
    prebuild_flashinfer || echo "WARNING: FlashInfer pre-build failed; FlashInfer cases will fail"
  fi
  if [ -n "$early" ]; then
    wait "$early" || rc=5
    step "the verify runs started during the FlashInfer build are done"
  fi
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
# `warmlint verify` for each release:warmup:env[:key=value...] spec, writing
# $OUT/verify-<n>.json and its table into the log. warmup: original | fixed (the bundled
# fixed runner of that runner) | plugin, or several joined by '+' (original+fixed: both
# matrices and a side-by-side table); env: NAME=VALUE[,NAME=VALUE] or empty; keys: runner
# (v1|v2|auto), kinds (comma list, counts after '/', e.g. logprobs/20), batches (comma
# list, run in this order), jobs. E.g.
#   0.26.0:original:VLLM_USE_FLASHINFER_SAMPLER=1:runner=v2:batches=256,37,8,1
# WARMLINT_VERIFY_EARLY: the same, run while FlashInfer builds (each spec must set
# VLLM_USE_FLASHINFER_SAMPLER=0), with WARMLINT_EARLY_DEADLINE_S counted from the start of
# the build; files verify-early-<n>.
run_verify() {
  local spec n=0 ver warmup env rest args rc=0 key val w var deadline="" tag=${VERIFY_TAG:-}
  if [ -n "${WARMLINT_DEADLINE_S:-}" ]; then deadline=$((STARTED + WARMLINT_DEADLINE_S)); fi
  for spec in ${WARMLINT_VERIFY:-}; do
    n=$((n + 1))
    IFS=: read -r ver warmup env rest <<< "$spec"
    if [ "$tag" = early ] && [[ ",$env," != *,VLLM_USE_FLASHINFER_SAMPLER=0,* ]]; then
      echo "WARMLINT_VERIFY_EARLY: $spec does not set VLLM_USE_FLASHINFER_SAMPLER=0: its cases"\
           "would build FlashInfer themselves, skipped"; rc=1; continue
    fi
    args=(--release-dir "$WARMLINT_RELEASES_DIR/$ver" --jobs "${WARMLINT_GPU_JOBS:-6}")
    local runner=auto
    IFS=: read -ra extra <<< "$rest"
    for key in "${extra[@]}"; do
      val=${key#*=}; key=${key%%=*}
      case $key in
        runner) runner=$val; args+=(--runner "$val") ;;
        kinds) args+=(--kinds "${val//\//:}") ;;
        batches) args+=(--batches "$val") ;;
        jobs) args[3]=$val ;;
        *) echo "WARMLINT_VERIFY: unknown key '$key' in $spec"; rc=1 ;;
      esac
    done
    IFS=+ read -ra warmups <<< "$warmup"
    for w in "${warmups[@]}"; do
      if [ "$w" = fixed ]; then
        if [ "$runner" = v2 ]; then var=WARMLINT_FIXED_RUNNER_V2_${ver//./_}
        else var=WARMLINT_FIXED_RUNNER_${ver//./_}; fi
        if [ -z "${!var:-}" ]; then echo "WARMLINT_VERIFY: $var is not set ($spec)"; rc=1; continue; fi
        w="file:${!var}"
      fi
      args+=(--warmup "$w")
    done
    IFS=, read -ra envs <<< "$env"
    for w in "${envs[@]}"; do [ -n "$w" ] && args+=(--env "$w"); done
    if [ -n "$deadline" ] && [ "$(date +%s)" -ge "$deadline" ]; then
      echo "WARMLINT_VERIFY: $spec not started: its deadline had passed"; rc=1; continue
    fi
    [ -n "$deadline" ] && args+=(--deadline "$deadline")
    step "warmlint verify ${args[*]}"
    local name=verify${tag:+-$tag}-$n
    "$PY" -m warmlint.cli verify "${args[@]}" --format json -o "$OUT/$name.json" \
      --cases-dir "$OUT/cases${tag:+-$tag}-$n" || rc=1
    "$PY" -c "import json,sys; from warmlint.verify import render_text, render_compare
d = json.load(open(sys.argv[1])); reps = d.get('reports', [d])
print('\n'.join(render_text(r) for r in reps))
print(render_compare(reps) if len(reps) > 1 else '')" "$OUT/$name.json" 2>&1
  done
  return $rc
}

if [ "${WARMLINT_FUNCTIONS_ONLY:-0}" != 1 ]; then
  main "$@" 2>&1 | tee -a "$OUT/gpu-log.txt"
  exit "${PIPESTATUS[0]}"
fi

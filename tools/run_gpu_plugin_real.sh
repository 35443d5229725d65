#!/usr/bin/env bash
# The plugin inside a complete vLLM (its CUDA wheel, compiled extensions included), on the
# GPU machine: tools/gpu_plugin_check.py over the unpacked wheel instead of .py files.
#
# The wheel (vLLM 0.26.0: 304 MB) is far over what one device call carries (64 MiB), so
# it travels in parts over consecutive calls to one warm machine, each stashed in /tmp:
#
#   here:   python tools/vllm_wheel_parts.py --wheel vllm-0.26.0-...whl --out .vllm-parts
#           python tools/gpu_bundle.py --release 0.26.0 --no-fix --out .gpu-bundle
#   call 1: carry [".gpu-bundle/payload", ".whl"]  bash tools/run_gpu_plugin_real.sh install
#   call k: carry [".vllm-parts/part-XX"]          bash tools/run_gpu_plugin_real.sh stash
#   last:   carry [".vllm-parts/part-XX", ".vllm-parts/SHA256SUMS"]
#                                                  bash tools/run_gpu_plugin_real.sh run
#
# `run` stashes its part too, checks every part against SHA256SUMS, unpacks the archive
# into /tmp/vllm-complete and writes $OUT/plugin-check-real.json.
set -uo pipefail
OUT=${OUT:-/tmp/warmlint-out}
STASH=/tmp/vllm-parts
DEST=/tmp/vllm-complete
mkdir -p "$OUT" "$STASH"

stash() {
  local part
  for part in .vllm-parts/part-*; do
    [ -f "$part" ] && cp "$part" "$STASH/" && echo "stashed ${part##*/}"
  done
  ls -la "$STASH"
}

case ${1:-} in
  install)
    WARMLINT_FUNCTIONS_ONLY=1 source tools/run_gpu_tests.sh
    install_wheels || exit 1
    # wheels the bundle lacks and this vLLM's runners import (0.26.0's v2 runner:
    # xgrammar, in a version that accepts the bundle's apache-tvm-ffi pin)
    if ls .whl/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl || exit 1
    fi
    echo "installed into $SITE" ;;
  stash)
    stash ;;
  run)
    stash
    (cd "$STASH" && sha256sum -c "$OLDPWD/.vllm-parts/SHA256SUMS") || exit 1
    if [ ! -f "$DEST/.unpacked" ]; then
      rm -rf "$DEST" && mkdir -p "$DEST" || exit 1
      cat "$STASH"/part-* | xz -dc | tar -xf - -C "$DEST" || exit 1
      touch "$DEST/.unpacked"
    fi
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    ls "$DEST" "$DEST"/vllm/*.so "$DEST"/vllm/vllm_flash_attn/*.so
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c "import torch; print('torch', torch.__version__)"
    PYTHONUNBUFFERED=1 python3 tools/gpu_plugin_check.py --release-dir "$DEST" \
      --json "$OUT/plugin-check-real.json" 2>&1 | tee "$OUT/plugin-check-real.txt" ;;
  *)
    echo "usage: $0 install|stash|run" >&2; exit 2 ;;
esac

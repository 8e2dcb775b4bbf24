#!/usr/bin/env bash
# The whole GPU check, as one script: `bash tools/gpu_check.sh [OUT_DIR]` on a CUDA machine with no
# internet. It runs `interp-bench --suite gpu` (random weights of Llama-3.1-8B's shape, bf16, 512-token
# prompts, 128 new tokens, one stream and 8 concurrent): vanilla vLLM with CUDA graphs, our
# generate-only backend, the hooked backend (eager mode) and `vllm-static` under CUDA graphs with
# resid_post captured at every layer, then the eager backend. Sized to finish within 8 minutes on
# one H200; the hard limit below stops it at 7.5 so the results are written either way.
#
# It needs vLLM (CUDA build) importable by `python3`; the packages of this repository are used
# from the source tree (no install). Without vLLM it says so and measures the eager backend only.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-gpu-results}}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$(ls -d packages/*/src | tr '\n' ':')${PYTHONPATH:-}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.csv" 2>&1
if ! "$PY" -c "import vllm" 2> "$OUT/vllm-import.txt"; then
    echo "vLLM is not importable here (see $OUT/vllm-import.txt): the vLLM rows will be missing"
fi
timeout 450 "$PY" -m interp_validator.bench.cli --suite gpu --out "$OUT" 2>&1 | tee "$OUT/log.txt"
echo "exit ${PIPESTATUS[0]}; results in $OUT/bench.md and $OUT/bench.json"

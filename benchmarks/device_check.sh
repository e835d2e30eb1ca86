#!/usr/bin/env bash
# A GPU machine's checks in one command: the CUDA tests, then each GPU benchmark of
# benchmarks/README.md ("GPU benchmarks") at the size its table records, every path timed as the
# best and spread of 5 samples of at least 1 s (`common.sampled`).
#
#   bash benchmarks/device_check.sh --dtype bfloat16            # tests + the bf16 benchmarks
#   bash benchmarks/device_check.sh --dtype float32 --no-tests  # the fp32 benchmarks
#   bash benchmarks/device_check.sh --quick                     # tiny sizes on the CPU
#
# Without --dtype both dtypes run (about twice as long). --quick checks the script itself. The
# log goes to $OUT/device_check.log (benchmarks/device_check.log without $OUT). Every step runs
# even if one fails; the exit status is the number of failed steps, each named at the end (64: a
# bad argument). In half precision some benchmarks exit 1 on rounding alone, over the 5e-2 they
# allow (recorded in benchmarks/README.md): read the failed step's numbers before calling it a
# regression. PYTHON picks the interpreter (default: .venv/bin/python if present, else python3).
set -uo pipefail
cd "$(dirname "$0")/.."

usage="allowed: --quick, --dtype bfloat16|float32, --no-tests"
quick=0 tests=1 dtypes=(bfloat16 float32)
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 tests=0 ;;
    --no-tests) tests=0 ;;
    --dtype)
      case "${2:-}" in
        bfloat16 | float32) dtypes=("$2"); shift ;;
        *) echo "device_check.sh: --dtype must be bfloat16 or float32, got '${2:-}'" >&2; exit 64 ;;
      esac ;;
    *) echo "device_check.sh: unknown argument '$1'; $usage" >&2; exit 64 ;;
  esac
  shift
done
if [ -x .venv/bin/python ]; then py=${PYTHON:-.venv/bin/python}; else py=${PYTHON:-python3}; fi
export PYTHONPATH="lib${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
log="${OUT:-benchmarks}/device_check.log"
mkdir -p "$(dirname "$log")"
: > "$log"

# Sizes: the GPU tables' (--quick: tiny). No array is empty, so "${a[@]}" is safe under set -u.
if [ "$quick" = 1 ]; then
  device=cpu
  timing=(--runs 2 --min-seconds 0.2)
  esp=(--sequences 4 --prefix 10 --suffix 10 --batch-size 4 --skip-isp)
  icl=(--questions 2 --documents 4 --new-tokens 3 --document-tokens 30)
  icl_large=(--questions 2 --documents 6 --new-tokens 4 --document-tokens 30)
  pad=(--prompts 1 --new-tokens 4 --prompt-tokens 40)
  forced=(--candidates 6 --new-tokens 4 --head-tokens 40 --canary-tokens 20 --tail-tokens 10)
  cid=(--contexts 2 --lams 1.0 --context 40 --new 4 --fair-groups 0 --naive-new 2)
else
  device=cuda
  timing=(--runs 5 --min-seconds 1)
  esp=(--sequences 256 --batch-size 64 --skip-isp)
  icl=(--questions 4 --documents 24 --new-tokens 6)
  icl_large=(--questions 8 --documents 100 --new-tokens 16)
  pad=(--prompts 8 --new-tokens 64 --prompt-tokens 600)
  forced=(--candidates 34 --new-tokens 12 --batch-rows 96)
  cid=(--contexts 32 --context 512 --new 50)
fi
shape=(--model smollm2-135m-shape --device "$device")
failed=()

step() {  # step TITLE COMMAND...: run it, append its output to the log, name it if it fails
  local title=$1
  shift
  { echo; echo "## $title"; echo "\$ $*"; } | tee -a "$log"
  local started=$SECONDS
  "$@" 2>&1 | grep -v "UserWarning\|warnings.warn" | tee -a "$log"
  local status=${PIPESTATUS[0]}
  echo "(exit $status, $((SECONDS - started)) s)" | tee -a "$log"
  [ "$status" = 0 ] || failed+=("$title (exit $status)")
}

step "machine" "$py" -c "import torch, transformers; print(torch.__version__, \
transformers.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
if [ "$tests" = 1 ]; then
  step "CUDA tests" "$py" -m pytest -q -p no:cacheprovider tests/test_cuda.py
fi
for dtype in "${dtypes[@]}"; do
  step "ESP scoring vs a bare forward, $dtype" \
    "$py" benchmarks/bench_esp.py "${shape[@]}" --dtype "$dtype" "${esp[@]}" "${timing[@]}"
  step "shared-prefix DP-ICL vs the shared decoder, $dtype" \
    "$py" benchmarks/bench_dp_icl_shared.py "${shape[@]}" --dtype "$dtype" "${icl[@]}" \
    "${timing[@]}"
  step "PAD's overhead and sweeps, $dtype" \
    "$py" benchmarks/bench_pad.py "${shape[@]}" --dtype "$dtype" "${pad[@]}" "${timing[@]}"
  step "the audit's forced decoding, $dtype" \
    "$py" benchmarks/bench_audit_forced.py "${shape[@]}" --dtype "$dtype" "${forced[@]}" \
    "${timing[@]}"
  step "CID vs HF generate, $dtype" \
    "$py" benchmarks/bench_cid.py "${shape[@]}" --dtype "$dtype" "${cid[@]}" "${timing[@]}"
  if [ "$dtype" = bfloat16 ]; then
    step "shared-prefix DP-ICL at 8 questions x 101 streams, bfloat16" \
      "$py" benchmarks/bench_dp_icl_shared.py "${shape[@]}" --dtype bfloat16 "${icl_large[@]}" \
      "${timing[@]}"
  fi
done
{
  echo
  echo "device_check: ${#failed[@]} step(s) failed; log in $log"
  for title in ${failed[@]+"${failed[@]}"}; do echo "  failed: $title"; done
} | tee -a "$log"
exit "${#failed[@]}"

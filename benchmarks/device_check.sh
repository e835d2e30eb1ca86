#!/usr/bin/env bash
# The GPU checks of one device session as one command: the CUDA tests, then each GPU benchmark of
# benchmarks/README.md ("GPU benchmarks") at its recorded size in bfloat16 and float32, every path
# timed as the best and spread of 5 samples of at least 1 s (`common.sampled`). Sized for one
# 10-minute device call (an estimate: not yet run on a GPU). Every step runs even if one fails;
# the exit status is the number that failed.
#
#   bash benchmarks/device_check.sh            # on the GPU machine; log in $OUT (or benchmarks/)
#   bash benchmarks/device_check.sh --quick    # tiny sizes on the CPU: checks the script itself
#
# PYTHON picks the interpreter (default: .venv/bin/python if present, else python3).
set -uo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *) echo "device_check.sh: unknown argument '$1'; allowed: --quick" >&2; exit 2 ;;
esac
if [ -x .venv/bin/python ]; then py=${PYTHON:-.venv/bin/python}; else py=${PYTHON:-python3}; fi
export PYTHONPATH="lib${PYTHONPATH:+:$PYTHONPATH}"
log="${OUT:-benchmarks}/device_check.log"
mkdir -p "$(dirname "$log")"
: > "$log"

if [ "$quick" = 1 ]; then
  device=cpu
  timing=(--runs 2 --min-seconds 0.2)
  pad=(--prompts 1 --new-tokens 4 --prompt-tokens 40)
  icl=(--questions 2 --documents 4 --new-tokens 3 --document-tokens 30)
  icl_large=(--questions 2 --documents 6 --new-tokens 4 --document-tokens 30)
  forced=(--candidates 6 --new-tokens 4 --head-tokens 40 --canary-tokens 20 --tail-tokens 10)
  esp=(--sequences 4 --prefix 10 --suffix 10 --batch-size 4 --skip-isp)
  cid=(--contexts 2 --lams 1.0 --context 40 --new 4 --fair-groups 0 --naive-new 2)
else
  device=cuda
  timing=(--runs 5 --min-seconds 1)
  pad=()                                   # 4 prompts x 16 defenses, 400 + 32 tokens
  icl=()                                   # 4 questions x 2 settings x 25 streams, 6 tokens
  icl_large=(--questions 8 --documents 100 --new-tokens 16)
  forced=()                                # 34 candidates, 96 rows
  esp=(--skip-isp)
  cid=(--contexts 32 --context 512 --new 50)
fi
shape=(--model smollm2-135m-shape --device "$device")
failed=0

step() {  # step TITLE COMMAND...: run it, append its output to the log, count a failure
  local title=$1
  shift
  { echo; echo "## $title"; echo "\$ $*"; } | tee -a "$log"
  local started=$SECONDS
  "$@" 2>&1 | grep -v "UserWarning\|warnings.warn" | tee -a "$log"
  local status=${PIPESTATUS[0]}
  echo "(exit $status, $((SECONDS - started)) s)" | tee -a "$log"
  [ "$status" = 0 ] || failed=$((failed + 1))
}

step "machine" "$py" -c "import torch, transformers; print(torch.__version__, \
transformers.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
if [ "$quick" = 0 ]; then
  step "CUDA tests" "$py" -m pytest -q -p no:cacheprovider tests/test_cuda.py
fi
for dtype in bfloat16 float32; do
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
done
step "shared-prefix DP-ICL at 8 questions x 101 streams, bfloat16" \
  "$py" benchmarks/bench_dp_icl_shared.py "${shape[@]}" --dtype bfloat16 "${icl_large[@]}" \
  "${timing[@]}"
echo "device_check: $failed step(s) failed; log in $log"
exit "$failed"

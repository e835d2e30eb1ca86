#!/usr/bin/env bash
# S3 under another machine's floats: rerun S3's stages (the classifier policy's fine-tune, the 56
# fine-tunes, the attack) and the claims with MKL's compatible code path and ATen's AVX2 kernels
# (other reduction orders than this machine's defaults, the same code and params), then list
# every committed metric that moved, claim verdicts among them (`privleak.pipeline.verify`).
# The committed outputs are restored afterwards (`dvc checkout` from the lock at HEAD).
#
#   bash benchmarks/float_perturbation.sh > benchmarks/runs/<date>-<commit>-s3-floats.txt
#
# About 11 minutes on 2 cores. Needs a workspace whose outputs match HEAD's dvc.lock.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if ! git diff --quiet HEAD -- dvc.lock metrics params.yaml; then
  echo "float_perturbation: dvc.lock, metrics/ or params.yaml differ from HEAD; commit first" >&2
  exit 2
fi
python -c "import torch; print('default kernels:', torch.backends.cpu.get_cpu_capability())"
export MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=avx2
python -c "import torch; print('perturbed kernels:', torch.backends.cpu.get_cpu_capability(), \
'+ MKL_CBWR=COMPATIBLE')"
restore() { git checkout -- dvc.lock metrics && dvc checkout -q --force > /dev/null; }
trap restore EXIT
for stage in s3_prepare s3_train s3_attack render_s3 render_claims; do
  dvc repro -f -s "$stage" > /dev/null || { echo "float_perturbation: $stage failed" >&2; break; }
done
python -m privleak.pipeline.verify
status=$?
unset MKL_CBWR ATEN_CPU_CAPABILITY
echo "verify exit status under perturbed floats: $status (1: something moved)"
exit $status

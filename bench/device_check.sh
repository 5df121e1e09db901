#!/usr/bin/env bash
# The one GPU check of the engine (issue 26, item 7): any session lent a device machine runs it in one call.
#
#   bash ../shared/tools/device_bundle.sh                      # once, on the CPU machine (packs data + wheels)
#   run: carry [".device-bundle"], command:
#   source .device-bundle/prelude.sh && bash bench/device_check.sh
#
# 1. the engine's test files on CUDA (device=auto picks it), verbose, without the page, browser and Ray files
#    (they test the page and the cluster, not the device); every result lands in the log;
# 2. the benches on the device, each printing ratios measured in one process: scattering (the engine's against
#    kymatio's when installed), the model batch (16 models against one), the real-data presets phase by phase
#    (bench_presets.py: load, scattering (cold: a fresh home), calibration, training, evaluation, accounting), and
#    the sweep (5 target epsilons x 3 seeds of the Fashion-MNIST preset: 15 runs in one model batch).
# Logs go under $OUT when it is set (the device tool brings that folder back), else under ./device-logs.
# Budget: about 8 minutes on one H100 after the prelude; each step has its own timeout so a hang costs one step,
# and the timeouts add up to under the device tool's 10 minutes a command.
set -uo pipefail
out=${OUT:-device-logs}
mkdir -p "$out"
python=${PYTHON:-python3}
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "nvidia-smi: none"
  $python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
} > "$out/device.txt" 2>&1

step() {  # step NAME SECONDS COMMAND...: run with a timeout, log to $out/NAME.log, note its exit code and time
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
}

# the engine's test files: those that drive no page (AppTest), browser (playwright) or Ray cluster
engine_tests=$(grep -L -E "AppTest|playwright|RayExecutor|import ray|ray.cluster_utils|--executor" tests/test_*.py)
data=${PRIVENGINE_DATA:-../shared/data}
home=$(mktemp -d)  # fresh for the presets: the first one computes the scattering (cold), the rest read it
step tests 240 $python -m pytest -v -p no:cacheprovider $engine_tests
step bench_scattering 45 $python bench/bench_scattering.py --device cuda --images 60000 --data-root "$data"
step bench_model_batch 45 $python bench/bench_model_batch.py --device cuda --k 16 --steps 20
# cold (the scattering computed on the GPU), then warm (cached): the issue's <= 10 s / <= 5 s rows
step bench_presets_cold 90 env PRIVENGINE_HOME="$home" $python bench/bench_presets.py --device cuda --data-root "$data"
step bench_presets_warm 60 env PRIVENGINE_HOME="$home" $python bench/bench_presets.py --device cuda --data-root "$data" \
  --presets dpsgd:fmnist-scatter-eps3,dpsgd:mnist-scatter-mlp-eps3
step sweep_fmnist 100 env PRIVENGINE_HOME="$home" $python -m privengine sweep dpsgd --preset fmnist-scatter-eps3 \
  --vary target_epsilon=0.5,1,2,4,8 --seeds 3 --device cuda --data-root "$data" --json
cat "$out/summary.txt"

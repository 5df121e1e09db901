#!/usr/bin/env bash
# The one GPU check of the engine (issue 26, item 7): any session lent a device machine runs it in one call.
#
#   bash ../shared/tools/device_bundle.sh                      # once, on the CPU machine (packs data + wheels)
#   run: carry [".device-bundle"], command:
#   source .device-bundle/prelude.sh && bash bench/device_check.sh
#
# Steps (all by default; STEPS="tests bench_scattering ..." runs some, in the order below):
#   tests               the engine's test files on CUDA (device=auto picks it), verbose, without the page, browser
#                       and Ray files (they test the page and the cluster, not the device); every result lands in the
#                       log. With pytest-xdist installed (the device image has it) TEST_WORKERS processes (default 8)
#                       of PRIVENGINE_TORCH_THREADS=2 CPU threads each; TESTS="file::name ..." narrows the selection.
#   bench_scattering    the engine's scattering against kymatio's (when installed) on the 60 000 MNIST images
#   bench_model_batch   16 models against one (the model batch)
#   bench_presets_cold  the real-data presets phase by phase, the scattering computed on the GPU (a fresh home)
#   bench_presets_warm  the two DP-SGD presets again, the scattering cached: the issue's <= 10 s / <= 5 s rows
#                       (BENCH_PROFILE=N adds each preset's N hottest host functions: bench_presets.py --profile N)
#   cli_presets_warm    each of the three presets as a user runs it, `python -m privengine run ...` in a new process
#                       (its imports and device start included), the scattering cached: wall seconds per preset
#   sweep_fmnist        the sweep: 5 target epsilons x 3 seeds of the Fashion-MNIST preset, one model batch
# Logs go under $OUT when it is set (the device tool brings back 8 files: summary.txt and one log per step), else
# under ./device-logs. Each step has its own timeout (STEP_LIMIT_<name> overrides it), so a hang costs one step;
# the defaults add up to under the device tool's 10 minutes a command.
set -uo pipefail
out=${OUT:-device-logs}
mkdir -p "$out"
python=${PYTHON:-python3}
steps=${STEPS:-tests bench_scattering bench_model_batch bench_presets_cold bench_presets_warm cli_presets_warm \
  sweep_fmnist}
data=${PRIVENGINE_DATA:-../shared/data}
home=${BENCH_HOME:-$(mktemp -d)}  # fresh for the presets: the cold one computes the scattering, the rest read it
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "nvidia-smi: none"
  $python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
  echo "steps: $steps"
} > "$out/summary.txt" 2>&1

step() {  # step NAME SECONDS COMMAND...: run with a timeout, log to $out/NAME.log, note its exit code and time
  local name=$1 limit_var="STEP_LIMIT_$1" limit; shift
  limit=${!limit_var:-$1}; shift
  [[ " $steps " == *" $name "* ]] || return 0
  local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - t0)) s (limit $limit s)" | tee -a "$out/summary.txt"
}

# the engine's test files: those that drive no page (AppTest), browser (playwright) or Ray cluster
tests=${TESTS:-$(grep -L -E "AppTest|playwright|RayExecutor|import ray|ray.cluster_utils|--executor" tests/test_*.py)}
parallel=()
if $python -c "import xdist" 2>/dev/null; then parallel=(-n "${TEST_WORKERS:-8}"); fi
step tests 200 env PRIVENGINE_TORCH_THREADS=2 $python -m pytest -v -p no:cacheprovider --timeout 150 -rfE \
  --tb=short --durations 25 "${parallel[@]}" $tests
step bench_scattering 45 $python bench/bench_scattering.py --device cuda --images 60000 --data-root "$data"
step bench_model_batch 45 $python bench/bench_model_batch.py --device cuda --k 16 --steps 20
step bench_presets_cold 100 env PRIVENGINE_HOME="$home" $python bench/bench_presets.py --device cuda --data-root "$data"
step bench_presets_warm 60 env PRIVENGINE_HOME="$home" $python bench/bench_presets.py --device cuda --data-root "$data" \
  --presets dpsgd:fmnist-scatter-eps3,dpsgd:mnist-scatter-mlp-eps3 ${BENCH_PROFILE:+--profile "$BENCH_PROFILE"}
cli_presets() {  # each preset in its own process, as a user runs it; the wall time of each
  for preset in dpsgd:fmnist-scatter-eps3 dpsgd:mnist-scatter-mlp-eps3 pate:mnist-confident-gnmax; do
    local t0
    t0=$(date +%s%N)
    PRIVENGINE_HOME="$home" $python -m privengine run "${preset%%:*}" --preset "${preset#*:}" --device cuda \
      --data-root "$data" --json > /dev/null || echo "$preset: failed"
    echo "$preset: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall (python -m privengine run, warm cache)"
  done
}
export -f cli_presets
export python home data
step cli_presets_warm 90 bash -c cli_presets
step sweep_fmnist 100 env PRIVENGINE_HOME="$home" $python -m privengine sweep dpsgd --preset fmnist-scatter-eps3 \
  --vary target_epsilon=0.5,1,2,4,8 --seeds 3 --device cuda --data-root "$data" --json
cat "$out/summary.txt"

#!/usr/bin/env bash
# The one GPU check of the engine (issue 26, item 7): any session lent a device machine runs it in one call.
#
#   bash ../shared/tools/device_bundle.sh && bash bench/device_extras.sh   # once, on the CPU machine (data, wheels,
#                                                                            # Streamlit; under the 64 MiB a call carries)
#   run: carry [".device-bundle"], command:
#   source .device-bundle/prelude.sh && bash bench/device_check.sh
#
# Steps (all by default, in this order; STEPS="tests sweep_fmnist ..." runs some):
#   bench_presets_cold  the real-data presets phase by phase, the scattering computed on the GPU (a fresh home);
#                       COLD_PRESETS names them (default the Fashion-MNIST one of issue 39; "dpsgd:fmnist-scatter-eps3,
#                       dpsgd:mnist-scatter-mlp-eps3,pate:mnist-confident-gnmax" for issue 26's three)
#   bench_presets_warm  the Fashion-MNIST preset again, the scattering cached (issue 39 row 1: <= 5 s), then once
#                       more under cProfile with its 25 hottest host functions (where the time goes)
#   cli_presets_warm    each of CLI_PRESETS (default the Fashion-MNIST one) as a user runs it, `python -m privengine
#                       run ...` in a new process, the scattering cached: wall seconds per preset (row 2: <= 8 s); then
#                       one -X importtime of it
#   sweep_fmnist        the frontier: 5 target epsilons x SWEEP_SEEDS seeds (default 20: 100 points, row 6 <= 60 s)
#                       of the Fashion-MNIST preset, a new process to JSON
#   membership_fmnist   the fmnist-membership preset, then `audit membership` with 64 reference models (row 4);
#                       membership_one_pass (after the tests) the same attack with every model of a side in one pass
#   dashboard_cuda      tests/test_dashboard_device.py: AppTest launches the Fashion-MNIST preset on CUDA (row 3)
#   bench_cnn           bench/bench_cnn_shaped_noise.py: shaped noise with a CNN against isotropic and Opacus (row 5)
#   bench_scattering    the engine's scattering against kymatio's (when installed) on the 60 000 MNIST images
#   bench_model_batch   16 models against one (the model batch)
#   tests               the engine's test files on CUDA (device=auto picks it), verbose, without the page, browser
#                       and Ray files (they test the page and the cluster, not the device); every result lands in the
#                       log. With pytest-xdist installed (the device image has it) TEST_WORKERS processes (default 12)
#                       of PRIVENGINE_TORCH_THREADS=1 CPU thread each; TESTS="file::name ..." narrows the selection.
# The device tool brings back at most 8 files: $OUT gets summary.txt (a line per step) and logs.tgz (one log per
# step, re-packed after each step, so a step killed by the call's limit loses only its own log); the last lines of
# each log also go to stdout. Logs go under $OUT when it is set, else under ./device-logs. Each step has its own
# timeout (STEP_LIMIT_<name> overrides it) and no step runs past DEADLINE_S seconds from the start (default 560),
# so a hang costs one step and the call ends inside the device tool's 10 minutes a command.
set -uo pipefail
out=${OUT:-device-logs}
logs=$(mktemp -d)
mkdir -p "$out"
python=${PYTHON:-python3}
steps=${STEPS:-bench_presets_cold bench_presets_warm cli_presets_warm sweep_fmnist membership_fmnist dashboard_cuda \
  bench_cnn tests membership_one_pass}
data=${PRIVENGINE_DATA:-../shared/data}
deadline=$((SECONDS + ${DEADLINE_S:-560}))
home=${BENCH_HOME:-$(mktemp -d)}  # fresh for the presets: the cold one computes the scattering, the rest read it
fmnist=dpsgd:fmnist-scatter-eps3
{
  date -u
  # The commit of the code that runs: the one device_extras.sh wrote into the bundle (the device's copy of .git can be
  # the session's first commit, older than the checkout it runs, so its HEAD would name the wrong code)
  if [[ -f .device-bundle/commit ]]; then cat .device-bundle/commit; else echo "commit: ${DEVICE_COMMIT:-unknown}"; fi
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "nvidia-smi: none"
  $python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
  echo "steps: $steps"
} > "$out/summary.txt" 2>&1

step() {  # step NAME SECONDS COMMAND...: run with a timeout, log to $logs/NAME.log, note its exit code and time
  local name=$1 limit_var="STEP_LIMIT_$1" limit left; shift
  limit=${!limit_var:-$1}; shift
  [[ " $steps " == *" $name "* ]] || return 0
  left=$((deadline - SECONDS))
  if ((left < 10)); then echo "$name: skipped, the call's deadline is near" | tee -a "$out/summary.txt"; return 0; fi
  ((limit > left)) && limit=$left
  local t0=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - t0)) s (limit $limit s)" | tee -a "$out/summary.txt"
  tail -n 6 "$logs/$name.log"
  tar -czf "$out/logs.tgz" -C "$logs" .
}

step bench_presets_cold 90 env PRIVENGINE_HOME="$home" $python bench/bench_presets.py --device cuda --data-root "$data" \
  --presets "${COLD_PRESETS:-$fmnist}"
warm_presets() {  # the Fashion-MNIST preset warm, then (BENCH_PROFILE=N) again under the profiler
  PRIVENGINE_HOME="$home" $python bench/bench_presets.py --device cuda --data-root "$data" --presets $fmnist
  [[ -z ${BENCH_PROFILE:-} ]] || PRIVENGINE_HOME="$home" $python bench/bench_presets.py --device cuda --data-root "$data" \
    --presets $fmnist --profile "$BENCH_PROFILE"
}
cli_presets() {  # each preset in its own process, as a user runs it; the wall time of each
  for preset in ${CLI_PRESETS:-$fmnist}; do
    local t0
    t0=$(date +%s%N)
    PRIVENGINE_HOME="$home" $python -m privengine run "${preset%%:*}" --preset "${preset#*:}" --device cuda \
      --data-root "$data" --json > /dev/null || echo "$preset: failed"
    echo "$preset: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall (python -m privengine run, warm cache)"
  done
  [[ -z ${IMPORTTIME:-} ]] || PRIVENGINE_HOME="$home" $python -X importtime -m privengine run dpsgd \
    --preset fmnist-scatter-eps3 --device cuda --data-root "$data" --json 2>&1 >/dev/null | sort -t'|' -k2 -n | tail -n 25
}
membership() {  # the attack's target, then the attack with 64 reference models; the wall time of each
  local t0 id
  t0=$(date +%s%N)
  id=$(PRIVENGINE_HOME="$home" $python -m privengine run dpsgd --preset fmnist-membership --device cuda \
    --data-root "$data" --json | $python -c "import json, sys; print(json.load(sys.stdin)['id'])") || return 1
  echo "target run $id: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall"
  t0=$(date +%s%N)
  PRIVENGINE_HOME="$home" $python -m privengine audit membership --run "$id" --reference-models 64 --device cuda \
    --json || return 1
  echo
  echo "audit membership, 64 reference models: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall"
  echo "$id" > "$home/membership_target"
}
membership_one_pass() {  # the same attack with every model of a side in one model batch (the default: 8 at a time)
  local t0 id
  id=$(cat "$home/membership_target") || return 1
  t0=$(date +%s%N)
  PRIVENGINE_HOME="$home" $python -m privengine audit membership --run "$id" --reference-models 64 \
    --models-per-pass 0 --device cuda --json | $python -c "import json, sys; r = json.load(sys.stdin); \
print({k: r[k] for k in ('auc', 'seconds', 'reference_models')})" || return 1
  echo "audit membership --models-per-pass 0, 64 reference models in one pass: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall"
}
sweep() {  # the frontier, a new process to JSON; its wall time
  local t0
  t0=$(date +%s%N)
  PRIVENGINE_HOME="$home" $python -m privengine sweep dpsgd --preset fmnist-scatter-eps3 \
    --vary target_epsilon=0.5,1,2,4,8 --seeds "${SWEEP_SEEDS:-20}" --device cuda --data-root "$data" --json || return 1
  echo
  echo "sweep, 5 target epsilons x ${SWEEP_SEEDS:-20} seeds: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall"
  PRIVENGINE_HOME="$home" $python -m privengine runs --limit 1000 --json | $python -c "
import json, sys
runs = [r for r in json.load(sys.stdin) if r.get('finished_at') and r['created_at'] >= $((t0 / 1000000000))]
t0 = min(r['created_at'] for r in runs)
print('runs', len(runs), '| first start', round(min(r['started_at'] for r in runs) - t0, 1), 's after the first was '
      'stored | last end', round(max(r['finished_at'] for r in runs) - t0, 1), 's | elapsed per run (min / max)',
      round(min(r['elapsed_s'] for r in runs), 1), '/', round(max(r['elapsed_s'] for r in runs), 1), 's')"
}
export -f warm_presets cli_presets membership membership_one_pass sweep
export python home data fmnist
step bench_presets_warm 60 bash -c warm_presets
step cli_presets_warm 90 bash -c cli_presets
step sweep_fmnist 120 bash -c sweep
step membership_fmnist 120 bash -c membership
step dashboard_cuda 120 $python -m pytest -v -p no:cacheprovider -n 0 -rfEs --tb=short tests/test_dashboard_device.py
step bench_cnn 75 $python bench/bench_cnn_shaped_noise.py --device cuda
step bench_scattering 45 $python bench/bench_scattering.py --device cuda --images 60000 --data-root "$data"
step bench_model_batch 45 $python bench/bench_model_batch.py --device cuda --k 16 --steps 20

# the engine's test files: those that drive no page (AppTest), browser (playwright) or Ray cluster, nor export to
# MLflow (the device image has no mlflow; the bundle does not carry it); with Streamlit importable (the bundle's
# extras, bench/device_extras.sh) the page tests of the presets run too, and without it they fail
tests=${TESTS:-$(grep -L -E "AppTest|playwright|RayExecutor|import ray|ray.cluster_utils|--executor|mlflow" tests/test_*.py)}
parallel=()
if $python -c "import xdist" 2>/dev/null; then parallel=(-n "${TEST_WORKERS:-12}"); fi
step tests 240 env PRIVENGINE_TORCH_THREADS=1 $python -m pytest -v -p no:cacheprovider --timeout 150 -rfE \
  --tb=short --durations 25 "${parallel[@]}" $tests
step membership_one_pass 60 bash -c membership_one_pass
cat "$out/summary.txt"

#!/usr/bin/env bash
# On a GPU node: builds deep500 against the node's PyTorch (scripts/build-with-kit.sh, from a kit
# made elsewhere by scripts/make-build-kit.sh) and checks the torch executor on cuda:0
# (docs/building.md#building-on-a-gpu-node-against-its-libtorch). Steps, in order:
#   build   d5, the torch executor's tests and its benchmark, NCCL's test, into BUILD_DIR
#   test    d5 info (its libtorch line must say "built with CUDA") and the torch executor's tests:
#           TorchOnCuda validates training steps and inference on the GPU against the reference,
#           counts the copies, and checks that --math strict keeps TF32 out of cuDNN; then NCCL's
#           collectives on one rank (NcclOnGpu, with the wheel's NCCL)
#   graphs  CUDA graphs (docs/cuda-graphs.md): d5_test_cuda's CudaGraphs and CudaExecutor tests
#           (replayed LeNet-5 training steps against the same steps without graphs), d5 net
#           lenet5 --cuda-graphs validated against the reference, ResNet-50's training step at
#           batch 64 with and without --cuda-graphs, and d5_bench_cuda_graphs (LeNet-5, ResNet-20)
#   net     d5 net --backend torch --device cuda:0 --mode train-step over the zoo networks of
#           Level 1 (validated against the reference, steady-state copies, throughput), and
#           LeNet-5 trained on MNIST to 0.97 with d5 train (when MNIST_DIR holds MNIST's test split)
#   bench   FrameworkOverhead on the GPU: d5_bench_torch_executor, ResNet-50 at batch 64
#   dist    with a kit made with --mpi: two ranks sharing the GPU (mpirun from the kit): the
#           distributed schemes with the cuda executor's tensors through host staging, NCCL's and
#           the CUDA-aware MPI's refusals (d5_test_lv3_mpi), and d5 train --backend cuda --dist dsgd
#           on MNIST to 0.97, recording the communicator chosen
#
# usage: scripts/check-torch-on-gpu.sh KIT_DIR OUT_DIR [STEP,...]   (default: every step)
# environment: BUILD_DIR (default build-gpu), MNIST_DIR (default ../shared/data/mnist),
#              D5_TORCH_PREFIX, D5_CUDNN_ROOT (scripts/build-with-kit.sh); and for a rehearsal on
#              a machine without a GPU: DEVICE (default cuda:0; cpu drops the CUDA requirement),
#              NET_MODELS (the zoo networks, space-separated), BENCH_ARGS (the benchmark's workload)
# Each step's output goes to OUT_DIR/STEP.log and its results to OUT_DIR; the last lines printed
# say which steps passed. Exit 1 when a step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 2 ]]; then
  sed -n '2,29p' "$0" >&2
  exit 2
fi
kit=$1 out=$(realpath -m "$2")
steps=${3:-build,test,graphs,net,bench,dist}
build=${BUILD_DIR:-build-gpu}
mnist=${MNIST_DIR:-../shared/data/mnist}
device=${DEVICE:-cuda:0}
models=${NET_MODELS:-lenet5 resnet20 resnet50 vgg11 mobilenet_v2 lstm transformer}
bench_args=${BENCH_ARGS:---networks resnet50 --resnet-batch 64}
mkdir -p "$out"
declare -A result=()

run_step() {  # run_step NAME FUNCTION: the function's output to OUT_DIR/NAME.log, timed
  local name=$1 start=$SECONDS
  [[ ,$steps, == *,$name,* ]] || return 0
  echo "== $name"
  if "$2" > "$out/$name.log" 2>&1; then result[$name]="passed"; else result[$name]="FAILED (exit $?)"; fi
  result[$name]+=" in $((SECONDS - start)) s"
  tail -n 15 "$out/$name.log"
}

step_build() {
  local targets=(d5 d5_test_torch_executor d5_bench_torch_executor d5_test_lv3_nccl)
  [[ -x $kit/usr/bin/mpicxx.openmpi ]] && targets+=(d5_test_lv3_mpi)
  # the CUDA backend's tests exist where the build found a CUDA toolkit with cuDNN
  if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then targets+=(d5_test_cuda d5_bench_cuda_graphs); fi
  scripts/build-with-kit.sh "$kit" "$build" "${targets[@]}"
}

step_test() {
  source "$build/kit-env.sh"
  "$build/bin/d5" info || return 1
  if [[ $device != cpu ]] && ! "$build/bin/d5" info | grep -q 'built with CUDA'; then
    echo "the LibTorch linked has no CUDA"
    return 1
  fi
  "$build/bin/d5_test_torch_executor" --gtest_output="json:$out/torch-executor-tests.json" || return 1
  # NCCL on one rank (the build has no MPI); it skips, saying so, where the build found no NCCL.
  "$build/bin/d5_test_lv3_nccl" --gtest_output="json:$out/nccl-tests.json"
}

step_graphs() {
  source "$build/kit-env.sh"
  if [[ $device == cpu ]]; then
    echo "CUDA graphs need a GPU (DEVICE=cpu): not run"
    return 0
  fi
  if [[ ! -x $build/bin/d5_test_cuda ]]; then
    echo "this build has no CUDA backend (no CUDA toolkit with cuDNN found)"
    return 1
  fi
  "$build/bin/d5_test_cuda" --gtest_filter='CudaGraphs.*:CudaExecutor.*' \
    --gtest_output="json:$out/cuda-graph-tests.json" || return 1
  local failed=0 flag
  timeout 300 "$build/bin/d5" net lenet5 --backend cuda --cuda-graphs --mode train-step --batch 16 --min-runs 10 \
    --max-time 2 --format json -o "$out/graphs-lenet5.json" || { echo "exit $?"; failed=1; }
  for flag in "" --cuda-graphs; do
    # shellcheck disable=SC2086  # an empty flag is no argument
    timeout 300 "$build/bin/d5" net resnet50 --backend cuda --mode train-step --batch 64 --no-validate --resident-io \
      $flag --min-runs 10 --max-time 5 --format json -o "$out/graphs-resnet50${flag:+-graphs}.json" ||
      { echo "exit $?"; failed=1; }
  done
  "$build/bin/d5_bench_cuda_graphs" --models lenet5,resnet20 --batch 16 --rounds 10 --runs 10 || failed=1
  python3 - "$out"/graphs-*.json <<'PY'
import json, sys
for path in sys.argv[1:]:
    for c in json.load(open(path)).get("cases", []):
        print(" ", path.rsplit("/", 1)[-1], c.get("name"), c.get("state"), (c.get("detail") or "")[:300])
        print("   ", json.dumps(c.get("params", {}).get("cuda_graphs")))
PY
  return $failed
}

step_net() {
  source "$build/kit-env.sh"
  local failed=0 model
  # batch 4, as the f64 oracle's figures in docs/executors.md (batch normalization in training mode
  # needs more than one sample per channel)
  for model in $models; do
    echo "-- $model"
    timeout 300 "$build/bin/d5" net "$model" --backend torch --device "$device" --mode train-step --batch 4 --breakdown \
      --min-runs 5 --max-time 2 --format json -o "$out/net-$model.json" || { echo "exit $?"; failed=1; }
    [[ -f $out/net-$model.json ]] && python3 - "$out/net-$model.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r.get("cases", []):
    print(" ", c.get("name"), c.get("state"), (c.get("detail") or "")[:300])
    for m in c.get("metrics", []):
        if m["name"] in ("transfers", "device_peak_bytes", "framework_device_peak_bytes"):
            value = m["samples"][0] if m.get("available") else "unavailable: " + m.get("unavailable_reason", "")
            print("   ", m["name"], value, m.get("info", {}).get("allocator", ""))
PY
  done
  if [[ -f $mnist/t10k-images-idx3-ubyte.gz ]]; then
    echo "-- d5 train lenet5 on MNIST"
    "$build/bin/d5" train --model lenet5 --dataset mnist --data-dir "$mnist" --train-split test \
      --train-range 0:8000 --test-split test --test-range 8000:10000 --optimizer adam --lr 0.001 \
      --batch 32 --epochs 10 --target-accuracy 0.97 --backend torch --device "$device" || failed=1
  else
    echo "-- d5 train: no MNIST test split in $mnist; not run"
  fi
  return $failed
}

step_bench() {
  source "$build/kit-env.sh"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of arguments
  "$build/bin/d5_bench_torch_executor" --rounds 8 --round-seconds 1 --gradients adopt,accumulate \
    --device "$device" --json "$out/overhead.json" $bench_args
}

step_dist() {
  source "$build/kit-env.sh"
  if ! command -v mpirun >/dev/null || [[ ! -x $build/bin/d5_test_lv3_mpi ]]; then
    echo "no MPI in this build: make the kit with scripts/make-build-kit.sh --mpi"
    return 1
  fi
  local failed=0 backend=cuda
  [[ $device == cpu ]] && backend=reference
  # Open MPI refuses to start ranks as root unless told (a GPU node's container often runs as root).
  [[ $(id -u) == 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # Two ranks on the one GPU: the schemes stage the cuda executor's tensors through the host
  # (DeviceSchemes.RanksSharingOneGpuTrainThroughHostStaging), NCCL refuses ranks that share a GPU,
  # and a CUDA-aware MPI is used only where the library says it is one (CudaAwareMpi.*).
  timeout 600 mpirun -np 2 "$build/bin/d5_test_lv3_mpi" --gtest_filter='DeviceSchemes.*:CudaAwareMpi.*' \
    --gtest_output="json:$out/dist-tests.json" || failed=1
  if [[ -f $mnist/t10k-images-idx3-ubyte.gz ]]; then
    echo "-- mpirun -np 2 d5 train lenet5 --backend $backend --dist dsgd on MNIST"
    timeout 600 mpirun -np 2 "$build/bin/d5" train --model lenet5 --dataset mnist --data-dir "$mnist" \
      --train-split test --train-range 0:8000 --test-split test --test-range 8000:10000 --optimizer adam \
      --lr 0.001 --batch 32 --epochs 10 --target-accuracy 0.97 --backend "$backend" --dist dsgd \
      --format json -o "$out/dist-train.json" || failed=1
    [[ -f $out/dist-train.json ]] && python3 - "$out/dist-train.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cases"][0]
d = c["params"]["dist"]
print(" ", c["state"], (c.get("detail") or "")[:300])
print("  communicator", d["communicator"], "-", d["communicator_choice"])
print("  staging", c["extra"]["distributed"]["ranks"][0]["volume"].get("staging"))
PY
  else
    echo "-- d5 train --dist: no MNIST test split in $mnist; not run"
  fi
  return $failed
}

run_step build step_build
run_step test step_test
run_step graphs step_graphs
run_step net step_net
run_step bench step_bench
run_step dist step_dist

echo "== summary"
status=0
for name in build test net bench dist; do
  [[ -n ${result[$name]:-} ]] || continue
  echo "$name: ${result[$name]}"
  [[ ${result[$name]} == passed* ]] || status=1
done
exit $status

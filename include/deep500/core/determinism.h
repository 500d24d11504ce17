#pragma once
// Deterministic mode (d5 --deterministic, docs/reproducibility.md). Process-wide: OpenMP keeps its
// team sizes fixed (no dynamic adjustment), so every parallel loop partitions its work the same
// way and reductions over per-thread partials run in the same order. Per run, the executors get
// ExecutorOptions::deterministic (LibTorch's deterministic algorithms); seeds are fixed by the
// ExperimentSettings either way.
namespace d5 {

void set_deterministic(bool on);
bool deterministic();

}  // namespace d5

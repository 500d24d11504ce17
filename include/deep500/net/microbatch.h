#pragma once
// Level 1 graph transformation: micro-batching of convolutions (docs/microbatching.md), after
// Oyama et al.'s u-cuDNN as used in the Deep500 paper (section V-C).
//
// A convolution algorithm's workspace may grow with the batch (the reference backend's batched
// im2col does; cuDNN's fast algorithms do). Under a workspace limit the fastest algorithm may not
// fit the whole batch, yet fit a part of it. plan_microbatches benchmarks each convolution at
// candidate micro-batch sizes under the limit (the registry picks the fastest algorithm that fits
// at each size) and chooses, per convolution, the partition of the batch into micro-batches that
// minimizes the summed measured time, exactly, by dynamic programming over the candidate sizes:
//   T(0) = 0,  T(n) = min over candidates b <= n of  t(b) + T(n - b).
// The problem is separable per convolution (each call's workspace is bounded on its own, as with
// cuDNN's per-call limit), so a one-dimensional DP is exact and needs no ILP solver; an ILP only
// becomes necessary when one workspace budget is shared by several layers at once.
// apply_microbatches rewrites each planned Conv as Split (along the batch) -> one Conv per
// micro-batch -> Concat; outputs are unchanged.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deep500/net/network.h"

namespace d5 {

struct MicrobatchOptions {
  int64_t workspace_limit = -1;  // bytes per convolution call; required (>= 0)
  std::string backend = "reference";
  // Micro-batch sizes considered: "powers-of-two" (1, 2, 4, ... and the whole batch; u-cuDNN's
  // default policy) or "all" (every size 1..N: the DP is then exact over all partitions).
  std::string policy = "powers-of-two";
  double seconds_per_size = 0.2;  // measurement budget per candidate size
  int min_runs = 6;  // the fewest runs with a 95% CI of the median
  // Candidates are timed with these implementations (implementation_pins.h): with Conv pinned to
  // a fast algorithm, the plan finds the micro-batches that algorithm fits under the limit.
  std::map<std::string, std::string> pins = {};
};

struct ConvTiming {
  int64_t batch = 0;
  double median_s = 0;          // per call
  double ci_low_s = 0, ci_high_s = 0;  // 95% CI of the median; NaN when too few runs for one
  int64_t workspace_bytes = 0;  // of the algorithm that ran
  std::string implementation;
};

struct ConvMicrobatchPlan {
  std::string node;
  int64_t batch = 0;
  std::vector<int64_t> micro_batches;  // sums to batch; one entry {batch} means "leave as is"
  std::vector<ConvTiming> candidates;  // measured sizes
  double time_before_s = 0;            // the whole batch at once, under the limit
  double time_after_s = 0;             // sum over micro-batches of their measured times
  int64_t workspace_before = 0;
  int64_t workspace_after = 0;         // largest micro-batch workspace
  bool changed() const { return micro_batches.size() > 1; }
};

struct MicrobatchPlan {
  int64_t workspace_limit = 0;
  std::vector<ConvMicrobatchPlan> convs;
};

// The DP on its own: the multiset of sizes (largest first) from `times` (size -> seconds per call)
// summing to `batch` with the least total time; empty when no combination sums to batch.
std::vector<int64_t> optimal_partition(int64_t batch, const std::vector<std::pair<int64_t, double>>& times);

// Benchmarks every Conv of the network (batch = dimension 0 of its input). InvalidArgument when
// no algorithm fits even one image under the limit, naming the node and the smallest need.
MicrobatchPlan plan_microbatches(const Network& net, const MicrobatchOptions& options);

// Rewrites the planned convolutions; returns how many were split.
int apply_microbatches(Network& net, const MicrobatchPlan& plan);

}  // namespace d5

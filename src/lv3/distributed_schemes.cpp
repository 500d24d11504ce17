// The registry of distributed schemes (include/deep500/dist/distributed_schemes.h) and the shipped
// ones, each turning its settings into its own typed options.
#include "deep500/dist/distributed_schemes.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/core/registry.h"
#include "deep500/dist/distributed_optimizers.h"

namespace d5 {

namespace {

// A whole number from a setting; InvalidArgument otherwise (no silent truncation of 2.5 steps).
int64_t whole(const SchemeSettings& s, const std::string& name) {
  const double v = s.at(name);
  D5_CHECK_ARG(std::isfinite(v) && v == std::floor(v), "distributed option '{}' must be a whole number, not {}", name,
               v);
  return static_cast<int64_t>(v);
}

using Inner = std::unique_ptr<Optimizer>;
using Comm = std::shared_ptr<Communicator>;

void add_shipped_schemes(Registry<DistributedScheme>& r) {
  r.add("dsgd", "consistent decentralized: bucketed allreduce of gradients (--bucket-mb)",
        {{{"bucket_mb", "most MiB fused into one allreduce; 0: one allreduce per tensor", 25},
          {"fuse_kb", "only gradients smaller than this many KiB are packed into buckets",
           BucketPolicy::kDefaultFuseBelowBytes / 1024.0},
          {"overlap", "1: start buckets during backprop; 0: reduce after it", 1}},
         [](Inner inner, Comm comm, const SchemeSettings& s) -> std::unique_ptr<DistributedOptimizer> {
           ConsistentDecentralized::Options o;
           o.bucket_mb = s.at("bucket_mb");
           o.fuse_kb = s.at("fuse_kb");
           o.overlap = s.at("overlap") != 0;
           return std::make_unique<ConsistentDecentralized>(std::move(inner), std::move(comm), o);
         }});
  r.add("pssgd", "consistent centralized: synchronous parameter server at rank 0",
        {{{"root", "the parameter server's rank", 0}},
         [](Inner inner, Comm comm, const SchemeSettings& s) -> std::unique_ptr<DistributedOptimizer> {
           ConsistentCentralized::Options o;
           o.root = static_cast<int>(whole(s, "root"));
           return std::make_unique<ConsistentCentralized>(std::move(inner), std::move(comm), o);
         }});
  r.add("asgd", "inconsistent centralized: asynchronous parameter server at rank 0, no barrier",
        {{{"fixed_order", "1: serve workers in rank order, one push each per step (deterministic); 0: whichever "
           "pushes first", 0}},
         [](Inner inner, Comm comm, const SchemeSettings& s) -> std::unique_ptr<DistributedOptimizer> {
           InconsistentCentralized::Options o;
           o.fixed_order = s.at("fixed_order") != 0;
           return std::make_unique<InconsistentCentralized>(std::move(inner), std::move(comm), o);
         }});
  r.add("ssgd", "stale synchronous: gradients applied up to --staleness steps late",
        {{{"staleness", "updates may use gradients up to this many steps old", 0}},
         [](Inner inner, Comm comm, const SchemeSettings& s) -> std::unique_ptr<DistributedOptimizer> {
           return std::make_unique<StaleSynchronous>(std::move(inner), std::move(comm),
                                                     StaleSynchronous::Options{whole(s, "staleness")});
         }});
  r.add("mavg", "model averaging: parameters averaged every --avg-every steps",
        {{{"average_every", "local steps between parameter averages", 1}},
         [](Inner inner, Comm comm, const SchemeSettings& s) -> std::unique_ptr<DistributedOptimizer> {
           return std::make_unique<ModelAverage>(std::move(inner), std::move(comm),
                                                 ModelAverage::Options{whole(s, "average_every")});
         }});
  r.add("dpsgd", "consistent neighbours: parameters averaged with ring neighbours",
        {{}, [](Inner inner, Comm comm, const SchemeSettings&) -> std::unique_ptr<DistributedOptimizer> {
           return std::make_unique<ConsistentNeighbors>(std::move(inner), std::move(comm));
         }});
  r.add("sparse", "top-k sparsified allreduce with error feedback (--topk)",
        {{{"topk", "fraction of gradient elements each rank sends, in (0, 1]", 0.01}},
         [](Inner inner, Comm comm, const SchemeSettings& s) -> std::unique_ptr<DistributedOptimizer> {
           return std::make_unique<SparseAllreduce>(std::move(inner), std::move(comm),
                                                    SparseAllreduce::Options{s.at("topk")});
         }});
}

Registry<DistributedScheme>& schemes() {
  static Registry<DistributedScheme>* r = [] {
    auto* reg = new Registry<DistributedScheme>("distributed scheme");
    add_shipped_schemes(*reg);
    return reg;
  }();
  return *r;
}

}  // namespace

void register_distributed_scheme(const std::string& name, const std::string& description, DistributedScheme scheme) {
  D5_CHECK_ARG(static_cast<bool>(scheme.make), "distributed scheme '{}' has no factory", name);
  schemes().add(name, description, std::move(scheme));
}

std::vector<std::pair<std::string, std::string>> distributed_scheme_names() { return schemes().descriptions(); }

std::shared_ptr<const DistributedScheme> distributed_scheme(const std::string& name) { return schemes().get(name); }

SchemeSettings scheme_settings(const std::string& name, const SchemeSettings& given) {
  const auto scheme = distributed_scheme(name);
  SchemeSettings all;
  for (const auto& o : scheme->options) all[o.name] = o.default_value;
  for (const auto& [key, value] : given) {
    if (all.count(key)) {
      all[key] = value;
      continue;
    }
    std::vector<std::string> takers;
    for (const auto& e : schemes().entries())
      for (const auto& o : e->value.options)
        if (o.name == key) takers.push_back(e->name);
    D5_CHECK_ARG(!takers.empty(), "'{}' is not an option of any distributed scheme", key);
    D5_THROW(InvalidArgument, "distributed scheme '{}' takes no option '{}' (it is an option of {})", name, key,
             fmt::join(takers, ", "));
  }
  return all;
}

std::unique_ptr<DistributedOptimizer> make_distributed_optimizer(const std::string& name, const SchemeSettings& given,
                                                                 std::unique_ptr<Optimizer> inner,
                                                                 std::shared_ptr<Communicator> comm) {
  const SchemeSettings all = scheme_settings(name, given);
  return distributed_scheme(name)->make(std::move(inner), std::move(comm), all);
}

}  // namespace d5

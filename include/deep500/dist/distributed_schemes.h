#pragma once
// Level 3: distributed schemes by name (docs/distributed-optimizers.md). Each scheme declares its
// own options (name, meaning, default); make_distributed_optimizer fills the scheme's typed
// options from them and refuses an option the scheme does not take, naming the schemes that do.
// Users add schemes with register_distributed_scheme; `d5 train --dist` and recipes then know them.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deep500/dist/distributed_optimizer.h"

namespace d5 {

// Option values by name; booleans are 0 or 1, counts whole numbers.
using SchemeSettings = std::map<std::string, double>;

struct SchemeOption {
  std::string name;  // "staleness": as in SchemeSettings and the results' params.dist
  std::string help;  // one line
  double default_value = 0;
};

struct DistributedScheme {
  std::vector<SchemeOption> options;
  // Called with every option of the scheme set (defaults filled in).
  std::function<std::unique_ptr<DistributedOptimizer>(std::unique_ptr<Optimizer> inner,
                                                      std::shared_ptr<Communicator> comm, const SchemeSettings&)>
      make;
};

// Adds a scheme, or replaces the one of that name. The shipped ones: dsgd, pssgd, asgd, ssgd,
// mavg, dpsgd, sparse.
void register_distributed_scheme(const std::string& name, const std::string& description, DistributedScheme scheme);
std::vector<std::pair<std::string, std::string>> distributed_scheme_names();  // name, description
// InvalidArgument listing the schemes for an unknown name.
std::shared_ptr<const DistributedScheme> distributed_scheme(const std::string& name);

// The scheme's options: `given` over the defaults. InvalidArgument for an option the scheme does
// not take (naming the schemes that take it) or a name that is not an option of any scheme.
SchemeSettings scheme_settings(const std::string& scheme, const SchemeSettings& given);

// The scheme wrapping `inner`. InvalidArgument for an unknown scheme, an option it does not take
// or an out-of-range value.
std::unique_ptr<DistributedOptimizer> make_distributed_optimizer(const std::string& scheme,
                                                                 const SchemeSettings& given,
                                                                 std::unique_ptr<Optimizer> inner,
                                                                 std::shared_ptr<Communicator> comm);

}  // namespace d5

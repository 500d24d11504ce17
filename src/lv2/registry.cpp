// Name -> factory registries for dataset formats and optimizers, and Dataset's default label().
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/train/dataset.h"
#include "deep500/train/dataset_subset.h"
#include "deep500/train/optimizer.h"

namespace d5 {

namespace {

template <typename Factory>
struct Registry {
  struct Entry {
    std::string description;
    Factory factory;
  };
  std::mutex mutex;
  std::map<std::string, Entry> entries;

  void add(const std::string& name, const std::string& description, Factory factory) {
    std::lock_guard lock(mutex);
    entries[name] = Entry{description, std::move(factory)};
  }
  std::vector<std::pair<std::string, std::string>> list() {
    std::lock_guard lock(mutex);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [name, e] : entries) out.emplace_back(name, e.description);
    return out;
  }
  // InvalidArgument naming the known entries when `name` is not one of them.
  Factory find(const std::string& name, const char* what) {
    std::lock_guard lock(mutex);
    auto it = entries.find(name);
    if (it != entries.end()) return it->second.factory;
    std::vector<std::string> known;
    for (const auto& [n, e] : entries) known.push_back(n);
    throw InvalidArgument(fmt::format("unknown {} '{}' (known: {})", what, name,
                                      known.empty() ? "none registered" : fmt::format("{}", fmt::join(known, ", "))));
  }
};

Registry<DatasetFactory>& datasets() {
  static Registry<DatasetFactory> r;
  return r;
}
Registry<OptimizerFactory>& optimizers() {
  static Registry<OptimizerFactory> r;
  return r;
}

}  // namespace

int64_t Dataset::label(int64_t index) const {
  D5_CHECK_ARG(classes() > 0, "dataset '{}' has no class labels", name());
  const int64_t indices[] = {index};
  const Batch b = fetch(indices);
  auto it = b.find(kDataLabels);
  D5_CHECK(it != b.end(), Internal, "dataset '{}' has classes but fetch produced no '{}' tensor", name(),
           kDataLabels);
  return static_cast<int64_t>(it->second.get(0));
}

void register_dataset(const std::string& name, const std::string& description, DatasetFactory factory) {
  datasets().add(name, description, std::move(factory));
}
// range=BEGIN:END is taken here rather than by each format, so that every format has it.
std::unique_ptr<Dataset> open_dataset(const DatasetSpec& spec) {
  auto range = spec.options.find("range");
  if (range == spec.options.end()) return datasets().find(spec.name, "dataset format")(spec);
  DatasetSpec base_spec = spec;
  base_spec.options.erase("range");
  std::shared_ptr<const Dataset> base = datasets().find(spec.name, "dataset format")(base_spec);
  const IndexRange r = parse_index_range(range->second, base->size());
  return std::make_unique<SubsetDataset>(std::move(base), r);
}
std::vector<std::pair<std::string, std::string>> dataset_formats() { return datasets().list(); }

void register_optimizer(const std::string& name, const std::string& description, OptimizerFactory factory) {
  optimizers().add(name, description, std::move(factory));
}
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const Hyperparameters& hyper) {
  return optimizers().find(name, "optimizer")(hyper);
}
std::vector<std::pair<std::string, std::string>> optimizer_names() { return optimizers().list(); }

}  // namespace d5

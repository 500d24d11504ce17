// The registries of dataset formats and optimizers (core/registry.h), and Dataset's default label().
#include "deep500/core/registry.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_subset.h"
#include "deep500/train/optimizer.h"

namespace d5 {

namespace {

Registry<DatasetFactory>& datasets() {
  static Registry<DatasetFactory> r("dataset format", Registry<DatasetFactory>::Order::name);
  return r;
}
Registry<OptimizerFactory>& optimizers() {
  static Registry<OptimizerFactory> r("optimizer", Registry<OptimizerFactory>::Order::name);
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
  if (range == spec.options.end()) return (*datasets().get(spec.name))(spec);
  DatasetSpec base_spec = spec;
  base_spec.options.erase("range");
  std::shared_ptr<const Dataset> base = (*datasets().get(spec.name))(base_spec);
  const IndexRange r = parse_index_range(range->second, base->size());
  return std::make_unique<SubsetDataset>(std::move(base), r);
}
std::vector<std::pair<std::string, std::string>> dataset_formats() {
  return datasets().descriptions();
}

void register_optimizer(const std::string& name, const std::string& description, OptimizerFactory factory) {
  optimizers().add(name, description, std::move(factory));
}
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const Hyperparameters& hyper) {
  return (*optimizers().get(name))(hyper);
}
std::vector<std::pair<std::string, std::string>> optimizer_names() {
  return optimizers().descriptions();
}

}  // namespace d5

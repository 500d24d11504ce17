#pragma once
// The Python objects of Level 2 that more than one binding file handles: datasets, samplers and
// data loaders (train_binding.cpp, loader_binding.cpp).
#include <memory>
#include <string>

#include "deep500/train/data_loader.h"
#include "deep500/train/dataset.h"
#include "deep500/train/sampler.h"

namespace d5::python {

struct PyDataset {
  std::shared_ptr<Dataset> set;
};

struct PySampler {
  std::shared_ptr<Sampler> sampler;
  std::shared_ptr<Dataset> set;  // the sampler reads it
  std::string name;              // as make_sampler knows it, to make a copy
};

// A loader draws from a sampler of its own; declared in this order, the loader goes before the
// dataset it reads.
struct PyDataLoader {
  std::shared_ptr<Dataset> set;
  std::shared_ptr<DataLoader> loader;
  bool epoch_ended = false;  // the last next() found the epoch's end: the next iteration starts another
};

}  // namespace d5::python

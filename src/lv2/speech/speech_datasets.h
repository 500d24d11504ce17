#pragma once
// Internal: the speech datasets' factories, registered by register_builtin_datasets().
#include <memory>

#include "deep500/train/dataset.h"

namespace d5::speech {

std::unique_ptr<Dataset> open_spoken_words(const DatasetSpec& spec);
std::unique_ptr<Dataset> open_spoken_digits(const DatasetSpec& spec);

}  // namespace d5::speech

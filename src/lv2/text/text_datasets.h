#pragma once
// Internal: the text datasets' factories, registered by register_builtin_datasets().
#include <memory>

#include "deep500/train/dataset.h"

namespace d5::text {

std::unique_ptr<Dataset> open_wordnet_glosses(const DatasetSpec& spec);
std::unique_ptr<Dataset> open_number_words(const DatasetSpec& spec);

}  // namespace d5::text

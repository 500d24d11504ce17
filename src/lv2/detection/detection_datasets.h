#pragma once
// Internal: the detection datasets' factories, registered by register_builtin_datasets().
#include <memory>

#include "deep500/train/dataset.h"

namespace d5::detection {

// A detection sample's boxes: f32 [max objects, 4], each row x1, y1, x2, y2 in pixels, the
// coordinates detection_metrics.h reads. Its "labels" are i64 [max objects], in the same order.
inline constexpr const char* kDataBoxes = "boxes";

std::unique_ptr<Dataset> open_mnist_scenes(const DatasetSpec& spec);

}  // namespace d5::detection

#pragma once
// Internal: the detection measures map, map50 and map75 (quality.h), made by make_quality_measure.
#include <memory>
#include <string>

#include "deep500/train/quality.h"

namespace d5 {

std::unique_ptr<QualityMeasure> make_detection_measure(const std::string& name, const QualitySettings& settings);

}  // namespace d5

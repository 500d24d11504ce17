#pragma once
// Level 2: accuracy metrics of training (docs/training.md).
//
// Both follow the Metric protocol: observe() accumulates predictions between begin() and end(),
// and end() records the fraction of correct top-1 predictions as one sample. TrainingAccuracy
// reads the logits a training step already computed; TestAccuracy is fed by the trainer's pass
// over the test set. Neither knows which network or dataset it measures.
#include <cstdint>
#include <string>

#include "deep500/metrics/metric.h"
#include "deep500/core/tensor.h"

namespace d5 {

// Top-1 hits among the first `rows` rows of logits [N, C] (f32) against labels [N] (i64 or i32);
// rows < 0 means all N. InvalidArgument for mismatched shapes, a row count above N or a label
// outside [0, C).
int64_t correct_predictions(const Tensor& logits, const Tensor& labels, int64_t rows = -1);

class AccuracyMetric : public Metric {
 public:
  std::string unit() const override { return "fraction"; }
  void begin() override { correct_ = total_ = 0; }
  void observe(const Tensor& logits, const Tensor& labels, int64_t rows = -1);
  // Records correct / total; nothing when nothing was observed since begin().
  void end() override;

 private:
  int64_t correct_ = 0, total_ = 0;
};

class TrainingAccuracy : public AccuracyMetric {
 public:
  std::string name() const override { return "training_accuracy"; }
};

class TestAccuracy : public AccuracyMetric {
 public:
  std::string name() const override { return "test_accuracy"; }
};

}  // namespace d5

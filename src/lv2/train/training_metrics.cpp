#include "deep500/train/training_metrics.h"

#include "deep500/core/error.h"

namespace d5 {

int64_t correct_predictions(const Tensor& logits, const Tensor& labels, int64_t rows) {
  D5_CHECK_ARG(logits.shape().rank() == 2 && logits.dtype() == DType::f32,
               "accuracy needs logits of shape [N, classes] in f32, got {}", logits.desc().to_string());
  const int64_t n = logits.shape()[0], classes = logits.shape()[1];
  D5_CHECK_ARG(labels.numel() == n && (labels.dtype() == DType::i64 || labels.dtype() == DType::i32),
               "accuracy needs {} integer labels for logits {}, got {}", n, logits.desc().to_string(),
               labels.desc().to_string());
  if (rows < 0) rows = n;
  D5_CHECK_ARG(rows <= n, "accuracy over {} rows of logits with {} rows", rows, n);
  const float* x = logits.data_as<float>();
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = static_cast<int64_t>(labels.get(r));
    D5_CHECK_ARG(label >= 0 && label < classes, "label {} of row {} is outside [0, {})", label, r, classes);
    // Ties go to the lowest class, as torch.argmax does.
    const float* row = x + r * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (row[c] > row[best]) best = c;
    }
    correct += best == label ? 1 : 0;
  }
  return correct;
}

void AccuracyMetric::observe(const Tensor& logits, const Tensor& labels, int64_t rows) {
  const int64_t counted = rows < 0 ? logits.shape()[0] : rows;
  correct_ += correct_predictions(logits, labels, rows);
  total_ += counted;
}

void AccuracyMetric::end() {
  if (total_ > 0) add_sample(static_cast<double>(correct_) / static_cast<double>(total_));
}

}  // namespace d5

#pragma once
// Level 2: quality measures of a trained network (docs/quality.md).
//
// A test pass hands every batch's prediction (the network output its loss head reads) and the
// batch's labels to the measures a run asked for; each keeps running sums and gives one value per
// pass. A measure never knows the network or the dataset, only the two tensors' layouts:
//
// - class scores, class axis last: logits [N, C] with labels [N] (a classifier) or logits
//   [N, T, C] with labels [N, T] (a token per position); labels are i64 or i32, and positions
//   labelled `ignore_index` (padding) are not counted;
// - regression: a prediction and an f32 target of one shape [N, ...];
// - CTC: per-step class scores [N, T, C] decoded greedily (the best class per step, repeats merged,
//   blanks removed) against label sequences [N, S] padded with `ignore_index`;
// - translation (bleu): class scores [N, T, C] whose best class per position, up to the first
//   `end_token`, is the hypothesis, against labels [N, T] ending with `end_token` (bleu.h);
// - detection (map, map50, map75): a single-shot detector's prediction [N, A, 4 + K] (per anchor
//   box offsets, then K class scores with the background first), decoded from the settings'
//   `anchors` [A, 4] and reduced by per-class non-maximum suppression, against the batch's labels
//   [N, M] and "boxes" [N, M, 4] (detection_metrics.h; docs/detection.md#measures). They read two
//   tensors of the batch, so they are observed through observe_batch only.
//
// Only the first `rows` of the N rows count: a padded last test batch has fewer real samples.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deep500/core/tensor.h"

namespace d5 {

// PyTorch's default for "no label at this position" (nn.CrossEntropyLoss's ignore_index).
inline constexpr int64_t kDefaultIgnoreIndex = -100;

class QualityMeasure {
 public:
  virtual ~QualityMeasure() = default;
  virtual std::string name() const = 0;  // as the user names it: "accuracy", "top5", "perplexity"
  virtual std::string unit() const = 0;  // "fraction" or "" (a plain number)
  virtual bool higher_is_better() const = 0;
  // The values the measure can take, [lowest, highest] (highest may be infinity): a target
  // outside them could never be met.
  virtual double lowest() const = 0;
  virtual double highest() const = 0;
  virtual void reset() = 0;
  // InvalidArgument when the tensors do not have the layout the measure reads, or a label is
  // outside [0, C) and not the ignore index.
  virtual void observe(const Tensor& prediction, const Tensor& labels, int64_t rows) = 0;
  // The same with every tensor of the batch by name (the trainer's call): a measure that reads
  // more than the "labels" overrides it. InvalidArgument naming a missing tensor.
  virtual void observe_batch(const Tensor& prediction, const std::map<std::string, Tensor>& batch, int64_t rows);
  // NaN when nothing was counted since reset() (no rows, or every position ignored).
  virtual double value() const = 0;
};

struct QualitySettings {
  int64_t ignore_index = kDefaultIgnoreIndex;
  int64_t blank = 0;  // the CTC blank class (cer)
  // word_perplexity: per class, whether it begins a word (Dataset::word_starts).
  std::vector<bool> word_starts = {};
  // bleu: the id that ends a sequence (Dataset::end_token); a hypothesis is read up to it.
  int64_t end_token = -1;
  // map, map50, map75: the detector's anchors, f32 [A, 4] (its constant "anchors").
  Tensor anchors = {};
};

// The measures by name, for help texts and errors: accuracy, top<k> (k >= 1, e.g. top5),
// exact_match, perplexity, word_perplexity, mse, mae, cer, bleu, map, map50, map75. word_perplexity is exp of the same
// summed negative log-likelihood as perplexity, divided by the words instead of the pieces: the
// labelled positions whose label begins a word, plus one per row whose first labelled piece
// continues a word that began before it. Observing it with settings without word_starts is an
// InvalidArgument.
std::vector<std::string> quality_measure_names();

// InvalidArgument naming the known measures for an unknown name.
std::unique_ptr<QualityMeasure> make_quality_measure(const std::string& name, const QualitySettings& settings = {});

}  // namespace d5

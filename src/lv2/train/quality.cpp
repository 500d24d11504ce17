// Quality measures over class scores (accuracy, top-k, exact match, perplexity), regression
// predictions (mse, mae), CTC outputs (cer) and translations (bleu); the layouts are in quality.h.
#include "deep500/train/quality.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"
#include "deep500/train/bleu.h"
#include "detection_quality.h"

namespace d5 {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double ratio(double num, double den) { return den > 0 ? num / den : kNaN; }

void check_rows(const std::string& measure, const Tensor& prediction, int64_t rows) {
  D5_CHECK_ARG(prediction.on_host(), "{}: the prediction is on {}; quality is measured on host tensors", measure,
               prediction.device().to_string());
  D5_CHECK_ARG(prediction.shape().rank() >= 1 && rows >= 0 && rows <= prediction.shape()[0],
               "{}: {} rows counted of a prediction shaped {}", measure, rows, prediction.shape().to_string());
}

// Measures over class scores, class axis last: every labelled position of the first `rows` rows
// is handed to position(); a row's positions are bracketed by begin_row / end_row.
class ClassScoreMeasure : public QualityMeasure {
 public:
  explicit ClassScoreMeasure(const QualitySettings& s) : ignore_(s.ignore_index) {}

  void observe(const Tensor& prediction, const Tensor& labels, int64_t rows) override {
    check_rows(name(), prediction, rows);
    const Shape& ps = prediction.shape();
    D5_CHECK_ARG(prediction.dtype() == DType::f32 && ps.rank() >= 2,
                 "{}: needs f32 class scores [N, C] or [N, T, C], got {}", name(), prediction.desc().to_string());
    std::vector<int64_t> want = ps.dims();
    want.pop_back();
    D5_CHECK_ARG((labels.dtype() == DType::i64 || labels.dtype() == DType::i32) && labels.shape() == Shape(want),
                 "{}: scores {} need integer labels shaped {}, got {}", name(), ps.to_string(),
                 Shape(want).to_string(), labels.desc().to_string());
    const int64_t classes = ps[ps.rank() - 1];
    const int64_t per_row = prediction.numel() / std::max<int64_t>(1, ps[0] * classes);
    const float* x = prediction.data_as<float>();
    for (int64_t r = 0; r < rows; ++r) {
      begin_row();
      for (int64_t t = 0; t < per_row; ++t) {
        const int64_t at = r * per_row + t;
        const auto label = static_cast<int64_t>(labels.get(at));
        if (label == ignore_) continue;
        D5_CHECK_ARG(label >= 0 && label < classes, "{}: label {} at row {}, position {} is outside [0, {})", name(),
                     label, r, t, classes);
        position(x + at * classes, classes, label);
      }
      end_row();
    }
  }

 protected:
  // Where the label ranks among the scores sorted descending, ties to the lower class (as
  // torch.argmax and a stable sort order them): 0 is the argmax.
  static int64_t rank_of(const float* scores, int64_t classes, int64_t label) {
    const float s = scores[label];
    int64_t rank = 0;
    for (int64_t c = 0; c < classes; ++c) rank += scores[c] > s || (scores[c] == s && c < label) ? 1 : 0;
    return rank;
  }
  virtual void begin_row() {}
  virtual void position(const float* scores, int64_t classes, int64_t label) = 0;
  virtual void end_row() {}

 private:
  int64_t ignore_;
};

// A fraction in [0, 1] of the things counted (positions, rows) that were right.
class FractionRight : public ClassScoreMeasure {
 public:
  using ClassScoreMeasure::ClassScoreMeasure;
  std::string unit() const override { return "fraction"; }
  bool higher_is_better() const override { return true; }
  double lowest() const override { return 0; }
  double highest() const override { return 1; }
  void reset() override { right_ = counted_ = 0; }
  double value() const override { return ratio(static_cast<double>(right_), static_cast<double>(counted_)); }

 protected:
  void count(bool right) {
    ++counted_;
    right_ += right ? 1 : 0;
  }

 private:
  int64_t right_ = 0, counted_ = 0;
};

// The label among the k best scores, per labelled position (k = 1: accuracy).
class TopK : public FractionRight {
 public:
  TopK(const QualitySettings& s, int64_t k, std::string name) : FractionRight(s), k_(k), name_(std::move(name)) {}
  std::string name() const override { return name_; }

 private:
  void position(const float* scores, int64_t classes, int64_t label) override {
    count(rank_of(scores, classes, label) < k_);
  }
  int64_t k_;
  std::string name_;
};

// Rows whose every labelled position is predicted right; rows without a label are not counted.
class ExactMatch : public FractionRight {
 public:
  using FractionRight::FractionRight;
  std::string name() const override { return "exact_match"; }

 private:
  void begin_row() override {
    labelled_ = 0;
    all_right_ = true;
  }
  void position(const float* scores, int64_t classes, int64_t label) override {
    ++labelled_;
    all_right_ = all_right_ && rank_of(scores, classes, label) == 0;
  }
  void end_row() override {
    if (labelled_ > 0) count(all_right_);
  }
  int64_t labelled_ = 0;
  bool all_right_ = true;
};

// exp of the mean negative log-likelihood of the labels under softmax(scores), over labelled
// positions: the exponentiated cross-entropy a language model is compared by.
class Perplexity : public ClassScoreMeasure {
 public:
  using ClassScoreMeasure::ClassScoreMeasure;
  std::string name() const override { return "perplexity"; }
  std::string unit() const override { return ""; }
  bool higher_is_better() const override { return false; }
  double lowest() const override { return 1; }
  double highest() const override { return kInf; }
  void reset() override {
    nll_ = 0;
    positions_ = 0;
  }
  double value() const override { return positions_ > 0 ? std::exp(nll_ / static_cast<double>(positions_)) : kNaN; }

 protected:
  double nll() const { return nll_; }
  void position(const float* scores, int64_t classes, int64_t label) override {
    // log-sum-exp in double around the maximum: no overflow for large logits.
    double top = scores[0];
    for (int64_t c = 1; c < classes; ++c) top = std::max(top, static_cast<double>(scores[c]));
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(scores[c]) - top);
    nll_ += top + std::log(sum) - static_cast<double>(scores[label]);
    ++positions_;
  }

 private:
  double nll_ = 0;
  int64_t positions_ = 0;
};

// Perplexity per word of a language model over word pieces (quality.h): the pieces' summed
// negative log-likelihood over the words they spell. Comparable across tokenizers, which
// per-piece perplexity is not.
class WordPerplexity : public Perplexity {
 public:
  explicit WordPerplexity(const QualitySettings& s) : Perplexity(s), word_starts_(s.word_starts) {}
  std::string name() const override { return "word_perplexity"; }
  void reset() override {
    Perplexity::reset();
    words_ = 0;
  }
  void observe(const Tensor& scores, const Tensor& labels, int64_t rows) override {
    D5_CHECK_ARG(!word_starts_.empty(),
                 "word_perplexity needs to know which classes begin a word: train a language model on a text set "
                 "of word pieces (wordnet-glosses with task=next-piece), or use perplexity");
    Perplexity::observe(scores, labels, rows);
  }
  double value() const override { return words_ > 0 ? std::exp(nll() / static_cast<double>(words_)) : kNaN; }

 private:
  void begin_row() override { first_ = true; }
  void position(const float* scores, int64_t classes, int64_t label) override {
    D5_CHECK_ARG(static_cast<size_t>(classes) == word_starts_.size(),
                 "word_perplexity: the prediction has {} classes, the vocabulary {} pieces", classes,
                 word_starts_.size());
    if (word_starts_[static_cast<size_t>(label)] || first_) ++words_;
    first_ = false;
    Perplexity::position(scores, classes, label);
  }
  std::vector<bool> word_starts_;
  int64_t words_ = 0;
  bool first_ = true;
};

// Mean squared or absolute error of a prediction against an f32 target of its shape.
class RegressionError : public QualityMeasure {
 public:
  explicit RegressionError(bool squared) : squared_(squared) {}
  std::string name() const override { return squared_ ? "mse" : "mae"; }
  std::string unit() const override { return ""; }
  bool higher_is_better() const override { return false; }
  double lowest() const override { return 0; }
  double highest() const override { return kInf; }
  void reset() override {
    sum_ = 0;
    count_ = 0;
  }
  double value() const override { return ratio(sum_, static_cast<double>(count_)); }
  void observe(const Tensor& prediction, const Tensor& target, int64_t rows) override {
    check_rows(name(), prediction, rows);
    D5_CHECK_ARG(prediction.dtype() == DType::f32 && target.dtype() == DType::f32 &&
                     prediction.shape() == target.shape(),
                 "{}: needs an f32 prediction and an f32 target of one shape, got {} and {}", name(),
                 prediction.desc().to_string(), target.desc().to_string());
    const int64_t per_row = prediction.shape()[0] > 0 ? prediction.numel() / prediction.shape()[0] : 0;
    const float* p = prediction.data_as<float>();
    const float* t = target.data_as<float>();
    for (int64_t i = 0; i < rows * per_row; ++i) {
      const double d = static_cast<double>(p[i]) - static_cast<double>(t[i]);
      sum_ += squared_ ? d * d : std::abs(d);
    }
    count_ += rows * per_row;
  }

 private:
  bool squared_;
  double sum_ = 0;
  int64_t count_ = 0;
};

// Levenshtein distance: the fewest insertions, deletions and substitutions turning a into b.
int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int64_t diagonal = row[0];
    row[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int64_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Character (token) error rate of greedy CTC decoding: the edits between each row's decoded
// sequence and its label sequence, summed, over the summed label lengths (a corpus rate, as
// speech benchmarks report it; insertions can take it above 1).
class CtcErrorRate : public QualityMeasure {
 public:
  explicit CtcErrorRate(const QualitySettings& s) : ignore_(s.ignore_index), blank_(s.blank) {}
  std::string name() const override { return "cer"; }
  std::string unit() const override { return ""; }
  bool higher_is_better() const override { return false; }
  double lowest() const override { return 0; }
  double highest() const override { return kInf; }
  void reset() override { edits_ = reference_ = 0; }
  double value() const override { return ratio(static_cast<double>(edits_), static_cast<double>(reference_)); }
  void observe(const Tensor& prediction, const Tensor& labels, int64_t rows) override {
    check_rows(name(), prediction, rows);
    const Shape& ps = prediction.shape();
    D5_CHECK_ARG(prediction.dtype() == DType::f32 && ps.rank() == 3,
                 "cer: needs f32 per-step class scores [N, T, C], got {}", prediction.desc().to_string());
    D5_CHECK_ARG((labels.dtype() == DType::i64 || labels.dtype() == DType::i32) && labels.shape().rank() == 2 &&
                     labels.shape()[0] == ps[0],
                 "cer: scores {} need integer label sequences [{}, S], got {}", ps.to_string(), ps[0],
                 labels.desc().to_string());
    const int64_t steps = ps[1], classes = ps[2], length = labels.shape()[1];
    D5_CHECK_ARG(blank_ >= 0 && blank_ < classes, "cer: the blank class {} is outside [0, {})", blank_, classes);
    const float* x = prediction.data_as<float>();
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> decoded, reference;
      int64_t previous = -1;
      for (int64_t t = 0; t < steps; ++t) {
        const float* scores = x + (r * steps + t) * classes;
        const auto best = static_cast<int64_t>(std::max_element(scores, scores + classes) - scores);
        if (best != previous && best != blank_) decoded.push_back(best);
        previous = best;
      }
      for (int64_t i = 0; i < length; ++i) {
        const auto label = static_cast<int64_t>(labels.get(r * length + i));
        if (label == ignore_) continue;
        D5_CHECK_ARG(label >= 0 && label < classes && label != blank_,
                     "cer: label {} at row {}, position {} is not a class in [0, {}) other than the blank {}", label,
                     r, i, classes, blank_);
        reference.push_back(label);
      }
      edits_ += edit_distance(decoded, reference);
      reference_ += static_cast<int64_t>(reference.size());
    }
  }

 private:
  int64_t ignore_, blank_;
  int64_t edits_ = 0, reference_ = 0;
};

// Corpus BLEU (bleu.h) of a translation model's outputs: per row, the hypothesis is the best
// class at each position up to the first end token (the greedy decoder's output when the test pass
// decodes greedily), the reference the labels up to the end token or the padding; both grouped
// into words by word_starts.
class Bleu : public QualityMeasure {
 public:
  explicit Bleu(const QualitySettings& s)
      : ignore_(s.ignore_index), end_(s.end_token), word_starts_(s.word_starts) {}
  std::string name() const override { return "bleu"; }
  std::string unit() const override { return ""; }
  bool higher_is_better() const override { return true; }
  double lowest() const override { return 0; }
  double highest() const override { return 100; }
  void reset() override { counts_ = BleuCounts{}; }
  double value() const override {
    return counts_.hypothesis_length() + counts_.reference_length() > 0 ? counts_.score() : kNaN;
  }
  void observe(const Tensor& prediction, const Tensor& labels, int64_t rows) override {
    check_rows(name(), prediction, rows);
    D5_CHECK_ARG(end_ >= 0,
                 "bleu needs the token that ends a sequence: measure it on a sequence-to-sequence set (number-words)");
    const Shape& ps = prediction.shape();
    D5_CHECK_ARG(prediction.dtype() == DType::f32 && ps.rank() == 3,
                 "bleu: needs f32 class scores per position [N, T, C], got {}", prediction.desc().to_string());
    const Shape per_position{ps[0], ps[1]};
    D5_CHECK_ARG((labels.dtype() == DType::i64 || labels.dtype() == DType::i32) && labels.shape() == per_position,
                 "bleu: scores {} need integer labels shaped [{}, {}], got {}", ps.to_string(), ps[0], ps[1],
                 labels.desc().to_string());
    const int64_t steps = ps[1], classes = ps[2];
    D5_CHECK_ARG(end_ < classes, "bleu: the end token {} is outside the {} classes", end_, classes);
    const float* x = prediction.data_as<float>();
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> hypothesis, reference;
      for (int64_t t = 0; t < steps; ++t) {
        const float* scores = x + (r * steps + t) * classes;
        const auto best = static_cast<int64_t>(std::max_element(scores, scores + classes) - scores);
        if (best == end_) break;
        hypothesis.push_back(best);
      }
      for (int64_t t = 0; t < steps; ++t) {
        const auto label = static_cast<int64_t>(labels.get(r * steps + t));
        if (label == end_ || label == ignore_) break;
        D5_CHECK_ARG(label >= 0 && label < classes, "bleu: label {} at row {}, position {} is outside [0, {})",
                     label, r, t, classes);
        reference.push_back(label);
      }
      counts_.add(group_words(hypothesis, word_starts_), group_words(reference, word_starts_));
    }
  }

 private:
  int64_t ignore_, end_;
  std::vector<bool> word_starts_;
  BleuCounts counts_;
};

}  // namespace

void QualityMeasure::observe_batch(const Tensor& prediction, const std::map<std::string, Tensor>& batch,
                                   int64_t rows) {
  auto labels = batch.find("labels");
  D5_CHECK_ARG(labels != batch.end(), "{}: the batch has no 'labels' tensor to measure against", name());
  observe(prediction, labels->second, rows);
}

std::vector<std::string> quality_measure_names() {
  return {"accuracy", "top<k>", "exact_match", "perplexity", "word_perplexity", "mse", "mae", "cer", "bleu",
          "map", "map50", "map75"};
}

std::unique_ptr<QualityMeasure> make_quality_measure(const std::string& name, const QualitySettings& settings) {
  if (name == "accuracy") return std::make_unique<TopK>(settings, 1, name);
  if (name.starts_with("top")) {
    const std::optional<int64_t> k = parse_int(std::string_view(name).substr(3));
    D5_CHECK_ARG(k && *k >= 1, "quality measure '{}': top-k needs a whole k >= 1 after 'top', e.g. top5", name);
    return std::make_unique<TopK>(settings, *k, name);
  }
  if (name == "exact_match") return std::make_unique<ExactMatch>(settings);
  if (name == "perplexity") return std::make_unique<Perplexity>(settings);
  if (name == "word_perplexity") return std::make_unique<WordPerplexity>(settings);
  if (name == "mse" || name == "mae") return std::make_unique<RegressionError>(name == "mse");
  if (name == "cer") return std::make_unique<CtcErrorRate>(settings);
  if (name == "bleu") return std::make_unique<Bleu>(settings);
  if (name == "map" || name == "map50" || name == "map75") return make_detection_measure(name, settings);
  D5_THROW(InvalidArgument, "unknown quality measure '{}' (known: {})", name, fmt::join(quality_measure_names(), ", "));
}

}  // namespace d5

#pragma once
// Level 2: a quality target, MLPerf style (docs/quality.md): a measure, a comparison and a number,
// written "accuracy>=0.97", "top5>=0.9", "perplexity<=40", "mse<0.01". Training stops at the
// first test pass that meets it; the training time until then is the time to target.
#include <string>
#include <string_view>

namespace d5 {

struct QualityTarget {
  enum class Comparison { at_least, above, at_most, below };  // >=, >, <=, <
  std::string measure;
  Comparison comparison = Comparison::at_least;
  double threshold = 0;

  // Whether a measured value meets the target; NaN (nothing measured) never does.
  bool met_by(double value) const;
  std::string to_string() const;  // as parse_quality_target reads it back
};

// Reads "MEASURE OP NUMBER" (spaces allowed, OP one of >= > <= <). InvalidArgument, saying what
// to write instead, for a malformed text, an unknown measure, a comparison that points the wrong
// way for the measure ("perplexity>=40": lower is better) or a number it can never meet
// ("accuracy>=1.5").
QualityTarget parse_quality_target(std::string_view text);

// Only the syntax of parse_quality_target: any measure name, no range or direction check (for
// measures that are not QualityMeasures, such as reinforcement learning's episode return).
QualityTarget parse_target_syntax(std::string_view text);

// The target accuracy >= fraction, the form of --target-accuracy.
QualityTarget accuracy_target(double fraction);

}  // namespace d5

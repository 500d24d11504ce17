#pragma once
// Whole-string number parsing for option values and text fields: nullopt unless all of `text` is
// the number, so "4x", " 4" or "" never pass as 4 or 0. Callers word the error, naming the option.
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace d5 {

inline std::optional<int64_t> parse_int(std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

inline std::optional<double> parse_double(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

}  // namespace d5

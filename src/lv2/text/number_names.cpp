#include "number_names.h"

#include <array>
#include <string_view>

#include "deep500/core/error.h"

namespace d5::text {

namespace {

constexpr std::array<std::string_view, 20> kSmall = {
    "zero",    "one",     "two",       "three",    "four",     "five",    "six",
    "seven",   "eight",   "nine",      "ten",      "eleven",   "twelve",  "thirteen",
    "fourteen", "fifteen", "sixteen",  "seventeen", "eighteen", "nineteen"};
constexpr std::array<std::string_view, 10> kTens = {"",      "",      "twenty",  "thirty", "forty",
                                                    "fifty", "sixty", "seventy", "eighty", "ninety"};

void append(std::string& out, std::string_view word) {
  if (!out.empty()) out += ' ';
  out += word;
}

// 1..999 (a group of three digits; zero groups are left unsaid).
void append_group(std::string& out, int64_t n) {
  if (n >= 100) {
    append(out, kSmall[static_cast<size_t>(n / 100)]);
    append(out, "hundred");
    n %= 100;
  }
  if (n >= 20) {
    append(out, kTens[static_cast<size_t>(n / 10)]);
    n %= 10;
    if (n > 0) append(out, kSmall[static_cast<size_t>(n)]);
  } else if (n > 0) {
    append(out, kSmall[static_cast<size_t>(n)]);
  }
}

}  // namespace

std::string number_to_words(int64_t n) {
  D5_CHECK_ARG(n >= 0 && n < 1'000'000'000, "number_to_words names the numbers in [0, 10^9), got {}", n);
  if (n == 0) return "zero";
  std::string out;
  constexpr std::array<std::pair<int64_t, std::string_view>, 2> kScales = {
      {{1'000'000, "million"}, {1'000, "thousand"}}};
  for (const auto& [scale, name] : kScales) {
    if (n >= scale) {
      append_group(out, n / scale);
      append(out, name);
      n %= scale;
    }
  }
  if (n > 0) append_group(out, n);
  return out;
}

}  // namespace d5::text

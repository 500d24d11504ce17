#pragma once
// Internal: the English names of numbers, for the number-words dataset.
#include <cstdint>
#include <string>

namespace d5::text {

// American English, words separated by single spaces, without "and", hyphens or commas (so that
// every word is a token of its own): 0 "zero", 21 "twenty one", 105 "one hundred five",
// 4213 "four thousand two hundred thirteen", 1000000 "one million". InvalidArgument outside
// [0, 10^9).
std::string number_to_words(int64_t n);

}  // namespace d5::text

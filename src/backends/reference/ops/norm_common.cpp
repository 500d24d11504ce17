#include "norm_common.h"

namespace d5::reference {

int64_t dims_product(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= s[i];
  return n;
}

Reduction parse_reduction(const OpSpec& spec) {
  const std::string r = spec.attrs.get_string("reduction", "mean");
  if (r == "none") return Reduction::None;
  if (r == "sum") return Reduction::Sum;
  D5_CHECK_ARG(r == "mean", "{}: reduction='{}' must be 'none', 'sum' or 'mean'", spec.label(), r);
  return Reduction::Mean;
}

}  // namespace d5::reference

#include "ref_common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace d5::reference {

void throw_unsupported_dtype(DType t, const OpSpec& spec, std::initializer_list<std::string_view> ok) {
  D5_THROW(InvalidArgument, "{}: dtype {} is not supported (supported: {})", spec.label(), to_string(t),
           fmt::join(ok, ", "));
}

BroadcastMap::BroadcastMap(const Shape& input, const Shape& output) {
  out_dims_ = output.dims();
  numel_ = output.numel();
  const size_t r = output.rank(), off = r - input.rank();
  in_strides_.assign(r, 0);
  const auto s = input.strides();
  for (size_t i = 0; i < input.rank(); ++i)
    in_strides_[off + i] = input[i] == 1 && output[off + i] != 1 ? 0 : s[i];
  identity_ = input == output;
}

void reduce_to_shape(const Tensor& grad_out, Tensor& grad_in) {
  const OpSpec none{};
  dispatch<float, double>(grad_out.dtype(), none, [&]<typename T>() {
    T* gi = grad_in.data_as<T>();
    const T* go = grad_out.data_as<T>();
    BroadcastMap map(grad_in.shape(), grad_out.shape());
    if (map.identity()) {
      std::copy(go, go + grad_out.numel(), gi);
      return;
    }
    std::vector<double> acc(static_cast<size_t>(grad_in.numel()), 0.0);
    map.for_each([&](int64_t o, int64_t i) { acc[static_cast<size_t>(i)] += static_cast<double>(go[o]); });
    for (size_t i = 0; i < acc.size(); ++i) gi[i] = static_cast<T>(acc[i]);
  });
}

namespace {
// Why an operator has no backward, for `d5 ops list --why`. Every reference op without a gradient
// lacks one mathematically, never for want of an implementation.
std::string no_backward_note(const std::string& op_type) {
  static const std::map<std::string, std::string> reasons = {
      {"ArgMax", "integer indices are piecewise constant: no gradient"},
      {"ArgMin", "integer indices are piecewise constant: no gradient"},
      {"Shape", "the output is the input's shape, not a function of its values: no gradient"},
      {"Constant", "no inputs: nothing to differentiate"},
      {"Range", "start, limit and delta decide the length, so they are constants of the graph: no gradient"},
      {"MelWeightMatrix", "a table built from integer sizes and constant frequencies: no gradient"},
      {"NonMaxSuppression", "integer indices of the selected boxes: no gradient"},
  };
  if (auto it = reasons.find(op_type); it != reasons.end()) return it->second;
  return "boolean output: no gradient";  // comparisons and logical ops
}
}  // namespace

void add_op(OpRegistry& r, const std::string& op_type, bool backward, OpFactory f) {
  r.add(OpImplementation{.op_type = op_type, .backend = "reference", .name = "reference", .backward = backward,
                         .create = std::move(f), .notes = backward ? "" : no_backward_note(op_type)});
}

}  // namespace d5::reference

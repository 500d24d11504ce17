// Operators that move elements: Transpose, Slice, Pad and Expand (each an AxisMap from output
// positions to input elements), Concat and Split (block copies along an axis) and Gather
// (indexed block copies). All move raw bytes, so they work for every dtype.
#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "movement_common.h"

namespace d5::reference {

namespace {

// Forward gathers through the map; backward sends each upstream gradient back to the element it
// was read from (adding where several positions read the same one: Expand, Pad's edge/reflect).
class MapOp : public MovementOp {
 public:
  MapOp(const OpSpec& spec, const Shape& out, AxisMap map)
      : MovementOp(spec, {TensorDesc{spec.inputs[0].dtype, out}}), map_(std::move(map)) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    map_.gather(in[0], out[0], fill(in));
  }
  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    map_.scatter_add(gy[0], gx[0]);
  }

 protected:
  // One element of the output dtype for positions outside the input (Pad); nullptr: zero.
  virtual const void* fill(std::span<const Tensor>) { return nullptr; }

 private:
  AxisMap map_;
};

// ---- Transpose ----------------------------------------------------------------------------

std::unique_ptr<Operator> make_transpose(const OpSpec& spec) {
  check_input_count(spec, 1, 1);
  const Shape& in = spec.inputs[0].shape;
  const size_t r = in.rank();
  std::vector<int64_t> perm(r);
  for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(r - 1 - i);  // default: reverse the axes
  perm = spec.attrs.get_ints("perm", perm);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(r);
  std::iota(iota.begin(), iota.end(), int64_t{0});
  D5_CHECK_ARG(sorted == iota, "{}: perm {} is not a permutation of the {} axes of input {}", spec.label(),
               dims_str(perm), r, in.to_string());
  const auto strides = in.strides();
  std::vector<int64_t> out(r);
  std::vector<std::vector<int64_t>> tables(r);
  for (size_t k = 0; k < r; ++k) {
    const auto a = static_cast<size_t>(perm[k]);
    out[k] = in[a];
    for (int64_t c = 0; c < in[a]; ++c) tables[k].push_back(c * strides[a]);
  }
  return std::make_unique<MapOp>(spec, Shape(out), AxisMap(std::move(tables), true));
}

// ---- Slice --------------------------------------------------------------------------------

std::vector<int64_t> required_ints(const OpSpec& spec, size_t input, const std::string& attr) {
  auto v = ints_from_input_or_attr(spec, input, attr);
  D5_CHECK_ARG(v.has_value(), "{}: '{}' is required (input {} from opset 10, an attribute before)",
               spec.label(), attr, input);
  return *v;
}

std::unique_ptr<Operator> make_slice(const OpSpec& spec) {
  check_input_count(spec, 1, 5);
  const Shape& in = spec.inputs[0].shape;
  const auto starts = required_ints(spec, 1, "starts");
  const auto ends = required_ints(spec, 2, "ends");
  const size_t n = starts.size();
  std::vector<int64_t> axes_in(n), steps(n, 1);
  std::iota(axes_in.begin(), axes_in.end(), int64_t{0});
  axes_in = ints_from_input_or_attr(spec, 3, "axes").value_or(axes_in);
  steps = ints_from_input_or_attr(spec, 4, "steps").value_or(steps);
  D5_CHECK_ARG(ends.size() == n && axes_in.size() == n && steps.size() == n,
               "{}: starts {}, ends {}, axes {} and steps {} must have the same length", spec.label(),
               dims_str(starts), dims_str(ends), dims_str(axes_in), dims_str(steps));
  const auto axes = normalize_axes(axes_in, in.rank(), spec, "axes");

  // Unsliced axes keep everything: start 0, step 1, full length.
  struct Range {
    int64_t first = 0, step = 1, count = 0;
  };
  std::vector<Range> ranges(in.rank());
  for (size_t a = 0; a < in.rank(); ++a) ranges[a].count = in[a];
  for (size_t i = 0; i < n; ++i) {
    const size_t a = axes[i];
    const int64_t d = in[a];
    D5_CHECK_ARG(steps[i] != 0, "{}: step for axis {} is 0", spec.label(), a);
    // Steps beyond the extent all select one element; clamping keeps -step representable.
    const int64_t st = std::clamp(steps[i], -INT64_MAX, INT64_MAX);
    int64_t s = starts[i] < 0 ? starts[i] + d : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + d : ends[i];
    int64_t count = 0;
    if (st > 0) {  // ONNX: clamp both to [0, d]
      s = std::clamp(s, int64_t{0}, d);
      e = std::clamp(e, int64_t{0}, d);
      count = e > s ? (e - s - 1) / st + 1 : 0;
    } else if (d > 0) {  // ONNX: start to [0, d-1], end to [-1, d-1]
      s = std::clamp(s, int64_t{0}, d - 1);
      e = std::clamp(e, int64_t{-1}, d - 1);
      count = s > e ? (s - e - 1) / -st + 1 : 0;
    }
    ranges[a] = {s, st, count};
  }
  const auto strides = in.strides();
  std::vector<int64_t> len(in.rank());
  std::vector<std::vector<int64_t>> tables(in.rank());
  for (size_t a = 0; a < in.rank(); ++a) {
    len[a] = ranges[a].count;
    for (int64_t c = 0; c < len[a]; ++c)
      tables[a].push_back((ranges[a].first + c * ranges[a].step) * strides[a]);
  }
  return std::make_unique<MapOp>(spec, Shape(len), AxisMap(std::move(tables), true));
}

// ---- Pad ----------------------------------------------------------------------------------

static_assert(AxisMap::kOutside == kPadOutside, "pad_source's outside marks an AxisMap's");

class PadOp : public MapOp {
 public:
  PadOp(const OpSpec& spec, const Shape& out, AxisMap map) : MapOp(spec, out, std::move(map)) {
    // Before opset 11 the fill is the FLOAT attribute 'value'; later it is input 2.
    Tensor v(spec.inputs[0].dtype, Shape{});
    v.set(0, spec.attrs.get_float("value", 0.0));
    std::memcpy(fill_, v.data(), v.bytes());
    if (spec.has_input(2)) {
      const auto& c = spec.inputs[2];
      D5_CHECK_ARG(c.dtype == spec.inputs[0].dtype && c.numel() == 1,
                   "{}: constant_value must be one element of the data's dtype {}, got {}", spec.label(),
                   to_string(spec.inputs[0].dtype), c.to_string());
    }
  }

 protected:
  const void* fill(std::span<const Tensor> in) override {
    if (spec_.has_input(2)) std::memcpy(fill_, in[2].data(), in[2].bytes());
    return fill_;
  }

 private:
  unsigned char fill_[8] = {};
};

std::unique_ptr<Operator> make_pad(const OpSpec& spec) {
  check_input_count(spec, 1, 4);
  const Shape& in = spec.inputs[0].shape;
  const std::string mode_name = spec.attrs.get_string("mode", "constant");
  const PadMode mode = parse_pad_mode(spec, mode_name);
  const auto pads = ints_from_input_or_attr(spec, 1, "pads");
  D5_CHECK_ARG(pads.has_value(), "{}: 'pads' is required (input 1 from opset 11, an attribute before)",
               spec.label());
  std::vector<int64_t> all(in.rank());
  std::iota(all.begin(), all.end(), int64_t{0});
  const auto axes =
      normalize_axes(ints_from_input_or_attr(spec, 3, "axes").value_or(all), in.rank(), spec, "axes");
  D5_CHECK_ARG(pads->size() == 2 * axes.size(), "{}: pads {} must have 2 values per padded axis ({} axes)",
               spec.label(), dims_str(*pads), axes.size());

  std::vector<int64_t> begin(in.rank(), 0), end(in.rank(), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    begin[axes[i]] = (*pads)[i];
    end[axes[i]] = (*pads)[i + axes.size()];
  }
  const auto strides = in.strides();
  std::vector<int64_t> out(in.rank());
  std::vector<std::vector<int64_t>> tables(in.rank());
  bool injective = true;
  for (size_t a = 0; a < in.rank(); ++a) {
    const int64_t d = in[a];
    int64_t o = 0;
    D5_CHECK_ARG(!__builtin_add_overflow(d, begin[a], &o) && !__builtin_add_overflow(o, end[a], &o) && o >= 0,
                 "{}: pads {} give axis {} of input {} a negative or overflowing extent", spec.label(),
                 dims_str(*pads), a, in.to_string());
    out[a] = o;
    const bool borders = begin[a] > 0 || end[a] > 0;
    D5_CHECK_ARG(d > 0 || o == 0 || mode == PadMode::constant,
                 "{}: mode '{}' cannot pad axis {} of input {}: it is empty", spec.label(), mode_name, a,
                 in.to_string());
    injective = injective && (mode == PadMode::constant || !borders);
    for (int64_t c = 0; c < o; ++c) {
      const int64_t s = pad_source(c - begin[a], d, mode);
      tables[a].push_back(s == AxisMap::kOutside ? s : s * strides[a]);
    }
  }
  return std::make_unique<PadOp>(spec, Shape(out), AxisMap(std::move(tables), injective));
}

// ---- Expand -------------------------------------------------------------------------------

std::unique_ptr<Operator> make_expand(const OpSpec& spec) {
  check_input_count(spec, 2, 2);
  const Shape& in = spec.inputs[0].shape;
  const auto target = int_values(constant_input(spec, 1, "shape"), spec, "shape");
  for (int64_t v : target)
    D5_CHECK_ARG(v >= 0, "{}: shape {} has a negative extent", spec.label(), dims_str(target));
  const Shape out = broadcast_shapes({in, Shape(target)}, spec);
  const size_t off = out.rank() - in.rank();
  const auto strides = in.strides();
  std::vector<std::vector<int64_t>> tables(out.rank());
  bool injective = true;
  for (size_t k = 0; k < out.rank(); ++k) {
    const bool repeated = k < off || in[k - off] == 1;  // broadcast axes read the same element
    injective = injective && !(repeated && out[k] > 1);
    for (int64_t c = 0; c < out[k]; ++c) tables[k].push_back(repeated ? 0 : c * strides[k - off]);
  }
  return std::make_unique<MapOp>(spec, out, AxisMap(std::move(tables), injective));
}

// ---- Concat and Split ---------------------------------------------------------------------

// The row-major layout of a tensor split along an axis: `outer` repetitions of each part's
// block, parts side by side. f(part, offset in part, offset in whole, bytes) for each block.
template <typename F>
void for_each_block(int64_t outer, const std::vector<size_t>& part_bytes, F&& f) {
  size_t pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < part_bytes.size(); ++i) {
      f(i, static_cast<size_t>(o) * part_bytes[i], pos, part_bytes[i]);
      pos += part_bytes[i];
    }
}

// whole = concat(parts); an undefined part (an absent gradient) contributes zeros.
void concat_into(std::span<const Tensor> parts, int64_t outer, const std::vector<size_t>& part_bytes,
                 Tensor& whole) {
  auto* dst = static_cast<unsigned char*>(whole.data());
  for_each_block(outer, part_bytes, [&](size_t i, size_t part_off, size_t whole_off, size_t n) {
    if (!n) return;
    if (parts[i].defined())
      std::memcpy(dst + whole_off, static_cast<const unsigned char*>(parts[i].data()) + part_off, n);
    else
      std::memset(dst + whole_off, 0, n);
  });
}

void split_into(const Tensor& whole, int64_t outer, const std::vector<size_t>& part_bytes,
                std::span<Tensor> parts) {
  const auto* src = static_cast<const unsigned char*>(whole.data());
  for_each_block(outer, part_bytes, [&](size_t i, size_t part_off, size_t whole_off, size_t n) {
    // The caller may skip gradients it does not need.
    if (n && parts[i].data())
      std::memcpy(static_cast<unsigned char*>(parts[i].data()) + part_off, src + whole_off, n);
  });
}

// Bytes of one block of each part: extent along the axis times everything after it.
std::vector<size_t> block_bytes(const std::vector<int64_t>& extents, const Shape& shape, size_t axis, DType t) {
  const auto inner = static_cast<size_t>(product(shape.dims(), axis + 1, shape.rank())) * dtype_size(t);
  std::vector<size_t> b;
  for (int64_t e : extents) b.push_back(static_cast<size_t>(e) * inner);
  return b;
}

class ConcatOp : public MovementOp {
 public:
  ConcatOp(const OpSpec& spec, const Shape& out, size_t axis)
      : MovementOp(spec, {TensorDesc{spec.inputs[0].dtype, out}}, spec.inputs.size()) {
    std::vector<int64_t> extents;
    for (const auto& d : spec.inputs) extents.push_back(d.shape[axis]);
    outer_ = product(out.dims(), 0, axis);
    blocks_ = block_bytes(extents, out, axis, spec.inputs[0].dtype);
  }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    concat_into(in, outer_, blocks_, out[0]);
  }
  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (gy[0].defined())
      split_into(gy[0], outer_, blocks_, gx);
    else
      for (auto& g : gx) copy_or_zero(Tensor(), g);
  }

 private:
  int64_t outer_ = 0;
  std::vector<size_t> blocks_;
};

std::unique_ptr<Operator> make_concat(const OpSpec& spec) {
  D5_CHECK_ARG(!spec.inputs.empty(), "{}: needs at least one input", spec.label());
  const auto& first = spec.inputs[0];
  const size_t axis = normalize_axis(spec.attrs.get_int("axis"), first.shape.rank(), spec, "axis");
  std::vector<int64_t> out = first.shape.dims();
  out[axis] = 0;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const auto& d = spec.inputs[i];
    D5_CHECK_ARG(spec.has_input(i), "{}: input {} is missing", spec.label(), i);
    bool ok = d.dtype == first.dtype && d.shape.rank() == first.shape.rank();
    for (size_t k = 0; ok && k < d.shape.rank(); ++k) ok = k == axis || d.shape[k] == first.shape[k];
    D5_CHECK_ARG(ok, "{}: input {} ({}) does not match input 0 ({}) outside axis {}", spec.label(), i,
                 d.to_string(), first.to_string(), axis);
    out[axis] += d.shape[axis];
  }
  return std::make_unique<ConcatOp>(spec, Shape(out), axis);
}

class SplitOp : public MovementOp {
 public:
  SplitOp(const OpSpec& spec, size_t axis, const std::vector<int64_t>& sizes)
      : MovementOp(spec, {}), outer_(product(spec.inputs[0].shape.dims(), 0, axis)) {
    const auto& in = spec.inputs[0];
    for (int64_t s : sizes) {
      auto dims = in.shape.dims();
      dims[axis] = s;
      outputs_.push_back(TensorDesc{in.dtype, Shape(dims)});
    }
    blocks_ = block_bytes(sizes, in.shape, axis, in.dtype);
  }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    split_into(in[0], outer_, blocks_, out);
  }
  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    concat_into(gy, outer_, blocks_, gx[0]);
  }

 private:
  int64_t outer_;
  std::vector<size_t> blocks_;
};

std::unique_ptr<Operator> make_split(const OpSpec& spec) {
  check_input_count(spec, 1, 2);
  const Shape& in = spec.inputs[0].shape;
  const size_t axis = normalize_axis(spec.attrs.get_int("axis", 0), in.rank(), spec, "axis");
  const int64_t d = in[axis];
  const auto split = ints_from_input_or_attr(spec, 1, "split");
  const bool chunks = spec.attrs.has("num_outputs");  // opset 18
  D5_CHECK_ARG(!(split && chunks), "{}: give either 'split' or 'num_outputs', not both", spec.label());
  std::vector<int64_t> sizes;
  if (split) {
    sizes = *split;
    int64_t sum = 0;
    for (int64_t s : sizes) {
      D5_CHECK_ARG(s >= 0 && s <= d, "{}: split {} has an invalid size {}", spec.label(), dims_str(sizes), s);
      sum += s;
    }
    D5_CHECK_ARG(sum == d, "{}: split {} sums to {}, but axis {} of input {} has extent {}", spec.label(),
                 dims_str(sizes), sum, axis, in.to_string(), d);
  } else {
    const int64_t n = chunks ? spec.attrs.get_int("num_outputs") : spec.num_outputs;
    D5_CHECK_ARG(n >= 1, "{}: the number of outputs is unknown: give 'split', 'num_outputs' or the node's "
                 "output count (OpSpec::num_outputs)", spec.label());
    // Opset 18's num_outputs allows a smaller last chunk; the node's output count asks for equal parts.
    const int64_t chunk = chunks ? (d + n - 1) / n : d / n;
    const int64_t last = d - chunk * (n - 1);
    D5_CHECK_ARG(chunks ? last >= 0 : d % n == 0,
                 "{}: axis {} of input {} (extent {}) cannot be split into {} {}", spec.label(), axis,
                 in.to_string(), d, n, chunks ? "chunks" : "equal parts");
    sizes.assign(static_cast<size_t>(n), chunk);
    sizes.back() = last;
  }
  D5_CHECK_ARG(spec.num_outputs < 0 || static_cast<size_t>(spec.num_outputs) == sizes.size(),
               "{}: splits into {} parts, but the node has {} outputs", spec.label(), sizes.size(),
               spec.num_outputs);
  return std::make_unique<SplitOp>(spec, axis, sizes);
}

// ---- Gather -------------------------------------------------------------------------------

class GatherOp : public MovementOp {
 public:
  GatherOp(const OpSpec& spec, size_t axis) : MovementOp(spec, {}) {
    const auto& data = spec.inputs[0].shape.dims();
    const auto& idx = spec.inputs[1].shape.dims();
    outer_ = product(data, 0, axis);
    extent_ = data[axis];
    inner_ = product(data, axis + 1, data.size());
    std::vector<int64_t> out(data.begin(), data.begin() + static_cast<ptrdiff_t>(axis));
    out.insert(out.end(), idx.begin(), idx.end());
    out.insert(out.end(), data.begin() + static_cast<ptrdiff_t>(axis) + 1, data.end());
    outputs_ = {TensorDesc{spec.inputs[0].dtype, Shape(out)}};
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const size_t es = dtype_size(in[0].dtype()), row = static_cast<size_t>(inner_) * es;
    const auto* src = static_cast<const unsigned char*>(in[0].data());
    auto* dst = static_cast<unsigned char*>(out[0].data());
    for_each_row(in[1], [&](int64_t to, int64_t from) {
      if (row) std::memcpy(dst + static_cast<size_t>(to) * row, src + static_cast<size_t>(from) * row, row);
    });
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gy[0].defined()) return copy_or_zero(gy[0], gx[0]);
    // Repeated indices read one row several times: their gradients add up.
    std::vector<double> acc(static_cast<size_t>(gx[0].numel()), 0.0);
    dispatch_all_floats(gy[0].dtype(), spec_, [&]<typename T>() {
      const T* g = gy[0].data_as<T>();
      for_each_row(in[1], [&](int64_t to, int64_t from) {
        for (int64_t k = 0; k < inner_; ++k)
          acc[static_cast<size_t>(from * inner_ + k)] += to_double(g[to * inner_ + k]);
      });
    });
    store_doubles(acc, gx[0]);
  }

 private:
  // f(output row, data row) for every gathered row; indices are checked, negatives count back.
  template <typename F>
  void for_each_row(const Tensor& indices, F&& f) const {
    dispatch<int32_t, int64_t>(indices.dtype(), spec_, [&]<typename I>() {
      const I* ix = indices.data_as<I>();
      const int64_t n = indices.numel();
      for (int64_t j = 0; j < n; ++j) {
        const auto v = static_cast<int64_t>(ix[j]);
        D5_CHECK_ARG(v >= -extent_ && v < extent_,
                     "{}: index {} (position {}) is out of range for an axis of extent {}", spec_.label(), v, j,
                     extent_);
      }
      for (int64_t o = 0; o < outer_; ++o)
        for (int64_t j = 0; j < n; ++j) {
          const auto v = static_cast<int64_t>(ix[j]);
          f(o * n + j, o * extent_ + (v < 0 ? v + extent_ : v));
        }
    });
  }

  int64_t outer_ = 0, extent_ = 0, inner_ = 0;
};

std::unique_ptr<Operator> make_gather(const OpSpec& spec) {
  check_input_count(spec, 2, 2);
  const auto& idx = spec.inputs[1];
  D5_CHECK_ARG(idx.dtype == DType::i32 || idx.dtype == DType::i64, "{}: indices must be int32 or int64, got {}",
               spec.label(), to_string(idx.dtype));
  const size_t rank = spec.inputs[0].shape.rank();
  D5_CHECK_ARG(rank >= 1, "{}: data must have rank >= 1, got a scalar", spec.label());
  return std::make_unique<GatherOp>(spec, normalize_axis(spec.attrs.get_int("axis", 0), rank, spec, "axis"));
}

}  // namespace

void register_data_movement_ops(OpRegistry& r) {
  const std::pair<const char*, std::unique_ptr<Operator> (*)(const OpSpec&)> ops[] = {
      {"Transpose", make_transpose}, {"Slice", make_slice}, {"Pad", make_pad},       {"Expand", make_expand},
      {"Concat", make_concat},       {"Split", make_split}, {"Gather", make_gather},
  };
  for (const auto& [type, make] : ops)
    add_op(r, type, true, [make = make](const OpSpec& s) -> OpCreateResult { return make(s); });
}

}  // namespace d5::reference

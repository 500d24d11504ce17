// Host-side helpers shared by the CUDA movement, reduction, normalization and loss operators.
#include "cuda_dims.h"

#include <cstring>

namespace d5::cuda {
inline namespace movement {

std::vector<int64_t> row_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

StridedMap strided_map(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t base) {
  refuse_if(dims.size() > static_cast<size_t>(kMaxRank), "rank {} is above the {} axes these kernels index",
            dims.size(), kMaxRank);
  StridedMap m;
  m.rank = static_cast<int>(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    m.dims[k] = dims[k];
    m.strides[k] = strides[k];
  }
  m.base = base;
  return m;
}

StridedMap broadcast_map(const Shape& in, const Shape& out) {
  const size_t off = out.rank() - in.rank();
  const auto st = row_strides(in.dims());
  std::vector<int64_t> strides(out.rank(), 0);
  for (size_t k = off; k < out.rank(); ++k) strides[k] = in[k - off] == 1 ? 0 : st[k - off];
  return strided_map(out.dims(), strides);
}

std::optional<std::vector<int64_t>> ints_input_or_attr(const OpSpec& s, size_t i, const std::string& attr) {
  if (!s.has_input(i)) {
    if (s.attrs.has(attr)) return s.attrs.get_ints(attr);
    return std::nullopt;
  }
  const Tensor* t = s.value(i);
  refuse_if(t == nullptr, "input {} ({}) must be known when the operator is created", i, attr);
  refuse_if(t->dtype() != DType::i64 && t->dtype() != DType::i32, "input {} ({}) is {}, not int64 or int32", i,
            attr, to_string(t->dtype()));
  std::vector<int64_t> v(static_cast<size_t>(t->numel()));
  if (t->dtype() == DType::i64)
    std::memcpy(v.data(), t->data(), v.size() * sizeof(int64_t));
  else
    for (size_t k = 0; k < v.size(); ++k) v[k] = t->data_as<int32_t>()[k];
  return v;
}

size_t axis_index(int64_t axis, size_t rank) {
  return static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
}

DeviceBuffer upload(const std::vector<int64_t>& v) {
  DeviceBuffer b(v.size() * sizeof(int64_t));
  if (!v.empty())
    check_cuda(cudaMemcpy(b.get(), v.data(), b.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return b;
}

Reduction reduction_over(const std::vector<int64_t>& in_dims, const std::vector<bool>& reduced) {
  refuse_if(in_dims.size() > static_cast<size_t>(kMaxRank), "rank {} is above the {} axes these kernels index",
            in_dims.size(), kMaxRank);
  const auto strides = row_strides(in_dims);
  Reduction r;
  r.outputs = 1;
  r.group = 1;
  for (size_t k = 0; k < in_dims.size(); ++k) {
    if (reduced[k]) {
      r.plan.red_dims[r.plan.red_rank] = in_dims[k];
      r.plan.red_strides[r.plan.red_rank++] = strides[k];
      r.group *= in_dims[k];
    } else {
      r.plan.out_dims[r.plan.out_rank] = in_dims[k];
      r.plan.out_strides[r.plan.out_rank++] = strides[k];
      r.outputs *= in_dims[k];
    }
  }
  return r;
}

Reduction fold_to(const Shape& full, const Shape& target) {
  const size_t off = full.rank() - target.rank();
  std::vector<bool> reduced(full.rank());
  for (size_t k = 0; k < full.rank(); ++k) reduced[k] = k < off || (target[k - off] == 1 && full[k] != 1);
  return reduction_over(full.dims(), reduced);
}

void run_sum(const float* x, float* y, const Reduction& r) {
  reduce_f32(x, y, nullptr, r.outputs, r.group, r.plan, ReduceKind::Sum, nullptr);
  check_launch("reduce_f32 (sum)");
}

unsigned long long* FirstBad::reset() {
  check_cuda(cudaMemsetAsync(buf_.get(), 0xFF, sizeof(unsigned long long), op_stream()), "cudaMemsetAsync");
  return buf_.as<unsigned long long>();
}

std::optional<int64_t> FirstBad::read() const {
  unsigned long long v = 0;
  check_cuda(cudaMemcpy(&v, buf_.get(), sizeof v, cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (v == ~0ull) return std::nullopt;
  return static_cast<int64_t>(v);
}

int64_t read_index(const void* device_ints, bool is64, int64_t pos) {
  const size_t es = is64 ? sizeof(int64_t) : sizeof(int32_t);
  const auto* src = static_cast<const unsigned char*>(device_ints) + static_cast<size_t>(pos) * es;
  if (is64) {
    int64_t v = 0;
    check_cuda(cudaMemcpy(&v, src, es, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return v;
  }
  int32_t v = 0;
  check_cuda(cudaMemcpy(&v, src, es, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return v;
}

}  // inline namespace movement
}  // namespace d5::cuda

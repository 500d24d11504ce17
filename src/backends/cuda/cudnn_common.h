#pragma once
// What the cuDNN operators share (cudnn_*.cpp): descriptors owned by RAII wrappers, packed NCHW
// tensor descriptors of 4 or 5 dimensions (cuDNN's legacy API wants at least 4), the scaling
// constants cuDNN reads from host memory, and the factories that cudnn_ops.cpp registers.
//
// cuDNN 9 marks most of the legacy API deprecated in favour of the graph API; these operators use
// it on purpose (one call per op, algorithms found once at creation), so each file that uses it
// turns the deprecation warning off for itself, as this header does between push and pop.
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_common.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace d5::cuda {

// A cuDNN descriptor, created on construction and destroyed with the owner.
template <typename Desc, cudnnStatus_t (*Create)(Desc*), cudnnStatus_t (*Destroy)(Desc)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() {
    Desc raw = nullptr;
    check_cudnn(Create(&raw), "cudnnCreate...Descriptor");
    p_.reset(raw);
  }
  Desc get() const { return p_.get(); }

 private:
  struct Deleter {
    void operator()(Desc d) const { Destroy(d); }
  };
  std::unique_ptr<std::remove_pointer_t<Desc>, Deleter> p_;
};

using CudnnTensor = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using CudnnFilter = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using CudnnConvolution =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using CudnnPooling =
    CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using CudnnLrn = CudnnDescriptor<cudnnLRNDescriptor_t, cudnnCreateLRNDescriptor, cudnnDestroyLRNDescriptor>;

// cuDNN's alpha / beta blend factors: results overwrite (beta = 0), or add (beta = 1).
inline const float kOne = 1.0f;
inline const float kZero = 0.0f;

// cuDNN describes extents and strides in int: refuses shapes beyond it (one element count bounds
// every extent and stride of a packed tensor).
inline void refuse_beyond_int(const Shape& s, const char* what) {
  refuse_if(s.numel() > std::numeric_limits<int>::max(), "{} {} has more elements than cuDNN's int indexing allows",
            what, s.to_string());
}
inline void refuse_empty(const Shape& s, const char* what) {
  refuse_if(s.numel() == 0, "{} {} is empty: cuDNN takes no zero extents", what, s.to_string());
}

inline std::vector<int> to_int(const std::vector<int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

// cuDNN's name of an element type this backend hands it (f32, f16, bf16).
inline cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

// A packed (row-major) tensor of `dims` (f32 unless `type` says otherwise); padded with trailing
// 1s to 4 dimensions, the fewest the legacy API takes.
inline void set_packed(const CudnnTensor& t, std::vector<int> dims, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  while (dims.size() < 4) dims.push_back(1);
  std::vector<int> strides(dims.size(), 1);
  for (size_t k = dims.size() - 1; k-- > 0;) strides[k] = strides[k + 1] * dims[k + 1];
  check_cudnn(cudnnSetTensorNdDescriptor(t.get(), type, static_cast<int>(dims.size()), dims.data(), strides.data()),
              "cudnnSetTensorNdDescriptor");
}

// Factories of the cuDNN operators (one file each); cudnn_ops.cpp registers them.
std::unique_ptr<Operator> make_cudnn_conv(const OpSpec& s);
std::unique_ptr<Operator> make_cudnn_conv_transpose(const OpSpec& s);  // cudnn_conv.cpp
std::unique_ptr<Operator> make_cudnn_pool(const OpSpec& s);     // MaxPool, AveragePool and the global pools
std::unique_ptr<Operator> make_cudnn_softmax(const OpSpec& s);  // Softmax, LogSoftmax
std::unique_ptr<Operator> make_cudnn_batch_norm(const OpSpec& s);
std::unique_ptr<Operator> make_cudnn_lrn(const OpSpec& s);

}  // namespace d5::cuda

#pragma GCC diagnostic pop

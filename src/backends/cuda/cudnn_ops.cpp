// Registration of the cuDNN operators (one file per family: cudnn_conv.cpp, cudnn_pool.cpp,
// cudnn_softmax.cpp, cudnn_batch_norm.cpp, cudnn_lrn.cpp). The notes say what each refuses.
#include "cudnn_common.h"

namespace d5::cuda {

void register_cudnn_ops(OpRegistry& r) {
  add_op(r, "Conv", make_cudnn_conv,
         {.backward = true,
          .any_dtype = true,
          .notes = "1-D, 2-D, 3-D; algorithms found by timing at creation within the workspace limit (default "
                   "256 MiB), deterministic backward preferred and FFT/Winograd only with --math tf32 or fast (fast: any "
                   "algorithm, non-deterministic ones too); refuses pads "
                   "that differ at the two ends of an axis when they change the output extent; f16 and bf16 on "
                   "tensor cores (f32 accumulation), without bias"});
  add_op(r, "ConvTranspose", make_cudnn_conv_transpose,
         {.backward = true,
          .notes = "1-D, 2-D, 3-D; cuDNN's backward data as its forward, algorithms found by timing at creation "
                   "as Conv's; refuses pads (after output_padding / output_shape / auto_pad) whose end exceeds "
                   "the beginning, or exceeds it by a stride or more, where cuDNN's extents differ"});
  const std::string pool_notes =
      "1-D, 2-D, 3-D; refuses dilations, MaxPool's Indices output, and pads unequal at the two ends or ceil_mode "
      "where they change the output extent (or, with count_include_pad, the divisor)";
  for (const char* type : {"MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool"})
    add_op(r, type, make_cudnn_pool, {.backward = true, .notes = pool_notes});
  for (const char* type : {"Softmax", "LogSoftmax"})
    add_op(r, type, make_cudnn_softmax,
           {.backward = true, .notes = "along one axis (opset 13+) or over the trailing axes (before 13)"});
  add_op(r, "BatchNormalization", make_cudnn_batch_norm,
         {.backward = true,
          .notes = "inference and training mode (running statistics with the biased variance, as ONNX); "
                   "spatial=0 too"});
  add_op(r, "LRN", make_cudnn_lrn,
         {.backward = true,
          .notes = "refuses size outside [1, 16], bias below 1e-5 and beta below 0.01 (cuDNN's limits)"});
}

}  // namespace d5::cuda

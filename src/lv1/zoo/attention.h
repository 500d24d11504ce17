#pragma once
// Internal: the Transformer pieces the zoo's attention models share (transformer.cpp,
// seq2seq_transformer.cpp). ONNX opset 17 has no attention operator, so attention is MatMul /
// Softmax / Reshape / Transpose, with parameter names as PyTorch's modules have them where the
// layout allows (q_proj, k_proj, v_proj, out_proj).
#include <cstdint>
#include <optional>
#include <string>

#include "zoo_builder.h"

namespace d5::zoo {

struct AttentionShape {
  int64_t model;  // d_model
  int64_t heads;
  double dropout;  // on the attention weights (training only)
};

// Vaswani et al.'s fixed sinusoidal encoding, [length, dim]: sin at even features, cos at odd.
Tensor position_encoding(int64_t length, int64_t dim);

// Multi-head scaled dot-product attention of `query` [batch, Tq, model] over `memory` [batch, Tk,
// model] (self-attention when both are the same value); `mask` [Tq, Tk], when given, is added to
// the scores before the softmax (-inf where a query may not look). Returns [batch, Tq, model].
Value multi_head_attention(Builder& b, const Value& query, const Value& memory, const std::string& scope,
                           const AttentionShape& shape, const std::optional<Value>& mask = std::nullopt);

// A [length, length] mask that is 0 on and below the diagonal and -inf above it: position t
// attends to positions up to t only (PyTorch's Transformer.generate_square_subsequent_mask).
Value causal_mask(Builder& b, int64_t length);

}  // namespace d5::zoo

#include "attention.h"

#include <cmath>
#include <limits>

namespace d5::zoo {

Tensor position_encoding(int64_t length, int64_t dim) {
  Tensor pe(DType::f32, Shape{length, dim});
  float* p = pe.data_as<float>();
  for (int64_t pos = 0; pos < length; ++pos)
    for (int64_t i = 0; i < dim; i += 2) {
      const double angle =
          static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(i) / static_cast<double>(dim));
      p[pos * dim + i] = static_cast<float>(std::sin(angle));
      if (i + 1 < dim) p[pos * dim + i + 1] = static_cast<float>(std::cos(angle));
    }
  return pe;
}

Value multi_head_attention(Builder& b, const Value& query, const Value& memory, const std::string& scope,
                           const AttentionShape& a, const std::optional<Value>& mask) {
  const int64_t batch = query.shape[0], tq = query.shape[1], tk = memory.shape[1], head_dim = a.model / a.heads;
  const Value split = b.int64s({0, 0, a.heads, head_dim});  // 0 keeps the batch and sequence extents
  auto heads = [&](const Value& from, const std::string& proj, std::vector<int64_t> perm, Shape out) {
    Value p = b.linear(from, scope + "." + proj, a.model);
    Value r = b.node("Reshape", scope + "." + proj + ".split", {p.name, split.name},
                     Shape{batch, from.shape[1], a.heads, head_dim});
    return b.node("Transpose", scope + "." + proj + ".heads", {r.name}, std::move(out),
                  Attributes{{"perm", std::move(perm)}});
  };
  Value q = heads(query, "q_proj", {0, 2, 1, 3}, Shape{batch, a.heads, tq, head_dim});
  Value k_t = heads(memory, "k_proj", {0, 2, 3, 1}, Shape{batch, a.heads, head_dim, tk});
  Value v = heads(memory, "v_proj", {0, 2, 1, 3}, Shape{batch, a.heads, tk, head_dim});
  Value scores = b.node("MatMul", scope + ".scores", {q.name, k_t.name}, Shape{batch, a.heads, tq, tk});
  scores = b.mul(scores, b.scalar(static_cast<float>(1 / std::sqrt(static_cast<double>(head_dim)))),
                 scope + ".scale");
  if (mask) scores = b.add(scores, *mask, scope + ".mask");
  Value attn =
      b.node("Softmax", scope + ".softmax", {scores.name}, scores.shape, Attributes{{"axis", int64_t{-1}}});
  attn = b.dropout(attn, scope + ".dropout", a.dropout);
  Value ctx = b.node("MatMul", scope + ".context", {attn.name, v.name}, Shape{batch, a.heads, tq, head_dim});
  ctx = b.node("Transpose", scope + ".merge", {ctx.name}, Shape{batch, tq, a.heads, head_dim},
               Attributes{{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  ctx = b.node("Reshape", scope + ".concat", {ctx.name, b.int64s({0, 0, a.model}).name}, Shape{batch, tq, a.model});
  return b.linear(ctx, scope + ".out_proj", a.model);
}

Value causal_mask(Builder& b, int64_t length) {
  Tensor mask(DType::f32, Shape{length, length});
  float* m = mask.data_as<float>();
  for (int64_t i = 0; i < length; ++i)
    for (int64_t j = 0; j < length; ++j)
      m[i * length + j] = j > i ? -std::numeric_limits<float>::infinity() : 0.0f;
  return b.constant("causal_mask", mask);
}

}  // namespace d5::zoo

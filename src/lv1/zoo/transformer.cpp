// A small Transformer encoder classifier (Vaswani et al., 2017, as PyTorch's post-norm
// TransformerEncoderLayer): a [batch, sequence, features] input projected to d_model = 128, plus
// the fixed sinusoidal position encoding, two encoder layers (4-head self-attention, a 512-unit
// feed-forward with GELU, dropout 0.1, residual + LayerNorm after each), mean pooling over the
// sequence and a linear classifier. ONNX opset 17 has no attention operator, so attention is
// MatMul / Softmax / Reshape / Transpose. 406,154 parameters for 64 features and 10 classes. The
// text Transformer reads token ids through a 128-wide embedding (scaled by sqrt(d_model), as
// Vaswani et al.) in place of the input projection: 658,349 parameters for 2,000 pieces and 45
// classes.
#include <cmath>

#include "zoo_builder.h"

namespace d5::zoo {

namespace {

constexpr int64_t kModel = 128, kHeads = 4, kFeedForward = 512, kLayers = 2;
constexpr double kDropout = 0.1;

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

Value self_attention(Builder& b, const Value& x, const std::string& scope) {
  const int64_t batch = x.shape[0], seq = x.shape[1], head_dim = kModel / kHeads;
  const Value split = b.int64s({0, 0, kHeads, head_dim});  // 0 keeps the batch and sequence extents
  auto heads = [&](const std::string& proj, std::vector<int64_t> perm, Shape out) {
    Value p = b.linear(x, scope + "." + proj, kModel);
    Value r = b.node("Reshape", scope + "." + proj + ".split", {p.name, split.name},
                     Shape{batch, seq, kHeads, head_dim});
    return b.node("Transpose", scope + "." + proj + ".heads", {r.name}, std::move(out),
                  Attributes{{"perm", std::move(perm)}});
  };
  Value q = heads("q_proj", {0, 2, 1, 3}, Shape{batch, kHeads, seq, head_dim});
  Value k_t = heads("k_proj", {0, 2, 3, 1}, Shape{batch, kHeads, head_dim, seq});
  Value v = heads("v_proj", {0, 2, 1, 3}, Shape{batch, kHeads, seq, head_dim});
  Value scores = b.node("MatMul", scope + ".scores", {q.name, k_t.name}, Shape{batch, kHeads, seq, seq});
  scores = b.mul(scores, b.scalar(static_cast<float>(1 / std::sqrt(static_cast<double>(head_dim)))),
                 scope + ".scale");
  Value attn =
      b.node("Softmax", scope + ".softmax", {scores.name}, scores.shape, Attributes{{"axis", int64_t{-1}}});
  attn = b.dropout(attn, scope + ".dropout", kDropout);
  Value ctx = b.node("MatMul", scope + ".context", {attn.name, v.name}, Shape{batch, kHeads, seq, head_dim});
  ctx = b.node("Transpose", scope + ".merge", {ctx.name}, Shape{batch, seq, kHeads, head_dim},
               Attributes{{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  ctx = b.node("Reshape", scope + ".concat", {ctx.name, b.int64s({0, 0, kModel}).name},
               Shape{batch, seq, kModel});
  return b.linear(ctx, scope + ".out_proj", kModel);
}

Value encoder_layer(Builder& b, const Value& x, const std::string& scope) {
  Value a = b.dropout(self_attention(b, x, scope + ".self_attn"), scope + ".dropout1", kDropout);
  Value h = b.layer_norm(b.add(x, a, scope + ".residual1"), scope + ".norm1");
  Value f = b.gelu(b.linear(h, scope + ".linear1", kFeedForward), scope + ".gelu");
  f = b.dropout(f, scope + ".dropout", kDropout);
  f = b.dropout(b.linear(f, scope + ".linear2", kModel), scope + ".dropout2", kDropout);
  return b.layer_norm(b.add(h, f, scope + ".residual2"), scope + ".norm2");
}


// [batch, sequence, d_model] embedded inputs through the encoder to the classifier.
Network encode_and_classify(Builder& b, Value x) {
  const int64_t batch = x.shape[0], seq = x.shape[1];
  x = b.add(x, b.constant("position_encoding", position_encoding(seq, kModel)), "add_position");
  x = b.dropout(x, "embed_dropout", kDropout);
  for (int64_t l = 0; l < kLayers; ++l) x = encoder_layer(b, x, "layers." + std::to_string(l));
  // ReduceMean takes its axes as an attribute up to opset 17.
  Value pooled = b.node("ReduceMean", "mean_pool", {x.name}, Shape{batch, kModel},
                        Attributes{{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  return b.finish(b.linear(pooled, "classifier", b.options().classes));
}

}  // namespace

Network build_transformer(const ModelOptions& o) {
  Builder b("transformer", o);
  return encode_and_classify(b, b.linear(b.input(2, "sequence length, features"), "embed", kModel));
}

Network build_text_transformer(const ModelOptions& o) {
  Builder b("text-transformer", o);
  Value x = b.embedding(b.token_input(), "embedding", kModel);
  return encode_and_classify(b, b.mul(x, b.scalar(static_cast<float>(std::sqrt(static_cast<double>(kModel)))),
                                      "embedding_scale"));
}

}  // namespace d5::zoo

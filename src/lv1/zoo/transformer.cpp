// A small Transformer encoder classifier (Vaswani et al., 2017, as PyTorch's post-norm
// TransformerEncoderLayer): a [batch, sequence, features] input projected to d_model = 128, plus
// the fixed sinusoidal position encoding, two encoder layers (4-head self-attention, a 512-unit
// feed-forward with GELU, dropout 0.1, residual + LayerNorm after each), mean pooling over the
// sequence and a linear classifier (attention as attention.h builds it). 406,154 parameters for
// 64 features and 10 classes. The text Transformer reads token ids through a 128-wide embedding
// (scaled by sqrt(d_model), as Vaswani et al.) in place of the input projection: 658,349
// parameters for 2,000 pieces and 45 classes.
#include <cmath>

#include "attention.h"

namespace d5::zoo {

namespace {

constexpr int64_t kModel = 128, kHeads = 4, kFeedForward = 512, kLayers = 2;
constexpr double kDropout = 0.1;

Value encoder_layer(Builder& b, const Value& x, const std::string& scope) {
  Value a = b.dropout(multi_head_attention(b, x, x, scope + ".self_attn", {kModel, kHeads, kDropout}),
                      scope + ".dropout1", kDropout);
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

// A small encoder-decoder Transformer for translation (Vaswani et al., 2017, as PyTorch's
// nn.Transformer with its defaults: post-norm layers, ReLU feed-forward, a LayerNorm after each
// stack). Source ids [batch, S] ("input") and the decoder's ids [batch, T] ("decoder_input": the
// target shifted right behind a start token, teacher forcing) pass through their own embeddings
// plus the sinusoidal position encoding; 2 encoder layers (self-attention, feed-forward), 2
// decoder layers (causally masked self-attention, attention over the encoder's output,
// feed-forward), each sub-layer followed by dropout 0.1, a residual and a LayerNorm; a linear layer scores every target position over the shared vocabulary: logits
// [batch, T, vocabulary], trained with the language model's loss (sequence-ce, padding -100).
//
// d_model 64, 4 heads, feed-forward 256: a size that learns number-words in minutes on two cores.
// Padded source positions are not masked out of attention: the padding id has an embedding of its
// own that the model learns to ignore, as it would with a plain nn.Transformer called without
// key-padding masks. Greedy decoding (the trainer's test pass) relies on the causal mask.
#include "attention.h"

namespace d5::zoo {

namespace {

constexpr int64_t kModel = 64, kHeads = 4, kFeedForward = 256, kLayers = 2;
constexpr double kDropout = 0.1;
constexpr AttentionShape kAttention{kModel, kHeads, kDropout};

// x + dropout(sublayer), then LayerNorm: the post-norm residual every sub-layer ends with.
Value add_and_norm(Builder& b, const Value& x, const Value& sublayer, const std::string& scope, int index) {
  const std::string i = std::to_string(index);
  Value d = b.dropout(sublayer, scope + ".dropout" + i, kDropout);
  return b.layer_norm(b.add(x, d, scope + ".residual" + i), scope + ".norm" + i);
}

Value feed_forward(Builder& b, const Value& x, const std::string& scope) {
  Value f = b.relu(b.linear(x, scope + ".linear1", kFeedForward), scope + ".relu");
  f = b.dropout(f, scope + ".dropout", kDropout);
  return b.linear(f, scope + ".linear2", kModel);
}

Value encoder_layer(Builder& b, const Value& x, const std::string& scope) {
  Value h = add_and_norm(b, x, multi_head_attention(b, x, x, scope + ".self_attn", kAttention), scope, 1);
  return add_and_norm(b, h, feed_forward(b, h, scope), scope, 2);
}

Value decoder_layer(Builder& b, const Value& y, const Value& memory, const Value& mask, const std::string& scope) {
  Value h = add_and_norm(b, y, multi_head_attention(b, y, y, scope + ".self_attn", kAttention, mask), scope, 1);
  h = add_and_norm(b, h, multi_head_attention(b, h, memory, scope + ".multihead_attn", kAttention), scope, 2);
  return add_and_norm(b, h, feed_forward(b, h, scope), scope, 3);
}

// Embedded ids plus the position encoding, then dropout. Not scaled by sqrt(d_model): the
// embedding has unit variance already (nn.Embedding's), and scaled it would drown the position
// encoding (amplitude 1) eightfold, which the digits of a numeral cannot do without.
Value embed(Builder& b, const Value& ids, const std::string& scope) {
  Value x = b.embedding(ids, scope, kModel);
  const Value pe = b.constant(scope + ".position_encoding", position_encoding(ids.shape[1], kModel));
  return b.dropout(b.add(x, pe, scope + ".add_position"), scope + ".dropout", kDropout);
}

}  // namespace

Network build_seq2seq_transformer(const ModelOptions& o) {
  Builder b("seq2seq-transformer", o);
  Value source = b.token_input();
  Value target = b.token_input(kZooDecoderInput, o.target_length);
  Value memory = embed(b, source, "src_embedding");
  for (int64_t l = 0; l < kLayers; ++l) memory = encoder_layer(b, memory, "encoder.layers." + std::to_string(l));
  memory = b.layer_norm(memory, "encoder.norm");
  const Value mask = causal_mask(b, o.target_length);
  Value y = embed(b, target, "tgt_embedding");
  for (int64_t l = 0; l < kLayers; ++l) y = decoder_layer(b, y, memory, mask, "decoder.layers." + std::to_string(l));
  y = b.layer_norm(y, "decoder.norm");
  return b.finish_per_position(b.linear(y, "generator", o.vocabulary));
}

}  // namespace d5::zoo

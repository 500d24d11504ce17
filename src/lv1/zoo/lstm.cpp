// An LSTM classifier: a [batch, sequence, features] input (row by row for images: 28 steps of 28
// pixels for MNIST) read by one LSTM layer of 128 units (the ONNX LSTM operator, sequence first),
// and a linear classifier (Gemm) on the hidden state after the last step. 82,186 parameters for
// 28 features and 10 classes. The text LSTM reads token ids through a 64-wide embedding instead:
// 233,133 parameters for 2,000 pieces and 45 classes (train it on ids padded at the start, so the
// last step is the text's last token). The text LSTM language model reads ids the same way and
// scores the next piece after every step: a linear layer from each step's hidden state to the
// vocabulary, logits [batch, length, vocabulary] for the sequence-ce loss head; 485,328
// parameters for 2,000 pieces.
#include "zoo_builder.h"

namespace d5::zoo {

namespace {

constexpr int64_t kHidden = 128;

// [batch, sequence, features] through the LSTM to the classifier.
Network classify_sequence(Builder& b, const Value& x) {
  Value seq_first =
      b.node("Transpose", "to_sequence_first", {x.name}, Shape{x.shape[1], x.shape[0], x.shape[2]},
             Attributes{{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value h = b.lstm_last_hidden(seq_first, "lstm", kHidden);
  return b.finish(b.linear(h, "fc", b.options().classes));
}

}  // namespace

Network build_lstm_classifier(const ModelOptions& o) {
  Builder b("lstm", o);
  return classify_sequence(b, b.input(2, "sequence length, features"));
}

constexpr int64_t kEmbedding = 64;

Network build_text_lstm(const ModelOptions& o) {
  Builder b("text-lstm", o);
  return classify_sequence(b, b.embedding(b.token_input(), "embedding", kEmbedding));
}

Network build_text_lstm_lm(const ModelOptions& o) {
  Builder b("text-lstm-lm", o);
  const Value x = b.embedding(b.token_input(), "embedding", kEmbedding);  // [batch, length, 64]
  const Attributes swap{{"perm", std::vector<int64_t>{1, 0, 2}}};
  const Value seq_first = b.node("Transpose", "to_sequence_first", {x.name}, Shape{x.shape[1], x.shape[0], x.shape[2]}, swap);
  const Value h = b.lstm_sequence(seq_first, "lstm", kHidden);  // [length, batch, hidden]
  const Value batch_first = b.node("Transpose", "to_batch_first", {h.name}, Shape{h.shape[1], h.shape[0], h.shape[2]}, swap);
  return b.finish_per_position(b.linear(batch_first, "fc", o.vocabulary));
}

}  // namespace d5::zoo

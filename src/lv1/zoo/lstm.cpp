// An LSTM classifier: a [batch, sequence, features] input (row by row for images: 28 steps of 28
// pixels for MNIST) read by one LSTM layer of 128 units (the ONNX LSTM operator, sequence first),
// and a linear classifier (Gemm) on the hidden state after the last step. 82,186 parameters for
// 28 features and 10 classes.
#include "zoo_builder.h"

namespace d5::zoo {

Network build_lstm_classifier(const ModelOptions& o) {
  constexpr int64_t kHidden = 128;
  Builder b("lstm", o);
  Value x = b.input(2, "sequence length, features");
  Value seq_first =
      b.node("Transpose", "to_sequence_first", {x.name}, Shape{x.shape[1], x.shape[0], x.shape[2]},
             Attributes{{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value h = b.lstm_last_hidden(seq_first, "lstm", kHidden);
  return b.finish(b.linear(h, "fc", o.classes));
}

}  // namespace d5::zoo

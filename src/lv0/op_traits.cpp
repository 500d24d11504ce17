// The one table of operator types (include/deep500/op/op_traits.h). ONNX opsets were read from
// onnx.defs (python3-onnx 1.12); tests/conformance checks them against it.
#include "deep500/op/op_traits.h"

#include "deep500/core/registry.h"

namespace d5 {

namespace {

constexpr auto W = NumericClass::elementwise;
constexpr auto T = NumericClass::transcendental;
constexpr auto A = NumericClass::accumulating;

// type, first ONNX opset (0: not ONNX), numeric class.
const OpTraits kTable[] = {
    {"Abs", 1, W},         {"Add", 1, W},          {"And", 1, W},          {"ArgMax", 1, W},
    {"ArgMin", 1, W},      {"AveragePool", 1, A},  {"BatchNormalization", 1, A},
    {"CTCLoss", 0, A},
    {"Cast", 1, W},        {"Clip", 1, W},         {"Concat", 1, W},       {"Constant", 1, W},
    {"ConstantOfShape", 9, W},                     {"Conv", 1, A},         {"ConvTranspose", 1, A},
    {"CumSum", 11, A},     {"Div", 1, W},          {"Dropout", 1, W},      {"Einsum", 12, A},
    {"Elu", 1, T},         {"Equal", 1, W},        {"Erf", 9, T},          {"Exp", 1, T},
    {"Expand", 8, W},      {"Flatten", 1, W},      {"GRU", 1, A},          {"Gather", 1, W},
    {"GatherElements", 11, W},                     {"TopK", 1, W},         {"Trilu", 14, W},
    {"Range", 11, W},      {"ScatterElements", 11, A},                     {"DFT", 17, A},
    {"STFT", 17, A},       {"MelWeightMatrix", 17, T},                     {"Resize", 10, A},
    {"RoiAlign", 10, A},     {"SsdLoss", 0, A},
    {"NonMaxSuppression", 10, W, {0}},  // selected_indices: padded (op_traits.h)
    {"Gelu", 20, T},       {"Gemm", 1, A},         {"GlobalAveragePool", 1, A},
    {"GlobalMaxPool", 1, W},                       {"Greater", 1, W},      {"GreaterOrEqual", 12, W},
    {"HardSigmoid", 1, W}, {"HardSwish", 14, W},   {"Identity", 1, W},     {"InstanceNormalization", 1, A},
    {"LRN", 1, A},         {"LSTM", 1, A},         {"LayerNormalization", 17, A},
    {"LeakyRelu", 1, W},   {"Less", 1, W},         {"LessOrEqual", 12, W}, {"Log", 1, T},
    {"LogSoftmax", 1, A},  {"MSELoss", 0, A},      {"MatMul", 1, A},       {"Max", 1, W},
    {"MaxPool", 1, W},     {"Mean", 1, W},         {"Min", 1, W},          {"Mish", 18, T},
    {"Mul", 1, W},         {"Neg", 1, W},          {"NegativeLogLikelihoodLoss", 12, A},
    {"Not", 1, W},         {"Or", 1, W},           {"Pad", 1, W},          {"Pow", 1, T},
    {"RNN", 1, A},         {"Reciprocal", 1, W},   {"ReduceL2", 1, A},     {"ReduceMax", 1, W},
    {"ReduceMean", 1, A},  {"ReduceSum", 1, A},    {"Relu", 1, W},         {"Reshape", 1, W},
    {"Selu", 1, T},        {"Shape", 1, W},        {"Sigmoid", 1, T},      {"Slice", 1, W},
    {"Softmax", 1, A},     {"SoftmaxCrossEntropyLoss", 12, A},             {"Softplus", 1, T},
    {"Split", 1, W},       {"Sqrt", 1, W},         {"Squeeze", 1, W},      {"Sub", 1, W},
    {"Sum", 1, W},         {"Tanh", 1, T},         {"Transpose", 1, W},    {"Unsqueeze", 1, W},
    {"Where", 9, W},       {"Xor", 1, W},
};

Registry<OpTraits>& registry() {
  static Registry<OpTraits>* r = [] {
    auto* reg = new Registry<OpTraits>("operator type", Registry<OpTraits>::Order::name);
    for (const auto& t : kTable) reg->add(t.type, to_string(t.numerics), t);
    return reg;
  }();
  return *r;
}

}  // namespace

const char* to_string(NumericClass c) {
  switch (c) {
    case NumericClass::elementwise: return "elementwise";
    case NumericClass::transcendental: return "transcendental";
    case NumericClass::accumulating: return "accumulating";
  }
  return "?";
}

void register_op_traits(OpTraits traits) {
  std::string type = traits.type;
  registry().add(std::move(type), to_string(traits.numerics), std::move(traits));
}

std::shared_ptr<const OpTraits> op_traits(const std::string& type) { return registry().find(type); }

std::vector<std::string> described_op_types() { return registry().names(); }

}  // namespace d5

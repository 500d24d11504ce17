// ONNX LSTM, GRU and RNN on ATen's recurrent kernels (at::lstm, at::gru, at::rnn_tanh,
// at::rnn_relu), which compute exactly the ONNX cells with the default activations:
// - Gate order. ONNX stacks LSTM gates as i, o, f, c and GRU gates as z, r, h; ATen as i, f, g, o
//   and r, z, n. W, R and B are inputs, so their gate blocks are reordered (one index_select each)
//   on every call, as part of the computation autograd differentiates.
// - Layouts. ATen runs sequence-first; layout=1 inputs and outputs are transposed around it. Y
//   [seq, batch, dirs*hidden] is viewed as ONNX's [seq, dirs, batch, hidden].
// - direction=reverse (ATen only has forward and bidirectional) reverses each sequence in time
//   before and after a forward run.
// - sequence_lens shorter than the sequence run as a packed sequence (_pack_padded_sequence,
//   sorted by length and unsorted after), which leaves Y zero past each sequence's end and takes
//   Y_h (Y_c) at its last step, as ONNX does. A length-0 sequence runs one step and its outputs
//   are masked to zero (so initial_h gets no gradient from it), as on the reference.
// Refused, because ATen's cells cannot express them: activations other than the defaults (and
// Relu for RNN), clip, LSTM peepholes (unless a constant zero P) and input_forget, and GRU with
// linear_before_reset=0 (ATen applies the reset gate after the recurrent product).
#include <algorithm>
#include <cctype>

#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using TensorList = std::vector<at::Tensor>;

enum class Cell { lstm, gru, rnn_tanh, rnn_relu };

struct RnnConfig {
  Cell cell;
  int64_t gates, hidden, dirs, seq, batch;
  bool reverse, batch_first, bias;
  std::vector<int64_t> gate_order;  // ATen gate k is ONNX gate gate_order[k]
  HostConstant gate_index;          // gate_order as an index tensor
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The cell ATen can run for these activations, or why none.
std::variant<Cell, std::string> cell_of(const OpSpec& s, const std::vector<std::string>& defaults,
                                        int64_t dirs) {
  auto names = s.attrs.get_strings("activations", {});
  for (auto& n : names) n = lower(n);
  const size_t per_dir = defaults.size();
  std::vector<std::string> want;
  for (int64_t d = 0; d < dirs; ++d)
    for (const auto& n : defaults) want.push_back(lower(n));
  if (names.size() == per_dir && dirs == 2) {  // one set serves both directions
    const auto one = names;
    names.insert(names.end(), one.begin(), one.end());
  }
  if (s.type == "RNN") {
    if (names.empty() || names == want) return Cell::rnn_tanh;
    if (names == std::vector<std::string>(static_cast<size_t>(dirs), "relu")) return Cell::rnn_relu;
    return std::string(
        "ATen's RNN cells apply Tanh or Relu (the same in both directions); activations are not");
  }
  if (names.empty() || names == want) return s.type == "LSTM" ? Cell::lstm : Cell::gru;
  return "ATen's " + s.type + " cell has fixed activations (" +
         (s.type == "LSTM" ? std::string("Sigmoid, Tanh, Tanh") : std::string("Sigmoid, Tanh")) + ")";
}

// Why ATen cannot run this spec, or "" when it can.
std::string refusal(const OpSpec& s) {
  if (s.attrs.has("clip")) return "ATen's recurrent cells have no clip";
  if (s.type == "GRU" && s.attrs.get_int("linear_before_reset", 0) == 0)
    return "ATen's GRU applies the reset gate after the recurrent product (ONNX linear_before_reset=1); "
           "linear_before_reset=0 is not expressible";
  if (s.type == "LSTM") {
    if (s.attrs.get_int("input_forget", 0) != 0)
      return "ATen's LSTM has no coupled input-forget gate (input_forget=1)";
    if (s.has_input(7)) {
      const Tensor* p = s.value(7);
      bool zero = p != nullptr;
      for (int64_t i = 0; zero && i < p->numel(); ++i) zero = p->get(i) == 0;
      if (!zero) return "ATen's LSTM has no peepholes (P must be absent or a constant zero)";
    }
  }
  return "";
}

// Each direction's weights in ATen's gate order: W [dirs, G*H, I] -> per direction [G*H, I].
TensorList params_of(const RnnConfig& cfg, const TensorList& in) {
  const at::Tensor& order = cfg.gate_index.on(in[1].device());
  auto reorder = [&](const at::Tensor& t) {  // [dirs, G*H, K] -> gates regrouped
    if (cfg.gates == 1) return t;
    return t.view({cfg.dirs, cfg.gates, cfg.hidden, -1})
        .index_select(1, order)
        .reshape({cfg.dirs, cfg.gates * cfg.hidden, -1});
  };
  const auto w = reorder(in[1]), r = reorder(in[2]);
  at::Tensor wb, rb;
  if (cfg.bias) {
    const auto b = in[3].view({cfg.dirs, 2, cfg.gates * cfg.hidden, 1});
    wb = reorder(b.select(1, 0)).squeeze(-1);
    rb = reorder(b.select(1, 1)).squeeze(-1);
  }
  TensorList p;
  for (int64_t d = 0; d < cfg.dirs; ++d) {
    p.push_back(w[d]);
    p.push_back(r[d]);
    if (cfg.bias) {
      p.push_back(wb[d]);
      p.push_back(rb[d]);
    }
  }
  return p;
}

// A state input ([dirs, batch, H], or [batch, dirs, H] with layout=1) in ATen's layout; zeros when absent.
at::Tensor state_in(const RnnConfig& cfg, const TensorList& in, size_t i, const at::Tensor& like) {
  if (i < in.size() && in[i].defined()) return cfg.batch_first ? in[i].transpose(0, 1).contiguous() : in[i];
  return at::zeros({cfg.dirs, cfg.batch, cfg.hidden}, like.options());
}

// ATen's [seq, batch, dirs*H] output and [dirs, batch, H] states into the ONNX layouts.
at::Tensor y_out(const RnnConfig& cfg, const at::Tensor& y) {
  const auto v = y.view({cfg.seq, cfg.batch, cfg.dirs, cfg.hidden});
  return cfg.batch_first ? v.permute({1, 0, 2, 3}) : v.permute({0, 2, 1, 3});
}
at::Tensor state_out(const RnnConfig& cfg, const at::Tensor& h) {
  return cfg.batch_first ? h.transpose(0, 1) : h;
}

// Runs the cell over x [seq, batch, I] (or packed data with batch_sizes); returns Y, H_n, C_n.
TensorList run_cell(const RnnConfig& cfg, const at::Tensor& x, const at::Tensor& batch_sizes,
                    const at::Tensor& h0, const at::Tensor& c0, const TensorList& params) {
  const bool bi = cfg.dirs == 2, packed = batch_sizes.defined();
  switch (cfg.cell) {
    case Cell::lstm: {
      auto r = packed ? at::lstm(x, batch_sizes, {h0, c0}, params, cfg.bias, 1, 0.0, false, bi)
                      : at::lstm(x, {h0, c0}, params, cfg.bias, 1, 0.0, false, bi, false);
      return {std::get<0>(r), std::get<1>(r), std::get<2>(r)};
    }
    case Cell::gru: {
      auto r = packed ? at::gru(x, batch_sizes, h0, params, cfg.bias, 1, 0.0, false, bi)
                      : at::gru(x, h0, params, cfg.bias, 1, 0.0, false, bi, false);
      return {std::get<0>(r), std::get<1>(r)};
    }
    case Cell::rnn_tanh: {
      auto r = packed ? at::rnn_tanh(x, batch_sizes, h0, params, cfg.bias, 1, 0.0, false, bi)
                      : at::rnn_tanh(x, h0, params, cfg.bias, 1, 0.0, false, bi, false);
      return {std::get<0>(r), std::get<1>(r)};
    }
    case Cell::rnn_relu: {
      auto r = packed ? at::rnn_relu(x, batch_sizes, h0, params, cfg.bias, 1, 0.0, false, bi)
                      : at::rnn_relu(x, h0, params, cfg.bias, 1, 0.0, false, bi, false);
      return {std::get<0>(r), std::get<1>(r)};
    }
  }
  return {};
}

// Position t of sequence b holds step min(t, L_b - 1) of its reversal: reads x at L_b - 1 - t
// inside the sequence and itself past it (an involution, so it also maps Y back).
at::Tensor reversal_index(const at::Tensor& lens, int64_t seq) {
  const auto t = at::arange(seq, lens.options()).unsqueeze(1);
  const auto l = lens.unsqueeze(0);
  return at::where(t < l, l - 1 - t, t);
}
at::Tensor reverse_time(const at::Tensor& v, const at::Tensor& index) {  // v [seq, batch, K]
  return v.gather(0, index.unsqueeze(2).expand({-1, -1, v.size(2)}));
}

TensorList run_rnn(const RnnConfig& cfg, const OpSpec& spec, const Call& c) {
  at::Tensor x = cfg.batch_first ? c.in[0].transpose(0, 1) : c.in[0];
  const auto params = params_of(cfg, c.in);
  at::Tensor h0 = state_in(cfg, c.in, 5, x);
  at::Tensor c0 = cfg.cell == Cell::lstm ? state_in(cfg, c.in, 6, x) : at::Tensor();

  at::Tensor lens;
  if (c.in.size() > 4 && c.in[4].defined()) {
    lens = c.in[4].to(at::kLong);
    const auto lo = lens.min().item<int64_t>(), hi = lens.max().item<int64_t>();
    D5_CHECK_ARG(lo >= 0 && hi <= cfg.seq, "{}: sequence_lens has values in [{}, {}], outside [0, {}]",
                 spec.label(), lo, hi, cfg.seq);
    if (lo == cfg.seq) lens = at::Tensor();  // every sequence is full: the plain path
  }
  at::Tensor rev;
  if (cfg.reverse) {
    rev = lens.defined() ? reversal_index(lens, cfg.seq) : at::Tensor();
    x = rev.defined() ? reverse_time(x, rev) : x.flip(0);
  }

  TensorList r;
  if (!lens.defined()) {
    r = run_cell(cfg, x.contiguous(), {}, h0, c0, params);
  } else {
    // Packing needs lengths >= 1 sorted in decreasing order; rows are unsorted afterwards.
    const auto [sorted, order] = at::sort(lens.clamp_min(1), 0, /*descending=*/true);
    const auto unorder = at::argsort(order);
    auto by_order = [&](const at::Tensor& t) { return t.defined() ? t.index_select(1, order) : t; };
    const auto packed = at::_pack_padded_sequence(by_order(x), sorted, false);
    r = run_cell(cfg, std::get<0>(packed), std::get<1>(packed), by_order(h0), by_order(c0), params);
    r[0] = std::get<0>(at::_pad_packed_sequence(r[0], std::get<1>(packed), false, 0.0, cfg.seq));
    const auto keep = (lens > 0).to(r[0].scalar_type()).view({1, cfg.batch, 1});
    for (auto& t : r) t = t.index_select(1, unorder) * keep;
  }
  if (cfg.reverse) r[0] = rev.defined() ? reverse_time(r[0], rev) : r[0].flip(0);
  r[0] = y_out(cfg, r[0]);
  for (size_t k = 1; k < r.size(); ++k) r[k] = state_out(cfg, r[k]);
  return r;
}

Built build_rnn(const OpSpec& s) {
  static const std::vector<std::string> kLstm = {"Sigmoid", "Tanh", "Tanh"}, kGru = {"Sigmoid", "Tanh"},
                                        kRnn = {"Tanh"};
  const std::string why = refusal(s);
  if (!why.empty()) return why;
  const std::string direction = s.attrs.get_string("direction", "forward");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const auto cell = cell_of(s, s.type == "LSTM" ? kLstm : s.type == "GRU" ? kGru : kRnn, dirs);
  if (auto* reason = std::get_if<std::string>(&cell)) return *reason;

  RnnConfig cfg{};
  cfg.cell = std::get<Cell>(cell);
  cfg.gates = s.type == "LSTM" ? 4 : s.type == "GRU" ? 3 : 1;
  cfg.gate_order = s.type == "LSTM"  ? std::vector<int64_t>{0, 2, 3, 1}
                   : s.type == "GRU" ? std::vector<int64_t>{1, 0, 2}
                                     : std::vector<int64_t>{0};
  cfg.gate_index = HostConstant(at::tensor(cfg.gate_order, at::kLong));
  cfg.batch_first = s.attrs.get_int("layout", 0) == 1;
  cfg.dirs = dirs;
  cfg.reverse = direction == "reverse";
  const Shape& x = s.inputs[0].shape;
  cfg.seq = x[cfg.batch_first ? 1 : 0];
  cfg.batch = x[cfg.batch_first ? 0 : 1];
  cfg.hidden = s.inputs[2].shape[2];
  cfg.bias = s.has_input(3);
  const std::string aten = cfg.cell == Cell::lstm       ? "at::lstm"
                           : cfg.cell == Cell::gru      ? "at::gru"
                           : cfg.cell == Cell::rnn_tanh ? "at::rnn_tanh"
                                                        : "at::rnn_relu";
  const OpSpec spec = s;
  return OpDef{[cfg, spec](const Call& c) { return run_rnn(cfg, spec, c); }, aten};
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  const char* notes =
      "f32, f64; default activations only (RNN: Tanh or Relu); no clip; LSTM without peepholes or "
      "input_forget; "
      "GRU with linear_before_reset=1; sequence_lens through packed sequences";
  for (const char* type : {"LSTM", "GRU", "RNN"})
    add_torch_op(
        r, type, true, [](const OpSpec& s, const OpSemantics&) { return build_rnn(s); }, notes);
}

}  // namespace d5::torch_backend

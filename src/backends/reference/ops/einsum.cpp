// Einsum: Einstein summation, ONNX's (numpy's) form. "ij,jk->ik" names each input's axes with
// letters; the output has the axes after "->" (without "->": "..." first, then the letters that
// occur exactly once, in alphabetical order), and every letter absent from the output is summed:
//   y[o] = sum over all letter values consistent with o of  prod_k x_k[letters of input k]
// A repeated letter in one input takes a diagonal ("ii->i"). "..." stands for the same number of
// leading axes in every term (fewer in an input of lower rank: right-aligned), broadcast like
// numpy (an extent of 1 repeats). The gradient of input k is the same sum with x_k left out:
//   dx_k[i_k] = sum of g[o] * prod_{j != k} x_j[i_j] over every assignment that maps to i_k
// (a broadcast axis of extent 1 collects every value it was repeated for).
#include <algorithm>
#include <map>

#include "../ref_common.h"

namespace d5::reference {

namespace {

// Labels are numbered: the ellipsis axes first (0 .. ellipsis-1), then letters by first use.
struct EinsumPlan {
  int ellipsis = 0;                          // axes "..." stands for, the most over all inputs
  std::vector<int64_t> extent;               // per label
  std::vector<std::vector<int>> in_labels;   // per input, per axis
  std::vector<int> out_labels;
};

// The letters and ellipsis of one term; "..." becomes -1.
std::vector<int> split_term(const std::string& term, const OpSpec& s) {
  std::vector<int> out;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term.compare(i, 3, "...") == 0) {
      D5_CHECK_ARG(std::find(out.begin(), out.end(), -1) == out.end(), "{}: '...' appears twice in term '{}'",
                   s.label(), term);
      out.push_back(-1);
      i += 2;
      continue;
    }
    const char c = term[i];
    D5_CHECK_ARG((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'), "{}: equation term '{}' has '{}'; use letters "
                 "and '...'", s.label(), term, c);
    out.push_back(static_cast<unsigned char>(c));
  }
  return out;
}

// Binds a term's axes to labels, checking extents (letters must agree; ellipsis axes broadcast).
std::vector<int> bind_axes(const std::vector<int>& term, const Shape& shape, EinsumPlan& p,
                           std::map<int, int>& letter_label, const OpSpec& s) {
  const auto letters = static_cast<int64_t>(std::count_if(term.begin(), term.end(), [](int c) { return c >= 0; }));
  const bool has_ellipsis = std::find(term.begin(), term.end(), -1) != term.end();
  const auto rank = static_cast<int64_t>(shape.rank());
  D5_CHECK_ARG(has_ellipsis ? rank >= letters : rank == letters, "{}: a term of {} letter(s){} does not fit an "
               "input of rank {}", s.label(), letters, has_ellipsis ? " and '...'" : "", rank);
  const int64_t dots = rank - letters;
  std::vector<int> labels;
  auto bind = [&](int label, int64_t dim, bool broadcasts) {
    int64_t& e = p.extent[static_cast<size_t>(label)];
    if (e == 0 || (broadcasts && e == 1)) e = dim;
    else
      D5_CHECK_ARG(dim == e || (broadcasts && dim == 1), "{}: an axis of extent {} meets one of extent {}",
                   s.label(), dim, e);
    labels.push_back(label);
  };
  size_t axis = 0;
  for (int c : term) {
    if (c == -1) {
      for (int64_t d = 0; d < dots; ++d)
        bind(p.ellipsis - static_cast<int>(dots) + static_cast<int>(d), shape[axis++], true);
      continue;
    }
    auto it = letter_label.find(c);
    if (it == letter_label.end()) {
      it = letter_label.emplace(c, static_cast<int>(p.extent.size())).first;
      p.extent.push_back(0);
    }
    bind(it->second, shape[axis++], false);
  }
  return labels;
}

EinsumPlan plan_einsum(const OpSpec& s) {
  std::string eq;
  for (char c : s.attrs.get_string("equation")) if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (size_t b = 0;;) {
    const size_t comma = lhs.find(',', b);
    terms.push_back(split_term(lhs.substr(b, comma - b), s));
    if (comma == std::string::npos) break;
    b = comma + 1;
  }
  D5_CHECK_ARG(terms.size() == s.inputs.size(), "{}: equation '{}' has {} term(s) for {} input(s)", s.label(), eq,
               terms.size(), s.inputs.size());
  EinsumPlan p;
  for (size_t k = 0; k < terms.size(); ++k) {
    const auto letters = std::count_if(terms[k].begin(), terms[k].end(), [](int c) { return c >= 0; });
    if (std::find(terms[k].begin(), terms[k].end(), -1) != terms[k].end())
      p.ellipsis = std::max(p.ellipsis, static_cast<int>(s.inputs[k].shape.rank()) - static_cast<int>(letters));
  }
  p.extent.assign(static_cast<size_t>(p.ellipsis), 0);
  std::map<int, int> letter_label;
  std::map<int, int> uses;
  for (size_t k = 0; k < terms.size(); ++k) {
    p.in_labels.push_back(bind_axes(terms[k], s.inputs[k].shape, p, letter_label, s));
    for (int c : terms[k])
      if (c >= 0) ++uses[c];
  }
  for (auto& e : p.extent) e = std::max<int64_t>(e, 1);  // an ellipsis axis no input has
  for (int l = 0; l < p.ellipsis; ++l) p.out_labels.push_back(l);
  if (arrow == std::string::npos) {
    for (const auto& [c, n] : uses)  // std::map: alphabetical (uppercase before lowercase, as numpy)
      if (n == 1) p.out_labels.push_back(letter_label.at(c));
    return p;
  }
  p.out_labels.clear();
  for (int c : split_term(eq.substr(arrow + 2), s)) {
    if (c == -1) {
      for (int l = 0; l < p.ellipsis; ++l) p.out_labels.push_back(l);
      continue;
    }
    D5_CHECK_ARG(letter_label.count(c), "{}: output letter '{}' is in no input term", s.label(), static_cast<char>(c));
    const int label = letter_label.at(c);
    D5_CHECK_ARG(std::find(p.out_labels.begin(), p.out_labels.end(), label) == p.out_labels.end(),
                 "{}: output letter '{}' appears twice", s.label(), static_cast<char>(c));
    p.out_labels.push_back(label);
  }
  return p;
}

std::vector<TensorDesc> output_of(const OpSpec& s, const EinsumPlan& p) {
  D5_CHECK_ARG(!s.inputs.empty(), "{}: needs at least one input", s.label());
  for (const auto& d : s.inputs)
    D5_CHECK_ARG(d.dtype == s.inputs[0].dtype, "{}: inputs have different dtypes ({} and {})", s.label(),
                 to_string(s.inputs[0].dtype), to_string(d.dtype));
  std::vector<int64_t> dims;
  for (int l : p.out_labels) dims.push_back(p.extent[static_cast<size_t>(l)]);
  return {TensorDesc{s.inputs[0].dtype, Shape(dims)}};
}

class EinsumOp : public ReferenceOp {
 public:
  explicit EinsumOp(const OpSpec& s) : EinsumOp(s, plan_einsum(s)) {}

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      std::vector<double> acc(static_cast<size_t>(out[0].numel()), 0.0);
      visit([&](const std::vector<int64_t>& at, int64_t o) {
        double v = 1;
        for (size_t k = 0; k < in.size(); ++k) v *= static_cast<double>(in[k].data_as<T>()[at[k]]);
        acc[static_cast<size_t>(o)] += v;
      });
      T* y = out[0].data_as<T>();
      for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<T>(acc[i]);
    });
  }

  std::vector<bool> differentiable_inputs() const override { return std::vector<bool>(spec_.inputs.size(), true); }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      std::vector<std::vector<double>> acc(in.size());
      for (size_t k = 0; k < in.size(); ++k) acc[k].assign(static_cast<size_t>(in[k].numel()), 0.0);
      if (gy[0].defined()) {
        const T* g = gy[0].data_as<T>();
        visit([&](const std::vector<int64_t>& at, int64_t o) {
          for (size_t k = 0; k < in.size(); ++k) {
            if (!gx[k].defined()) continue;
            double v = static_cast<double>(g[o]);
            for (size_t j = 0; j < in.size(); ++j)
              if (j != k) v *= static_cast<double>(in[j].data_as<T>()[at[j]]);
            acc[k][static_cast<size_t>(at[k])] += v;
          }
        });
      }
      for (size_t k = 0; k < in.size(); ++k)
        if (gx[k].defined())
          for (size_t i = 0; i < acc[k].size(); ++i) gx[k].data_as<T>()[i] = static_cast<T>(acc[k][i]);
    });
  }

  // One multiply per input and one add per assignment of every label.
  double flops() const override {
    double n = 1;
    for (int64_t e : plan_.extent) n *= static_cast<double>(e);
    return n * static_cast<double>(spec_.inputs.size());
  }

 private:
  EinsumOp(const OpSpec& s, EinsumPlan p) : ReferenceOp(s, output_of(s, p)), plan_(std::move(p)) {}

  // Calls f(flat index into each input, flat index into the output) for every assignment of
  // values to the labels; an input axis of extent 1 under a longer label reads index 0.
  template <typename F> void visit(F&& f) const {
    const size_t labels = plan_.extent.size();
    for (int64_t e : plan_.extent)
      if (e == 0) return;
    std::vector<int64_t> value(labels, 0), at(spec_.inputs.size(), 0);
    for (;;) {
      for (size_t k = 0; k < spec_.inputs.size(); ++k) {
        const Shape& sh = spec_.inputs[k].shape;
        int64_t flat = 0;
        for (size_t a = 0; a < sh.rank(); ++a)
          flat = flat * sh[a] + (sh[a] == 1 ? 0 : value[static_cast<size_t>(plan_.in_labels[k][a])]);
        at[k] = flat;
      }
      int64_t o = 0;
      for (int l : plan_.out_labels) o = o * plan_.extent[static_cast<size_t>(l)] + value[static_cast<size_t>(l)];
      f(at, o);
      size_t d = labels;
      while (d-- > 0) {
        if (++value[d] < plan_.extent[d]) break;
        value[d] = 0;
      }
      if (d == static_cast<size_t>(-1)) return;
    }
  }

  EinsumPlan plan_;
};

}  // namespace

void register_einsum_ops(OpRegistry& r) { add_op(r, "Einsum", true, make<EinsumOp>); }

}  // namespace d5::reference

// Native GEMM and convolution calls. They take the layouts a deep500 tensor has (row-major
// matrices, NCHW images, OIHW filters) so that both sides of a comparison are handed the same
// memory; primitives and views are made once, outside anything timed.
#include "deep500/op/native_calls.h"

#include <cstring>
#include <memory>

#include <fmt/format.h>

#ifdef D5_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif
#ifdef D5_HAVE_TORCH
#include <ATen/ATen.h>
#endif
#ifdef D5_HAVE_CUDA
#include "native_cuda.h"
#endif

namespace d5 {

namespace {

[[maybe_unused]] int64_t param(const Problem& p, const char* key) { return p.params.at(key).get<int64_t>(); }

struct ConvDims {
  int64_t n, c, h, w, k, fh, fw, ph, pw, sh, sw, oh, ow;
};
// Unused when the program has neither native library (nothing to compare with).
[[maybe_unused]] ConvDims conv_dims(const Problem& p) {
  ConvDims d{param(p, "n"), param(p, "c"), param(p, "h"), param(p, "w"), param(p, "k"), param(p, "filter_h"),
             param(p, "filter_w"), param(p, "pad_h"), param(p, "pad_w"), param(p, "hstride"), param(p, "wstride"),
             0, 0};
  d.oh = (d.h + 2 * d.ph - d.fh) / d.sh + 1;
  d.ow = (d.w + 2 * d.pw - d.fw) / d.sw + 1;
  return d;
}

#ifdef D5_HAVE_ONEDNN
// A oneDNN primitive with its arguments and the reorders around it. When the primitive picks
// formats other than the plain ones (format_tag::any), inputs are reordered into them either once,
// here (NativeLayout::Best, as a framework that keeps tensors in blocked formats has them), or on
// every call (NativeLayout::Boundary, as a framework with plain tensors must). Every reorder
// primitive is created here, none per call.
struct OnednnSetup {
  using Step = std::pair<dnnl::primitive, std::unordered_map<int, dnnl::memory>>;
  std::shared_ptr<dnnl::engine> eng = std::make_shared<dnnl::engine>(dnnl::engine::kind::cpu, 0);
  std::shared_ptr<dnnl::stream> strm = std::make_shared<dnnl::stream>(*eng);
  bool per_call = false;
  std::vector<Step> before, after;
  std::unordered_map<int, dnnl::memory> args;

  static Step reorder(const dnnl::memory& from, const dnnl::memory& to) {
    return {dnnl::reorder(from, to), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}};
  }
  void execute(const Step& s) const { s.first.execute(*strm, s.second); }

  // `chosen` is what the primitive wants; `plain` describes `data`.
  void input(int arg, const dnnl::memory::desc& chosen, const dnnl::memory::desc& plain, const void* data) {
    const dnnl::memory user(plain, *eng, const_cast<void*>(data));
    if (chosen == plain) {
      args.emplace(arg, user);
      return;
    }
    const dnnl::memory m(chosen, *eng);
    if (per_call) {
      before.push_back(reorder(user, m));
    } else {
      execute(reorder(user, m));
      strm->wait();
    }
    args.emplace(arg, m);
  }
  // The output in the chosen format, and a function that returns it as a plain tensor.
  std::function<Tensor()> output(const dnnl::memory::desc& chosen, const dnnl::memory::desc& plain, const Shape& shape) {
    auto out = std::make_shared<Tensor>(DType::f32, shape);
    const dnnl::memory user(plain, *eng, out->data());
    if (chosen == plain || per_call) {
      if (chosen == plain) {
        args.emplace(DNNL_ARG_DST, user);
      } else {
        const dnnl::memory m(chosen, *eng);
        args.emplace(DNNL_ARG_DST, m);
        after.push_back(reorder(m, user));
      }
      return [out] { return out->clone(); };
    }
    const dnnl::memory m(chosen, *eng);
    args.emplace(DNNL_ARG_DST, m);
    return [back = reorder(m, user), out, strm = strm] {
      back.first.execute(*strm, back.second);
      strm->wait();
      return out->clone();
    };
  }
  void run(const dnnl::primitive& prim) const {
    for (const auto& s : before) execute(s);
    prim.execute(*strm, args);
    for (const auto& s : after) execute(s);
    strm->wait();
  }
};

std::optional<NativeCall> onednn_call(const Problem& p, const std::vector<Tensor>& in, NativeLayout layout,
                                      std::string* why) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  OnednnSetup st;
  st.per_call = layout == NativeLayout::Boundary;
  std::shared_ptr<primitive> prim;
  NativeCall call;
  if (p.spec.type == "Gemm") {
    const int64_t m = param(p, "m"), n = param(p, "n"), k = param(p, "k");
    const bool ta = param(p, "a_t") != 0, tb = param(p, "b_t") != 0;
    // A transposed operand is the same storage read with swapped strides; matmul reads such
    // plain operands directly, so only Best changes anything: B prepacked, as an inference
    // framework keeps its weights.
    const memory::desc a({m, k}, dt::f32, ta ? memory::dims{1, m} : memory::dims{k, 1});
    const memory::desc b({k, n}, dt::f32, tb ? memory::dims{1, k} : memory::dims{n, 1});
    const memory::desc c({m, n}, dt::f32, memory::dims{n, 1});
    const bool pack = layout == NativeLayout::Best;
    const matmul::primitive_desc pd(matmul::desc(a, pack ? memory::desc({k, n}, dt::f32, tag::any) : b, c), *st.eng);
    prim = std::make_shared<matmul>(pd);
    st.input(DNNL_ARG_SRC, pd.src_desc(), a, in[0].data());
    st.input(DNNL_ARG_WEIGHTS, pd.weights_desc(), b, in[1].data());
    call.result = st.output(pd.dst_desc(), c, Shape{m, n});
    call.implementation = fmt::format("onednn:{} (matmul{})", pd.impl_info_str(), pack ? ", prepacked B" : "");
  } else if (p.spec.type == "Conv") {
    const ConvDims d = conv_dims(p);
    const memory::desc x({d.n, d.c, d.h, d.w}, dt::f32, tag::nchw);
    const memory::desc w({d.k, d.c, d.fh, d.fw}, dt::f32, tag::oihw);
    const memory::desc y({d.n, d.k, d.oh, d.ow}, dt::f32, tag::nchw);
    const bool plain = layout == NativeLayout::Plain;
    auto fmt_of = [&](const memory::desc& md) { return plain ? md : memory::desc(md.dims(), dt::f32, tag::any); };
    // Boundary mirrors a training framework (forward_training); the others are inference calls.
    const prop_kind kind = layout == NativeLayout::Boundary ? prop_kind::forward_training : prop_kind::forward_inference;
    const convolution_forward::desc cd(kind, algorithm::convolution_direct, fmt_of(x), fmt_of(w), fmt_of(y),
                                       {d.sh, d.sw}, {d.ph, d.pw}, {d.ph, d.pw});
    const convolution_forward::primitive_desc pd(cd, *st.eng);
    prim = std::make_shared<convolution_forward>(pd);
    st.input(DNNL_ARG_SRC, pd.src_desc(), x, in[0].data());
    st.input(DNNL_ARG_WEIGHTS, pd.weights_desc(), w, in[1].data());
    call.result = st.output(pd.dst_desc(), y, Shape{d.n, d.k, d.oh, d.ow});
    call.implementation = fmt::format("onednn:{} (convolution, {})", pd.impl_info_str(),
                                      plain                                    ? "plain formats"
                                      : layout == NativeLayout::Best           ? "its own formats, inputs reordered once"
                                                                               : "its own formats, reorders per call");
  } else {
    *why = fmt::format("no native oneDNN call for {}", p.spec.type);
    return std::nullopt;
  }
  // `run` owns every buffer it touches (the arguments hold them, or point into the output tensor
  // that `result` shares); a caller may keep `run` without `result`.
  call.run = [st, prim, keep = call.result] { st.run(*prim); };
  return call;
}
#endif

#ifdef D5_HAVE_TORCH
at::Tensor borrow(const Tensor& t) {
  return at::from_blob(const_cast<void*>(t.data()), t.shape().dims(), at::TensorOptions().dtype(at::kFloat));
}

std::optional<NativeCall> torch_call(const Problem& p, const std::vector<Tensor>& in, std::string* why) {
  auto last = std::make_shared<at::Tensor>();
  NativeCall call;
  if (p.spec.type == "Gemm") {
    const at::Tensor a = param(p, "a_t") ? borrow(in[0]).t() : borrow(in[0]);
    const at::Tensor b = param(p, "b_t") ? borrow(in[1]).t() : borrow(in[1]);
    call.run = [a, b, last] { *last = at::matmul(a, b); };
    call.implementation = "aten::matmul";
  } else if (p.spec.type == "Conv") {
    const ConvDims d = conv_dims(p);
    const at::Tensor x = borrow(in[0]), w = borrow(in[1]);
    call.run = [x, w, d, last] { *last = at::conv2d(x, w, {}, {d.sh, d.sw}, {d.ph, d.pw}); };
    call.implementation = "aten::conv2d";
  } else {
    *why = fmt::format("no native ATen call for {}", p.spec.type);
    return std::nullopt;
  }
  call.result = [last] {
    const at::Tensor c = last->contiguous();
    Tensor t(DType::f32, Shape(std::vector<int64_t>(c.sizes().begin(), c.sizes().end())));
    std::memcpy(t.data(), c.data_ptr(), t.bytes());
    return t;
  };
  return call;
}
#endif

}  // namespace

std::vector<std::string> native_libraries() {
  std::vector<std::string> out;
#ifdef D5_HAVE_ONEDNN
  out.push_back("onednn");
#endif
#ifdef D5_HAVE_TORCH
  out.push_back("torch");
#endif
#ifdef D5_HAVE_CUDA
  out.push_back("cuda");
#endif
  return out;
}

std::optional<NativeCall> make_native_call(const std::string& library, const Problem& p,
                                           const std::vector<Tensor>& inputs, std::string* why,
                                           const NativeMatch& match) {
#ifdef D5_HAVE_ONEDNN
  if (library == "onednn") return onednn_call(p, inputs, match.layout, why);
#endif
#ifdef D5_HAVE_TORCH
  if (library == "torch") return torch_call(p, inputs, why);
#endif
#ifdef D5_HAVE_CUDA
  if (library == "cuda") return cuda_native_call(p, inputs, match, why);
#endif
  (void)p;
  (void)inputs;
  (void)match;
  *why = library == "onednn" || library == "torch" || library == "cuda"
             ? fmt::format("native library '{}' is not built into this program", library)
             : fmt::format("backend '{}' wraps no library to call directly (native calls exist for onednn, torch and "
                           "cuda)",
                           library);
  return std::nullopt;
}

}  // namespace d5

#include "onednn_common.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>

#include <fmt/ranges.h>

namespace d5::onednn {

namespace {
std::atomic<int64_t> g_primitives{0};
std::atomic<int64_t> g_port_reorders{0};
}  // namespace

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

const dnnl::stream& stream() {
  static const dnnl::stream s(engine());
  return s;
}

int64_t primitives_created() { return g_primitives.load(); }
void count_primitive_creation() { ++g_primitives; }
int64_t port_reorders_run() { return g_port_reorders.load(); }

memory::dims dims_of(const Shape& s) {
  if (s.rank() == 0) return {1};
  return memory::dims(s.dims().begin(), s.dims().end());
}

memory::dims padded(const memory::dims& d, size_t rank) {
  memory::dims r(rank - std::min(rank, d.size()), 1);
  r.insert(r.end(), d.begin(), d.end());
  return r;
}

memory::desc plain(const memory::dims& d) {
  memory::dims strides(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<memory::dim>(d[i], 1);
  return memory::desc(d, memory::data_type::f32, strides);
}

memory::desc any(const memory::dims& d) {
  return memory::desc(d, memory::data_type::f32, memory::format_tag::any);
}

memory::desc transposed(const memory::desc& md) {
  memory::dims d = md.dims();
  const auto& blk = md.data.format_desc.blocking;
  memory::dims strides(blk.strides, blk.strides + md.data.ndims);
  const size_t r = d.size();
  std::swap(d[r - 1], d[r - 2]);
  std::swap(strides[r - 1], strides[r - 2]);
  return memory::desc(d, md.data_type(), strides);
}

bool is_plain(const memory::desc& md) { return md == plain(md.dims()); }

namespace {
// oneDNN's tag notation: axes outermost first, a capital for an axis that is also blocked, then
// the inner blocks ("aBcd16b" is nChw16c).
std::string layout_name(const memory::desc& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked) return "opaque";
  const auto& blk = d.format_desc.blocking;
  std::vector<int> order(static_cast<size_t>(d.ndims));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  std::vector<bool> blocked(order.size(), false);
  for (int k = 0; k < blk.inner_nblks; ++k) blocked[static_cast<size_t>(blk.inner_idxs[k])] = true;
  std::string s;
  for (int a : order) s += static_cast<char>((blocked[static_cast<size_t>(a)] ? 'A' : 'a') + a);
  for (int k = 0; k < blk.inner_nblks; ++k)
    s += fmt::format("{}{}", blk.inner_blks[k], static_cast<char>('a' + blk.inner_idxs[k]));
  return s;
}
}  // namespace

BackendLayout backend_layout(const memory::desc& md) {
  BackendLayout l;
  l.backend = "onednn";
  l.name = layout_name(md);
  l.desc.resize(sizeof(md.data));
  std::memcpy(l.desc.data(), &md.data, sizeof(md.data));
  l.elements = static_cast<int64_t>(md.get_size() / sizeof(float));
  return l;
}

memory::desc desc_of(const BackendLayout& l) {
  D5_CHECK_ARG(l.backend == "onednn" && l.desc.size() == sizeof(dnnl_memory_desc_t),
               "a {} layout '{}' is not a oneDNN memory descriptor", l.backend, l.name);
  dnnl_memory_desc_t d;
  std::memcpy(&d, l.desc.data(), sizeof(d));
  return memory::desc(d);
}

memory unbound(const memory::desc& md) { return memory(md, engine(), DNNL_MEMORY_NONE); }

// oneDNN takes a non-const handle for every argument; it never writes to a primitive's inputs.
void bind(const memory& m, const void* data) { m.set_data_handle(const_cast<void*>(data)); }

dnnl::primitive_attr Scratchpad::attr(dnnl::primitive_attr a) {
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

void Scratchpad::reserve(const dnnl::primitive_desc_base& pd) {
  const size_t need = pd.scratchpad_desc().get_size();
  if (need <= bytes_) return;
  bytes_ = need;
  mem_ = memory(memory::desc({static_cast<memory::dim>(need)}, memory::data_type::u8, memory::format_tag::a),
                engine());
}

Port::Port(const memory::desc& user, const memory::desc& prim, Dir dir, Scratchpad& scratch)
    : user_(unbound(user)), scratch_(&scratch) {
  if (user == prim) {
    prim_ = user_;
    return;
  }
  prim_ = memory(prim, engine());  // owned, in the primitive's layout
  const auto& src = dir == Dir::in ? user_ : prim_;
  const auto& dst = dir == Dir::in ? prim_ : user_;
  const dnnl::reorder::primitive_desc pd(src, dst, Scratchpad::attr());
  scratch.reserve(pd);
  reorder_ = make_primitive<dnnl::reorder>(pd);
  reorder_args_ = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
}

void Port::run_reorder() {
  ++g_port_reorders;
  if (scratch_->bytes()) reorder_args_.insert_or_assign(DNNL_ARG_SCRATCHPAD, scratch_->mem());
  reorder_->execute(stream(), reorder_args_);
}

const memory& Port::in(const void* data) {
  bind(user_, data);
  if (reorder_) run_reorder();
  return prim_;
}

const memory& Port::out(void* data) {
  bind(user_, data);
  return prim_;
}

void Port::finish() {
  if (reorder_) run_reorder();
}

std::string OnednnOp::implementation() const {
  std::string s = fmt::format("onednn:{}", fmt::join(forward_impls_, "+"));
  if (!backward_impls_.empty() && backward_impls_ != forward_impls_)
    s += fmt::format(" bwd:{}", fmt::join(backward_impls_, "+"));
  return s;
}

namespace {

// The variant of an operator that has none of its own for a layout exchange: inputs in oneDNN
// layouts are reordered to plain and the operator for plain tensors runs.
class Relayout : public OnednnOp {
 public:
  Relayout(const OnednnOp& op, const IoLayouts& io)
      : OnednnOp(op.spec(), op.output_descs()), plain_(OpRegistry::global().create(op.spec(), "onednn")) {
    ports_.resize(spec_.inputs.size());
    for (size_t i = 0; i < ports_.size(); ++i)
      if (const memory::desc* md = io.input(i)) {
        ports_[i] = port(*md, plain(dims_of(spec_.inputs[i].shape)), Port::Dir::in);
        reorders_.inputs += ports_[i].reorders();
      }
  }
  std::string implementation() const override { return plain_->implementation(); }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    std::vector<Tensor> plain_in(in.begin(), in.end());
    for (size_t i = 0; i < ports_.size(); ++i)
      if (ports_[i].reorders())
        plain_in[i] = Tensor::view(plain_->spec().inputs[i], ports_[i].in(in[i].data()).get_data_handle());
    plain_->forward(plain_in, out);
  }
  double flops() const override { return plain_->flops(); }

 private:
  std::unique_ptr<Operator> plain_;
  std::vector<Port> ports_;
};

}  // namespace

bool OnednnOp::accepts_layout(size_t i, const BackendLayout& l) const {
  return l.backend == "onednn" && i < spec_.inputs.size() && takes_layout(i) &&
         desc_of(l).dims() == dims_of(spec_.inputs[i].shape);
}

std::unique_ptr<Operator> OnednnOp::with_layouts(const std::vector<std::optional<BackendLayout>>& in,
                                                 const std::vector<bool>& keep) const {
  IoLayouts io;
  io.keep = keep;
  for (const auto& l : in) io.in.push_back(l ? std::optional(desc_of(*l)) : std::nullopt);
  std::unique_ptr<OnednnOp> v;
  try {
    v = variant(io);
  } catch (const dnnl::error&) {
  } catch (const Refused&) {
  }
  if (!v) v = std::make_unique<Relayout>(*this, io);
  // The executor allocates, and check_inputs expects, the storage of what is not plain.
  for (size_t i = 0; i < v->spec_.inputs.size(); ++i)
    if (const memory::desc* md = io.input(i)) v->spec_.inputs[i] = backend_layout(*md).storage();
  for (size_t j = 0; j < v->outputs_.size(); ++j)
    if (auto l = v->output_layout(j)) v->outputs_[j] = l->storage();
  return v;
}

std::optional<BackendLayout> OnednnOp::output_layout(size_t j) const {
  if (j >= output_layouts_.size() || !output_layouts_[j]) return std::nullopt;
  return backend_layout(*output_layouts_[j]);
}

void OnednnOp::set_output_layout(size_t j, const memory::desc& md) {
  if (is_plain(md)) return;
  if (output_layouts_.size() <= j) output_layouts_.resize(j + 1);
  output_layouts_[j] = md;
}

void OnednnOp::uses(const dnnl::primitive_desc_base& pd, bool backward) {
  scratch_.reserve(pd);
  auto& v = backward ? backward_impls_ : forward_impls_;
  const std::string name = pd.impl_info_str();
  if (std::find(v.begin(), v.end(), name) == v.end()) v.push_back(name);
}

void OnednnOp::run(const dnnl::primitive& p, Args& args) {
  if (scratch_.bytes()) args.insert_or_assign(DNNL_ARG_SCRATCHPAD, scratch_.mem());
  try {
    p.execute(stream(), args);
  } catch (const dnnl::error& e) {
    D5_THROW(Internal, "{} ({}): oneDNN execution failed: {}", spec_.label(), implementation(), e.what());
  }
}

void OnednnOp::append_sum_to(Steps& steps, const memory& src, const memory& dst, float scale) {
  const memory::desc& from = src.get_desc();
  const memory::desc& to = dst.get_desc();
  const bool reduce = from.dims() != to.dims();
  if (reduce)
    append<dnnl::reduction>(steps,
                            dnnl::reduction::primitive_desc(
                                {dnnl::algorithm::reduction_sum, from, to, 0.f, 0.f}, attr(), engine()),
                            {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}}, true);
  if (!reduce && scale == 1)
    append<dnnl::reorder>(steps, dnnl::reorder::primitive_desc(src, dst, attr()),
                          {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}}, true);
  if (scale == 1) return;
  // Scales the reduced result in place, or the source into dst.
  append<dnnl::eltwise_forward>(
      steps,
      dnnl::eltwise_forward::primitive_desc(
          {dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_linear, to, scale, 0.f}, attr(),
          engine()),
      {{DNNL_ARG_SRC, reduce ? dst : src}, {DNNL_ARG_DST, dst}}, true);
}

SingleInputOp::SingleInputOp(const OpSpec& spec, std::vector<TensorDesc> outputs, const memory::desc& x_md,
                             const memory::desc& y_md)
    : OnednnOp(spec, std::move(outputs)), gy_(unbound(y_md)), gx_(unbound(x_md)) {
  exchange(x_md, x_md, y_md, y_md);
}

void SingleInputOp::exchange(const memory::desc& x_user, const memory::desc& x_prim, const memory::desc& y_user,
                             const memory::desc& y_prim) {
  x_port_ = port(x_user, x_prim, Port::Dir::in);
  y_port_ = port(y_user, y_prim, Port::Dir::out);
  x_ = x_port_.mem();
  y_ = y_port_.mem();
  reorders_ = {x_port_.reorders(), y_port_.reorders()};
}

void SingleInputOp::forward(std::span<const Tensor> in, std::span<Tensor> out) {
  check_inputs(in);
  x_port_.in(in[0].data());
  y_port_.out(out[0].data());
  run(forward_steps_);
  y_port_.finish();
}

std::vector<bool> SingleInputOp::differentiable_inputs() const {
  std::vector<bool> m(spec_.inputs.size(), false);
  m[0] = true;
  return m;
}

void SingleInputOp::backward(std::span<const Tensor> gy, std::span<const Tensor> in,
                             std::span<const Tensor> out, std::span<Tensor> gx) {
  if (!gx[0].defined()) return;
  if (!gy[0].defined()) {
    gx[0].fill(0);
    return;
  }
  bind(x_, in[0].data());
  bind(y_, out[0].data());
  bind(gy_, gy[0].data());
  bind(gx_, gx[0].data());
  run(backward_steps_);
}

void add_op(OpRegistry& r, const std::string& op_type, bool backward, Maker make, std::string notes) {
  auto create = [make = std::move(make)](const OpSpec& s) -> OpCreateResult {
    for (size_t i = 0; i < s.inputs.size(); ++i)
      if (s.has_input(i) && s.inputs[i].dtype != DType::f32)
        return fmt::format("onednn computes in f32 only; input {} is {}", i, to_string(s.inputs[i].dtype));
    try {
      return make(s);
    } catch (const Refused& e) {
      return std::string(e.what());
    } catch (const dnnl::error& e) {
      return fmt::format("oneDNN has no implementation for this case ({}, status {})", e.what(),
                         static_cast<int>(e.status));
    }
  };
  r.add(OpImplementation{.op_type = op_type,
                         .backend = "onednn",
                         .name = "onednn",
                         .backward = backward,
                         .create = std::move(create),
                         .notes = std::move(notes)});
}

}  // namespace d5::onednn

#pragma once
// Shared pieces of the oneDNN backend: the process-wide CPU engine and stream, memory descriptors
// for d5's plain row-major tensors, ports that reorder between those and the layouts primitives
// choose, the operator's own scratchpad, refusals and registration.
//
// Every operator builds all it needs when it is created: primitive descriptors, primitives,
// reorders, memory objects and scratch buffers. forward() and backward() only point memory
// objects at the caller's buffers and execute. make_primitive() counts creations so that tests
// can check that no call creates anything.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "deep500/core/error.h"
#include "deep500/spi/native_layout.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/operator.h"
#include "deep500/spi/selective_backward.h"

namespace d5::onednn {

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

// One CPU engine and one stream per process. This oneDNN runs on OpenMP, so execution is
// synchronous and d5::set_num_threads governs it.
const dnnl::engine& engine();
const dnnl::stream& stream();

// Primitives and reorders created through make_primitive since the process started.
int64_t primitives_created();
void count_primitive_creation();
// Reorders of activations (ports) executed since the process started.
int64_t port_reorders_run();

template <typename P, typename PD>
P make_primitive(const PD& pd) {
  count_primitive_creation();
  return P(pd);
}

// Thrown while creating an operator for a valid case this backend does not handle; the
// registration wrapper turns it into a refusal carrying the message.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... A>
void refuse_if(bool cond, fmt::format_string<A...> f, A&&... args) {
  if (cond) throw Refused(fmt::format(f, std::forward<A>(args)...));
}

// Dimensions of a d5 shape ({1} for a scalar: oneDNN has no rank-0 memory).
memory::dims dims_of(const Shape& s);
// `d` with leading ones up to `rank` (NumPy broadcasting aligns trailing axes).
memory::dims padded(const memory::dims& d, size_t rank);
// f32 row-major descriptor, the layout of every d5 tensor.
memory::desc plain(const memory::dims& d);
// f32, layout left to the primitive.
memory::desc any(const memory::dims& d);
// The last two axes of a plain matrix (batch) descriptor swapped through its strides: the
// transpose without moving data.
memory::desc transposed(const memory::desc& md);

// Whether `md` is d5's plain row-major layout of its dimensions.
bool is_plain(const memory::desc& md);
// A oneDNN descriptor as the executor carries it (native_layout.h), and back.
BackendLayout backend_layout(const memory::desc& md);
memory::desc desc_of(const BackendLayout& l);

// What a variant of an operator exchanges with its neighbours (NativeLayoutOperator): input i
// arrives in in[i] (none: plain); output j stays in its primitive's layout when keep[j].
struct IoLayouts {
  std::vector<std::optional<memory::desc>> in;
  std::vector<bool> keep;
  const memory::desc* input(size_t i) const { return i < in.size() && in[i] ? &*in[i] : nullptr; }
  bool keeps(size_t j) const { return j < keep.size() && keep[j]; }
};

// Memory of descriptor `md` with no buffer yet: forward/backward point it at the caller's data.
memory unbound(const memory::desc& md);
void bind(const memory& m, const void* data);

// The scratch memory of one operator: every primitive it runs is created with a user-managed
// scratchpad and they all share one buffer, sized for the largest, since they run one at a time.
class Scratchpad {
 public:
  // `attr` with the user scratchpad mode.
  static dnnl::primitive_attr attr(dnnl::primitive_attr a = {});
  void reserve(const dnnl::primitive_desc_base& pd);
  const memory& mem() const { return mem_; }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_ = 0;
  memory mem_;
};

// One tensor argument of a primitive. d5 tensors are plain row-major; a primitive may want a
// blocked layout (format_tag::any lets it choose). When the two differ, the port owns a buffer in
// the primitive's layout and the reorder between them.
class Port {
 public:
  enum class Dir { in, out };
  Port() = default;
  Port(const memory::desc& user, const memory::desc& prim, Dir dir, Scratchpad& scratch);

  // Input: points at `data` and reorders it into the primitive's layout when needed.
  const memory& in(const void* data);
  // Output: points at `data`; the primitive writes mem(), and finish() reorders it to `data`.
  const memory& out(void* data);
  void finish();
  // What the primitive reads or writes: the caller's buffer or the port's own.
  const memory& mem() const { return prim_; }
  bool reorders() const { return reorder_.has_value(); }

 private:
  void run_reorder();

  memory user_, prim_;
  std::optional<dnnl::reorder> reorder_;
  Args reorder_args_;
  Scratchpad* scratch_ = nullptr;
};

// A sequence of primitives with their arguments, run in order.
struct Step {
  dnnl::primitive primitive;
  Args args;
};
using Steps = std::vector<Step>;

// Base of every oneDNN operator: implementation names, ports, scratchpad and execution, and the
// exchange of oneDNN layouts with neighbouring operators (NativeLayoutOperator). Every oneDNN
// backward checks which gradients it is given (spare buffers catch what a primitive writes
// regardless), hence SelectiveBackward.
class OnednnOp : public Operator, public NativeLayoutOperator, public SelectiveBackward {
 public:
  // "onednn:<forward primitives>", plus " bwd:<backward primitives>" when these differ.
  std::string implementation() const override;

  bool accepts_layout(size_t i, const BackendLayout& l) const override;
  std::unique_ptr<Operator> with_layouts(const std::vector<std::optional<BackendLayout>>& in,
                                         const std::vector<bool>& keep) const override;
  std::optional<BackendLayout> output_layout(size_t j) const override;
  LayoutReorders reorders() const override { return reorders_; }

 protected:
  OnednnOp(const OpSpec& spec, std::vector<TensorDesc> outputs) : Operator(spec, std::move(outputs)) {}

  // Which inputs a variant can take in a oneDNN layout (accepts_layout checks their dimensions).
  virtual bool takes_layout(size_t /*input*/) const { return false; }
  // A forward-only variant exchanging `io`; nullptr when this operator has none. with_layouts
  // then runs this operator's plain twin behind reorders.
  virtual std::unique_ptr<OnednnOp> variant(const IoLayouts& /*io*/) const { return nullptr; }
  // Records that output j is in the non-plain layout `md` (of a variant: kept so; of an operator
  // for plain tensors: would be, if kept).
  void set_output_layout(size_t j, const memory::desc& md);

  // Records a compute primitive: its implementation name and its scratchpad needs.
  void uses(const dnnl::primitive_desc_base& pd, bool backward = false);
  Port port(const memory::desc& user, const memory::desc& prim, Port::Dir dir) {
    return Port(user, prim, dir, scratch_);
  }
  dnnl::primitive_attr attr(dnnl::primitive_attr a = {}) const { return Scratchpad::attr(std::move(a)); }
  // Creates the primitive of `pd`, records it (uses) and appends it to `steps`.
  template <typename P, typename PD>
  void append(Steps& steps, const PD& pd, Args args, bool backward) {
    uses(pd, backward);
    steps.push_back({make_primitive<P>(pd), std::move(args)});
  }
  // Appends the steps writing into `dst` the sum of `src` over the axes along which dst's shape
  // (same rank, ones where it broadcasts) is smaller, times `scale`: the gradient of a broadcast
  // input from an output-shaped one. A reorder copies when there is nothing to sum or scale.
  void append_sum_to(Steps& steps, const memory& src, const memory& dst, float scale);
  // Executes with this operator's scratchpad; a oneDNN failure becomes an InternalError naming the op.
  void run(const dnnl::primitive& p, Args& args);
  void run(Steps& steps) {
    for (auto& s : steps) run(s.primitive, s.args);
  }

  Scratchpad scratch_;
  LayoutReorders reorders_;

 private:
  std::vector<std::string> forward_impls_, backward_impls_;
  std::vector<std::optional<memory::desc>> output_layouts_;
};

// An operator with one differentiable input x (input 0) and one output y, whose forward and
// backward are short sequences of primitives over x, y, their gradients gy, gx and memories of
// its own (Eltwise, Softmax, LRN, pooling).
class SingleInputOp : public OnednnOp {
 public:
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override;
  std::vector<bool> differentiable_inputs() const override;
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override;

 protected:
  // x and gx have descriptor `x_md`, y and gy `y_md`.
  SingleInputOp(const OpSpec& spec, std::vector<TensorDesc> outputs, const memory::desc& x_md,
                const memory::desc& y_md);
  SingleInputOp(const OpSpec& spec, std::vector<TensorDesc> outputs, const memory::desc& md)
      : SingleInputOp(spec, std::move(outputs), md, md) {}
  // For a variant, before its steps are built: primitives read x_ in `x_prim` and write y_ in
  // `y_prim`; forward reorders from the caller's `x_user` and into `y_user` where they differ.
  void exchange(const memory::desc& x_user, const memory::desc& x_prim, const memory::desc& y_user,
                const memory::desc& y_prim);

  Port x_port_, y_port_;
  memory x_, y_, gy_, gx_;
  Steps forward_steps_, backward_steps_;
};

// A scratch buffer of f32 elements, allocated when the operator is created.
struct Buffer {
  std::unique_ptr<float[]> data;
  int64_t size = 0;
  void allocate(int64_t n) {
    data = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(std::max<int64_t>(n, 1)));
    size = n;
  }
  float* get() const { return data.get(); }
};

// A buffer that exists only for the rare call that needs it: the gradient sink of an input whose
// gradient the caller did not ask for while oneDNN still writes it. Allocated on first use, once.
class SpareBuffer {
 public:
  float* get(int64_t n) {
    if (buf_.size < n) buf_.allocate(n);
    return buf_.get();
  }

 private:
  Buffer buf_;
};

// Registers a oneDNN implementation of `op_type`. The wrapper refuses non-f32 inputs, and turns
// Refused and oneDNN's own errors during creation into refusals; `notes` states the limits.
using Maker = std::function<std::unique_ptr<Operator>(const OpSpec&)>;
void add_op(OpRegistry& r, const std::string& op_type, bool backward, Maker make, std::string notes);

// Per-family registration (one file each).
void register_eltwise_ops(OpRegistry& r);
void register_binary_ops(OpRegistry& r);
void register_softmax_concat_ops(OpRegistry& r);
void register_norm_ops(OpRegistry& r);
void register_conv_ops(OpRegistry& r);
void register_pool_ops(OpRegistry& r);
void register_matmul_ops(OpRegistry& r);

void register_backend();
void register_operators(OpRegistry& r);

}  // namespace d5::onednn

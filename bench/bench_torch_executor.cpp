// TorchExecutor training step against a hand-written LibTorch training step of the same network:
// LeNet-5 at batch 64 and ResNet-18 (ImageNet shapes) at batch 16. One model description (a
// template over two interpreters) builds the d5 Network and runs the ATen forward, so both sides
// compute exactly the same layers with the same parameter values; the first step of each is
// checked to give the same loss before anything is timed.
//
// A step is: forward, loss, backward, gradients available. The executor's step is
// inference_and_backprop (gradients land in the network's d5 tensors); the hand-written one sets
// the parameters' .grad to none (torch's zero_grad default), runs the ATen ops and
// loss.backward(). Rounds alternate which side goes first, in one process, so load changes hit
// both alike (steps alternate within a round too); the ratio of each round's medians gives a median
// with its 95% CI. Target: <= 1.03. --threads sets ATen's thread count (0: its default);
// --malloc keep (the default here) or system picks the allocator policy for the whole process
// (include/deep500/core/malloc_policy.h): under glibc's defaults both sides pay page faults that
// depend on the order in which tensors are freed, which is not the executor's work; page faults
// per step are printed for each side.
// --gradients adopt,accumulate times the executor with each way of landing gradients in the network.
// --device cuda:0 runs both sides on a GPU (a d5 built against a CUDA LibTorch): parameters and
// the batch on the device for both, the executor with resident inputs and outputs (its loss stays
// there, as the hand-written one's does), and each step of either side ends by waiting for the
// device, so that both are timed to the end of their work. --math strict|tf32|fast sets d5's f32
// math mode and with it ATen's switches (backends/torch/aten_math.h) for both sides.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <sys/resource.h>
#include <iostream>

#include "backends/torch/aten_math.h"
#include "backends/torch/torch_device.h"
#include "backends/torch/torch_executor.h"
#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/device_allocator.h"
#include "deep500/core/math_mode.h"
#include "deep500/net/graph_executor.h"
#include "deep500/core/malloc_policy.h"
#include "deep500/metrics/manifest.h"
#include "deep500/net/network.h"
#include "deep500/op/op_registry.h"
#include "deep500/core/rng.h"

namespace {

using namespace d5;
using namespace d5::bench;

std::vector<int64_t> ints(std::initializer_list<int64_t> v) { return v; }

// The d5 interpreter: each layer adds nodes (and parameters, drawn uniformly in +-1/sqrt(fan_in))
// to the network; values are tensor names.
struct D5Model {
  using T = std::string;
  Network& net;
  RngStream rng{0x1e7, "bench_torch_executor"};
  int count = 0;

  std::string fresh(const std::string& kind) { return fmt::format("{}{}", kind, ++count); }
  std::string param(const std::string& name, const Shape& shape, int64_t fan_in, bool is_param = true,
                    double fill = std::numeric_limits<double>::quiet_NaN()) {
    Tensor t(DType::f32, shape);
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::isnan(fill) ? rng.uniform(-bound, bound) : fill);
    net.feed_tensor(name, t, is_param);
    return name;
  }
  T node(const std::string& type, std::vector<std::string> in, Attributes attrs = {}) {
    const std::string name = fresh(type);
    net.add_node({name, type, "", std::move(attrs), std::move(in), {name + "_out"}});
    return name + "_out";
  }
  T conv(const T& x, int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t pad, bool bias) {
    const std::string n = fresh("conv");
    std::vector<std::string> in{x, param(n + "_w", Shape{cout, cin, k, k}, cin * k * k)};
    if (bias) in.push_back(param(n + "_b", Shape{cout}, cin * k * k));
    return node("Conv", in,
                Attributes{{"strides", ints({stride, stride})}, {"pads", ints({pad, pad, pad, pad})},
                           {"kernel_shape", ints({k, k})}});
  }
  T batch_norm(const T& x, int64_t c) {
    const std::string n = fresh("bn");
    return node("BatchNormalization",
                {x, param(n + "_scale", Shape{c}, 1, true, 1), param(n + "_bias", Shape{c}, 1, true, 0),
                 param(n + "_mean", Shape{c}, 1, false, 0), param(n + "_var", Shape{c}, 1, false, 1)},
                Attributes{{"training_mode", int64_t{1}}});
  }
  T relu(const T& x) { return node("Relu", {x}); }
  T max_pool(const T& x, int64_t k, int64_t stride, int64_t pad) {
    return node("MaxPool", {x},
                Attributes{{"kernel_shape", ints({k, k})}, {"strides", ints({stride, stride})},
                           {"pads", ints({pad, pad, pad, pad})}});
  }
  T add(const T& a, const T& b) { return node("Add", {a, b}); }
  T global_avg_pool(const T& x) { return node("GlobalAveragePool", {x}); }
  T flatten(const T& x) { return node("Flatten", {x}); }
  T fc(const T& x, int64_t in, int64_t out) {
    const std::string n = fresh("fc");
    return node("Gemm", {x, param(n + "_w", Shape{out, in}, in), param(n + "_b", Shape{out}, in)},
                Attributes{{"transB", int64_t{1}}});
  }
  T loss(const T& logits, const T& labels) { return node("SoftmaxCrossEntropyLoss", {logits, labels}); }
};

// The hand-written interpreter: ATen calls on leaf tensors holding the same parameter values (the
// names come out in the same order as D5Model's).
struct AtenModel {
  using T = at::Tensor;
  const std::map<std::string, at::Tensor>& params;
  int count = 0;

  std::string fresh(const std::string& kind) { return fmt::format("{}{}", kind, ++count); }
  const at::Tensor& p(const std::string& name) const { return params.at(name); }
  T conv(const T& x, int64_t, int64_t, int64_t, int64_t stride, int64_t pad, bool bias) {
    const std::string n = fresh("conv");
    ++count;  // D5Model counts the node too
    return at::conv2d(x, p(n + "_w"), bias ? p(n + "_b") : at::Tensor(), {stride, stride}, {pad, pad});
  }
  T batch_norm(const T& x, int64_t) {
    const std::string n = fresh("bn");
    ++count;
    return at::batch_norm(x, p(n + "_scale"), p(n + "_bias"), {}, {}, true, 0.1, 1e-5, true);
  }
  T relu(const T& x) {
    ++count;
    return at::relu(x);
  }
  T max_pool(const T& x, int64_t k, int64_t stride, int64_t pad) {
    ++count;
    return at::max_pool2d(x, {k, k}, {stride, stride}, {pad, pad});
  }
  T add(const T& a, const T& b) {
    ++count;
    return a + b;
  }
  T global_avg_pool(const T& x) {
    ++count;
    return at::adaptive_avg_pool2d(x, {1, 1});
  }
  T flatten(const T& x) {
    ++count;
    return x.flatten(1);
  }
  T fc(const T& x, int64_t, int64_t) {
    const std::string n = fresh("fc");
    ++count;
    return at::linear(x, p(n + "_w"), p(n + "_b"));
  }
  T loss(const T& logits, const T& labels) {
    ++count;
    return at::cross_entropy_loss(logits, labels);
  }
};

// LeNet-5 on 28x28 images (the first convolution pads by 2, as for MNIST).
template <class M>
typename M::T lenet5(M& m, const typename M::T& x, const typename M::T& labels) {
  auto h = m.max_pool(m.relu(m.conv(x, 1, 6, 5, 1, 2, true)), 2, 2, 0);
  h = m.max_pool(m.relu(m.conv(h, 6, 16, 5, 1, 0, true)), 2, 2, 0);
  h = m.flatten(h);
  h = m.relu(m.fc(h, 16 * 5 * 5, 120));
  h = m.relu(m.fc(h, 120, 84));
  return m.loss(m.fc(h, 84, 10), labels);
}

// ResNet-18: basic blocks of two 3x3 convolutions with batch normalization; 1x1 projections where
// the shape changes.
template <class M>
typename M::T basic_block(M& m, const typename M::T& x, int64_t cin, int64_t cout, int64_t stride) {
  auto h = m.relu(m.batch_norm(m.conv(x, cin, cout, 3, stride, 1, false), cout));
  h = m.batch_norm(m.conv(h, cout, cout, 3, 1, 1, false), cout);
  const auto skip = stride != 1 || cin != cout ? m.batch_norm(m.conv(x, cin, cout, 1, stride, 0, false), cout) : x;
  return m.relu(m.add(h, skip));
}

// ResNet-50: bottleneck blocks (1x1, 3x3, 1x1 with four times the channels), the stride on the
// 3x3 convolution, a 1x1 projection where the shape changes.
template <class M>
typename M::T bottleneck(M& m, const typename M::T& x, int64_t cin, int64_t width, int64_t stride) {
  const int64_t cout = 4 * width;
  auto h = m.relu(m.batch_norm(m.conv(x, cin, width, 1, 1, 0, false), width));
  h = m.relu(m.batch_norm(m.conv(h, width, width, 3, stride, 1, false), width));
  h = m.batch_norm(m.conv(h, width, cout, 1, 1, 0, false), cout);
  const auto skip = stride != 1 || cin != cout ? m.batch_norm(m.conv(x, cin, cout, 1, stride, 0, false), cout) : x;
  return m.relu(m.add(h, skip));
}

template <class M>
typename M::T resnet50(M& m, const typename M::T& x, const typename M::T& labels) {
  auto h = m.max_pool(m.relu(m.batch_norm(m.conv(x, 3, 64, 7, 2, 3, false), 64)), 3, 2, 1);
  int64_t cin = 64;
  for (const auto& [width, blocks] : std::vector<std::pair<int64_t, int>>{{64, 3}, {128, 4}, {256, 6}, {512, 3}}) {
    for (int b = 0; b < blocks; ++b) {
      h = bottleneck(m, h, cin, width, b == 0 && width != 64 ? 2 : 1);
      cin = 4 * width;
    }
  }
  h = m.flatten(m.global_avg_pool(h));
  return m.loss(m.fc(h, 2048, 1000), labels);
}

template <class M>
typename M::T resnet18(M& m, const typename M::T& x, const typename M::T& labels) {
  auto h = m.max_pool(m.relu(m.batch_norm(m.conv(x, 3, 64, 7, 2, 3, false), 64)), 3, 2, 1);
  int64_t cin = 64;
  for (const int64_t c : {64, 128, 256, 512}) {
    h = basic_block(m, h, cin, c, c == 64 ? 1 : 2);
    h = basic_block(m, h, c, c, 1);
    cin = c;
  }
  h = m.flatten(m.global_avg_pool(h));
  return m.loss(m.fc(h, 512, 1000), labels);
}

struct Workload {
  std::string name;
  Shape input;
  int64_t classes;
  std::function<std::string(D5Model&, const std::string&, const std::string&)> build;
  std::function<at::Tensor(AtenModel&, const at::Tensor&, const at::Tensor&)> forward;
};

// A view of a d5 tensor wherever it is (the host, or the bench's device).
at::Tensor aten_of(const Tensor& t, const at::Device& where = at::Device(at::kCPU)) {
  return at::from_blob(const_cast<void*>(t.data()), t.shape().dims(),
                       at::TensorOptions().dtype(t.dtype() == DType::i64 ? at::kLong : at::kFloat).device(where));
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One executor variant's figures against the hand-written step.
struct Side {
  std::string sink;                        // "adopt" or "accumulate" (TorchExecutor's GradientSink)
  std::vector<double> ratios, cpu_ratios;  // per round: median step / hand-written median step
  double median_s = 0;                     // median over rounds of the round's median step
  double faults = 0;                       // median minor page faults per step
};

struct Measured {
  std::vector<Side> sides;
  double hand_median = 0, zero_grad_median = 0, hand_faults = 0;
  int runs = 0;
};

torch_backend::GradientSink sink_of(const std::string& name) {
  D5_CHECK_ARG(name == "adopt" || name == "accumulate", "unknown gradient sink '{}' (adopt, accumulate)", name);
  return name == "adopt" ? torch_backend::GradientSink::adopt : torch_backend::GradientSink::accumulate;
}

// The workload's network; every call builds the same one (same parameter values).
std::unique_ptr<Network> build_network(const Workload& w, std::string* loss) {
  auto net = std::make_unique<Network>(w.name);
  D5Model dm{*net};
  net->add_input("x", TensorDesc{DType::f32, w.input});
  net->add_input("labels", TensorDesc{DType::i64, Shape{w.input[0]}});
  *loss = w.build(dm, "x", "labels");
  net->infer();
  return net;
}

Measured measure(const Workload& w, const std::vector<std::string>& sinks, int rounds, double round_seconds,
                 const std::string& device) {
  const torch_backend::TorchPlacement place = torch_backend::torch_placement(device);
  // Both sides end each step by waiting for the device (the executor does so itself).
  auto wait = [&place] {
    if (!place.host()) allocator_for(place.device).synchronize(place.device.index);
  };
  std::string loss;
  // One network per executor: an executor replaces gradient tensors it did not make, so two on
  // one network would allocate them anew at every step.
  std::vector<std::unique_ptr<Network>> nets;
  for (size_t k = 0; k < std::max<size_t>(1, sinks.size()); ++k) nets.push_back(build_network(w, &loss));
  const Network& net = *nets[0];

  Tensor x(DType::f32, w.input), labels(DType::i64, Shape{w.input[0]});
  RngStream r(7, w.name);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, r.uniform(-1, 1));
  for (int64_t i = 0; i < labels.numel(); ++i) labels.set(i, static_cast<double>(r.below(w.classes)));
  // The batch where both sides read it: on a device, placed there once.
  const TensorMap feeds{{"x", x.to(place.device)}, {"labels", labels.to(place.device)}};

  std::map<std::string, at::Tensor> params;
  for (const auto& name : net.get_params())
    params[name] = aten_of(net.fetch_tensor(name)).to(place.aten).clone().requires_grad_(true);
  const at::Tensor ax = aten_of(x).to(place.aten), alabels = aten_of(labels).to(place.aten);
  at::Tensor hand_loss;
  auto hand_step = [&] {
    for (auto& [name, t] : params) t.mutable_grad().reset();
    AtenModel am{params};
    hand_loss = w.forward(am, ax, alabels);
    hand_loss.backward();
    wait();
  };
  hand_step();

  // One executor per gradient sink.
  Measured m;
  std::vector<std::unique_ptr<torch_backend::TorchExecutor>> executors;
  std::vector<std::function<void()>> steps;
  for (size_t k = 0; k < sinks.size(); ++k) {
    const std::string& sink = sinks[k];
    Network& net = *nets[k];
    ExecutorOptions eo;
    eo.device = device;
    executors.push_back(std::make_unique<torch_backend::TorchExecutor>(net, eo));
    auto& ex = *executors.back();
    ex.set_gradient_sink(sink_of(sink));
    ex.keep_outputs_on_device();  // on a device: the loss stays there, as the hand-written one's
    D5_CHECK(ex.fallbacks().empty(), Internal, "{}: the torch executor falls back on node {}", w.name,
             ex.fallbacks()[0].first);
    steps.push_back([&ex, &feeds, &loss] { ex.inference_and_backprop(feeds, loss); });
    // Same computation: the first step's loss and every gradient agree with the hand-written step.
    steps.back()();
    const double d5_loss = net.fetch_tensor(loss).to(Device::cpu()).get(0), aten_loss = hand_loss.item<double>();
    D5_CHECK(std::abs(d5_loss - aten_loss) <= 1e-4 * std::abs(aten_loss) + 1e-5, Internal,
             "{}: executor loss {} differs from the hand-written step's {}", w.name, d5_loss, aten_loss);
    for (const auto& [p, gname] : net.gradient())
      D5_CHECK(at::allclose(aten_of(net.fetch_tensor(gname), place.aten), params.at(p).grad(), 1e-3, 1e-5), Internal,
               "{} ({}): gradients of '{}' differ between the executor and the hand-written step", w.name, sink, p);
    m.sides.push_back(Side{sink, {}, {}, 0});
  }
  steps.push_back(hand_step);

  // The zeroing pass the accumulate sink adds to a step.
  std::vector<at::Tensor> grads;
  for (const auto& [p, gname] : net.gradient()) grads.push_back(aten_of(net.fetch_tensor(gname), place.aten));
  m.zero_grad_median = median(hand_loop([&] {
    for (auto& t : grads) t.zero_();
    wait();
  }, 20));

  const double probe = median(hand_loop(hand_step, 2));
  m.runs = static_cast<int>(std::clamp(round_seconds / probe, 1.0, 200.0));
  // Each step is timed by the wall clock and by the process's CPU time: on a loaded machine the
  // wall clock also counts the time other processes held the cores, CPU time only ours.
  // Minor page faults too: a step that touches freshly mapped memory pays the kernel for zeroed pages.
  const size_t n = steps.size(), hand = n - 1;
  std::vector<std::vector<double>> faults(n);
  auto timed = [&faults](size_t side, const std::function<void()>& f, std::vector<double>& wall,
                         std::vector<double>& cpu) {
    const long f0 = minor_faults();
    const double c0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(process_cpu_seconds() - c0);
    faults[side].push_back(static_cast<double>(minor_faults() - f0));
  };
  std::vector<std::vector<double>> meds(n);
  for (int round = 0; round <= rounds; ++round) {
    // The sides take turns step by step, and which one leads rotates, so a load change on the
    // machine hits all of them alike.
    std::vector<std::vector<double>> wall(n), cpu(n);
    for (int i = 0; i < m.runs; ++i)
      for (size_t k = 0; k < n; ++k) {
        const size_t side = (k + static_cast<size_t>(round + i)) % n;
        timed(side, steps[side], wall[side], cpu[side]);
      }
    if (round == 0) continue;  // warms allocators and caches for every side
    for (size_t k = 0; k < n; ++k) meds[k].push_back(median(wall[k]));
    for (size_t k = 0; k < hand; ++k) {
      m.sides[k].ratios.push_back(median(wall[k]) / median(wall[hand]));
      m.sides[k].cpu_ratios.push_back(median(cpu[k]) / median(cpu[hand]));
    }
  }
  for (size_t k = 0; k < hand; ++k) {
    m.sides[k].median_s = median(meds[k]);
    m.sides[k].faults = median(faults[k]);
  }
  m.hand_median = median(meds[hand]);
  m.hand_faults = median(faults[hand]);
  return m;
}

}  // namespace

int main(int argc, char** argv) try {
  set_invocation(argc, argv);
  const Args args(argc, argv,
                  {{"networks", "lenet5,resnet18"}, {"rounds", "10"}, {"round-seconds", "1"},
                   {"lenet-batch", "64"}, {"resnet-batch", "16"}, {"resnet-image", "224"}, {"threads", "0"},
                   {"gradients", "adopt"}, {"json", ""}, {"malloc", "keep"}, {"device", "cpu"},
                   {"math", "strict"}});
  set_malloc_policy(parse_malloc_policy(args.str("malloc")));
  set_f32_math(parse_f32_math(args.str("math")));
  torch_backend::set_aten_math(f32_math());  // before either side runs; the executor sets the same
  register_builtin_operators();
  if (args.integer("threads") > 0) at::set_num_threads(args.integer("threads"));
  const int rounds = args.integer("rounds");
  D5_CHECK_ARG(rounds >= 6, "--rounds must be >= 6 for a 95% CI of the median, got {}", rounds);
  const int64_t image = args.integer("resnet-image");
  const std::vector<Workload> all{
      {"lenet5", Shape{args.integer("lenet-batch"), 1, 28, 28}, 10,
       [](D5Model& m, const std::string& x, const std::string& l) { return lenet5(m, x, l); },
       [](AtenModel& m, const at::Tensor& x, const at::Tensor& l) { return lenet5(m, x, l); }},
      {"resnet18", Shape{args.integer("resnet-batch"), 3, image, image}, 1000,
       [](D5Model& m, const std::string& x, const std::string& l) { return resnet18(m, x, l); },
       [](AtenModel& m, const at::Tensor& x, const at::Tensor& l) { return resnet18(m, x, l); }},
      {"resnet50", Shape{args.integer("resnet-batch"), 3, image, image}, 1000,
       [](D5Model& m, const std::string& x, const std::string& l) { return resnet50(m, x, l); },
       [](AtenModel& m, const at::Tensor& x, const at::Tensor& l) { return resnet50(m, x, l); }}};

  Results res;
  std::cout << fmt::format("device: {}; math: {}; threads: {} (ATen); malloc: {}; rounds: {}; ratio = executor "
                           "step / hand-written step\n",
                           args.str("device"), to_string(f32_math()), at::get_num_threads(), args.str("malloc"), rounds);
  for (const auto& name : args.list("networks")) {
    const auto w = std::find_if(all.begin(), all.end(), [&](const Workload& x) { return x.name == name; });
    D5_CHECK_ARG(w != all.end(), "unknown network '{}' (lenet5, resnet18, resnet50)", name);
    const auto m = measure(*w, args.list("gradients"), rounds, args.number("round-seconds"), args.str("device"));
    std::cout << fmt::format("{:<9} batch {:>3}  hand-written {:>9.3f} ms  {:>7.0f} page faults  ({} runs/round)\n",
                             w->name, w->input[0], m.hand_median * 1e3, m.hand_faults, m.runs);
    for (const auto& side : m.sides) {
      std::cout << fmt::format(
          "  executor ({:<10}) {:>9.3f} ms  {:>7.0f} page faults  ratio {}  CPU-time ratio {}  (target <= 1.03)\n",
          side.sink, side.median_s * 1e3, side.faults, with_ci(side.ratios), with_ci(side.cpu_ratios));
      res.cases.push_back(ratio_case(fmt::format("{} ({})", w->name, side.sink), "torch",
                                     {{"batch", w->input[0]}, {"input", w->input.to_string()}, {"gradients", side.sink},
                                      {"device", args.str("device")}, {"math", to_string(f32_math())}},
                                     side.ratios,
                                     {{"target", "<= 1.03"},
                                      {"executor_median_s", side.median_s},
                                      {"hand_written_median_s", m.hand_median},
                                      {"cpu_time_ratios", side.cpu_ratios},
                                      {"page_faults_per_step", side.faults},
                                      {"hand_written_page_faults_per_step", m.hand_faults},
                                      {"zero_grad_median_s", m.zero_grad_median},
                                      {"runs_per_round", m.runs}}));
      res.cases.back().level = "L1";
    }
    std::cout << fmt::format("  zeroing the network's gradient tensors: {:.3f} ms per step ({:.2f}% of the "
                             "hand-written step)\n",
                             m.zero_grad_median * 1e3, 100 * m.zero_grad_median / m.hand_median);
  }
  if (!args.str("json").empty()) {
    res.manifest = make_manifest({});
    write_results(args.str("json"), res);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_torch_executor: " << e.what() << "\n";
  return 2;
}

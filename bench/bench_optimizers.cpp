// Adam's update over 10M float32 parameters: deep500's reference Adam against torch::optim::Adam,
// side by side in one run (ratio d5 / torch, target <= 1.0), and the bandwidth the d5 update
// achieves against STREAM-like copy, triad and in-place update kernels on buffers of the same size (target >=
// 70% of the best of them). Adam moves 7 x 4 bytes per parameter: p, g, m, v read, p, m, v written.
// Two layouts: one tensor, and the parameter tensors of ResNet-50 scaled to the same total.
#include <omp.h>

#include <iostream>

#include <torch/optim.h>

#include "bench_util.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/net/model_zoo.h"
#include "deep500/train/optimizer.h"
#include "deep500/core/rng.h"

using namespace d5;
using namespace d5::bench;

namespace {

// ResNet-50's parameter sizes, scaled so that they add up to about `total`.
std::vector<int64_t> resnet50_split(int64_t total) {
  ModelOptions mo;
  mo.initialize = false;
  const Network net = build_model("resnet50", mo);
  std::vector<int64_t> sizes;
  const double scale = static_cast<double>(total) / static_cast<double>(net.parameter_count());
  for (const auto& p : net.get_params())
    sizes.push_back(std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(net.fetch_tensor(p).numel()) * scale)));
  return sizes;
}

void fill(float* x, int64_t n, uint64_t seed) {
  RngStream rng(seed, "bench/optimizers");
  for (int64_t i = 0; i < n; ++i) x[i] = rng.uniform_float() - 0.5f;
}

// Seconds per call of a STREAM kernel over n floats per array (parallel, static schedule).
double stream_copy(float* a, const float* b, int64_t n) {
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i];
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
double stream_triad(float* a, const float* b, const float* c, int64_t n) {
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 0.5f * c[i];
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// a += s * b: two reads and one write to an array that was just read, so no write-allocate
// traffic, like Adam's (the triad's 12 bytes leave out the write-allocate read of a).
double stream_update(float* a, const float* b, int64_t n) {
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = a[i] + 0.5f * b[i];
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Layout {
  std::string name;
  std::vector<int64_t> sizes;
};

void run_layout(const Layout& layout, int rounds, int runs) {
  int64_t total = 0;
  for (int64_t s : layout.sizes) total += s;
  // deep500: parameters and gradients as d5 tensors; the optimizer keeps m and v.
  std::vector<Tensor> p, g;
  std::vector<at::Tensor> tp;
  std::vector<Tensor> torch_mem;  // storage of the torch side's parameters and gradients
  uint64_t seed = 1;
  for (int64_t s : layout.sizes) {
    p.emplace_back(DType::f32, Shape{s});
    g.emplace_back(DType::f32, Shape{s});
    fill(p.back().data_as<float>(), s, seed++);
    fill(g.back().data_as<float>(), s, seed++);
    Tensor tpm = p.back().clone(), tgm = g.back().clone();
    at::Tensor t = at::from_blob(tpm.data(), {s}, at::kFloat);
    t.mutable_grad() = at::from_blob(tgm.data(), {s}, at::kFloat);
    tp.push_back(t);
    torch_mem.push_back(std::move(tpm));
    torch_mem.push_back(std::move(tgm));
  }
  auto d5_adam = make_optimizer("adam", {{"lr", 1e-4}});
  auto* rule = dynamic_cast<ThreeStepOptimizer*>(d5_adam.get());
  D5_CHECK(rule != nullptr, Internal, "adam is not a ThreeStepOptimizer");
  // What ThreeStepOptimizer::step does after backprop: every parameter's update in one call.
  std::vector<ThreeStepOptimizer::ParameterUpdate> updates;
  for (size_t i = 0; i < p.size(); ++i) updates.push_back({g[i], p[i], "p" + std::to_string(i)});
  torch::optim::Adam torch_adam(tp, torch::optim::AdamOptions(1e-4));
  const auto d5_step = [&] { rule->update_all(updates); };
  const auto torch_step = [&] { torch_adam.step(); };

  // STREAM buffers of the same length as the parameters.
  Tensor a(DType::f32, Shape{total}), b(DType::f32, Shape{total}), c(DType::f32, Shape{total});
  fill(b.data_as<float>(), total, 99);
  fill(c.data_as<float>(), total, 98);

  std::vector<double> t_d5, t_torch, ratio, copy_bw, triad_bw, update_bw;
  for (int r = 0; r <= rounds; ++r) {
    // Alternate which side goes first, so drift and frequency changes hit both alike.
    double md = 0, mt = 0;
    if (r % 2 == 0) {
      md = median(hand_loop(d5_step, runs));
      mt = median(hand_loop(torch_step, runs));
    } else {
      mt = median(hand_loop(torch_step, runs));
      md = median(hand_loop(d5_step, runs));
    }
    std::vector<double> cp, tr, up;
    for (int k = 0; k < runs; ++k) {
      cp.push_back(stream_copy(a.data_as<float>(), b.data_as<float>(), total));
      tr.push_back(stream_triad(a.data_as<float>(), b.data_as<float>(), c.data_as<float>(), total));
      up.push_back(stream_update(a.data_as<float>(), b.data_as<float>(), total));
    }
    if (r == 0) continue;  // warm-up: first touch of the moment buffers
    t_d5.push_back(md * 1e3);
    t_torch.push_back(mt * 1e3);
    ratio.push_back(md / mt);
    copy_bw.push_back(8.0 * static_cast<double>(total) / median(cp) / 1e9);
    triad_bw.push_back(12.0 * static_cast<double>(total) / median(tr) / 1e9);
    update_bw.push_back(12.0 * static_cast<double>(total) / median(up) / 1e9);
  }
  // The reference bandwidth of each round is the best of the three kernels measured in it.
  std::vector<double> adam_bw, of_best;
  for (size_t i = 0; i < t_d5.size(); ++i) {
    adam_bw.push_back(28.0 * static_cast<double>(total) / (t_d5[i] / 1e3) / 1e9);
    of_best.push_back(adam_bw.back() / std::max({copy_bw[i], triad_bw[i], update_bw[i]}));
  }
  std::cout << fmt::format("\n{}: {} tensors, {} parameters, {} threads\n", layout.name, layout.sizes.size(), total,
                           omp_get_max_threads());
  std::cout << fmt::format("  d5 adam step            {} ms\n", with_ci(t_d5, "{:.2f}"));
  std::cout << fmt::format("  torch::optim::Adam step {} ms\n", with_ci(t_torch, "{:.2f}"));
  std::cout << fmt::format("  d5 / torch              {}  (target <= 1.0)\n", with_ci(ratio));
  std::cout << fmt::format("  STREAM copy             {} GB/s\n", with_ci(copy_bw, "{:.2f}"));
  std::cout << fmt::format("  STREAM triad (12 B)     {} GB/s\n", with_ci(triad_bw, "{:.2f}"));
  std::cout << fmt::format("  a += s*b (12 B)         {} GB/s\n", with_ci(update_bw, "{:.2f}"));
  std::cout << fmt::format("  d5 adam (28 B/param)    {} GB/s\n", with_ci(adam_bw, "{:.2f}"));
  std::cout << fmt::format("  d5 adam / best of three {}  (target >= 0.70)\n", with_ci(of_best));
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args(argc, argv, {{"params", "10000000"}, {"rounds", "10"}, {"runs", "5"}, {"layouts", "one,resnet50"}});
  register_builtin_backends();
  const int64_t n = static_cast<int64_t>(args.number("params"));
  const int rounds = args.integer("rounds"), runs = args.integer("runs");
  D5_CHECK_ARG(rounds >= 6, "--rounds must be >= 6 for a 95% CI of the median, got {}", rounds);
  D5_CHECK_ARG(n > 0 && runs > 0, "--params and --runs must be > 0");
  for (const auto& l : args.list("layouts")) {
    if (l == "one") {
      run_layout({"one tensor", {n}}, rounds, runs);
    } else if (l == "resnet50") {
      run_layout({"ResNet-50 split", resnet50_split(n)}, rounds, runs);
    } else {
      D5_THROW(InvalidArgument, "unknown layout '{}' (one, resnet50)", l);
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "d5_bench_optimizers: " << e.what() << "\n";
  return 1;
}

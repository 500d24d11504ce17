#pragma once
// A recipe for submission tests: LeNet-5 for four steps on 128 MNIST images (seconds on the
// reference backend), ranked by its final loss, which --deterministic runs repeat bit for bit.
#include <fstream>
#include <string>

namespace d5::test {

inline void write_tiny_list_recipe(const std::string& path, const std::string& mnist_dir) {
  std::ofstream(path) << R"(recipe: tiny-list
division: closed
score: {quantity: final_loss, better: lower}
entries:
  - name: lenet5
    command: train
    fixed: {model: lenet5, optimizer: sgd, dataset: mnist, train-split: test, train-range: "0:128",
            test-split: test, test-range: "8000:8100", backend: reference}
    mutable: {data-dir: ")" << mnist_dir << R"(", batch: 32, epochs: 1, lr: 0.01}
    criteria: [final_loss < 100]
)";
}

}  // namespace d5::test

#pragma once
// An operator of another backend (the reference, usually) run on a test device
// (test_memory_device.h, guarded_memory_device.h): its inputs, outputs and gradients live on the
// device, and it computes on host copies of them, so every path an accelerator's operators take
// through an executor runs on machines without one.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deep500/core/backend.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/operator.h"

namespace d5::test {

class OnTestDevice final : public Operator {
 public:
  OnTestDevice(std::unique_ptr<Operator> inner, Device device)
      : Operator(inner->spec(), inner->output_descs()), inner_(std::move(inner)), device_(device) {}
  std::string implementation() const override { return "testdev(" + inner_->implementation() + ")"; }
  Device device() const override { return device_; }
  std::vector<bool> differentiable_inputs() const override { return inner_->differentiable_inputs(); }
  double flops() const override { return inner_->flops(); }
  double bytes() const override { return inner_->bytes(); }

  void forward(std::span<const Tensor> inputs, std::span<Tensor> outputs) override {
    check_inputs(inputs);
    std::vector<Tensor> outs = inner_->run_forward(on_host(inputs));
    for (size_t j = 0; j < outputs.size(); ++j) outputs[j].copy_from(outs[j]);
  }
  void backward(std::span<const Tensor> grad_outputs, std::span<const Tensor> inputs,
                std::span<const Tensor> outputs, std::span<Tensor> grad_inputs) override {
    std::vector<Tensor> grads(grad_inputs.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grad_inputs[i].defined()) continue;
      EXPECT_EQ(grad_inputs[i].device(), device_) << "gradient buffer of input " << i;
      grads[i] = Tensor::uninitialized(grad_inputs[i].desc());
    }
    inner_->backward(on_host(grad_outputs), on_host(inputs), on_host(outputs), grads);
    for (size_t i = 0; i < grads.size(); ++i)
      if (grads[i].defined()) grad_inputs[i].copy_from(grads[i]);
  }

 private:
  std::vector<Tensor> on_host(std::span<const Tensor> ts) const {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) {
      if (t.defined()) {
        EXPECT_EQ(t.device(), device_);
      }
      out.push_back(t.defined() ? t.to(Device::cpu()) : Tensor());
    }
    return out;
  }
  std::unique_ptr<Operator> inner_;
  Device device_;
};

// Registers the backend `backend`, whose operators of `types` are the reference's run on `device`.
inline void register_reference_on_device(const std::string& backend, Device device, const std::vector<std::string>& types,
                                         const std::string& description) {
  BackendInfo info;
  info.name = backend;
  info.description = description;
  info.version = "1";
  register_backend(info);
  for (const std::string& type : types)
    OpRegistry::global().add_or_replace(
        {type, backend, backend, true, [device](const OpSpec& spec) -> OpCreateResult {
           return std::make_unique<OnTestDevice>(OpRegistry::global().create(spec, "reference"), device);
         },
         "the reference kernel on " + device.to_string()});
}

}  // namespace d5::test

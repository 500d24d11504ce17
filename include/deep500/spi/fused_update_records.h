#pragma once
// One parameter's update as data: which built-in rule, its buffers and the scalars the rule
// computed for this step. The optimizers (src/lv2/optim) fill these; the host runs them with its
// element loops, a device with its multi-tensor kernel (spi/fused_update.h). Plain C++17 and
// trivially copyable, so that a CUDA kernel can take a batch of them as its argument.
#include <cstdint>

namespace d5 {

enum class UpdateKind : int32_t {
  sgd,                     // state[0]: momentum buffer or null
  adam,                    // state[0..2]: exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad) or null
  adagrad,                 // state[0]: sum
  rmsprop,                 // state[0..2]: square_avg, grad_avg (centered) or null, momentum or null
  accelegrad_interpolate,  // p = tau * z + rest * p, state[0]: z; g unused
  accelegrad_step,         // z = z - step_z * g; p = p - step_y * g, state[0]: z
  copy_param,              // state[0] = p; g unused
  accumulate,              // p = p + g: an executor's gradient sums where the gradients live
};

struct SgdScalars {
  float neg_lr, wd, mu, damp;
  int32_t nesterov, first;  // first: the momentum buffer starts as the step's direction
};
struct AdamScalars {
  float b1, b2, c1, c2, eps, neg_step_size, bc2_sqrt, wd, decay;
};
struct AdagradScalars {
  float neg_clr, wd, eps;
};
struct RmsPropScalars {
  float neg_lr, alpha, c, wd, eps, mu;
};
struct AcceleGradScalars {
  float tau, rest, step_y, step_z;
};

struct FusedUpdate {
  UpdateKind kind = UpdateKind::sgd;
  int64_t n = 0;  // elements of p, g and every state buffer
  const float* g = nullptr;
  float* p = nullptr;
  float* state[3] = {nullptr, nullptr, nullptr};
  union Scalars {
    SgdScalars sgd;
    AdamScalars adam;
    AdagradScalars adagrad;
    RmsPropScalars rmsprop;
    AcceleGradScalars accelegrad;
  } scalars{};
};

}  // namespace d5

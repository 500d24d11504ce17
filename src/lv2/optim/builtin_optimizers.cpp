// The optimizers every d5 binary has, and the names of the native twins, which the torch backend
// replaces with working factories when it is built.
#include <fmt/format.h>

#include "deep500/train/optimizers.h"
#include "optim_internal.h"

namespace d5 {

void register_builtin_optimizers() {
  static const bool once = [] {
    using namespace optim;
    for (const char* v : {"sgd", "momentum", "nesterov"}) {
      const std::string variant = v;
      const std::string what = variant == "sgd"        ? "stochastic gradient descent (torch.optim.SGD)"
                               : variant == "momentum" ? "SGD with momentum 0.9 (torch.optim.SGD)"
                                                       : "SGD with Nesterov momentum 0.9 (torch.optim.SGD)";
      register_optimizer(variant, what, [variant](const Hyperparameters& h) { return make_sgd(h, variant); });
    }
    register_optimizer("adam", "Adam (torch.optim.Adam)", [](const Hyperparameters& h) { return make_adam(h, false); });
    register_optimizer("adamw", "Adam with decoupled weight decay (torch.optim.AdamW)",
                       [](const Hyperparameters& h) { return make_adam(h, true); });
    register_optimizer("adagrad", "Adagrad (torch.optim.Adagrad)", make_adagrad);
    register_optimizer("rmsprop", "RMSprop (torch.optim.RMSprop)", make_rmsprop);
    register_optimizer("accelegrad", "AcceleGrad (Levy et al. 2018), a three-step optimizer", make_accelegrad);
    register_optimizer("lbfgs", "L-BFGS, optionally with strong-Wolfe line search (torch.optim.LBFGS)", make_lbfgs);
    for (const char* t : {"sgd", "momentum", "nesterov", "adam", "adamw", "adagrad", "rmsprop", "lbfgs"}) {
      const std::string twin = std::string("torch-") + t;
      register_optimizer(twin, fmt::format("torch::optim twin of {} (needs the torch backend)", t),
                         [twin](const Hyperparameters&) -> std::unique_ptr<Optimizer> {
                           throw NotBuilt(fmt::format(
                               "optimizer '{}' needs the torch backend, which this build of deep500 does not "
                               "have (install libtorch-dev and reconfigure)",
                               twin));
                         });
    }
    return true;
  }();
  (void)once;
}

}  // namespace d5

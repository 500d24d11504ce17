#pragma once
// Level 2: the reference optimizers (docs/optimizers.md). Each is registered by CLI name; the
// hyperparameters and their defaults equal torch.optim's:
//
//   sgd, momentum, nesterov  lr=1e-3 momentum=0 (0.9 for momentum/nesterov) dampening=0 weight_decay=0
//   adam                     lr=1e-3 beta1=0.9 beta2=0.999 eps=1e-8 weight_decay=0 amsgrad=0
//   adamw                    as adam with weight_decay=1e-2 (decoupled)
//   adagrad                  lr=1e-2 lr_decay=0 weight_decay=0 initial_accumulator_value=0 eps=1e-10
//   rmsprop                  lr=1e-2 alpha=0.99 eps=1e-8 weight_decay=0 momentum=0 centered=0
//   accelegrad               lr=1 diameter=1 gradient_bound=1
//   lbfgs                    lr=1 max_iter=20 max_eval=-1 (max_iter*5/4) tolerance_grad=1e-7 tolerance_change=1e-9
//                            history_size=100 line_search=0 (1: strong Wolfe)
//
// Parameters must be float32; moments are float32 and scalars (step counts, bias corrections) are
// computed in double and rounded once, as torch does for float tensors.
namespace d5 {

// Registers sgd, momentum, nesterov, adam, adamw, adagrad, rmsprop, accelegrad and lbfgs, and the
// names of the native twins (torch-adam, ...) with a factory that says which backend they need;
// the torch backend, when built, replaces those with the real ones.
void register_builtin_optimizers();

}  // namespace d5

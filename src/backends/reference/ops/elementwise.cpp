#include "elementwise.h"

namespace d5::reference {

void reduce_grad(const Tensor& full, Tensor& grad, const Shape& as) {
  if (grad.shape() == as) {
    reduce_to_shape(full, grad);
    return;
  }
  Tensor view = grad.reshape(as);  // shares grad's buffer
  reduce_to_shape(full, view);
}

}  // namespace d5::reference

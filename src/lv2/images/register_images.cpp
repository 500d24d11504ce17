#include "register_images.h"

namespace d5 {

void register_image_datasets() {
  images::register_cifar();
  images::register_image_tar();
  images::register_tfrecord();
}

}  // namespace d5

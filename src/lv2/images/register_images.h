#pragma once
// Registration of the image dataset formats: cifar10, cifar100, image-tar, tfrecord.
namespace d5 {

void register_image_datasets();

namespace images {
void register_cifar();
void register_image_tar();
void register_tfrecord();
}  // namespace images

}  // namespace d5

#pragma once
// A tensor shape: a short list of non-negative extents (rank 0 = scalar).
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace d5 {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::vector<int64_t> dims);

  size_t rank() const { return dims_.size(); }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t& operator[](size_t i) { return dims_[i]; }
  // Accepts negative axes in ONNX style (-1 is the last); throws InvalidArgument when out of range.
  int64_t dim(int64_t axis) const;
  size_t normalize_axis(int64_t axis) const;
  int64_t numel() const;  // 1 for a scalar
  std::vector<int64_t> strides() const;  // row-major, in elements
  const std::vector<int64_t>& dims() const { return dims_; }
  std::string to_string() const;  // "[2, 3, 4]"

  bool operator==(const Shape& o) const = default;

 private:
  std::vector<int64_t> dims_;
};

}  // namespace d5

#pragma once
// GoogleTest expectations that two networks are the same graph: inputs, outputs, nodes (names, op
// types, domains, edges, attributes), initializers (descriptors and bytes) and parameters.
#include <gtest/gtest.h>

#include <cstring>

#include "deep500/net/network.h"

namespace d5::test {

inline void expect_same_graph(const Network& a, const Network& b) {
  EXPECT_EQ(a.opset(), b.opset());
  EXPECT_EQ(a.inputs(), b.inputs());
  for (const auto& in : a.inputs())
    if (b.desc(in) != a.desc(in)) ADD_FAILURE() << "input " << in << ": " << a.desc(in).to_string() << " vs "
                                                 << b.desc(in).to_string();
  EXPECT_EQ(a.outputs(), b.outputs());
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = a.nodes()[i];
    const Node& y = b.nodes()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.op_type, y.op_type) << x.name;
    EXPECT_EQ(x.domain, y.domain) << x.name;
    EXPECT_EQ(x.inputs, y.inputs) << x.name;
    EXPECT_EQ(x.outputs, y.outputs) << x.name;
    EXPECT_EQ(x.attrs.to_string(), y.attrs.to_string()) << x.name;
  }
  ASSERT_EQ(a.initializers(), b.initializers());
  for (const auto& name : a.initializers()) {
    const Tensor x = a.fetch_tensor(name), y = b.fetch_tensor(name);
    ASSERT_EQ(x.dtype(), y.dtype()) << name;
    ASSERT_EQ(x.shape(), y.shape()) << name;
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.bytes()), 0) << name;
  }
  EXPECT_EQ(a.get_params(), b.get_params());
}

}  // namespace d5::test

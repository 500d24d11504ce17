// Tensors on a device other than the host, through the host-memory "testmem" device
// (test_memory_device.h): allocation and reuse, statistics, copies each way and between two
// device kinds, and host access refused with a message instead of a crash.
#include <gtest/gtest.h>

#include <thread>

#include "deep500/core/device_allocator.h"
#include "deep500/core/tensor.h"
#include "../test_memory_device.h"

namespace d5 {
namespace {

Tensor host_values() { return Tensor::from_values<float>(Shape{2, 3}, {1, -2, 3, -4, 5, -6}); }

TEST(DeviceAllocator, HostIsKindZeroAndAccessible) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_TRUE(host_accessible(Device::cpu()));
  EXPECT_EQ(allocator_for(Device::cpu()).kind_name(), "cpu");
  const auto before = allocator_for(Device::cpu()).stats(0);
  Tensor t(DType::f32, Shape{1000});
  EXPECT_GE(allocator_for(Device::cpu()).stats(0).allocated_bytes, before.allocated_bytes + 4000);
}

TEST(DeviceAllocator, TestDeviceParsesPrintsAndRefusesUnknownKinds) {
  const Device d = test::test_memory_device(1);
  EXPECT_EQ(d.to_string(), "testmem:1");
  EXPECT_EQ(parse_device("testmem:1"), d);
  EXPECT_EQ(parse_device("testmem").index, 0);
  EXPECT_FALSE(host_accessible(d));
  // A kind nothing registered (a GPU tensor from DLPack in a build without that backend).
  EXPECT_FALSE(host_accessible(Device{static_cast<DeviceKind>(57), 0}));
  try {
    parse_device("tpu:0");
    FAIL() << "an unknown kind was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("known: cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("testmem"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_device("testmem:x"), InvalidArgument);
}

TEST(DeviceAllocator, RoundTripThroughTheDeviceKeepsValues) {
  const Device d = test::test_memory_device();
  auto alloc = test::test_memory_allocator();
  const int to_host = alloc->copies_to_host, from_host = alloc->copies_from_host;
  const Tensor h = host_values();
  const Tensor on_device = h.to(d);
  EXPECT_EQ(on_device.device(), d);
  EXPECT_NE(on_device.data(), h.data());
  const Tensor cloned = on_device.clone();  // device to device, staged through the host
  EXPECT_EQ(cloned.device(), d);
  const Tensor back = cloned.to(Device::cpu());
  EXPECT_TRUE(back.on_host());
  for (int64_t i = 0; i < h.numel(); ++i) EXPECT_EQ(back.get(i), h.get(i));
  EXPECT_EQ(alloc->copies_from_host, from_host + 2);
  EXPECT_EQ(alloc->copies_to_host, to_host + 2);
  // to() the device it is on shares the buffer.
  EXPECT_EQ(on_device.to(d).data(), on_device.data());
}

TEST(DeviceAllocator, ZeroFilledOnTheDevice) {
  const Device d = test::test_memory_device();
  Tensor z(TensorDesc{DType::f64, Shape{17}}, d);
  const Tensor back = z.to(Device::cpu());
  for (int64_t i = 0; i < back.numel(); ++i) EXPECT_EQ(back.get(i), 0.0);
}

TEST(DeviceAllocator, HostAccessToDeviceMemoryIsAClearError) {
  const Device d = test::test_memory_device();
  Tensor t = host_values().to(d);
  auto expect_refused = [](auto&& f) {
    try {
      f();
      ADD_FAILURE() << "host access to device memory was allowed";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("testmem:0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("to(Device::cpu())"), std::string::npos) << e.what();
    }
  };
  expect_refused([&] { (void)t.data_as<float>(); });
  expect_refused([&] { (void)t.span<float>(); });
  expect_refused([&] { (void)t.get(0); });
  expect_refused([&] { t.set(0, 1.0); });
  expect_refused([&] { t.fill(2.0); });
  expect_refused([&] { (void)t.cast(DType::f64); });
  expect_refused([&] { (void)t.at<float>({0, 0}); });
  EXPECT_EQ(t.to_string(), "f32[2, 3] on testmem:0");
  EXPECT_NE(t.data(), nullptr);  // the raw pointer is what a device library receives
}

TEST(DeviceAllocator, FreedBlocksAreReusedAndCounted) {
  const Device d = test::test_memory_device(1);
  auto alloc = test::test_memory_allocator();
  alloc->release_cached(1);
  const auto before = alloc->stats(1);
  const int raw_before = alloc->raw_allocations;
  const void* first = nullptr;
  {
    Tensor a(TensorDesc{DType::f32, Shape{1000}}, d);  // 4000 bytes: the 4096-byte class
    first = a.data();
    const auto during = alloc->stats(1);
    EXPECT_EQ(during.allocated_bytes, before.allocated_bytes + 4096);
    EXPECT_EQ(during.reserved_bytes, before.reserved_bytes + 4096);
  }
  const auto after_free = alloc->stats(1);
  EXPECT_EQ(after_free.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after_free.reserved_bytes, before.reserved_bytes + 4096);  // cached, not returned
  Tensor b(TensorDesc{DType::i32, Shape{1010}}, d);  // 4040 bytes: the same class
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(alloc->raw_allocations, raw_before + 1);
  const auto reused = alloc->stats(1);
  EXPECT_EQ(reused.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(reused.allocations, before.allocations + 2);
  EXPECT_EQ(reused.peak_bytes, std::max(before.peak_bytes, before.allocated_bytes + 4096));
  Tensor c(TensorDesc{DType::f32, Shape{3000}}, d);  // another class: a new block
  EXPECT_EQ(alloc->raw_allocations, raw_before + 2);
  alloc->reset_peak(1);
  EXPECT_EQ(alloc->stats(1).peak_bytes, alloc->stats(1).allocated_bytes);
}

// A device short of memory only because blocks of other sizes wait in the cache gets them back
// and serves the request; one that is really full fails with the request's size.
TEST(DeviceAllocator, AFullDeviceGivesBackTheCacheBeforeFailing) {
  auto alloc = test::test_memory_allocator("tinymem");
  alloc->capacity = 8192;
  { const auto small = alloc->allocate(4000, 0); }  // the 4096-byte class, cached after this
  EXPECT_EQ(alloc->stats(0).reserved_bytes, 4096);
  const auto big = alloc->allocate(8000, 0);  // 8192 bytes: fits only without the cached block
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(alloc->stats(0).reserved_bytes, 8192);
  EXPECT_EQ(alloc->raw_bytes, 8192u);
  try {
    alloc->allocate(100, 0);
    FAIL() << "a full device handed out a block";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("out of tinymem memory allocating 100 bytes"), std::string::npos) << e.what();
  }
}

TEST(DeviceAllocator, CopiesBetweenTwoDeviceKindsGoThroughTheHost) {
  const Device a = test::test_memory_device(0, "testmem");
  const Device b = test::test_memory_device(0, "testmem_b");
  EXPECT_NE(a.kind, b.kind);
  auto alloc_b = test::test_memory_allocator("testmem_b");
  const int from_host = alloc_b->copies_from_host;
  const Tensor on_b = host_values().to(a).to(b);
  EXPECT_EQ(on_b.device(), b);
  EXPECT_EQ(alloc_b->copies_from_host, from_host + 1);
  const Tensor back = on_b.to(Device::cpu());
  EXPECT_EQ(back.get(5), -6.0);
}

TEST(DeviceAllocator, ReRegisteringAKindKeepsItsValue) {
  const Device d = test::test_memory_device();
  const DeviceKind again = register_device_kind(test::test_memory_allocator());
  EXPECT_EQ(again, d.kind);
  EXPECT_THROW(allocator_for(Device{static_cast<DeviceKind>(1000), 0}), InvalidArgument);
}

}  // namespace
}  // namespace d5

namespace d5 {
namespace {

using PoolScope = CachingDeviceAllocator::PoolScope;

// A recording's blocks (CUDA graphs replay them, docs/cuda-graphs.md) never serve another
// allocation: not after they are freed, not on another thread, not on another device.
TEST(AllocationPool, ABlockFreedIntoAPoolServesOnlyThatPool) {
  auto alloc = test::test_memory_allocator("poolmem");
  alloc->release_cached(0);
  const auto before = alloc->stats(0);
  auto pool = alloc->make_pool(0);
  void* recorded = nullptr;
  {
    PoolScope scope(pool);
    auto a = alloc->allocate(4000, 0);
    recorded = a.get();
  }
  EXPECT_EQ(alloc->pool_free_bytes(*pool), 4096);
  EXPECT_EQ(alloc->stats(0).allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(alloc->stats(0).reserved_bytes, before.reserved_bytes + 4096);

  const auto outside = alloc->allocate(4000, 0);
  EXPECT_NE(outside.get(), recorded);
  std::shared_ptr<void> other_device, other_thread, again;
  {
    PoolScope scope(pool);
    other_device = alloc->allocate(4000, 1);
    std::thread worker([&] { other_thread = alloc->allocate(4000, 0); });
    worker.join();
    again = alloc->allocate(4000, 0);
  }
  EXPECT_NE(other_thread.get(), recorded);
  EXPECT_NE(other_device.get(), recorded);
  EXPECT_EQ(again.get(), recorded);
  EXPECT_EQ(alloc->pool_free_bytes(*pool), 0);
}

// The pool outlives its owner while a block from it lives; then its blocks join the shared cache.
TEST(AllocationPool, ItsBlocksJoinTheSharedCacheWhenTheLastHolderGoes) {
  auto alloc = test::test_memory_allocator("poolmem");
  alloc->release_cached(0);
  auto pool = alloc->make_pool(0);
  std::shared_ptr<void> held;
  void* freed = nullptr;
  {
    PoolScope scope(pool);
    held = alloc->allocate(4000, 0);
    freed = alloc->allocate(9000, 0).get();
  }
  std::weak_ptr<AllocationPool> alive = pool;
  pool.reset();
  EXPECT_FALSE(alive.expired()) << "a block from the pool still lives";
  EXPECT_NE(alloc->allocate(9000, 0).get(), freed);
  void* const was_held = held.get();
  held.reset();
  EXPECT_TRUE(alive.expired());
  const int raw = alloc->raw_allocations;
  const auto a = alloc->allocate(4000, 0);
  const auto b = alloc->allocate(9000, 0);
  EXPECT_EQ(a.get(), was_held);
  EXPECT_EQ(b.get(), freed);
  EXPECT_EQ(alloc->raw_allocations, raw);
}

TEST(AllocationPool, ScopesNestAndRestoreThePreviousPool) {
  auto alloc = test::test_memory_allocator("poolmem");
  auto outer = alloc->make_pool(0), inner = alloc->make_pool(0);
  PoolScope a(outer);
  { PoolScope b(inner); alloc->allocate(512, 0); }
  alloc->allocate(1024, 0);
  EXPECT_EQ(alloc->pool_free_bytes(*inner), 512);
  EXPECT_EQ(alloc->pool_free_bytes(*outer), 1024);
}

// Within one device a copy stays on it when the kind has such a copy; otherwise through the host.
TEST(DeviceAllocator, CopiesWithinADeviceUseItsOwnCopy) {
  auto alloc = test::test_memory_allocator("copymem");
  const Device d = test::test_memory_device(0, "copymem");
  const Tensor on_device = host_values().to(d);
  const int to_host = alloc->copies_to_host;
  const Tensor staged = on_device.clone();
  EXPECT_EQ(alloc->copies_to_host, to_host + 1);
  alloc->device_copies = true;
  const Tensor direct = on_device.clone();
  alloc->device_copies = false;
  EXPECT_EQ(alloc->copies_within, 1);
  EXPECT_EQ(alloc->copies_to_host, to_host + 1);
  EXPECT_NE(direct.data(), on_device.data());
  for (const Tensor& t : {staged, direct}) {
    const Tensor back = t.to(Device::cpu());
    for (int64_t i = 0; i < back.numel(); ++i) EXPECT_EQ(back.get(i), host_values().get(i));
  }
}

}  // namespace
}  // namespace d5

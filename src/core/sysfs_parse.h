#pragma once
// Internal: pure decoders for the text the kernel exposes in /proc and /sys, plus the one file
// reader every host-fact module shares. Kept apart from the readers so tests can feed literal
// inputs instead of depending on whatever host they run on.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deep500/core/device.h"

namespace d5::detail {

// Whole file as text. On failure returns nullopt and, when `error` is given, the strerror text
// (callers turn it into an "unavailable" reason, never an exception: hosts differ).
std::optional<std::string> read_text_file(const std::string& path, std::string* error = nullptr);

// Names in a directory, sorted. Empty when it cannot be listed; `error` then says why.
std::vector<std::string> list_directory(const std::string& path, std::string* error = nullptr);
// A file holding one number, as most sysfs attributes do; nullopt if unreadable or malformed.
std::optional<int64_t> read_int_file(const std::string& path);

std::string_view trim(std::string_view s);
std::vector<std::string> split_words(std::string_view s);

// Non-negative decimal integer filling all of `s` (after trimming); nullopt otherwise.
std::optional<int64_t> parse_int(std::string_view s);
// Same for the unsigned 64-bit counters of powercap, which may exceed int64 in principle.
std::optional<uint64_t> parse_uint64(std::string_view s);

// Value of the first "key : value" line in /proc/cpuinfo text, i.e. of the first processor
// block; the key must match exactly (so "model" does not find "model name").
std::optional<std::string> cpuinfo_field(std::string_view text, std::string_view key);

// Value of KEY in os-release text, with shell quoting and escapes removed.
std::optional<std::string> os_release_field(std::string_view text, std::string_view key);

// "VmHWM:   1652 kB" style fields of /proc/<pid>/status, in bytes.
std::optional<int64_t> status_field_bytes(std::string_view text, std::string_view key);

// Resident pages, the second field of /proc/<pid>/statm.
std::optional<int64_t> statm_resident_pages(std::string_view text);

// CPUID words that decide the ISA extensions deep500 reports (x86 only, but decoding is
// portable so it is testable everywhere).
struct X86CpuidWords {
  uint32_t leaf1_ecx = 0;
  bool has_leaf7 = false;
  uint32_t leaf7_ebx = 0, leaf7_ecx = 0, leaf7_edx = 0;
  uint32_t leaf7_1_eax = 0;  // subleaf 1; zero when the CPU does not have it
};

// One cache from the deterministic cache parameters that CPUID leaf 4 (Intel) and leaf
// 0x8000001D (AMD, Hygon) report in the same layout: EAX type and level, EBX line size,
// partitions and ways, ECX sets, each stored minus one. nullopt for type 0 (the list's end) or a
// reserved type. shared_by_cpus stays 0: the leaf gives the addressable IDs, not who shares.
std::optional<CacheInfo> decode_cpuid_cache(uint32_t eax, uint32_t ebx, uint32_t ecx);

// The caches AMD's older leaves describe, for CPUs (or hypervisors) without leaf 0x8000001D:
// 0x80000005 ECX/EDX (L1 data/instruction: size in KiB in bits 31-24, line in 7-0) and
// 0x80000006 ECX (L2: KiB in 31-16) and EDX (L3: 512 KiB units in 31-18). A size of 0 means
// that level is absent.
std::vector<CacheInfo> decode_amd_legacy_caches(uint32_t ecx5, uint32_t edx5, uint32_t ecx6, uint32_t edx6);

// Extensions that are *usable*: present in CPUID and with their register state enabled by the
// OS in XCR0. `xcr0` must be 0 when CPUID.1:ECX.OSXSAVE is clear (XGETBV would fault).
std::vector<std::string> x86_usable_isa(const X86CpuidWords& w, uint64_t xcr0);

}  // namespace d5::detail

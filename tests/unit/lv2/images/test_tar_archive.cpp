#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "deep500/core/error.h"
#include "lv2/images/tar_archive.h"
#include "image_test_util.h"

namespace d5 {
namespace {

using test::TempDir;

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

void write_sample(const std::string& path, bool gzip, TarWriter::LongNames names = TarWriter::LongNames::Gnu) {
  TarWriter w(path, gzip, names);
  w.add_directory("cats");
  w.add_file("cats/a.txt", bytes_of("hello"), 1000);
  w.add_file("cats/empty", {}, 0);
  w.add_file(std::string(150, 'x') + "/long_name.bin", bytes_of(std::string(700, 'z')));
  w.finish();
}

void check_sample(const std::string& path) {
  TarReader r(path);
  TarMember m;
  ASSERT_TRUE(r.next(m));
  EXPECT_EQ(m.path, "cats/");
  EXPECT_EQ(m.type, '5');
  ASSERT_TRUE(r.next(m));
  EXPECT_EQ(m.path, "cats/a.txt");
  EXPECT_TRUE(m.regular_file());
  EXPECT_EQ(m.size, 5u);
  EXPECT_EQ(m.mtime, 1000);
  EXPECT_EQ(m.data_offset, 1024u);  // directory header + this header
  EXPECT_EQ(r.read_data(), bytes_of("hello"));
  ASSERT_TRUE(r.next(m));
  EXPECT_EQ(m.path, "cats/empty");
  EXPECT_EQ(m.size, 0u);  // data not read: next() skips it
  ASSERT_TRUE(r.next(m));
  EXPECT_EQ(m.path, std::string(150, 'x') + "/long_name.bin");
  EXPECT_EQ(r.read_data(), bytes_of(std::string(700, 'z')));
  EXPECT_FALSE(r.next(m));
  EXPECT_FALSE(r.next(m));
}

TEST(TarArchive, PlainRoundTripWithGnuLongName) {
  TempDir dir;
  write_sample(dir.file("a.tar"), false);
  check_sample(dir.file("a.tar"));
  EXPECT_FALSE(TarReader(dir.file("a.tar")).gzip());
}

TEST(TarArchive, GzipRoundTripWithPaxPath) {
  TempDir dir;
  write_sample(dir.file("a.tar.gz"), true, TarWriter::LongNames::Pax);
  EXPECT_TRUE(TarReader(dir.file("a.tar.gz")).gzip());
  check_sample(dir.file("a.tar.gz"));
  const auto all = list_tar(dir.file("a.tar.gz"));
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[3].path.size(), 164u);
}

TEST(TarArchive, DataOffsetsArePreadable) {
  TempDir dir;
  write_sample(dir.file("a.tar"), false);
  const auto raw = test::read_bytes(dir.file("a.tar"));
  for (const auto& m : list_tar(dir.file("a.tar"))) {
    if (m.path == "cats/a.txt") {
      EXPECT_EQ(std::string(raw.begin() + static_cast<long>(m.data_offset),
                            raw.begin() + static_cast<long>(m.data_offset + m.size)),
                "hello");
    }
  }
  EXPECT_EQ(raw.size() % 512, 0u);
}

TEST(TarArchive, UstarPrefixFieldJoinsThePath) {
  TempDir dir;
  write_sample(dir.file("a.tar"), false);
  auto raw = test::read_bytes(dir.file("a.tar"));
  // Rewrite the second header (cats/a.txt) as prefix "deep/dir" + name "a.txt".
  uint8_t* h = raw.data() + 512;
  std::memset(h, 0, 100);
  std::memcpy(h, "a.txt", 5);
  std::memcpy(h + 345, "deep/dir", 8);
  const uint32_t sum = tar_header_checksum(h);
  std::snprintf(reinterpret_cast<char*>(h + 148), 8, "%06o", sum);
  test::write_bytes(dir.file("b.tar"), raw);
  EXPECT_EQ(list_tar(dir.file("b.tar"))[1].path, "deep/dir/a.txt");
}

TEST(TarArchive, BadChecksumIsFormatErrorWithOffset) {
  TempDir dir;
  write_sample(dir.file("a.tar"), false);
  auto raw = test::read_bytes(dir.file("a.tar"));
  raw[512 + 10] ^= 0x01;  // second header's name
  test::write_bytes(dir.file("bad.tar"), raw);
  D5_EXPECT_FORMAT_ERROR(list_tar(dir.file("bad.tar")), "bad.tar", "offset 512", "checksum");
}

// Hostile archives: members named outside the archive's tree are refused, naming the member;
// "./" and names that merely contain dots are not.
TEST(TarArchive, AbsoluteAndParentPathsAreFormatErrors) {
  TempDir dir;
  const std::vector<uint8_t> data = {1, 2, 3};
  for (const std::string bad : {"../evil.JPEG", "c/../../evil.JPEG", "/etc/c/x.JPEG", "c/.."}) {
    {
      TarWriter w(dir.file("bad.tar"));
      w.add_file(bad, data);
    }
    D5_EXPECT_FORMAT_ERROR(list_tar(dir.file("bad.tar")), bad, "'..' component");
  }
  {
    TarWriter w(dir.file("good.tar"));
    w.add_file("./c/x.JPEG", data);
    w.add_file("c/..x/y...JPEG", data);
  }
  EXPECT_EQ(list_tar(dir.file("good.tar")).size(), 2u);
}

TEST(TarArchive, NotATarIsFormatError) {
  TempDir dir;
  test::write_bytes(dir.file("x.tar"), std::vector<uint8_t>(2048, 'a'));
  D5_EXPECT_FORMAT_ERROR(list_tar(dir.file("x.tar")), "x.tar", "offset 0");
}

TEST(TarArchive, TruncationIsFormatErrorWithOffset) {
  TempDir dir;
  write_sample(dir.file("a.tar"), false);
  const auto raw = test::read_bytes(dir.file("a.tar"));
  // Cut inside the long-name member's data, inside a header, and right after the last member
  // (before the end-of-archive marker).
  const size_t end_of_members = raw.size() - 1024;
  for (size_t cut : {end_of_members - 300, size_t{512 + 100}, end_of_members}) {
    test::write_bytes(dir.file("cut.tar"), std::vector<uint8_t>(raw.begin(), raw.begin() + static_cast<long>(cut)));
    D5_EXPECT_FORMAT_ERROR(list_tar(dir.file("cut.tar")), "cut.tar", "offset");
  }
  // Reading data across the cut fails the same way.
  test::write_bytes(dir.file("cut.tar"), std::vector<uint8_t>(raw.begin(), raw.begin() + 1024 + 3));
  TarReader r(dir.file("cut.tar"));
  TarMember m;
  ASSERT_TRUE(r.next(m));
  ASSERT_TRUE(r.next(m));
  D5_EXPECT_FORMAT_ERROR(r.read_data(), "cut.tar", "offset 1024");
}

TEST(TarArchive, TruncatedGzipIsFormatError) {
  TempDir dir;
  write_sample(dir.file("a.tar.gz"), true);
  const auto raw = test::read_bytes(dir.file("a.tar.gz"));
  test::write_bytes(dir.file("cut.tar.gz"), std::vector<uint8_t>(raw.begin(), raw.begin() + static_cast<long>(raw.size() / 2)));
  D5_EXPECT_FORMAT_ERROR(list_tar(dir.file("cut.tar.gz")), "cut.tar.gz");
}

// Archives made by GNU tar itself, in each of its formats: the reader must agree with the
// reference implementation, not only with TarWriter.
TEST(TarArchive, ReadsArchivesMadeByGnuTar) {
  if (std::system("tar --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no 'tar' program on this machine";
  TempDir dir;
  // 153 bytes: a long-name record in the gnu and pax formats, the prefix field in ustar.
  const std::string deep = "d/" + std::string(90, 'n') + "/" + std::string(60, 'f');
  std::filesystem::create_directories(dir.path / "src" / std::filesystem::path(deep).parent_path());
  test::write_bytes(dir.file("src/" + deep), bytes_of(std::string(1500, 'k')));
  test::write_bytes(dir.file("src/d/small.bin"), bytes_of("tiny"));
  // A 110-byte file name cannot be split into prefix + name: gnu writes an 'L' record, pax an
  // 'x' header with a path; ustar cannot store it, so its archive leaves e/ out.
  const std::string wide = "e/" + std::string(110, 'w');
  std::filesystem::create_directories(dir.path / "src" / "e");
  test::write_bytes(dir.file("src/" + wide), bytes_of("wide"));
  for (const std::string format : {"gnu", "pax", "ustar"}) {
    for (const bool gz : {false, true}) {
      const std::string out = dir.file("x_" + format + (gz ? ".tar.gz" : ".tar"));
      const std::string cmd = "tar -C " + dir.file("src") + " --format=" + format + (gz ? " -czf " : " -cf ") + out +
                              " --sort=name d" + (format == "ustar" ? "" : " e");
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
      std::map<std::string, std::vector<uint8_t>> files;
      TarReader r(out);
      EXPECT_EQ(r.gzip(), gz);
      TarMember m;
      while (r.next(m)) {
        if (m.regular_file()) files[m.path] = r.read_data();
      }
      ASSERT_EQ(files.size(), format == "ustar" ? 2u : 3u) << out;
      if (format != "ustar") {
        EXPECT_EQ(files.at(wide), bytes_of("wide")) << out;
      }
      EXPECT_EQ(files.at(deep), bytes_of(std::string(1500, 'k'))) << out;
      EXPECT_EQ(files.at("d/small.bin"), bytes_of("tiny")) << out;
    }
  }
}

TEST(TarArchive, MissingFileIsIoError) {
  EXPECT_THROW(TarReader("/nonexistent/d5/x.tar"), IoError);
}

}  // namespace
}  // namespace d5

// KernelCache: compiled kernels survive a round trip, and a damaged, truncated or foreign entry
// is never loaded: it is removed and reported as a miss.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "gemmtune/cache/kernel_cache.hpp"
#include "gemmtune/generator/util.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

CachedKernel sample_kernel() {
  CachedKernel k;
  // Binary, with NUL bytes: a cubin is an ELF file.
  k.cubin = std::string(
                "\x7f"
                "ELF\0\0\x01\x02",
                8) +
            std::string(5000, '\xab') + std::string(1, '\0');
  k.registers = 168;
  k.spills = 8;
  k.smem_static = 4096;
  k.stack_frame = 16;
  k.log = "ptxas info    : Used 168 registers, 4096 bytes smem";
  k.compile_ms = 187.25;
  return k;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class KernelCacheTest : public ::testing::Test {
 protected:
  TempDir dir_;
  KernelCache cache_{dir_.path() / "kernels"};
  static constexpr KernelCache::KeyParts kParts{"5f3a9c", "templates-1", "-arch=sm_90a -std=c++17",
                                                "13.0", "sm_90a"};
  const std::string key_ = KernelCache::key(kParts);
};

TEST_F(KernelCacheTest, StoreThenLoadGivesBackTheKernel) {
  const CachedKernel stored = sample_kernel();
  cache_.store(key_, stored);
  EXPECT_TRUE(fs::exists(cache_.path_of(key_)));
  const auto loaded = cache_.load(key_);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->cubin, stored.cubin);
  EXPECT_EQ(loaded->registers, 168);
  EXPECT_EQ(loaded->spills, 8);
  EXPECT_EQ(loaded->smem_static, 4096);
  EXPECT_EQ(loaded->stack_frame, 16);
  EXPECT_EQ(loaded->log, stored.log);
  EXPECT_DOUBLE_EQ(loaded->compile_ms, 187.25);
}

TEST_F(KernelCacheTest, StoreLeavesOnlyTheEntryAndReplacesAnOldOne) {
  CachedKernel k = sample_kernel();
  cache_.store(key_, k);
  k.registers = 99;
  cache_.store(key_, k);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(cache_.dir())) files.push_back(entry.path());
  ASSERT_EQ(files.size(), 1u) << "temp files left behind";
  EXPECT_EQ(files[0], cache_.path_of(key_));
  EXPECT_EQ(cache_.load(key_)->registers, 99);
}

TEST_F(KernelCacheTest, KeyChangesWithEveryPart) {
  EXPECT_EQ(key_.size(), 32u);
  auto with = [](auto change) {
    KernelCache::KeyParts parts = kParts;
    change(parts);
    return KernelCache::key(parts);
  };
  EXPECT_NE(key_, with([](auto& k) { k.source_hash = "5f3a9d"; }));
  EXPECT_NE(key_, with([](auto& k) { k.templates_hash = "templates-2"; }));
  EXPECT_NE(key_, with([](auto& k) { k.options = "-arch=sm_80 -std=c++17"; }));
  EXPECT_NE(key_, with([](auto& k) { k.nvrtc = "12.8"; }));
  EXPECT_NE(key_, with([](auto& k) { k.arch = "sm_90"; }));
  // Moving text from one part to another is a different key too.
  EXPECT_NE(with([](auto& k) { k.source_hash = "ab", k.templates_hash = "c"; }),
            with([](auto& k) { k.source_hash = "a", k.templates_hash = "bc"; }));
}

// A key must not change between runs or builds of the same version, or every entry would be
// missed: a known answer pins it. Change it only with the key's composition, on purpose (old
// entries are then simply never hit again).
TEST_F(KernelCacheTest, KeyIsAKnownFunctionOfItsParts) {
  EXPECT_EQ(key_, hash_hex("gemmtune kernel cache v1|6:5f3a9c|11:templates-1|23:-arch=sm_90a "
                           "-std=c++17|4:13.0|6:sm_90a"));
  EXPECT_EQ(key_, "0c8092b4034830e6585fa064a8990a0c");
}

TEST_F(KernelCacheTest, AMissingEntryIsAMiss) {
  EXPECT_FALSE(cache_.load(key_));
  EXPECT_FALSE(fs::exists(cache_.dir())) << "a load must not create the folder";
}

class DamagedEntry : public KernelCacheTest, public ::testing::WithParamInterface<std::string> {
 protected:
  // The bytes to put at path_of(key_), made from a good entry.
  std::string damaged(const std::string& good) {
    const std::string& how = GetParam();
    if (how == "truncated") return good.substr(0, good.size() / 2);
    if (how == "truncated_checksum") return good.substr(0, good.size() - 1);
    if (how == "flipped_cubin_byte") {
      std::string bad = good;
      bad[bad.size() - 32 - 100] ^= 0x01;  // inside the cubin: the checksum (32 digits) follows it
      return bad;
    }
    if (how == "other_key") {
      const std::string other = KernelCache::key({"another", "source", "", "13.0", "sm_90a"});
      cache_.store(other, sample_kernel());
      return read_bytes(cache_.path_of(other));
    }
    if (how == "garbage") return std::string(3000, 'g');
    if (how == "empty") return "";
    ADD_FAILURE() << "unknown damage " << how;
    return good;
  }
};

TEST_P(DamagedEntry, IsRemovedAndReportedAsAMiss) {
  cache_.store(key_, sample_kernel());
  const fs::path path = cache_.path_of(key_);
  write_bytes(path, damaged(read_bytes(path)));
  EXPECT_FALSE(cache_.load(key_));
  EXPECT_FALSE(fs::exists(path)) << "the bad entry was kept";
  // The next compile stores a good entry again.
  cache_.store(key_, sample_kernel());
  EXPECT_TRUE(cache_.load(key_));
}

INSTANTIATE_TEST_SUITE_P(KernelCache, DamagedEntry,
                         ::testing::Values("truncated", "truncated_checksum", "flipped_cubin_byte",
                                           "other_key", "garbage", "empty"));

TEST_F(KernelCacheTest, StoreIntoAFolderThatCannotExistDoesNotThrow) {
  // Under a regular file no folder can be made, even by root (who ignores permission bits).
  const fs::path file = dir_.path() / "plain_file";
  write_bytes(file, "x");
  const KernelCache unwritable(file / "kernels");
  EXPECT_NO_THROW(unwritable.store(key_, sample_kernel()));
  EXPECT_FALSE(unwritable.load(key_));
}

TEST_F(KernelCacheTest, KeysThatAreNotFileNamesAreRefused) {
  for (const std::string& bad :
       std::vector<std::string>{"", "../escape", "a/b", std::string(200, 'a')}) {
    try {
      cache_.load(bad);
      ADD_FAILURE() << "accepted key '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
    }
  }
}

TEST(KernelCacheDefaults, DefaultFolderFollowsGemmtuneCacheDir) {
  const auto saved = env_var("GEMMTUNE_CACHE_DIR");
  ::setenv("GEMMTUNE_CACHE_DIR", "/tmp/gemmtune-cache-dir-test", 1);
  EXPECT_EQ(KernelCache().dir(), fs::path("/tmp/gemmtune-cache-dir-test") / "kernels");
  if (saved)
    ::setenv("GEMMTUNE_CACHE_DIR", saved->c_str(), 1);
  else
    ::unsetenv("GEMMTUNE_CACHE_DIR");
}

}  // namespace
}  // namespace gemmtune

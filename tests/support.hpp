#pragma once
// Helpers shared by the tests: temporary folders, running the tools, skipping without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "gemmtune/generator/embedded.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/runtime/driver.hpp"

namespace gemmtune::test {

// The first rule a configuration breaks, by name: "" when it is a valid point of the family's
// space for the problem, else why_invalid()'s reason when that is not a broken rule.
// The problem with `extra` more elements of leading dimension for A, B and C, and the alignment
// class that leaves (an odd extra: no TMA in place, packed or stored from registers).
inline Problem with_longer_lds(Problem p, int64_t extra) {
  p.lda += extra;
  p.ldb += extra;
  p.ldc += extra;
  p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
  return p;
}

inline std::string broken_rule(const Family& f, const KernelConfig& c, const Problem& p,
                               const ArchInfo& arch) {
  const std::string why = f.why_invalid(c, p, arch);
  const std::string marker = "breaks constraint ";
  if (why.empty() || why.find(marker) != 0) return why;
  const size_t end = why.find(' ', marker.size());
  return why.substr(marker.size(), end - marker.size());
}

// A fresh folder, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("gemmtune-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal (a crash)
  int signal = 0;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, capturing stdout and (unless told otherwise) stderr.
inline CommandResult run_command(const std::string& command, bool with_stderr = true) {
  CommandResult r;
  FILE* pipe = popen((command + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

// A tool or worker built with the tests: beside the running test binary, where it is when the
// build folder was copied to another machine, else where it was built.
inline std::string tool(const std::string& name) {
  std::error_code error;
  const auto beside = std::filesystem::read_symlink("/proc/self/exe", error).parent_path() / name;
  if (!error && std::filesystem::exists(beside, error)) return beside.string();
  return std::string(GEMMTUNE_BIN_DIR) + "/" + name;
}

// `count` bytes from a fixed seed: a file that is nothing in particular.
inline std::string random_bytes(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out(count, '\0');
  for (char& ch : out) ch = char(rng());
  return out;
}

// The embedded templates as a copy a test edits: what an edit of the sources, or an upgrade of
// gemmtune, does to what depends on them (the Compiler and template_version take such a set).
class EditableTemplates {
 public:
  EditableTemplates() {
    for (const auto& f : embedded_templates()) contents_.emplace_back(f.content);
    for (size_t i = 0; i < contents_.size(); ++i)
      files_.push_back({embedded_templates()[i].path, contents_[i]});
  }
  EditableTemplates(const EditableTemplates&) = delete;  // files_ views contents_
  EditableTemplates& operator=(const EditableTemplates&) = delete;

  EditableTemplates& append(std::string_view path, const std::string& text) {
    for (size_t i = 0; i < files_.size(); ++i)
      if (path == files_[i].path) {
        contents_[i] += text;
        files_[i].content = contents_[i];
        return *this;
      }
    ADD_FAILURE() << "no template " << path;
    return *this;
  }
  const std::vector<EmbeddedFile>& files() const { return files_; }

 private:
  std::vector<std::string> contents_;
  std::vector<EmbeddedFile> files_;
};

}  // namespace gemmtune::test

// GPU tests say plainly why they skipped.
#define GEMMTUNE_REQUIRE_GPU()                                                    \
  do {                                                                            \
    if (!::gemmtune::cu::available())                                             \
      GTEST_SKIP() << "no GPU here (" << ::gemmtune::cu::unavailable_reason()     \
                   << "): GPU tests run on the GPU machine (tools/gpu-check.sh)"; \
  } while (0)

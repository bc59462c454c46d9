#include "gemmtune/runtime/compiler.hpp"

#include <dlfcn.h>
#include <nvrtc.h>

#include <charconv>
#include <chrono>
#include <ctime>
#include <fstream>
#include <regex>

#include "gemmtune/generator/embedded.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/device.hpp"

namespace gemmtune {
namespace {

[[noreturn]] void throw_nvrtc(nvrtcResult r, const char* call, const char* file, int line) {
  throw_error_at(Errc::compile, file, line,
                 fmt::format("{} failed: {}", call, nvrtcGetErrorString(r)));
}

#define GT_NVRTC(call)                                                         \
  do {                                                                         \
    const nvrtcResult gt_r_ = (call);                                          \
    if (gt_r_ != NVRTC_SUCCESS) throw_nvrtc(gt_r_, #call, __FILE__, __LINE__); \
  } while (0)

// Owns an nvrtcProgram, with `files` as its in-memory headers.
class Program {
 public:
  Program(const KernelSource& source, const std::vector<EmbeddedFile>& files) {
    std::vector<std::string> text;  // NUL-terminated copies: a string_view need not end in one
    std::vector<const char*> contents, names;
    text.reserve(files.size());
    for (const auto& f : files) {
      contents.push_back(text.emplace_back(f.content).c_str());
      names.push_back(f.path);
    }
    GT_NVRTC(nvrtcCreateProgram(&program_, source.code.c_str(), (source.name + ".cu").c_str(),
                                int(files.size()), contents.data(), names.data()));
  }
  ~Program() { nvrtcDestroyProgram(&program_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return program_; }

  std::string log() const {
    size_t size = 0;
    nvrtcGetProgramLogSize(program_, &size);
    std::string log(size, '\0');
    if (size > 0) nvrtcGetProgramLog(program_, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
  }
  std::string cubin() const {
    size_t size = 0;
    GT_NVRTC(nvrtcGetCUBINSize(program_, &size));
    std::string bytes(size, '\0');
    GT_NVRTC(nvrtcGetCUBIN(program_, bytes.data()));
    return bytes;
  }

 private:
  nvrtcProgram program_ = nullptr;
};

// CPU time of the calling thread: NVRTC compiles on the thread that calls it, so this is the
// compile's own cost, whatever else the machine is doing (wall time is not, on a busy machine).
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

int read_int(const std::string& s) {
  int v = -1;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// Writes text to $knob/<name><ext> when the knob is set; throws Error(io) saying which knob
// when it cannot (the candidate then fails with that message, the run goes on).
void dump(const char* knob, const std::string& name, const char* ext, const std::string& text) {
  auto dir = env_var(knob);
  if (!dir) return;
  const std::filesystem::path path = std::filesystem::path(*dir) / (name + ext);
  std::error_code error;
  std::filesystem::create_directories(*dir, error);
  GT_REQUIRE(!error, Errc::io, "{}={}: cannot create the folder: {}", knob, *dir, error.message());
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  GT_REQUIRE(out, Errc::io, "{}={}: cannot write {}", knob, *dir, path.string());
}

// NVRTC's version, and which build of it: the file this process loaded (its size and time), since
// nvrtcVersion() says only major.minor and an update may generate other code.
std::string nvrtc_identity() {
  static const std::string identity = [] {
    std::string id = nvrtc_version();
    Dl_info info{};
    std::error_code error;
    if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) != 0 && info.dli_fname != nullptr) {
      const std::filesystem::path file = std::filesystem::canonical(info.dli_fname, error);
      const auto size = error ? 0 : std::filesystem::file_size(file, error);
      const auto time =
          error ? std::filesystem::file_time_type{} : std::filesystem::last_write_time(file, error);
      if (!error)
        id += fmt::format(" {} {} {}", file.string(), size, time.time_since_epoch().count());
    }
    return id;
  }();
  return identity;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

}  // namespace

PtxasReport parse_ptxas_report(std::string_view log_view, std::string_view name) {
  PtxasReport r;
  const std::string log(log_view);
  // The report of one entry runs from "Function properties for NAME" to its "Used ..." line.
  const std::string props = fmt::format("Function properties for {}", name);
  size_t pos = log.find(props);
  if (pos == std::string::npos) return r;
  const std::string tail = log.substr(pos);
  std::smatch m;
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  if (std::regex_search(tail, m, frame)) {
    r.stack_frame = read_int(m[1]);
    r.spill_stores = read_int(m[2]);
    r.spill_loads = read_int(m[3]);
  }
  if (std::regex_search(tail, m, used)) {
    r.registers = read_int(m[1]);
    r.found = true;
    // smem appears on the Used line only when the kernel has static shared memory.
    const size_t line_end = tail.find('\n', size_t(m.position(0)));
    const std::string line = tail.substr(size_t(m.position(0)), line_end - size_t(m.position(0)));
    r.smem_static = std::regex_search(line, m, smem) ? read_int(m[1]) : 0;
  }
  return r;
}

Compiler::Compiler(bool use_cache, std::optional<std::filesystem::path> dir,
                   std::vector<EmbeddedFile> templates)
    : templates_(std::move(templates)) {
  if (use_cache && !env_var("GEMMTUNE_NO_KERNEL_CACHE"))
    cache_.emplace(dir ? *dir : cache_dir() / "kernels");
}

std::vector<std::string> Compiler::options(const ArchInfo& arch) const {
  // -minimal leaves out the runtime API declarations (textures, device launches, driver
  // types) that no template uses: up to 9% less compile time, byte-identical cubins
  // (docs/PERF.md, 'NVRTC -minimal saves up to 9% and changes no cubin').
  // -v: the ptxas report (registers, spills) is part of every result.
  std::vector<std::string> opts = {"--gpu-architecture=" + arch.name(), "-std=c++17", "-minimal",
                                   "--ptxas-options=-v", "-DNDEBUG"};
  if (env_var("GEMMTUNE_LINEINFO")) opts.push_back("-lineinfo");
  return opts;
}

CompiledKernel Compiler::compile(const KernelSource& source, const ArchInfo& arch) const {
  const auto opts = options(arch);
  // Everything the cubin depends on: a change to any included template, an option, NVRTC or the
  // target is a miss, never a stale binary.
  const std::string key =
      KernelCache::key({.source_hash = source.hash,
                        .templates_hash = included_templates_digest(source.code, templates_),
                        .options = join(opts),
                        .nvrtc = nvrtc_identity(),
                        .arch = arch.name()});
  dump("GEMMTUNE_DUMP_SOURCE", source.name, ".cu", source.code);
  if (cache_) {
    if (auto hit = cache_->load(key)) {
      CompiledKernel k;
      k.name = source.name;
      k.cubin = std::move(hit->cubin);
      k.log = std::move(hit->log);
      k.report = parse_ptxas_report(k.log, k.name);
      k.compile_ms = hit->compile_ms;
      k.from_cache = true;
      return k;
    }
  }
  CompiledKernel k = compile_uncached(source, arch);
  if (cache_) {
    CachedKernel entry;
    entry.cubin = k.cubin;
    entry.registers = k.report.registers;
    entry.spills = k.report.found ? k.report.spills() : -1;
    entry.smem_static = k.report.smem_static;
    entry.stack_frame = k.report.stack_frame;
    entry.log = k.log;
    entry.compile_ms = k.compile_ms;
    cache_->store(key, entry);
  }
  return k;
}

CompiledKernel Compiler::compile_uncached(const KernelSource& source, const ArchInfo& arch) const {
  const auto opts = options(arch);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = thread_cpu_ms();
  Program program(source, templates_);
  const nvrtcResult result = nvrtcCompileProgram(program.get(), int(argv.size()), argv.data());
  CompiledKernel k;
  k.name = source.name;
  k.log = program.log();
  if (result != NVRTC_SUCCESS) {
    GT_THROW(Errc::compile, "NVRTC could not compile {} for {}: {}\noptions: {}\n{}", source.name,
             arch.name(), nvrtcGetErrorString(result), join(opts), k.log);
  }
  k.cubin = program.cubin();
  k.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  k.compile_cpu_ms = thread_cpu_ms() - cpu_start;
  k.report = parse_ptxas_report(k.log, k.name);
  if (env_var("GEMMTUNE_DUMP_PTX")) {
    // The cubin target has no PTX to give: compile once more for the virtual architecture.
    Program ptx_program(source, templates_);
    auto virt = opts;
    virt[0] = "--gpu-architecture=compute_" + arch.name().substr(3);
    std::vector<const char*> vargv;
    for (const auto& o : virt) vargv.push_back(o.c_str());
    if (nvrtcCompileProgram(ptx_program.get(), int(vargv.size()), vargv.data()) == NVRTC_SUCCESS) {
      size_t size = 0;
      nvrtcGetPTXSize(ptx_program.get(), &size);
      std::string ptx(size, '\0');
      nvrtcGetPTX(ptx_program.get(), ptx.data());
      dump("GEMMTUNE_DUMP_PTX", source.name, ".ptx", ptx);
    }
  }
  log().debug("compiled {} in {:.0f} ms ({} registers)", k.name, k.compile_ms, k.report.registers);
  return k;
}

}  // namespace gemmtune

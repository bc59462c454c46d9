#include "gemmtune/runtime/shape_recorder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {
namespace {

constexpr const char* kHeader =
    "# Problems served without a tuned kernel (GEMMTUNE_RECORD). Tune them with:\n"
    "#   gemm-tune --shapes THIS_FILE\n";

// The words of a line before any comment, single-spaced: how two lines are compared.
std::string key_of(const std::string& line) {
  std::istringstream words(line.substr(0, line.find('#')));
  std::string key;
  for (std::string w; words >> w;) key += (key.empty() ? "" : " ") + w;
  return key;
}

bool lists(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (key_of(line) == key) return true;
  return false;
}

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& file) {
  GT_THROW(Errc::io, "GEMMTUNE_RECORD: cannot {} {}: {}", what, file.string(),
           std::strerror(errno));
}

std::string read_all(int fd, const std::filesystem::path& file) {
  std::string text;
  char buf[65536];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io("read", file);
    if (n == 0) return text;
    text.append(buf, size_t(n));
    at += n;
  }
}

void write_all(int fd, const std::string& text, const std::filesystem::path& file) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io("append to", file);
    done += size_t(n);
  }
}

// An open file descriptor, closed (which also drops its lock) at the end of the scope.
struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

}  // namespace

std::string shape_line(const Problem& p) {
  // A grouped problem's line says N as gemm-tune --groups takes it: the mean columns of a group,
  // or a masked group's capacity (always N / G). An N that is not a multiple of G is rounded up, to
  // the nearest problem a line can name (G x the mean columns, with the tight leading dimensions of
  // that N); the comment keeps the N.
  const int64_t groups = p.group_count();
  const int64_t mean = (p.n + groups - 1) / groups;
  std::string line = fmt::format("{} {} {} {} {}", p.m, mean, p.k, p.types.name(), p.layout());
  if (p.scaling != Scaling::none) line += fmt::format(" scaling={}", to_string(p.scaling));
  // Fast accumulation is another problem (tuned and stored apart); precise, the default, is not
  // written, so the lines of earlier files stand for what they did.
  if (p.fast_accumulation()) line += fmt::format(" accum={}", to_string(p.accumulation));
  // So is an f32 product on tensor cores; exact, the default, is not written, as for accum=.
  if (p.precision != Precision::exact) line += fmt::format(" precision={}", to_string(p.precision));
  if (p.grouped()) line += fmt::format(" groups={}", p.groups);
  if (p.masked()) line += fmt::format(" group_layout={}", to_string(p.group_layout));
  // A fused store is another problem; none, the default, is not written, as for accum=.
  if (!p.epilogue.none()) line += fmt::format(" epilogue={}", p.epilogue.name());
  // Leading dimensions below the read-back problem's tight ones (only where N was rounded up)
  // cannot be named: the tight ones stand for them.
  Problem tight = make_problem(p.types, p.op_a, p.op_b, p.m, mean * groups, p.k);
  tight.epilogue = p.epilogue;
  tight.ldc = std::max<int64_t>(1, tight.output_rows());  // D's rows: M / 2 when gated
  const int64_t lda = std::max(p.lda, tight.lda), ldb = std::max(p.ldb, tight.ldb),
                ldc = std::max(p.ldc, tight.ldc);
  if (lda != tight.lda) line += fmt::format(" lda={}", lda);
  if (ldb != tight.ldb) line += fmt::format(" ldb={}", ldb);
  if (ldc != tight.ldc) line += fmt::format(" ldc={}", ldc);
  if (p.reads_c) line += " beta=1";
  std::string notes;
  // The call's own leading dimensions: the note is about its pointers.
  const int ld_align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
  if (p.align < ld_align) notes += fmt::format(" align={}", p.align);
  if (mean * groups != p.n) notes += fmt::format(" n={}", p.n);
  return notes.empty() ? line : fmt::format("{}  #{}", line, notes);
}

bool record_shape(const std::filesystem::path& file, const Problem& problem) {
  const std::string line = shape_line(problem);
  if (file.has_parent_path()) {
    std::error_code ignored;  // open() below says what went wrong, if anything did
    std::filesystem::create_directories(file.parent_path(), ignored);
  }
  Fd f{::open(file.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644)};
  if (f.fd < 0) throw_io("open", file);
  while (::flock(f.fd, LOCK_EX) != 0)
    if (errno != EINTR) throw_io("lock", file);
  // Read again under the lock: another process may have appended the line meanwhile.
  const std::string text = read_all(f.fd, file);
  if (lists(text, key_of(line))) return false;
  std::string append = text.empty() ? kHeader : "";
  if (!text.empty() && text.back() != '\n') append += '\n';
  write_all(f.fd, append + line + '\n', file);
  return true;
}

}  // namespace gemmtune

#pragma once
// The library's log lines while one of these lives, for tests that check what was said.
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "gemmtune/generator/util.hpp"

namespace gemmtune::test {

class LogCapture {
 public:
  // `level`: the least severe level captured (the logger is lowered to it meanwhile).
  explicit LogCapture(spdlog::level::level_enum level = spdlog::level::warn)
      : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)), before_(log().level()) {
    log().sinks().push_back(sink_);
    if (level < before_) log().set_level(level);
  }
  ~LogCapture() {
    log().set_level(before_);
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  int lines_with(const std::string& part) const {
    std::istringstream in(text_.str());
    int count = 0;
    for (std::string line; std::getline(in, line);) count += line.find(part) != std::string::npos;
    return count;
  }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum before_;
};

}  // namespace gemmtune::test

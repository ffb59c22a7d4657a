// A FILE* whose output is gathered in memory, for tests of code that
// prints (progress lines, replay reports).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include <doctest/doctest.h>

namespace pagefile::test {

class StreamCapture {
 public:
  StreamCapture() : file_(open_memstream(&data_, &size_)) { REQUIRE(file_ != nullptr); }
  ~StreamCapture() {
    if (file_ != nullptr) std::fclose(file_);
    std::free(data_);
  }
  StreamCapture(const StreamCapture&) = delete;
  StreamCapture& operator=(const StreamCapture&) = delete;

  std::FILE* file() { return file_; }
  // Everything written so far.
  std::string text() {
    std::fflush(file_);
    return std::string(data_, size_);
  }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

}  // namespace pagefile::test

// GET /metrics over HTTP/1.1 (Boost.Beast), for pagefiled --metrics
// HOST:PORT: each request is answered with what `render` returns then, in
// Prometheus's text format; any other path is 404, any other method 405.
// One thread answers one connection at a time (a scrape a few seconds
// apart is its whole load), each read bounded to 2 s so a silent client
// cannot hold it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "pagefile/status.h"

namespace pagefile::tools {

class MetricsHttp {
 public:
  // Listens on HOST:PORT (port 0: a free one) and starts answering.
  static Result<std::unique_ptr<MetricsHttp>> start(const std::string& host_port, std::function<std::string()> render);
  ~MetricsHttp();  // stop()
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;

  // "http://HOST:PORT/metrics", with the real port.
  const std::string& url() const { return url_; }
  void stop();

 private:
  struct State;
  explicit MetricsHttp(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
  std::string url_;
};

}  // namespace pagefile::tools

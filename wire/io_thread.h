// A thread that runs an io_context until told to finish.
//
// finish() lets the work already queued (connections ending, their last
// handlers) run to the end before the thread exits, so nothing a handler
// holds is left behind; only past `grace` does it stop the io_context
// outright.
#pragma once

#include <chrono>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace pagefile::net {

class IoThread {
 public:
  explicit IoThread(boost::asio::io_context& io) : io_(io), work_(boost::asio::make_work_guard(io)) {
    thread_ = std::thread([this] { io_.run(); });
  }
  ~IoThread() { finish(); }
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // REQUIRES: not called from the io_context's own thread.
  void finish(std::chrono::milliseconds grace = std::chrono::milliseconds(2000)) {
    if (!thread_.joinable()) return;
    work_.reset();
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (!io_.stopped() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    io_.stop();
    thread_.join();
  }

 private:
  boost::asio::io_context& io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
};

}  // namespace pagefile::net

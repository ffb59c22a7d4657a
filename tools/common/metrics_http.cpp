#include "tools/common/metrics_http.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

namespace pagefile::tools {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using Tcp = asio::ip::tcp;

struct MetricsHttp::State {
  asio::io_context io;
  Tcp::acceptor acceptor{io};
  std::function<std::string()> render;
  std::thread thread;
  bool stopped = false;

  void serve() {
    for (;;) {
      boost::system::error_code ec;
      Tcp::socket socket(io);
      acceptor.accept(socket, ec);
      if (ec) {
        if (!acceptor.is_open() || ec == asio::error::invalid_argument || ec == asio::error::bad_descriptor) return;
        continue;  // the client went before we took it
      }
      timeval limit{2, 0};
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
      boost::beast::flat_buffer buffer;
      http::request<http::string_body> request;
      http::read(socket, buffer, request, ec);
      if (ec) continue;
      http::response<http::string_body> response;
      response.version(request.version());
      response.keep_alive(false);
      if (request.method() != http::verb::get) {
        response.result(http::status::method_not_allowed);
        response.body() = "GET only\n";
      } else if (request.target() != "/metrics") {
        response.result(http::status::not_found);
        response.body() = "not found: the metrics are at /metrics\n";
      } else {
        response.result(http::status::ok);
        response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        response.body() = render();
      }
      response.prepare_payload();
      http::write(socket, response, ec);
      socket.shutdown(Tcp::socket::shutdown_both, ec);
    }
  }
};

Result<std::unique_ptr<MetricsHttp>> MetricsHttp::start(const std::string& host_port,
                                                        std::function<std::string()> render) {
  auto colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::invalid_argument(fmt::format("metrics address '{}'", host_port), "is not HOST:PORT");
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned long port = 0;
  try {
    size_t used = 0;
    port = std::stoul(host_port.substr(colon + 1), &used);
    if (used != host_port.size() - colon - 1 || port > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    return Status::invalid_argument(fmt::format("metrics address '{}'", host_port), "has no port 0 to 65535");
  }
  auto state = std::make_unique<State>();
  state->render = std::move(render);
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(host, ec);
  if (ec) return Status::invalid_argument(fmt::format("metrics address '{}'", host_port), "needs an IP address");
  Tcp::endpoint endpoint(ip, static_cast<uint16_t>(port));
  state->acceptor.open(endpoint.protocol(), ec);
  if (!ec) state->acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(endpoint, ec);
  if (!ec) state->acceptor.listen(16, ec);
  if (ec) return Status::io_error(fmt::format("metrics address {}", host_port), ec.message());
  auto local = state->acceptor.local_endpoint(ec);
  std::unique_ptr<MetricsHttp> out(new MetricsHttp(std::move(state)));
  out->url_ = fmt::format("http://{}:{}/metrics", ip.is_v6() ? "[" + host + "]" : host, local.port());
  out->state_->thread = std::thread([s = out->state_.get()] { s->serve(); });
  return out;
}

MetricsHttp::MetricsHttp(std::unique_ptr<State> state) : state_(std::move(state)) {}

MetricsHttp::~MetricsHttp() { stop(); }

void MetricsHttp::stop() {
  if (!state_ || state_->stopped) return;
  state_->stopped = true;
  // Wakes the accept() the thread waits in (closing the acceptor from
  // another thread would race with it).
  ::shutdown(state_->acceptor.native_handle(), SHUT_RDWR);
  if (state_->thread.joinable()) state_->thread.join();
  boost::system::error_code ignored;
  state_->acceptor.close(ignored);
}

}  // namespace pagefile::tools

#include "server/etcd_client.h"

// GCC (12, with the sanitizers) takes an optional in Beast's HTTP parser
// for uninitialized once inlined here; it is not (Boost's issue, not ours).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <charconv>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pagefile::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

struct EtcdClient::Member {
  std::string host;
  std::string port;
  asio::io_context io;
  std::unique_ptr<beast::tcp_stream> stream;  // kept open between calls

  // Runs the operations started on `io` until they finish (each stream
  // operation ends by its expiry at the latest).
  void run() {
    io.restart();
    io.run();
  }

  void drop() {
    if (stream) {
      beast::error_code ignored;
      stream->socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
      stream->close();
    }
    stream.reset();
  }

  // One request and its answer: the HTTP status and body, or the
  // transport's error (then the connection is dropped).
  Result<std::pair<unsigned, std::string>> exchange(const std::string& target, const std::string& body,
                                                    Clock::time_point until) {
    beast::error_code ec;
    if (!stream) {
      asio::ip::tcp::resolver resolver(io);
      auto found = resolver.resolve(host, port, ec);
      if (ec) return Status::disconnected(host + ":" + port, fmt::format("resolve: {}", ec.message()));
      stream = std::make_unique<beast::tcp_stream>(io);
      stream->expires_at(until);
      stream->async_connect(found, [&](beast::error_code e, const asio::ip::tcp::endpoint&) { ec = e; });
      run();
      if (ec) {
        drop();
        return Status::disconnected(host + ":" + port, fmt::format("connect: {}", ec.message()));
      }
    }
    http::request<http::string_body> request{http::verb::post, target, 11};
    request.set(http::field::host, host + ":" + port);
    request.set(http::field::content_type, "application/json");
    request.keep_alive(true);
    request.body() = body;
    request.prepare_payload();
    stream->expires_at(until);
    http::async_write(*stream, request, [&](beast::error_code e, size_t) { ec = e; });
    run();
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(256u << 20);  // a list of many records (Beast's default is 8 MB)
    if (!ec) {
      http::async_read(*stream, buffer, parser, [&](beast::error_code e, size_t) { ec = e; });
      run();
    }
    if (ec) {
      drop();
      return Status::disconnected(host + ":" + port, fmt::format("{}: {}", target, ec.message()));
    }
    auto& response = parser.get();
    if (!response.keep_alive()) drop();
    return std::make_pair(response.result_int(), std::move(response.body()));
  }
};

Result<std::unique_ptr<EtcdClient>> EtcdClient::make(const std::vector<std::string>& endpoints, Options options) {
  if (endpoints.empty()) return Status::invalid_argument("etcd", "no endpoints");
  for (const auto& e : endpoints) {
    auto colon = e.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == e.size() ||
        e.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      return Status::invalid_argument(fmt::format("etcd endpoint '{}'", e), "is not HOST:PORT");
    }
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(endpoints, options));
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, Options options)
    : endpoints_(std::move(endpoints)), options_(options) {
  MutexLock lock(mu_);
  for (const auto& e : endpoints_) {
    auto member = std::make_unique<Member>();
    auto colon = e.rfind(':');
    member->host = e.substr(0, colon);
    member->port = e.substr(colon + 1);
    members_.push_back(std::move(member));
  }
}

EtcdClient::~EtcdClient() {
  MutexLock lock(mu_);
  for (auto& m : members_) m->drop();
}

namespace {

// gRPC's codes, as the gateway reports them.
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcNotFound = 5;
constexpr int kGrpcPermissionDenied = 7;
constexpr int kGrpcResourceExhausted = 8;
constexpr int kGrpcUnavailable = 14;
constexpr int kGrpcUnauthenticated = 16;

// An answer that another member (or this one, a moment later) may answer
// well: no leader yet, an election, a request that timed out inside etcd.
bool worth_another_try(int code, std::string_view message) {
  return code == kGrpcUnavailable || code == kGrpcDeadlineExceeded ||
         message.find("leader") != std::string_view::npos || message.find("timed out") != std::string_view::npos ||
         message.find("too many requests") != std::string_view::npos;
}

Status error_status(int code, const std::string& message) {
  switch (code) {
    case kGrpcNotFound: return Status::not_found("etcd", message);
    case kGrpcInvalidArgument: return Status::invalid_argument("etcd", message);
    case kGrpcResourceExhausted: return Status::no_space("etcd", message);
    case kGrpcPermissionDenied:
    case kGrpcUnauthenticated: return Status::permission_denied("etcd", message);
    default: return Status::io_error("etcd", fmt::format("{} (code {})", message, code));
  }
}

}  // namespace

Result<nlohmann::json> EtcdClient::call(std::string_view path, const nlohmann::json& body) {
  MutexLock lock(mu_);
  const std::string target(path);
  const std::string text = body.dump();
  const auto deadline = Clock::now() + options_.deadline;
  Status last = Status::disconnected("etcd", "no member was tried");
  for (size_t tries = 0;; ++tries) {
    auto now = Clock::now();
    if (now >= deadline) break;
    if (tries != 0 && tries % members_.size() == 0) {
      // Every member failed this round: an election takes a moment.
      std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(100), deadline - now));
      now = Clock::now();
      if (now >= deadline) break;
    }
    Member& member = *members_[current_];
    auto answer = member.exchange(target, text, std::min(deadline, now + options_.attempt));
    if (answer) {
      auto reply = nlohmann::json::parse(answer->second, nullptr, /*allow_exceptions=*/false);
      if (reply.is_discarded() || !reply.is_object()) {
        last = Status::io_error(endpoints_[current_], fmt::format("{}: not a JSON object: {:.200}", target, answer->second));
      } else if (answer->first == 200 && !reply.contains("error")) {
        return reply;
      } else {
        // {"error": "...", "code": N, "message": "..."}, or from a streamed
        // call {"error": {"grpc_code": N, "message": "..."}}.
        const nlohmann::json& error = reply.contains("error") && reply["error"].is_object() ? reply["error"] : reply;
        int code = static_cast<int>(number(error, error.contains("grpc_code") ? "grpc_code" : "code"));
        std::string message = fmt::format("HTTP {}", answer->first);
        for (const char* key : {"message", "error"}) {
          if (auto it = error.find(key); it != error.end() && it->is_string()) {
            message = it->get<std::string>();
            break;
          }
        }
        if (!worth_another_try(code, message)) return error_status(code, message).with_context(target);
        last = Status::disconnected(endpoints_[current_], fmt::format("{}: {}", target, message));
      }
    } else {
      last = answer.status();
    }
    current_ = (current_ + 1) % members_.size();
  }
  return Status::disconnected("etcd", fmt::format("no member of {} answered within {} ms (last: {})",
                                                  fmt::join(endpoints_, ","), options_.deadline.count(),
                                                  last.message()));
}

std::string EtcdClient::base64(std::string_view bytes) {
  std::string out(beast::detail::base64::encoded_size(bytes.size()), '\0');
  out.resize(beast::detail::base64::encode(out.data(), bytes.data(), bytes.size()));
  return out;
}

Result<std::string> EtcdClient::unbase64(std::string_view text) {
  std::string out(beast::detail::base64::decoded_size(text.size()), '\0');
  auto [wrote, read] = beast::detail::base64::decode(out.data(), text.data(), text.size());
  // (It stops at the padding.)
  if (text.find_first_not_of('=', read) != std::string_view::npos) return Status::corruption("etcd", "an answer's key or value is not base64");
  out.resize(wrote);
  return out;
}

int64_t EtcdClient::number(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_unsigned()) return static_cast<int64_t>(it->get<uint64_t>());
  if (it->is_string()) {
    // Member ids use all 64 bits: read those as unsigned, kept bit for bit.
    const std::string& text = it->get_ref<const std::string&>();
    int64_t value = 0;
    if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        ec == std::errc() && end == text.data() + text.size()) {
      return value;
    }
    uint64_t big = 0;
    if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), big);
        ec == std::errc() && end == text.data() + text.size()) {
      return static_cast<int64_t>(big);
    }
  }
  return 0;
}

}  // namespace pagefile::net

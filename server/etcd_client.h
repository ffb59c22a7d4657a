// A client of etcd's v3 API through its JSON gateway (POST /v3/kv/range,
// /v3/kv/txn, /v3/lease/grant, ... with base64 keys and values and 64-bit
// numbers as strings), over HTTP/1.1 with Boost.Beast: the transport of the
// catalog on etcd (server/etcd_catalog.h).
//
// A call goes to the member that answered last; a member that cannot be
// reached, does not answer within the attempt's time, or answers that it
// has no leader or timed out is left for the next one, round the list,
// until the call's deadline. So a dead member (the leader included) costs a
// call one attempt, and a lost quorum is a clean kDisconnected at the
// deadline, never a hang. A call retried on another member may have been
// applied by the first: callers make their writes conditional (txn
// compares) or idempotent.
//
// Thread-safety: thread-safe; calls run one at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mutex.h"
#include "pagefile/status.h"

namespace pagefile::net {

class EtcdClient {
 public:
  struct Options {
    std::chrono::milliseconds deadline{5000};  // one call, every attempt
    std::chrono::milliseconds attempt{1500};   // one member
  };

  // `endpoints`: "host:port" of each member (http).
  // kInvalidArgument for an empty list or an endpoint without a port.
  static Result<std::unique_ptr<EtcdClient>> make(const std::vector<std::string>& endpoints, Options options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // The answer to `body` POSTed to `path` ("/v3/kv/txn"). An error answer
  // becomes its Status: kNotFound (a lease that is gone), kInvalidArgument,
  // kNoSpace (etcd's quota), kPermissionDenied, else kIOError; no answer
  // within the deadline kDisconnected.
  Result<nlohmann::json> call(std::string_view path, const nlohmann::json& body);

  const std::vector<std::string>& endpoints() const { return endpoints_; }

  // The gateway's encodings.
  static std::string base64(std::string_view bytes);
  static Result<std::string> unbase64(std::string_view text);
  // A 64-bit number of an answer: a string, a number, or absent (0).
  static int64_t number(const nlohmann::json& object, const char* key);

 private:
  struct Member;
  EtcdClient(std::vector<std::string> endpoints, Options options);

  const std::vector<std::string> endpoints_;
  const Options options_;
  Mutex mu_;
  std::vector<std::unique_ptr<Member>> members_ GUARDED_BY(mu_);
  size_t current_ GUARDED_BY(mu_) = 0;  // the member that answered last
};

}  // namespace pagefile::net

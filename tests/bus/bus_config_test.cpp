#include "bus/bus_config.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include "tests/support/temp_dir.h"

using namespace pagefile;
using namespace pagefile::net;

TEST_CASE("a comma-separated list: the first is the catalog") {
  auto bus = parse_bus("tcp://127.0.0.1:7001,tcp://127.0.0.1:7002, unix:/tmp/s.sock", "/h");
  REQUIRE_OK(bus);
  REQUIRE(bus->servers.size() == 3);
  CHECK(bus->catalog == 0);
  CHECK(bus->servers[2].text() == "unix:/tmp/s.sock");
  CHECK(bus->embedded.empty());
}

TEST_CASE("catalog= names the catalog") {
  auto bus = parse_bus("tcp://127.0.0.1:1,catalog=tcp://127.0.0.1:2", "/h");
  REQUIRE_OK(bus);
  CHECK(bus->catalog == 1);
  CHECK_CODE(parse_bus("catalog=tcp://a:1,catalog=tcp://b:1", "/h"), Code::kInvalidArgument);
}

TEST_CASE("inproc:N starts N servers in this process") {
  auto bus = parse_bus("inproc:3", "/data");
  REQUIRE_OK(bus);
  CHECK(bus->servers.size() == 3);
  CHECK(bus->embedded.size() == 3);
  CHECK(bus->servers[1].text() == "inproc:server-1");
  CHECK(bus->home == "/data");
  CHECK_CODE(parse_bus("inproc:0", "/h"), Code::kInvalidArgument);
  CHECK_CODE(parse_bus("inproc:65", "/h"), Code::kInvalidArgument);
}

TEST_CASE("bad lists are refused with the reason") {
  CHECK_CODE(parse_bus("", "/h"), Code::kInvalidArgument);
  CHECK_CODE(parse_bus(" , ", "/h"), Code::kInvalidArgument);
  CHECK_CODE(parse_bus("tcp://a", "/h"), Code::kInvalidArgument);
  CHECK_CODE(parse_bus("http://a:1", "/h"), Code::kInvalidArgument);
  auto twice = parse_bus("tcp://a:1,tcp://a:1", "/h");
  CHECK_CODE(twice, Code::kInvalidArgument);
  CHECK(twice.status().message().find("twice") != std::string::npos);
}

TEST_CASE("replicas=R: the copies a new file keeps, at most one per server") {
  auto bus = parse_bus("inproc:3,replicas=2", "/h");
  REQUIRE_OK(bus);
  CHECK(bus->replicas == 2);
  CHECK(parse_bus("inproc:3", "/h")->replicas == 1);
  auto too_many = parse_bus("tcp://a:1,tcp://b:1,replicas=3", "/h");
  CHECK_CODE(too_many, Code::kInvalidArgument);
  CHECK(too_many.status().message().find("needs 3 servers") != std::string::npos);
  CHECK_CODE(parse_bus("inproc:8,replicas=8", "/h"), Code::kInvalidArgument);  // at most 7
  CHECK_CODE(parse_bus("inproc:8,replicas=0", "/h"), Code::kInvalidArgument);
  CHECK_CODE(parse_bus("inproc:8,replicas=two", "/h"), Code::kInvalidArgument);
  CHECK_CODE(parse_bus("inproc:8,replicas=", "/h"), Code::kInvalidArgument);
}

TEST_CASE("@file: one address a line, comments allowed") {
  pagefile::test::TempDir dir;
  std::ofstream(dir / "bus") << "# the cluster\ntcp://127.0.0.1:7001  # first\n\ncatalog=tcp://127.0.0.1:7002\n";
  auto bus = parse_bus("@" + (dir / "bus").string(), "/h");
  REQUIRE_OK(bus);
  CHECK(bus->servers.size() == 2);
  CHECK(bus->catalog == 1);
  CHECK_CODE(parse_bus("@" + (dir / "missing").string(), "/h"), Code::kNotFound);

  // Entries after the file's, as `pagefile --bus @FILE --psk-file KEY` gives.
  std::ofstream(dir / "tls.bus") << "tls://10.0.0.1:7001\ntls://10.0.0.2:7001  # second\n";
  auto with_key = parse_bus("@" + (dir / "tls.bus").string() + ",psk_file=/k,replicas=2", "/h");
  REQUIRE_OK(with_key);
  CHECK(with_key->servers.size() == 2);
  CHECK(with_key->tls.psk_files == std::vector<std::string>{"/k"});
  CHECK(with_key->replicas == 2);
  CHECK_CODE(parse_bus("@" + (dir / "missing").string() + ",psk_file=/k", "/h"), Code::kNotFound);
}

TEST_CASE("tls options: psk_file=, tls_cert=, tls_key=, tls_ca=; tls:// servers need something to trust them by") {
  auto bus = parse_bus("tls://a:1,tls://b:1,psk_file=/x,psk_file=/y,tls_cert=/c,tls_key=/k,tls_ca=/ca", "/h");
  REQUIRE_OK(bus);
  CHECK(bus->servers[0].kind == pagefile::net::Address::Kind::kTls);
  CHECK(bus->tls.psk_files == std::vector<std::string>{"/x", "/y"});
  CHECK(bus->tls.cert == "/c");
  CHECK(bus->tls.key == "/k");
  CHECK(bus->tls.ca == "/ca");
  CHECK_CODE(parse_bus("tls://a:1", "/h"), Code::kInvalidArgument);
  CHECK_CODE(parse_bus("tls://a:1,psk_file=", "/h"), Code::kInvalidArgument);
  CHECK_OK(parse_bus("tcp://a:1,psk_file=/x", "/h"));  // (unused until a tls:// server is named)
}

TEST_CASE("resolve: explicit, then PAGEFILE_BUS, then the embedded default") {
  ::unsetenv("PAGEFILE_BUS");
  ::setenv("PAGEFILE_HOME", "/var/pf", 1);
  auto d = resolve_bus("");
  REQUIRE_OK(d);
  CHECK(d->servers.size() == 4);
  CHECK(d->embedded.size() == 4);
  CHECK(d->home == "/var/pf");
  ::setenv("PAGEFILE_BUS", "tcp://127.0.0.1:9", 1);
  auto e = resolve_bus("");
  REQUIRE_OK(e);
  CHECK(e->servers.size() == 1);
  auto x = resolve_bus("inproc:2", "/x");
  REQUIRE_OK(x);
  CHECK(x->servers.size() == 2);
  CHECK(x->home == "/x");
  ::setenv("PAGEFILE_BUS", "garbage", 1);
  auto bad = resolve_bus("");
  CHECK_CODE(bad, Code::kInvalidArgument);
  CHECK(bad.status().message().rfind("PAGEFILE_BUS", 0) == 0);
  ::unsetenv("PAGEFILE_BUS");
  ::unsetenv("PAGEFILE_HOME");
}

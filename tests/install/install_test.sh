#!/usr/bin/env bash
# The install as a user meets it: `meson install` of this build into a
# temporary root, then a small program built with nothing but
# `pkg-config --cflags --libs pagefile` and run against the installed
# library (a local Pagefile written and read back); the installed tools
# answer --help; the systemd unit passes `systemd-analyze verify`.
#
# usage: install_test.sh BUILD_DIR SOURCE_DIR SANITIZERS
set -euo pipefail
build=$1 source=$2 sanitizers=$3
if [[ "$sanitizers" != "none" && -n "$sanitizers" ]]; then
  echo "install_test: skipped in a sanitized build (its library needs the sanitizers' runtime)"
  exit 77
fi
root=$(mktemp -d /tmp/pagefile-install.XXXXXX)
trap 'rm -rf "$root"' EXIT

meson install -C "$build" --no-rebuild --destdir "$root" --quiet > "$root.log" 2>&1 || { cat "$root.log"; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

pc=$(find "$root" -name pagefile.pc | head -1)
[[ -n "$pc" ]] || { echo "install_test: no pagefile.pc installed"; find "$root" | head -50; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
for f in bin/pagefiled bin/pagefile bin/pf-replay include/pagefile/pagefile.h include/pagefile/status.h \
         include/pagefile/pagefile_vfs.h; do
  found=$(find "$root" -path "*/$f" | head -1)
  [[ -n "$found" ]] || { echo "install_test: $f was not installed"; exit 1; }
done
[[ -n "$(find "$root" -name 'libpagefile.so*' | head -1)" ]] || { echo "install_test: no libpagefile.so"; exit 1; }
[[ -n "$(find "$root" -name 'pagefile.so' | head -1)" ]] || { echo "install_test: no pagefile.so (the VFS)"; exit 1; }

cat > "$root/hello.cpp" <<'CPP'
#include <pagefile/pagefile.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  pagefile::ClientOptions options;
  options.local_dir = argv[1];
  auto client = pagefile::Client::start(options);
  if (!client) { std::printf("start: %s\n", client.status().to_string().c_str()); return 1; }
  pagefile::OpenOptions open;
  open.create = true;
  open.page_size = 4096;
  auto fd = (*client)->open("hello", open);
  if (!fd) { std::printf("open: %s\n", fd.status().to_string().c_str()); return 1; }
  std::vector<std::byte> page(4096, std::byte{0x5a}), back(4096);
  if (auto s = (*client)->write(*fd, 3, page); !s) { std::printf("write: %s\n", s.to_string().c_str()); return 1; }
  if (auto s = (*client)->sync(*fd); !s) { std::printf("sync: %s\n", s.to_string().c_str()); return 1; }
  if (auto r = (*client)->read(*fd, 3, back); !r) { std::printf("read: %s\n", r.status().to_string().c_str()); return 1; }
  if (std::memcmp(page.data(), back.data(), page.size()) != 0) { std::printf("read other bytes\n"); return 1; }
  std::printf("hello: page 3 written and read back\n");
  return 0;
}
CPP
export PKG_CONFIG_PATH="$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root"
flags=$(pkg-config --cflags --libs pagefile)
echo "install_test: pkg-config --cflags --libs pagefile: $flags"
c++ -std=c++20 "$root/hello.cpp" -o "$root/hello" $flags
mkdir -p "$root/data"
LD_LIBRARY_PATH="$libdir" "$root/hello" "$root/data"

for tool in pagefiled pagefile pf-replay; do
  LD_LIBRARY_PATH="$libdir" "$(find "$root" -path "*/bin/$tool" | head -1)" --help > /dev/null
done

# The unit, as an instance, with its ExecStart pointing at the installed
# binary (verify wants it to exist).
unit=$(find "$root" -name 'pagefiled@.service' | head -1)
[[ -n "$unit" ]] || { echo "install_test: the systemd unit was not installed"; exit 1; }
if command -v systemd-analyze > /dev/null; then
  mkdir -p "$root/units"
  sed "s|/usr/local/bin/pagefiled|$(find "$root" -path '*/bin/pagefiled' | head -1)|" "$unit" > "$root/units/pagefiled@demo.service"
  (cd "$root/units" && systemd-analyze verify --man=no ./pagefiled@demo.service)
  echo "install_test: systemd-analyze verify: ok"
fi
echo "install_test: ok"

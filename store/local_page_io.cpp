#include "store/local_page_io.h"

namespace pagefile {

LocalPageIo::LocalPageIo(std::unique_ptr<LocalPagefile> file, WorkPool& pool)
    : file_(std::move(file)), pool_(pool) {}

void LocalPageIo::read_async(int64_t page, std::span<std::byte> out, ReadDone done) {
  pool_.post([file = file_.get(), page, out, done = std::move(done)] {
    done(file->read_page(page, out));
  });
}

void LocalPageIo::write_async(int64_t page, std::span<const std::byte> data, WriteDone done) {
  pool_.post([file = file_.get(), page, data, done = std::move(done)] {
    done(file->write_page(page, data));
  });
}

}  // namespace pagefile

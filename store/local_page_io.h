// PageIo over a LocalPagefile: each page read or write runs on a thread of
// the client's I/O pool, so a slow disk serves many requests at once.
#pragma once

#include <memory>

#include "core/page_checksum.h"
#include "core/page_io.h"
#include "core/work_pool.h"
#include "store/local_pagefile.h"

namespace pagefile {

class LocalPageIo final : public PageIo {
 public:
  // REQUIRES: `pool` outlives this object and every callback it starts.
  LocalPageIo(std::unique_ptr<LocalPagefile> file, WorkPool& pool);

  const std::string& name() const override { return file_->name(); }
  uint32_t page_size() const override { return file_->page_size(); }
  BufferPolicy recorded_policy() const override { return file_->recorded_policy(); }
  bool read_only() const override { return file_->read_only(); }

  void read_async(int64_t page, std::span<std::byte> out, ReadDone done) override;
  void write_async(int64_t page, std::span<const std::byte> data, WriteDone done) override;

  // A page in the page cache is read on the calling thread, and a write
  // (to the page cache) is done there unless the file is O_DSYNC: handing
  // either to an I/O thread costs more than it does. Reads that would wait
  // for the disk, and O_DSYNC writes, go to the I/O threads, where many
  // overlap.
  std::optional<Result<PageRead>> read_direct(int64_t page, std::span<std::byte> out) override {
    return file_->read_page_now(page, out);
  }
  std::optional<Result<PageRead>> read_here(int64_t page, std::span<std::byte> out) override {
    return file_->read_page(page, out);
  }
  std::optional<Result<int64_t>> read_pages_here(int64_t first, int64_t count, std::span<std::byte> out) override {
    return file_->read_pages(first, count, out);
  }
  std::optional<Result<size_t>> read_part_here(int64_t page, size_t offset, std::span<std::byte> out) override {
    return file_->read_part(page, offset, out);
  }
  std::optional<Status> write_direct(int64_t page, std::span<const std::byte> data, ChangedBytes changed) override {
    if (file_->dsync()) return std::nullopt;
    return file_->write_page(page, data, kNoChecksum, changed);
  }
  std::optional<Status> write_pages_here(int64_t first, std::span<const std::byte> data) override {
    if (file_->dsync()) return std::nullopt;
    return file_->write_pages(first, data);
  }
  bool may_be_direct() const override { return true; }
  // Not strictly (a read that would wait goes to the I/O threads), but
  // reading ahead gains nothing here: the kernel reads ahead a local file.
  bool always_direct() const override { return true; }
  bool shared_without_sync() const override { return true; }

  Status sync() override { return file_->sync(); }
  Status truncate(int64_t pages) override { return file_->truncate(pages); }
  Result<int64_t> size_pages() override { return file_->size_pages(); }
  Status set_empty_page_size(uint32_t page_size) override { return file_->set_empty_page_size(page_size); }
  Status lock(LockMode mode, LockWait wait) override { return file_->lock(mode, wait); }
  Status unlock() override { return file_->unlock(); }
  Status set_lock_level(LockLevel level) override { return file_->set_lock_level(level); }
  Result<bool> reserved_elsewhere() override { return file_->reserved_elsewhere(); }
  void exclude_other_writers(bool excluded) override { file_->exclude_other_writers(excluded); }

 private:
  std::unique_ptr<LocalPagefile> file_;
  WorkPool& pool_;
};

}  // namespace pagefile

#include "wire/wire_convert.h"

#include <cstring>

#include <bit>

#include <capnp/serialize.h>
#include <fmt/format.h>

#include "core/file_record.h"

namespace pagefile::net {

void to_wire(const Status& status, wire::Error::Builder out) {
  out.setCode(static_cast<uint16_t>(status.code()));
  out.setMessage(status.message());
}

Status from_wire(wire::Error::Reader error) {
  uint16_t code = error.getCode();
  std::string message = error.getMessage();
  std::optional<Code> known = error_code_from_number(code);
  if (!known) return Status::corruption("server", fmt::format("unknown error code {}: {}", code, message));
  return Status::from_code(*known, message);
}

void to_wire(const BufferPolicy& policy, wire::Policy::Builder out) {
  out.setAccess(static_cast<uint8_t>(policy.access));
  out.setMinPages(policy.min_pages);
  out.setMaxPages(policy.max_pages);
  out.setName(policy.name);
}

BufferPolicy from_wire(wire::Policy::Reader policy) {
  BufferPolicy out;
  uint8_t access = policy.getAccess();
  out.access = access <= static_cast<uint8_t>(AccessType::kLooping) ? static_cast<AccessType>(access)
                                                                   : AccessType::kRandom;
  out.min_pages = policy.getMinPages();
  out.max_pages = policy.getMaxPages();
  out.name = policy.getName();
  return out;
}

void to_wire(const FileRecord& record, wire::FileRecord::Builder out) {
  out.setName(record.name);
  out.setId(record.id);
  out.setPageSize(record.page_size);
  out.setSizePages(record.size_pages);
  out.setPlacement(static_cast<uint8_t>(record.placement));
  out.setStripePages(record.stripe_pages);
  auto servers = out.initServers(static_cast<unsigned>(record.servers.size()));
  for (unsigned i = 0; i < record.servers.size(); ++i) servers.set(i, record.servers[i]);
  to_wire(record.policy, out.initPolicy());
  out.setCreatedUnixNs(record.created_unix_ns);
  out.setCluster(record.cluster);
  out.setReplicas(static_cast<uint8_t>(record.replicas));
  auto stale = out.initStale(static_cast<unsigned>(record.stale.size()));
  for (unsigned i = 0; i < record.stale.size(); ++i) stale.set(i, record.stale[i]);
  auto resyncing = out.initResyncing(static_cast<unsigned>(record.resyncing.size()));
  for (unsigned i = 0; i < record.resyncing.size(); ++i) resyncing.set(i, record.resyncing[i]);
  out.setReplicaVersion(record.replica_version);
  auto keys = out.initPlacementKeys(static_cast<unsigned>(record.placement_keys.size()));
  for (unsigned i = 0; i < record.placement_keys.size(); ++i) keys.set(i, record.placement_keys[i]);
  if (!record.directories.empty()) {
    auto directories = out.initDirectories(static_cast<unsigned>(record.directories.size()));
    for (unsigned i = 0; i < record.directories.size(); ++i) directories.set(i, record.directories[i]);
  }
}

void share_to_wire(const FileRecord& record, uint64_t directory, uint64_t fence, wire::Share::Builder out) {
  out.setCluster(record.cluster);
  out.setDirectory(directory);
  out.setFileId(record.id);
  out.setPageSize(record.page_size);
  out.setFence(fence);
}

Result<FileRecord> from_wire(wire::FileRecord::Reader record) {
  FileRecord out;
  out.name = std::string(record.getName().asArray().begin(), record.getName().size());
  out.id = record.getId();
  out.page_size = record.getPageSize();
  out.size_pages = record.getSizePages();
  out.placement = static_cast<Placement>(record.getPlacement());  // (an unknown one is refused below)
  out.stripe_pages = record.getStripePages();
  for (auto s : record.getServers()) out.servers.emplace_back(s);
  out.policy = from_wire(record.getPolicy());
  out.created_unix_ns = record.getCreatedUnixNs();
  out.cluster = record.getCluster();
  out.replicas = record.getReplicas() == 0 ? 1 : record.getReplicas();
  for (auto s : record.getStale()) out.stale.emplace_back(s);
  for (auto s : record.getResyncing()) out.resyncing.emplace_back(s);
  out.replica_version = record.getReplicaVersion();
  for (auto s : record.getPlacementKeys()) out.placement_keys.emplace_back(s);
  for (uint64_t d : record.getDirectories()) out.directories.push_back(d);
  // The catalog's own check of what it creates.
  if (Status s = check_file_record(out); !s) {
    return Status::corruption(out.name, fmt::format("the catalog's record is unusable: {}", s.message()));
  }
  return out;
}

Frame to_frame(capnp::MessageBuilder& message) {
  // The segment table is little-endian on the wire; so is every host we build for.
  static_assert(std::endian::native == std::endian::little);
  auto segments = message.getSegmentsForOutput();
  // The flat-array form: segment table, then the segments (capnp/serialize.h).
  size_t table_words = (segments.size() + 2) / 2;
  size_t total = table_words;
  for (auto segment : segments) total += segment.size();
  Frame frame(total);
  auto* table = reinterpret_cast<uint32_t*>(frame.data());
  table[0] = static_cast<uint32_t>(segments.size() - 1);
  for (size_t i = 0; i < segments.size(); ++i) table[i + 1] = static_cast<uint32_t>(segments[i].size());
  if (segments.size() % 2 == 0) table[segments.size() + 1] = 0;
  capnp::word* at = frame.data() + table_words;
  for (auto segment : segments) {
    std::memcpy(static_cast<void*>(at), segment.begin(), segment.size() * sizeof(capnp::word));
    at += segment.size();
  }
  return frame;
}

// capnp requires segments to be zeroed.
FrameBuilder::FrameBuilder(size_t first_segment_words)
    : frame_(zeroed_frame(1 + std::max<size_t>(first_segment_words, 1))) {}

FrameBuilder::~FrameBuilder() = default;

kj::ArrayPtr<capnp::word> FrameBuilder::allocateSegment(unsigned int minimum_words) {
  if (!first_given_) {
    first_given_ = true;
    if (frame_.size() - 1 < minimum_words) frame_ = zeroed_frame(1 + minimum_words);
    return kj::ArrayPtr<capnp::word>(frame_.data() + 1, frame_.size() - 1);
  }
  spill_.push_back(zeroed_frame(std::max<size_t>(minimum_words, frame_.size())));
  return kj::ArrayPtr<capnp::word>(spill_.back().data(), spill_.back().size());
}

Frame FrameBuilder::finish() {
  auto segments = getSegmentsForOutput();
  if (segments.size() != 1 || segments[0].begin() != frame_.data() + 1) return to_frame(*this);
  // One segment, in place: the table says so, and the unused tail goes.
  auto* table = reinterpret_cast<uint32_t*>(frame_.data());
  table[0] = 0;
  table[1] = static_cast<uint32_t>(segments[0].size());
  frame_.resize(1 + segments[0].size());
  return std::move(frame_);
}

capnp::ReaderOptions frame_reader_options() {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = kMaxFrameBytes / sizeof(capnp::word) * 2;
  options.nestingLimit = 16;
  return options;
}

}  // namespace pagefile::net

// Conversions between the library's types and their wire form
// (wire/pagefile.capnp), and the framing of whole messages.
#pragma once

#include <capnp/message.h>

#include "core/file_record.h"
#include "wire/frame.h"
#include "wire/pagefile.capnp.h"
#include "pagefile/status.h"

namespace pagefile::net {

void to_wire(const Status& status, wire::Error::Builder out);
// kCorruption for a code this build does not know.
Status from_wire(wire::Error::Reader error);

void to_wire(const BufferPolicy& policy, wire::Policy::Builder out);
BufferPolicy from_wire(wire::Policy::Reader policy);

void to_wire(const FileRecord& record, wire::FileRecord::Builder out);
// A record as the catalog sent it, checked where it enters the client:
// kCorruption, naming the file and the field, for a record no catalog of
// this build makes (a bad page size, a size past kMaxPageNumber + 1 pages,
// an unknown placement, no stripe unit, no servers, a name holding NUL),
// so that no size from the wire reaches arithmetic unchecked.
Result<FileRecord> from_wire(wire::FileRecord::Reader record);

// The share of `record` on a server whose directory is `directory` (0:
// unknown), for a request made under fencing token `fence` (0: none, as a
// drop or a scrub carries).
void share_to_wire(const FileRecord& record, uint64_t directory, uint64_t fence, wire::Share::Builder out);

// The frame holding `message` (one copy, into word-aligned memory).
Frame to_frame(capnp::MessageBuilder& message);

// A message built straight into the frame that will carry it: the first
// segment is the frame's own memory, after a one-word segment table, so a
// message that fits its first segment reaches the wire with no copy (a page
// read is 8 KiB; to_frame would copy every byte once more). A message that
// outgrows it spills into further segments and finish() copies as to_frame.
class FrameBuilder final : public capnp::MessageBuilder {
 public:
  // `first_segment_words`: room for the whole message when it can be known.
  explicit FrameBuilder(size_t first_segment_words);
  ~FrameBuilder() override;

  kj::ArrayPtr<capnp::word> allocateSegment(unsigned int minimum_words) override;

  // The frame; the builder must not be used afterwards.
  Frame finish();

 private:
  Frame frame_;
  bool first_given_ = false;
  std::vector<Frame> spill_;  // further segments, zeroed as capnp requires
};

// Reader options for frames from the network: bounded so that a hostile
// frame cannot make us traverse more than it holds.
capnp::ReaderOptions frame_reader_options();

}  // namespace pagefile::net

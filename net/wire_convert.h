// Conversions between the library's types and their wire form
// (net/pagefile.capnp), and the framing of whole messages.
#pragma once

#include <capnp/message.h>

#include "net/catalog_store.h"
#include "net/frame.h"
#include "net/pagefile.capnp.h"
#include "pagefile/status.h"

namespace pagefile::net {

void to_wire(const Status& status, wire::Error::Builder out);
// kCorruption for a code this build does not know.
Status from_wire(wire::Error::Reader error);

void to_wire(const BufferPolicy& policy, wire::Policy::Builder out);
BufferPolicy from_wire(wire::Policy::Reader policy);

void to_wire(const FileRecord& record, wire::FileRecord::Builder out);
FileRecord from_wire(wire::FileRecord::Reader record);

// The frame holding `message` (one copy, into word-aligned memory).
Frame to_frame(capnp::MessageBuilder& message);

// Reader options for frames from the network: bounded so that a hostile
// frame cannot make us traverse more than it holds.
capnp::ReaderOptions frame_reader_options();

}  // namespace pagefile::net

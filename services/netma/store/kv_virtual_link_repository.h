#pragma once
// VirtualLinkRepository on the KvStore port. Key layout, column family
// "virtual_links":
//   link/<id>            -> 0x01 + serialized codeco.netma.v1.VirtualLink
//   req/<request_id>     -> <id>            (idempotency of CreateVirtualLink)
//   reqof/<id>           -> <request_id>    (so Delete can drop the index entry)
// The leading byte of a link value is the record version.

#include <memory>

#include "codeco/common/kv_store.h"
#include "netma/core/virtual_links.h"

namespace codeco::netma {

/// Column family of the repository.
inline constexpr char kVirtualLinksColumnFamily[] = "virtual_links";

/// A VirtualLinkRepository over `store` (not owned; must have the
/// "virtual_links" column family).
std::unique_ptr<VirtualLinkRepository> NewKvVirtualLinkRepository(KvStore& store);

}  // namespace codeco::netma

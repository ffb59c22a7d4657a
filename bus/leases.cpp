// Lock owners and their leases at the catalog (bus/bus_client_impl.h).
#include "bus/bus_client_impl.h"

namespace pagefile::net {

void BusClient::Impl::set_holds_locks(uint64_t owner, bool holds) {
  MutexLock lock(owners_mu_);
  if (holds) {
    lock_owners_.insert(owner);
    lost_owners_.erase(owner);
  } else {
    lock_owners_.erase(owner);
  }
}

bool BusClient::Impl::lease_lost(uint64_t owner) {
  MutexLock lock(owners_mu_);
  return lost_owners_.count(owner) != 0;
}

void BusClient::Impl::renew_leases() {
  std::set<uint64_t> owners;
  {
    MutexLock lock(owners_mu_);
    owners = lock_owners_;
  }
  std::weak_ptr<Impl> weak = shared_from_this();
  for (uint64_t owner : owners) {
    call(catalog_name_, [owner](wire::Request::Builder r) { r.setRenewLease(owner); },
         [weak, owner](Result<ReplyPtr> r) {
           // kNotFound: the lease ran out before this renewal and the
           // locks are gone; the owner hears it at its next lock call.
           // (A dead or slow catalog is not proof of loss; retry.)
           auto self = weak.lock();
           if (self && !r && r.status().is(Code::kNotFound)) {
             MutexLock lock(self->owners_mu_);
             if (self->lock_owners_.erase(owner)) self->lost_owners_.insert(owner);
           }
         });
  }
}

}  // namespace pagefile::net

// SharedFlags (see shared_flags.h): shm_open + mmap of (words + 1) 64-bit atomics.
#include "launch/shared_flags.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim::launch {

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared words must be lock-free across processes");

std::string SharedFlags::unique_name() {
  static std::atomic<int> counter{0};
  return fmt::format("/ppsim-{}-{}", static_cast<long>(::getpid()), counter.fetch_add(1));
}

SharedFlags::SharedFlags(const std::string& name, std::size_t words, bool create)
    : name_(name), words_(words), bytes_((words + 1) * sizeof(std::uint64_t)), owner_(create) {
  const int fd = ::shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0)
    throw InputError(fmt::format("replay: cannot {} the shared flags '{}': {}", create ? "create" : "open", name,
                                 std::strerror(errno)),
                     {}, kExitGpu);
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
    const int e = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw InputError(fmt::format("replay: cannot size the shared flags '{}': {}", name, std::strerror(e)), {}, kExitGpu);
  }
  base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    if (create) ::shm_unlink(name.c_str());
    throw InputError(fmt::format("replay: cannot map the shared flags '{}': {}", name, std::strerror(e)), {}, kExitGpu);
  }
  if (create)
    for (std::size_t i = 0; i <= words_; ++i) new (static_cast<std::uint64_t*>(base_) + i) std::atomic<std::uint64_t>(0);
}

SharedFlags::~SharedFlags() {
  if (base_) ::munmap(base_, bytes_);
  if (owner_) unlink();
}

void SharedFlags::unlink() {
  if (!name_.empty()) ::shm_unlink(name_.c_str());
  owner_ = false;
}

std::atomic<std::uint64_t>& SharedFlags::at(std::size_t i) const {
  if (i > words_) throw InputError(fmt::format("replay: shared flag {} of {}", i, words_ + 1), {}, kExitInternal);
  return *reinterpret_cast<std::atomic<std::uint64_t>*>(static_cast<std::uint64_t*>(base_) + i);
}

}  // namespace ppsim::launch

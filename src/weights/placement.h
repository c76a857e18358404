#pragma once
// Where a checkpoint's linear weights live while the model runs (docs/kernels.md, "Weight placement").
// Decode streams every weight byte once per token; from the file maps those bytes sit in 4 KiB page-cache
// pages, which on these machines stream ~25-30% slower than the same bytes in 2 MiB pages (TLB misses, and
// the hardware prefetchers stop at every 4 KiB boundary). kHugePages copies each linear weight the model
// binds (Checkpoint::weight) into anonymous memory advised into transparent huge pages at load, then drops
// the file's pages, so resident memory stays about the checkpoint's size.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::weights {

enum class Placement : uint8_t {
    kMmap,      // read in place from the file maps
    kHugePages, // copied at load into anonymous 2 MiB pages (linear weights; the token embedding stays
                // mapped)
};

const char* placement_name(Placement p); // "mmap", "hugepages"
// Parses "mmap" / "hugepages" / "auto" (auto: kHugePages where huge_pages_available()); false otherwise.
bool parse_placement(std::string_view name, Placement* p);
// Whether the kernel grants transparent huge pages to memory that asks for them (THP "always" or
// "madvise"; on a kernel without THP the copy would only cost load time and memory).
bool huge_pages_available();
// The placement Checkpoint::open uses when none is given: kHugePages where huge_pages_available(), else
// kMmap, until set (the cli sets it once from --weights-placement / DEEPINFER_WEIGHTS_PLACEMENT).
void set_default_placement(Placement p);
Placement default_placement();

// One reservation of anonymous address space (MAP_NORESERVE: only the pages written become resident),
// 2 MiB-aligned and advised MADV_HUGEPAGE, filled front to back. Memory is never freed before the arena.
class HugePageArena {
public:
    // Reserves `bytes` (rounded up to 2 MiB). ResourceExhausted when the address space is refused.
    static core::Result<std::unique_ptr<HugePageArena>> reserve(size_t bytes);
    ~HugePageArena();
    HugePageArena(const HugePageArena&) = delete;
    HugePageArena& operator=(const HugePageArena&) = delete;

    // Reads n bytes at `offset` of the open file `fd` into the next 4 KiB-aligned free span (pread, split
    // over up to `threads` threads when large: the copy runs on every core) and returns it. `what` names the
    // file and tensor in errors (IoError for a failed or short read, ResourceExhausted when full).
    core::Result<const void*> copy_in(int fd, uint64_t offset, size_t n, int threads,
                                      const std::string& what);

    // The next 4 KiB-aligned free span of n bytes, zero until written (for weights derived at load, e.g. a
    // requantized head); nullptr when the arena cannot hold it.
    uint8_t* allocate(size_t n);

    size_t used_bytes() const { return used_; }
    size_t capacity_bytes() const { return capacity_; }
    // Bytes of the arena the kernel backs with huge pages (AnonHugePages in /proc/self/smaps); -1 when
    // smaps cannot be read.
    int64_t huge_bytes() const;

private:
    HugePageArena() = default;
    uint8_t* base_ = nullptr;
    size_t capacity_ = 0;
    size_t used_ = 0;
};

} // namespace deepinfer::weights

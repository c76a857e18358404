#include "weights/placement.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

namespace deepinfer::weights {
namespace {

constexpr size_t kHuge = size_t{2} << 20;
constexpr size_t kAlign = 4096;           // each copy starts on a page (and so on a cache line)
constexpr size_t kReadChunk = 8u << 20;   // bytes per pread call
constexpr size_t kBytesPerThread = kHuge; // a copy gets one thread per huge page (up to `threads`)

// 0: unset (huge_pages_available() decides), else 1 + Placement.
std::atomic<int> g_default{0};

// Reads [offset, offset + n) of fd into dst; false with errno-style text in *err on a failed or short read.
bool read_range(int fd, uint64_t offset, size_t n, uint8_t* dst, std::string* err) {
    size_t done = 0;
    while (done < n) {
        const size_t want = std::min(kReadChunk, n - done);
        const ssize_t got = ::pread(fd, dst + done, want, static_cast<off_t>(offset + done));
        if (got < 0) {
            if (errno == EINTR) continue;
            *err = std::strerror(errno);
            return false;
        }
        if (got == 0) {
            *err = "file ends " + std::to_string(n - done) + " bytes early";
            return false;
        }
        done += static_cast<size_t>(got);
    }
    return true;
}

} // namespace

const char* placement_name(Placement p) {
    switch (p) {
    case Placement::kMmap:
        return "mmap";
    case Placement::kHugePages:
        return "hugepages";
    }
    return "?";
}

bool parse_placement(std::string_view name, Placement* p) {
    if (name == "auto") {
        *p = huge_pages_available() ? Placement::kHugePages : Placement::kMmap;
        return true;
    }
    for (Placement q : {Placement::kMmap, Placement::kHugePages}) {
        if (name == placement_name(q)) {
            *p = q;
            return true;
        }
    }
    return false;
}

bool huge_pages_available() {
    static const bool available = [] {
        std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
        std::string line;
        if (!std::getline(in, line)) return false;
        return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
    }();
    return available;
}

void set_default_placement(Placement p) {
    g_default.store(1 + static_cast<int>(p), std::memory_order_relaxed);
}

Placement default_placement() {
    const int v = g_default.load(std::memory_order_relaxed);
    if (v != 0) return static_cast<Placement>(v - 1);
    return huge_pages_available() ? Placement::kHugePages : Placement::kMmap;
}

core::Result<std::unique_ptr<HugePageArena>> HugePageArena::reserve(size_t bytes) {
    const size_t capacity = std::max(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
    // Over-reserve by one huge page and trim, so the arena starts on a 2 MiB boundary.
    const size_t span = capacity + kHuge;
    void* p =
        ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return core::resource_exhausted(
            "weights: cannot reserve " + std::to_string(capacity >> 20) +
            " MiB of address space for huge-page weights: " + std::strerror(errno));
    const auto raw = reinterpret_cast<uintptr_t>(p);
    const uintptr_t start = (raw + kHuge - 1) / kHuge * kHuge;
    if (start > raw) ::munmap(p, start - raw);
    if (raw + span > start + capacity)
        ::munmap(reinterpret_cast<void*>(start + capacity), raw + span - start - capacity);
    auto* base = reinterpret_cast<uint8_t*>(start);
    // Advice only: without it (or without THP) the arena is ordinary memory and the weights just stream as
    // they would from the page cache.
    ::madvise(base, capacity, MADV_HUGEPAGE);
    auto arena = std::unique_ptr<HugePageArena>(new HugePageArena());
    arena->base_ = base;
    arena->capacity_ = capacity;
    return arena;
}

HugePageArena::~HugePageArena() {
    if (base_ != nullptr) ::munmap(base_, capacity_);
}

core::Result<const void*> HugePageArena::copy_in(int fd, uint64_t offset, size_t n, int threads,
                                                 const std::string& what) {
    const size_t begin = (used_ + kAlign - 1) / kAlign * kAlign;
    if (begin > capacity_ || n > capacity_ - begin)
        return core::resource_exhausted(what + ": huge-page weight arena full (" + std::to_string(capacity_) +
                                        " bytes)");
    uint8_t* dst = base_ + begin;
    const int parts = static_cast<int>(
        std::clamp<size_t>(n / kBytesPerThread, 1, static_cast<size_t>(std::max(threads, 1))));
    // Part boundaries on the arena's 2 MiB pages: each thread faults in (zeroes) huge pages of its own. The
    // fault of a fresh huge page, not the copy, is most of the cost (in a VM ~1 s of CPU per GB against
    // ~0.2 s for the copy itself), hence the threads.
    std::vector<size_t> cut(parts + 1, n);
    cut[0] = 0;
    const size_t lead = (kHuge - begin % kHuge) % kHuge; // bytes before dst's first huge-page boundary
    for (int i = 1; i < parts; ++i)
        cut[i] = std::min(n, lead + (n - std::min(n, lead)) * i / parts / kHuge * kHuge);
    std::vector<std::string> errs(parts);
    std::vector<char> ok(parts, 0);
    auto part = [&](int i) {
        ok[i] = read_range(fd, offset + cut[i], cut[i + 1] - cut[i], dst + cut[i], &errs[i]);
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < parts; ++i) pool.emplace_back(part, i);
    part(0);
    for (auto& t : pool) t.join();
    for (int i = 0; i < parts; ++i)
        if (!ok[i])
            return core::io_error(what + ": reading " + std::to_string(n) + " bytes at offset " +
                                  std::to_string(offset) + " failed: " + errs[i]);
    used_ = begin + n;
    return static_cast<const void*>(dst);
}

uint8_t* HugePageArena::allocate(size_t n) {
    const size_t begin = (used_ + kAlign - 1) / kAlign * kAlign;
    if (begin > capacity_ || n > capacity_ - begin) return nullptr;
    used_ = begin + n;
    return base_ + begin;
}

int64_t HugePageArena::huge_bytes() const {
    std::ifstream in("/proc/self/smaps");
    if (!in) return -1;
    const auto lo = reinterpret_cast<uintptr_t>(base_), hi = lo + capacity_;
    std::string line;
    bool inside = false;
    int64_t kb_total = 0;
    while (std::getline(in, line)) {
        unsigned long a = 0, b = 0;
        char dash = 0;
        // A mapping line starts "lo-hi perms ..."; field lines start with a name and a colon.
        if (std::sscanf(line.c_str(), "%lx%c%lx", &a, &dash, &b) == 3 && dash == '-') {
            inside = a < hi && b > lo;
            continue;
        }
        long kb = 0;
        if (inside && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) kb_total += kb;
    }
    return kb_total * 1024;
}

} // namespace deepinfer::weights

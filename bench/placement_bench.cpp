// Where decode's weights should live: the batch-1 GEMV (kernels::cpu::matmul, n = 1) over one checkpoint
// tensor read from
//   mmap      the file's MAP_PRIVATE map, as weights::Checkpoint maps it (page cache, 4 KiB PTEs unless the
//             page cache happens to hold PMD-sized folios at aligned addresses),
//   mmap-thp  a second map of the same file after madvise(MADV_HUGEPAGE) + MADV_POPULATE_READ,
//   anon-4k   an anonymous copy in 4 KiB pages (MADV_NOHUGEPAGE),
//   anon-2m   an anonymous 2 MiB-aligned copy with MADV_HUGEPAGE (what weights::Placement::kHugePages does),
// interleaved rep by rep with a plain streaming read (4 streams per thread) of the same bytes, so the ratios
// hold on a shared machine. Prints each region's AnonHugePages / FilePmdMapped from /proc/self/smaps.
//
// --load instead times what a model load does with each weights::Placement (in a child process each, for a
// clean RSS): Checkpoint::open and weight() for every linear weight (2-D BF16 / F8_E4M3 / I8 `*.weight`),
// then prints the seconds, bytes copied, the arena's AnonHugePages and VmRSS / VmHWM.
//
//   placement_bench --model DIR [--tensor head.weight] [--threads 2] [--reps 7] [--load]

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "core/weight.h"
#include "kernels/cpu/linear.h"
#include "kernels/ops.h"
#include "stream_read.h"
#include "weights/checkpoint.h"
#include "weights/safetensors.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace {

using namespace deepinfer;
using Clock = std::chrono::steady_clock;
constexpr size_t kHuge = size_t{2} << 20;

using bench::median;
using bench::stream_read_seconds;

// kB of AnonHugePages and FilePmdMapped in the smaps entries overlapping [p, p + n).
std::string smaps_huge(const void* p, size_t n) {
    std::ifstream in("/proc/self/smaps");
    std::string line;
    const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + n;
    bool inside = false;
    long anon = 0, file = 0, rss = 0;
    while (std::getline(in, line)) {
        unsigned long a = 0, b = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &a, &b) == 2 && line.find(':') > line.find(' ')) {
            inside = a < hi && b > lo;
            continue;
        }
        if (!inside) continue;
        long kb = 0;
        char key[64];
        if (std::sscanf(line.c_str(), "%63[^:]: %ld kB", key, &kb) == 2) {
            if (std::strcmp(key, "AnonHugePages") == 0) anon += kb;
            if (std::strcmp(key, "FilePmdMapped") == 0) file += kb;
            if (std::strcmp(key, "Rss") == 0) rss += kb;
        }
    }
    std::ostringstream s;
    s << "Rss " << rss / 1024 << " MiB, AnonHugePages " << anon / 1024 << " MiB, FilePmdMapped "
      << file / 1024 << " MiB";
    return s.str();
}

long status_kb(const char* key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key) + 1);
    return -1;
}

// The binding a model load does, timed (see the header).
int load_child(const std::string& dir, weights::Placement placement) {
    const auto t0 = Clock::now();
    auto ck = weights::Checkpoint::open(dir, placement);
    if (!ck.ok()) {
        std::fprintf(stderr, "placement_bench: %s\n", ck.status().to_string().c_str());
        return 1;
    }
    weights::QuantizationConfig q;
    q.fp8 = true;
    int bound = 0;
    for (const weights::TensorInfo& t : (*ck)->tensors()) {
        const std::string suffix = ".weight";
        if (t.shape.ndim() != 2 || t.name.size() <= suffix.size() ||
            t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        if (t.dtype != core::DType::kBF16 && t.dtype != core::DType::kF8E4M3 && t.dtype != core::DType::kI8)
            continue;
        const int64_t cols = t.dtype == core::DType::kI8 ? 2 * t.shape[1] : t.shape[1];
        auto w = (*ck)->weight(t.name.substr(0, t.name.size() - suffix.size()), t.shape[0], cols, q);
        if (!w.ok()) {
            std::fprintf(stderr, "placement_bench: %s\n", w.status().to_string().c_str());
            return 1;
        }
        ++bound;
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf(
        "%-9s load %7.2f s: %d linear weights, %.1f MB copied (%.2f GB/s), arena AnonHugePages %.1f MB, "
        "VmRSS %.1f MB, VmHWM %.1f MB, checkpoint %.1f MB\n",
        weights::placement_name(placement), s, bound, (*ck)->placed_bytes() / 1e6,
        (*ck)->placed_bytes() / s / 1e9, (*ck)->placed_huge_bytes() / 1e6, status_kb("VmRSS:") / 1e3,
        status_kb("VmHWM:") / 1e3, (*ck)->mapped_bytes() / 1e6);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    std::string dir, tensor = "head.weight";
    int threads = 2, reps = 7;
    bool load = false;
    for (int i = 1; i < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--load") {
            load = true;
            --i;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "placement_bench: %s needs a value\n", flag.c_str());
            return 2;
        }
        if (flag == "--model")
            dir = argv[i + 1];
        else if (flag == "--tensor")
            tensor = argv[i + 1];
        else if (flag == "--threads")
            threads = std::atoi(argv[i + 1]);
        else if (flag == "--reps")
            reps = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "placement_bench: unknown flag %s\n", flag.c_str());
            return 2;
        }
    }
    if (dir.empty() || !__builtin_cpu_supports("avx512f")) {
        std::fprintf(stderr, "usage: placement_bench --model DIR [--tensor NAME] (needs AVX-512)\n");
        return 2;
    }
    if (load) {
        for (weights::Placement p : {weights::Placement::kHugePages, weights::Placement::kMmap}) {
            std::fflush(stdout);
            const pid_t pid = ::fork();
            if (pid == 0) {
                const int rc = load_child(dir, p);
                std::fflush(stdout);
                _exit(rc);
            }
            int st = 0;
            ::waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
        }
        return 0;
    }
    auto ck = weights::Checkpoint::open(dir, weights::Placement::kMmap);
    if (!ck.ok()) {
        std::fprintf(stderr, "placement_bench: %s\n", ck.status().to_string().c_str());
        return 1;
    }
    const weights::TensorInfo* t = (*ck)->find(tensor);
    if (t == nullptr || t->dtype != core::DType::kBF16 || t->shape.ndim() != 2) {
        std::fprintf(stderr, "placement_bench: %s: no 2-D BF16 tensor '%s'\n", dir.c_str(), tensor.c_str());
        return 1;
    }
    const int64_t rows = t->shape[0], cols = t->shape[1];
    const size_t bytes = t->nbytes;
    const std::string path = dir + "/" + t->file;

    // The tensor's file offset: its address minus the checkpoint map's base is not public, so map the file
    // again and find the same bytes through the header.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        std::perror(path.c_str());
        return 1;
    }
    const off_t fsize = ::lseek(fd, 0, SEEK_END);
    auto* plain = static_cast<uint8_t*>(::mmap(nullptr, fsize, PROT_READ, MAP_PRIVATE, fd, 0));
    auto* thp = static_cast<uint8_t*>(::mmap(nullptr, fsize, PROT_READ, MAP_PRIVATE, fd, 0));
    if (plain == MAP_FAILED || thp == MAP_FAILED) {
        std::perror("mmap");
        return 1;
    }
    auto hdr = weights::parse_header(plain, static_cast<size_t>(fsize), t->file);
    if (!hdr.ok()) return 1;
    size_t off = 0;
    for (const auto& e : hdr->tensors)
        if (e.name == tensor) off = hdr->data_offset + e.begin;
    const int thp_rc = ::madvise(thp, fsize, MADV_HUGEPAGE);
    const int pop_rc = ::madvise(thp + off / 4096 * 4096, bytes + off % 4096, MADV_POPULATE_READ);

    const size_t abytes = (bytes + kHuge - 1) / kHuge * kHuge;
    auto* anon4k = static_cast<uint8_t*>(std::aligned_alloc(kHuge, abytes));
    auto* anon2m = static_cast<uint8_t*>(std::aligned_alloc(kHuge, abytes));
    ::madvise(anon4k, abytes, MADV_NOHUGEPAGE);
    const int anon_rc = ::madvise(anon2m, abytes, MADV_HUGEPAGE);
    core::ThreadPool pool(threads);
    const auto c0 = Clock::now();
    pool.parallel_for(threads, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const size_t lo = bytes * i / threads / kHuge * kHuge,
                         hi = i + 1 == threads ? bytes : bytes * (i + 1) / threads / kHuge * kHuge;
            std::memcpy(anon2m + lo, plain + off + lo, hi - lo);
        }
    });
    const double copy_s = std::chrono::duration<double>(Clock::now() - c0).count();
    std::memcpy(anon4k, plain + off, bytes);

    struct Region {
        const char* name;
        const uint8_t* p;
    };
    const Region regions[] = {
        {"mmap", plain + off}, {"mmap-thp", thp + off}, {"anon-4k", anon4k}, {"anon-2m", anon2m}};
    std::printf("tensor %s [%lld, %lld] BF16, %.1f MB at file offset %zu (%% 2 MiB = %zu); madvise: "
                "HUGEPAGE(file) %d, POPULATE_READ %d, HUGEPAGE(anon) %d; anon-2m copy on %d threads %.0f ms "
                "(%.1f GB/s)\n",
                tensor.c_str(), static_cast<long long>(rows), static_cast<long long>(cols), bytes / 1e6, off,
                off % kHuge, thp_rc, pop_rc, anon_rc, threads, copy_s * 1e3, bytes / copy_s / 1e9);

    std::vector<float> x(cols), y(rows);
    for (int64_t i = 0; i < cols; ++i) x[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
    std::vector<std::vector<double>> gemv(4), rd(4);
    std::vector<float> ref;
    for (int r = -1; r < reps; ++r) { // rep -1: warm-up (faults, scratch)
        for (int k = 0; k < 4; ++k) {
            core::Weight w;
            w.format = core::WeightFormat::kBF16;
            w.rows = rows;
            w.cols = cols;
            w.data = regions[k].p;
            kernels::MatmulArgs a = kernels::linear_args(x.data(), 1, w, y.data());
            a.pool = &pool;
            const auto t0 = Clock::now();
            kernels::cpu::matmul(a);
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            if (ref.empty()) ref = y;
            if (y != ref) {
                std::fprintf(stderr, "placement_bench: %s gave other outputs than mmap\n", regions[k].name);
                return 1;
            }
            const double rs = stream_read_seconds(&pool, regions[k].p, static_cast<int64_t>(bytes));
            if (r >= 0) {
                gemv[k].push_back(s);
                rd[k].push_back(rs);
            }
        }
    }
    // Medians, and the best rep (on a loaded machine the least disturbed one).
    std::printf("%-9s %9s %9s %9s %9s %9s %9s  %s\n", "region", "gemv ms", "GB/s", "best GB/s", "read GB/s",
                "best rd", "gemv/rd", "smaps");
    for (int k = 0; k < 4; ++k) {
        const double g = median(gemv[k]), s = median(rd[k]);
        const double gb = *std::min_element(gemv[k].begin(), gemv[k].end()),
                     sb = *std::min_element(rd[k].begin(), rd[k].end());
        std::printf("%-9s %9.2f %9.2f %9.2f %9.2f %9.2f %8.1f%%  %s\n", regions[k].name, g * 1e3,
                    bytes / g / 1e9, bytes / gb / 1e9, bytes / s / 1e9, bytes / sb / 1e9, 100.0 * s / g,
                    smaps_huge(regions[k].p, bytes).c_str());
    }
    std::free(anon4k);
    std::free(anon2m);
    ::munmap(plain, fsize);
    ::munmap(thp, fsize);
    ::close(fd);
    return 0;
}

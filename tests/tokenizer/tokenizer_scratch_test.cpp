// The tokenizer's per-thread scratch is released after a huge input (issue 13: every 10 MiB prompt left
// ~190 MiB resident in its HTTP thread, and 12 such threads left 2.4 GB resident while idle).

#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_data.h"

namespace deepinfer::tokenizer {
namespace {

long rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
}

TEST(TokenizerScratch, HugeInputsLeaveNoScratchResidentInTheirThreads) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "a sanitizer's allocator keeps freed memory (quarantine): RSS says nothing here";
#endif
    const Tokenizer& tok = testing::v4_tokenizer();
    (void)tok.encode("warm up the tables once"); // lazily built state is not scratch
    std::string text;
    for (int i = 0; text.size() < (2u << 20); ++i) text += "word" + std::to_string(i % 1000) + " ";
    const long base = rss_kib();
    // Threads that stay alive after their request, as HTTP workers do (a thread's scratch dies with it).
    constexpr int kThreads = 4;
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    bool release = false;
    size_t ids = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
            size_t n = tok.encode(text).size();
            std::unique_lock<std::mutex> lock(mu);
            ids += n;
            ++done;
            cv.notify_all();
            cv.wait(lock, [&] { return release; });
        });
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done == kThreads; });
    const long grown = rss_kib() - base;
    release = true;
    cv.notify_all();
    lock.unlock();
    for (auto& t : threads) t.join();
    EXPECT_GT(ids, static_cast<size_t>(kThreads) * 100000);
    // Each 2 MiB input grows its thread's scratch to ~30 MiB (4 threads: +121 MiB resident when it was kept;
    // +49 MiB measured with it released and trimmed, +0 with one thread). Issue 13's bound: within 64 MiB.
    EXPECT_LT(grown, 64 * 1024) << "RSS grew by " << grown << " KiB with the threads idle";
}

} // namespace
} // namespace deepinfer::tokenizer

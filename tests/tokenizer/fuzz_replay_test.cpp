// Replays the fuzz corpora (fuzz/tokenizer/corpus/*) through the fuzz target bodies: the CI smoke of the
// libFuzzer targets, which need clang and run for minutes (docs/tokenizer.md).

#include <algorithm>
#include <filesystem>

#include "../../fuzz/tokenizer/fuzz_bodies.h"
#include "test_data.h"

namespace deepinfer::tokenizer {
namespace {

std::vector<std::string> corpus_files(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(testing::source_path(dir)))
        if (e.is_regular_file()) out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

TEST(FuzzReplay, TokenizerCorpus) {
    const auto files = corpus_files("fuzz/tokenizer/corpus/tokenizer");
    ASSERT_GE(files.size(), 50u);
    for (const auto& f : files) {
        const std::string data = testing::read_file(f);
        fuzz::tokenizer_one(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    }
}

TEST(FuzzReplay, DsmlCorpus) {
    const auto files = corpus_files("fuzz/tokenizer/corpus/dsml");
    ASSERT_GE(files.size(), 30u);
    for (const auto& f : files) {
        const std::string data = testing::read_file(f);
        fuzz::dsml_one(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    }
}

} // namespace
} // namespace deepinfer::tokenizer

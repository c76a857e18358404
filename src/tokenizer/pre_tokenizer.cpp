#include "tokenizer/pre_tokenizer.h"

#include "core/check.h"
#include "tokenizer/cancel.h"

namespace deepinfer::tokenizer {

namespace {

class SplitPreTokenizer final : public PreTokenizer {
public:
    SplitPreTokenizer(Regex regex, SplitBehavior behavior, bool invert)
        : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}

    void apply(PreTokenizeState& st) const override {
        st.next.clear();
        std::size_t since_check = 0;
        for (std::string_view piece : st.pieces) {
            split_one(piece, st);
            if ((since_check += piece.size()) >= kCancelCheckBytes) { // cancel.h: the rest is dropped
                since_check = 0;
                if (encode_cancelled()) break;
            }
        }
        st.pieces.swap(st.next);
    }

private:
    // Emits the splits of one piece into st.next, following HF's SplitDelimiterBehavior.
    void split_one(std::string_view piece, PreTokenizeState& st) const {
        st.matches.clear();
        regex_.find_all(piece, st.matches);
        if (st.matches.empty() && !invert_) {
            st.next.push_back(piece); // the whole piece is one non-delimiter segment
            return;
        }
        // Segments (start, end, is_delimiter) covering the piece.
        struct Seg {
            std::size_t s, e;
            bool delim;
        };
        std::vector<Seg> segs;
        segs.reserve(st.matches.size() * 2 + 1);
        std::size_t prev = 0;
        for (const auto& m : st.matches) {
            if (m.start > prev) segs.push_back({prev, m.start, invert_});
            segs.push_back({m.start, m.end, !invert_});
            prev = m.end;
        }
        if (prev < piece.size()) segs.push_back({prev, piece.size(), invert_});

        auto emit = [&](std::size_t s, std::size_t e) {
            if (e > s) st.next.push_back(piece.substr(s, e - s));
        };
        switch (behavior_) {
        case SplitBehavior::kRemoved:
            for (const auto& g : segs)
                if (!g.delim) emit(g.s, g.e);
            break;
        case SplitBehavior::kIsolated:
            for (const auto& g : segs) emit(g.s, g.e);
            break;
        case SplitBehavior::kMergedWithPrevious: {
            std::size_t start = 0;
            bool open = false;
            for (const auto& g : segs) {
                if (g.delim) {
                    emit(open ? start : g.s, g.e);
                    open = false;
                } else {
                    if (open) emit(start, g.s);
                    start = g.s;
                    open = true;
                }
            }
            if (open) emit(start, piece.size());
            break;
        }
        case SplitBehavior::kMergedWithNext: {
            std::size_t start = 0;
            bool open = false;
            for (const auto& g : segs) {
                if (g.delim) {
                    if (open) emit(start, g.s);
                    start = g.s;
                    open = true;
                } else {
                    emit(open ? start : g.s, g.e);
                    open = false;
                }
            }
            if (open) emit(start, piece.size());
            break;
        }
        case SplitBehavior::kContiguous: {
            std::size_t i = 0;
            while (i < segs.size()) {
                std::size_t j = i;
                if (segs[i].delim)
                    while (j + 1 < segs.size() && segs[j + 1].delim) ++j;
                emit(segs[i].s, segs[j].e);
                i = j + 1;
            }
            break;
        }
        }
    }

    Regex regex_;
    SplitBehavior behavior_;
    bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
public:
    ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<PreTokenizer> gpt2_split)
        : add_prefix_space_(add_prefix_space), split_(std::move(gpt2_split)) {}

    void apply(PreTokenizeState& st) const override {
        if (add_prefix_space_) {
            for (auto& piece : st.pieces) {
                if (!piece.empty() && piece.front() == ' ') continue;
                st.arena.push_back(" " + std::string(piece));
                piece = st.arena.back();
            }
        }
        if (split_) split_->apply(st);
    }
    bool byte_level() const override { return true; }

private:
    bool add_prefix_space_;
    std::unique_ptr<PreTokenizer> split_;
};

class SequencePreTokenizer final : public PreTokenizer {
public:
    explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> items)
        : items_(std::move(items)) {}
    void apply(PreTokenizeState& st) const override {
        for (const auto& p : items_) p->apply(st);
    }
    bool byte_level() const override {
        for (const auto& p : items_)
            if (p->byte_level()) return true;
        return false;
    }

private:
    std::vector<std::unique_ptr<PreTokenizer>> items_;
};

} // namespace

std::unique_ptr<PreTokenizer> make_split(Regex regex, SplitBehavior behavior, bool invert) {
    return std::make_unique<SplitPreTokenizer>(std::move(regex), behavior, invert);
}

std::unique_ptr<PreTokenizer> make_byte_level(bool add_prefix_space, bool use_regex) {
    std::unique_ptr<PreTokenizer> split;
    if (use_regex) {
        // GPT-2's pattern, as HF's ByteLevel pre-tokenizer uses it.
        auto re =
            Regex::compile(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
        DI_CHECK(re.ok()) << re.status().to_string();
        split = make_split(std::move(re).value(), SplitBehavior::kIsolated, false);
    }
    return std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, std::move(split));
}

std::unique_ptr<PreTokenizer> make_sequence(std::vector<std::unique_ptr<PreTokenizer>> items) {
    return std::make_unique<SequencePreTokenizer>(std::move(items));
}

} // namespace deepinfer::tokenizer

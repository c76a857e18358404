#pragma once
// Bodies of the tokenizer fuzz targets, shared by the libFuzzer binaries (fuzz/tokenizer/*_fuzz.cpp) and
// the corpus replay test that CI runs (tests/tokenizer/fuzz_replay_test.cpp). Each checks invariants and
// aborts (DI_CHECK) on a violation.

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "tokenizer/dsml_parser.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::fuzz {

inline const Tokenizer& fuzz_tokenizer() {
    static const Tokenizer* t = [] {
        auto r = Tokenizer::from_file(std::string(DEEPINFER_SOURCE_DIR) +
                                      "/data/tokenizer/deepseek-v4/tokenizer.json");
        DI_CHECK(r.ok()) << r.status().to_string();
        return new Tokenizer(std::move(r).value());
    }();
    return *t;
}

// encode/decode: ids are valid, decode(encode(x)) == x (after U+FFFD replacement of ill-formed bytes), the
// incremental detokenizer agrees with decode, and encode_plain round-trips too.
inline void tokenizer_one(const std::uint8_t* data, std::size_t size) {
    const Tokenizer& tok = fuzz_tokenizer();
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const std::string expect = utf8::sanitize(in);
    const auto ids = tok.encode(in);
    for (TokenId id : ids) DI_CHECK(id >= 0 && static_cast<std::size_t>(id) < tok.vocab_size()) << id;
    const std::string text = tok.decode(ids);
    DI_CHECK(text == expect) << "round trip failed";
    DI_CHECK(utf8::is_valid(text));
    IncrementalDetokenizer detok(tok);
    std::string streamed;
    for (TokenId id : ids) {
        std::string piece = detok.push(id);
        DI_CHECK(utf8::is_valid(piece)) << "partial character emitted";
        streamed += piece;
    }
    streamed += detok.finish();
    DI_CHECK(streamed == text) << "incremental detokenization differs from decode";
    DI_CHECK(tok.decode(tok.encode_plain(in)) == expect);
}

// DSML parser: any split of the output gives the same message; events add up to it.
inline void dsml_one(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return;
    const bool thinking = data[0] & 1;
    const FinishReason fr = (data[0] & 2) ? FinishReason::kLength : FinishReason::kStop;
    const std::size_t chunk = 1 + data[1] % 13;
    const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);

    auto run = [&](std::size_t n, std::string* reasoning, std::string* content,
                   std::vector<std::string>* args) {
        DsmlStreamParser p({.thinking = thinking});
        auto apply = [&](const std::vector<ParseEvent>& evs) {
            for (const auto& e : evs) {
                switch (e.kind) {
                case ParseEventKind::kReasoningDelta:
                    *reasoning += e.text;
                    break;
                case ParseEventKind::kContentDelta:
                    *content += e.text;
                    break;
                case ParseEventKind::kToolCallBegin:
                    DI_CHECK(e.index == static_cast<int>(args->size()));
                    args->emplace_back();
                    break;
                case ParseEventKind::kToolCallArgsDelta:
                    DI_CHECK(e.index >= 0 && e.index < static_cast<int>(args->size()));
                    (*args)[e.index] += e.text;
                    break;
                case ParseEventKind::kToolCallEnd:
                    break;
                case ParseEventKind::kReasoningWasContent:
                    *content = e.text + *content;
                    reasoning->clear();
                    break;
                }
            }
        };
        if (n == 0) {
            apply(p.feed(text));
        } else {
            for (std::size_t i = 0; i < text.size(); i += n)
                apply(p.feed(std::string_view(text).substr(i, n)));
        }
        apply(p.finish(fr));
        return p.message();
    };
    std::string r1, c1, r2, c2;
    std::vector<std::string> a1, a2;
    const ParsedMessage m1 = run(0, &r1, &c1, &a1);
    const ParsedMessage m2 = run(chunk, &r2, &c2, &a2);
    DI_CHECK(m1.reasoning == m2.reasoning) << "reasoning depends on the split";
    DI_CHECK(m1.content == m2.content) << "content depends on the split";
    DI_CHECK(m1.finish_reason == m2.finish_reason);
    DI_CHECK(m1.tool_calls.size() == m2.tool_calls.size());
    for (std::size_t i = 0; i < m1.tool_calls.size(); ++i) {
        DI_CHECK(m1.tool_calls[i].name == m2.tool_calls[i].name);
        DI_CHECK(m1.tool_calls[i].arguments == m2.tool_calls[i].arguments) << "arguments depend on the split";
        DI_CHECK(a1[i] == m1.tool_calls[i].arguments);
    }
    DI_CHECK(r1 == m1.reasoning && c1 == m1.content) << "events do not add up to the message";
}

} // namespace deepinfer::tokenizer::fuzz

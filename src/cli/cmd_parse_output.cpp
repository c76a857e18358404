// `deepinfer parse-output`: model output (text or ids) -> reasoning, content and tool calls as JSON, the
// way the server parses it (DsmlStreamParser), whole or streamed from stdin as it arrives.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/tokenizer_common.h"
#include "tokenizer/chat_tokens.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/output_json.h"
#include "tokenizer/utf8.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kHelp =
    "usage: deepinfer parse-output [--mode thinking|chat] [--ids] [--stream] [--length] [--no-tools]\n"
    "                              [--tokenizer PATH] [--file F|-] [TEXT...]\n"
    "Parses one assistant completion (what follows <｜Assistant｜><think> or </think>) into\n"
    "{\"reasoning_content\", \"content\", \"tool_calls\": [...], \"finish_reason\"} on one JSON line.\n"
    "  --mode     thinking (default: the output starts inside <think>) | chat\n"
    "  --ids      the input is token ids (whitespace/comma separated), decoded with the tokenizer;\n"
    "             an end-of-sentence id ends the output\n"
    "  --stream   read stdin as it arrives and print each parser event as a JSON line\n"
    "             ({\"event\": \"reasoning\"|\"content\"|\"tool_call_begin\"|...}), then {\"message\": ...}\n"
    "  --length   the output was cut by max_tokens (finish_reason length: a half-written marker is\n"
    "             dropped, half-written arguments stay)\n"
    "  --no-tools DSML stays in the content\n";

void print_json(const tokenizer::Json& j) {
    const std::string s = j.dump(-1, ' ', false, tokenizer::Json::error_handler_t::replace);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

// Splits id text into ids; keeps an unfinished trailing number in `pending` (streaming).
bool take_ids(std::string& pending, bool final, std::vector<tokenizer::TokenId>& out) {
    std::size_t start = 0;
    for (std::size_t i = 0; i <= pending.size(); ++i) {
        const bool end = i == pending.size();
        if (end && !final) break;
        const char c = end ? ' ' : pending[i];
        if (c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r' || c == '[' || c == ']') {
            if (i > start) {
                const std::string t = pending.substr(start, i - start);
                if (t.find_first_not_of("0123456789") != std::string::npos || t.size() > 9) {
                    std::fprintf(stderr, "error: '%s' is not a token id\n", t.c_str());
                    return false;
                }
                out.push_back(std::stoi(t));
            }
            start = i + 1;
        }
    }
    pending.erase(0, std::min(start, pending.size()));
    return true;
}

int run(const std::vector<std::string>& argv) {
    auto args =
        Args::parse(argv, {"mode", "tokenizer", "file"}, {"ids", "stream", "length", "no-tools", "help"});
    if (!args.ok()) {
        std::fprintf(stderr, "error: %s\n%s", args.status().message().c_str(), kHelp);
        return 2;
    }
    if (args->has("help")) {
        std::printf("%s", kHelp);
        return 0;
    }
    const std::string mode = args->get_or("mode", "thinking");
    if (mode != "thinking" && mode != "chat") {
        std::fprintf(stderr, "error: --mode must be thinking or chat, not '%s'\n", mode.c_str());
        return 2;
    }
    tokenizer::DsmlStreamParser::Options opt;
    opt.thinking = mode == "thinking";
    opt.parse_tool_calls = !args->has("no-tools");
    const auto reason =
        args->has("length") ? tokenizer::FinishReason::kLength : tokenizer::FinishReason::kStop;
    std::optional<tokenizer::Tokenizer> tok;
    std::optional<tokenizer::TokenId> eos;
    if (args->has("ids")) {
        tok = load_tokenizer(*args);
        if (!tok) return 1;
        eos = tok->token_to_id(tokenizer::kEosToken);
    }

    if (!args->has("stream")) {
        auto input = read_input(*args);
        if (!input) return 1;
        std::string text = *input;
        if (tok) {
            std::string pending = *input;
            std::vector<tokenizer::TokenId> ids;
            if (!take_ids(pending, true, ids)) return 1;
            if (eos)
                if (auto it = std::find(ids.begin(), ids.end(), *eos); it != ids.end())
                    ids.erase(it, ids.end());
            text = tok->decode(ids);
        }
        print_json(tokenizer::parsed_message_json(tokenizer::parse_completion(text, opt, reason)));
        return 0;
    }

    // Streaming: feed whatever read() returns, as a server feeds detokenized pieces.
    tokenizer::DsmlStreamParser parser(opt);
    std::optional<tokenizer::IncrementalDetokenizer> detok;
    if (tok) detok.emplace(*tok);
    std::string pending, held; // held: text that could still be the start of the EOS token
    bool stopped = false;
    auto feed = [&](const std::string& piece) {
        for (const auto& e : parser.feed(piece)) print_json(tokenizer::parse_event_json(e));
    };
    auto feed_text = [&](std::string s, bool final) {
        // A trailing end-of-sentence token ends the output (the official parser's input carries it).
        held += s;
        const std::size_t at = held.find(tokenizer::kEosToken);
        if (at != std::string::npos) {
            held.resize(at);
            stopped = true;
        }
        std::size_t keep = 0;
        if (!stopped && !final) keep = tokenizer::utf8::incomplete_tail_length(held); // whole characters only
        if (!stopped && !final && keep == 0)
            for (std::size_t k = std::min(held.size(), tokenizer::kEosToken.size() - 1); k > 0; --k)
                if (tokenizer::kEosToken.compare(0, k, held, held.size() - k, k) == 0) {
                    keep = k;
                    break;
                }
        feed(held.substr(0, held.size() - keep));
        held.erase(0, held.size() - keep);
    };
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
        if (n <= 0) break;
        if (stopped) continue;
        if (!tok) {
            feed_text(std::string(buf, static_cast<std::size_t>(n)), false);
            continue;
        }
        pending.append(buf, static_cast<std::size_t>(n));
        std::vector<tokenizer::TokenId> ids;
        if (!take_ids(pending, false, ids)) return 1;
        for (auto id : ids) {
            if (stopped) break;
            if (eos && id == *eos) {
                stopped = true;
                break;
            }
            feed_text(detok->push(id), false);
        }
    }
    if (tok && !stopped) {
        std::vector<tokenizer::TokenId> ids;
        if (!take_ids(pending, true, ids)) return 1;
        for (auto id : ids) {
            if (eos && id == *eos) break;
            feed_text(detok->push(id), false);
        }
        feed_text(detok->finish(), true);
    } else if (!stopped) {
        feed_text("", true);
    }
    for (const auto& e : parser.finish(reason)) print_json(tokenizer::parse_event_json(e));
    print_json({{"message", tokenizer::parsed_message_json(parser.message())}});
    return 0;
}

} // namespace

DI_REGISTER_COMMAND("parse-output", "model output (text or ids) -> reasoning, content, tool calls (JSON)",
                    run);

} // namespace deepinfer::cli

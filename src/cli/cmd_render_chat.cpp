// `deepinfer render-chat`: the exact DeepSeek V4 prompt for an OpenAI-style chat request.

#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/tokenizer_common.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kHelp =
    "usage: deepinfer render-chat [--mode MODE] [--keep-thinking] [--no-bos] [--ids] [--tokenizer PATH]\n"
    "                             [--file F|-] [REQUEST_JSON]\n"
    "Renders an OpenAI-style request ({\"messages\": [...], \"tools\": [...]}) into the DeepSeek V4 prompt.\n"
    "  --mode           non-thinking | thinking-low | thinking-high (default) | thinking-max\n"
    "  --keep-thinking  keep reasoning of earlier turns (drop_thinking=False)\n"
    "  --ids            also print the prompt's token ids and their count\n";

int run(const std::vector<std::string>& argv) {
    auto args = Args::parse(argv, {"mode", "tokenizer", "file"}, {"keep-thinking", "no-bos", "ids", "help"});
    if (!args.ok()) {
        std::fprintf(stderr, "error: %s\n%s", args.status().message().c_str(), kHelp);
        return 2;
    }
    if (args->has("help")) {
        std::printf("%s", kHelp);
        return 0;
    }
    auto mode = tokenizer::parse_thinking_mode(args->get_or("mode", "thinking-high"));
    if (!mode.ok()) {
        std::fprintf(stderr, "error: %s\n", mode.status().message().c_str());
        return 2;
    }
    auto text = read_input(*args);
    if (!text) return 1;
    tokenizer::Json request;
    try {
        request = tokenizer::Json::parse(*text);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: request is not valid JSON: %s\n", e.what());
        return 1;
    }
    auto conv = tokenizer::conversation_from_json(request);
    if (!conv.ok()) {
        std::fprintf(stderr, "error: %s\n", conv.status().message().c_str());
        return 1;
    }
    tokenizer::ChatOptions opt;
    opt.mode = *mode;
    opt.drop_thinking = !args->has("keep-thinking");
    opt.add_bos = !args->has("no-bos");
    auto prompt = tokenizer::render_chat(*conv, opt);
    if (!prompt.ok()) {
        std::fprintf(stderr, "error: %s\n", prompt.status().message().c_str());
        return 1;
    }
    std::fwrite(prompt->data(), 1, prompt->size(), stdout);
    std::printf("\n");
    if (args->has("ids")) {
        auto tok = load_tokenizer(*args);
        if (!tok) return 1;
        const auto ids = tok->encode(*prompt);
        std::printf("--- %zu tokens\n", ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
        std::printf("\n");
    }
    return 0;
}

} // namespace

DI_REGISTER_COMMAND("render-chat", "chat request JSON -> DeepSeek V4 prompt (and ids)", run);

} // namespace deepinfer::cli

// `deepinfer render-chat`: the exact DeepSeek V4 prompt for an OpenAI-style chat request.

#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/tokenizer_common.h"
#include "tokenizer/chat_defaults.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kHelp =
    "usage: deepinfer render-chat [--mode MODE] [--effort-table auto|release|0731] [--model DIR]\n"
    "                             [--context FILE] [--keep-thinking] [--no-bos] [--ids] [--plain-content]\n"
    "                             [--tokenizer PATH] [--verbose] [--default-chat-template-kwargs JSON]\n"
    "                             [--reasoning-effort E] [FILE | - | REQUEST_JSON]\n"
    "Renders an OpenAI-style request ({\"messages\": [...], \"tools\": [...]}, or a bare messages array) "
    "into\n"
    "the DeepSeek V4 prompt, byte-exact with DeepSeek's encoding_dsv4.py. The request is a file path, '-'\n"
    "(stdin, also the default) or JSON text ('{' or '[' first); --file F works too.\n"
    "  --mode           chat | thinking (no effort prompt) | thinking-effort-high | thinking-effort-max\n"
    "                   (old names: non-thinking, thinking-low, thinking-high, thinking-max). Default: what\n"
    "                   `deepinfer serve` renders for the request: its thinking / reasoning_effort /\n"
    "                   chat_template_kwargs fields, else the server defaults below (thinking, effort high)\n"
    "  --default-chat-template-kwargs JSON, --reasoning-effort E\n"
    "                   the same server-wide defaults as `deepinfer serve` (e.g. '{\"thinking\": false}')\n"
    "  --effort-table   which effort prompts high/max render (default auto: what --model DIR's\n"
    "                   encoding/encoding_dsv4.py defines, like SGLang; the release table without one)\n"
    "                     release: high -> none, max -> \"Absolute maximum ...\"\n"
    "                     0731:    high -> \"Absolute maximum ...\", max -> \"Beyond maximum ...\"\n"
    "  --context FILE   messages already encoded (a request or messages array, as the encoder's\n"
    "                   context=): only the request's messages are rendered, after them, without BOS\n"
    "  --keep-thinking  keep reasoning of earlier turns (drop_thinking=False)\n"
    "  --ids            also print the prompt's token ids and their count\n"
    "  --plain-content  with --ids: message text is encoded as text, so role markers typed in it\n"
    "                   (<｜User｜>, </think>, ｜DSML｜...) stay text (a deepinfer extension; default: "
    "official)\n"
    "  --verbose        say on stderr which effort table was chosen and why\n";

core::Result<tokenizer::Json> read_json(const std::string& what, const std::string& text) {
    try {
        return tokenizer::Json::parse(text);
    } catch (const std::exception& e) {
        return core::invalid_argument(what + " is not valid JSON: " + e.what());
    }
}

// A request object, or a bare messages array wrapped as one.
tokenizer::Json as_request(tokenizer::Json j) {
    if (j.is_array()) return tokenizer::Json{{"messages", std::move(j)}};
    return j;
}

int fail(const std::string& msg) {
    std::fprintf(stderr, "error: %s\n", msg.c_str());
    return 1;
}

int run(const std::vector<std::string>& argv) {
    auto args = Args::parse(argv,
                            {"mode", "tokenizer", "file", "effort-table", "model", "context",
                             "default-chat-template-kwargs", "reasoning-effort"},
                            {"keep-thinking", "no-bos", "ids", "plain-content", "verbose", "help"});
    if (!args.ok()) {
        std::fprintf(stderr, "error: %s\n%s", args.status().message().c_str(), kHelp);
        return 2;
    }
    if (args->has("help")) {
        std::printf("%s", kHelp);
        return 0;
    }
    if (args->positional().size() > 1 || (args->has("file") && !args->positional().empty())) {
        std::fprintf(stderr, "error: one request (FILE, - or JSON) expected\n%s", kHelp);
        return 2;
    }
    auto defaults = tokenizer::chat_defaults_from_flags(args->get("default-chat-template-kwargs"),
                                                        args->get("reasoning-effort"));
    if (!defaults.ok()) return fail(defaults.status().message());
    tokenizer::ChatOptions opt;
    if (auto m = args->get("mode")) {
        auto mode = tokenizer::parse_thinking_mode(*m);
        if (!mode.ok()) return fail(mode.status().message());
        opt.mode = *mode;
    }
    const std::string table = args->get_or("effort-table", "auto");
    if (table == "auto") {
        const auto choice =
            args->get("model")
                ? tokenizer::detect_effort_table(*args->get("model"))
                : tokenizer::EffortTableChoice{tokenizer::EffortTable::kRelease,
                                               "no --model DIR: release table (SGLang's fallback)"};
        opt.effort_table = choice.table;
        if (args->has("verbose")) std::fprintf(stderr, "effort table: %s\n", choice.reason.c_str());
    } else {
        auto t = tokenizer::parse_effort_table(table);
        if (!t.ok()) return fail(t.status().message());
        opt.effort_table = *t;
        if (args->has("verbose")) std::fprintf(stderr, "effort table: %s (--effort-table)\n", table.c_str());
    }

    // The request: --file F, a positional path / '-' / JSON text, or stdin.
    std::string what = "request";
    std::optional<std::string> text;
    const std::string pos = args->positional().empty() ? "" : args->positional()[0];
    const std::size_t first = pos.find_first_not_of(" \t\r\n");
    if (!pos.empty() && first != std::string::npos && (pos[first] == '{' || pos[first] == '[')) {
        text = pos;
    } else if (!pos.empty()) {
        what = pos == "-" ? "stdin" : pos;
        text = read_path(pos);
    } else {
        if (auto f = args->get("file")) what = *f;
        text = read_input(*args);
    }
    if (!text) return 1;
    auto request = read_json(what, *text);
    if (!request.ok()) return fail(request.status().message());
    if (!args->has("mode")) { // as the server decides it (tokenizer/chat_defaults.h)
        auto choice = tokenizer::thinking_of_request(
            request->is_object() ? *request : tokenizer::Json::object(), *defaults);
        if (auto* e = std::get_if<tokenizer::FieldError>(&choice)) return fail(what + ": " + e->message);
        opt.mode = std::get<tokenizer::ThinkingChoice>(choice).mode();
        if (args->has("verbose"))
            std::fprintf(stderr, "mode: %s\n", std::string(tokenizer::thinking_mode_name(opt.mode)).c_str());
    }
    auto conv = tokenizer::conversation_from_json(as_request(std::move(request).value()));
    if (!conv.ok()) return fail(what + ": " + conv.status().message());

    if (auto ctx_path = args->get("context")) {
        auto ctx_text = read_path(*ctx_path);
        if (!ctx_text) return 1;
        auto ctx_json = read_json(*ctx_path, *ctx_text);
        if (!ctx_json.ok()) return fail(ctx_json.status().message());
        auto ctx = tokenizer::conversation_from_json(as_request(std::move(ctx_json).value()));
        if (!ctx.ok()) return fail(*ctx_path + ": " + ctx.status().message());
        if (!(ctx->tools.is_array() && !ctx->tools.empty()) && conv->tools.is_array())
            ctx->tools = conv->tools;
        opt.context_messages = ctx->messages.size();
        ctx->messages.insert(ctx->messages.end(), conv->messages.begin(), conv->messages.end());
        conv = std::move(ctx);
    }
    opt.drop_thinking = !args->has("keep-thinking");
    opt.add_bos = !args->has("no-bos");
    std::vector<tokenizer::ContentRange> content;
    auto prompt = tokenizer::render_chat(*conv, opt, &content);
    if (!prompt.ok()) return fail(what + ": " + prompt.status().message());
    std::fwrite(prompt->data(), 1, prompt->size(), stdout);
    std::printf("\n");
    if (args->has("ids")) {
        auto tok = load_tokenizer(*args);
        if (!tok) return 1;
        const auto ids = args->has("plain-content") ? tok->encode_with_plain_ranges(*prompt, content)
                                                    : tok->encode(*prompt);
        std::printf("--- %zu tokens\n", ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
        std::printf("\n");
    }
    return 0;
}

} // namespace

DI_REGISTER_COMMAND("render-chat", "chat request (file, - or JSON) -> DeepSeek V4 prompt (and ids)", run);

} // namespace deepinfer::cli

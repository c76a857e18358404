// DeepSeek V4 prompt rendering. The structure follows the reference encoder step by step (merge tool
// results into user turns, order them by call, drop old reasoning, render each message, then append the
// generation header) so that each step can be checked against it; the code is our own.

#include "tokenizer/chat_encoding.h"

#include <algorithm>
#include <map>

#include "tokenizer/chat_tokens.h"

namespace deepinfer::tokenizer {

namespace {

using core::Result;
using core::Status;

struct Block {
    enum class Kind { kText, kImage, kToolResult } kind;
    std::string text; // text, or the tool result content
    std::string tool_use_id;
    std::vector<std::size_t> images = {}; // offsets in text where an image placeholder token was put
};

// A message after tool results were merged (the reference's intermediate dict form).
struct Item {
    Role role;
    std::string content;
    std::optional<std::vector<Block>> blocks; // user turns
    std::optional<std::string> reasoning;
    std::vector<ToolCall> tool_calls;
    Json tools, response_format;
    std::optional<std::string> task;
    bool wo_eos = false;
    std::vector<std::size_t> content_images; // offsets in content where an image placeholder was put
};

// images (optional): receives the offsets of the image placeholders flatten() itself inserted.
std::string flatten(const Message& m, std::vector<std::size_t>* images = nullptr) {
    if (!m.parts) return m.content;
    std::string out;
    for (std::size_t i = 0; i < m.parts->size(); ++i) {
        if (i) out += "\n\n";
        const ContentPart& p = (*m.parts)[i];
        if (p.is_image && images) images->push_back(out.size());
        out += p.is_image ? std::string(kImagePlaceholder) : p.text;
    }
    return out;
}

// A tool message's content as the reference renders a tool_result block.
std::string tool_result_text(const Message& m) {
    if (!m.parts) return m.content;
    std::string out;
    for (std::size_t i = 0; i < m.parts->size(); ++i) {
        if (i) out += "\n\n";
        const ContentPart& p = (*m.parts)[i];
        out += p.is_image ? std::string("[Unsupported image_url]") : p.text;
    }
    return out;
}

std::vector<Item> merge_tool_messages(const std::vector<Message>& messages) {
    std::vector<Item> out;
    for (const Message& m : messages) {
        Item* last = out.empty() ? nullptr : &out.back();
        const bool last_is_merged_user = last && last->role == Role::kUser && last->blocks.has_value();
        if (m.role == Role::kTool) {
            Block b{Block::Kind::kToolResult, tool_result_text(m), m.tool_call_id};
            if (last_is_merged_user) {
                last->blocks->push_back(std::move(b));
            } else {
                Item it{};
                it.role = Role::kUser;
                it.blocks = std::vector<Block>{std::move(b)};
                out.push_back(std::move(it));
            }
        } else if (m.role == Role::kUser) {
            Block b{Block::Kind::kText, "", ""};
            b.text = flatten(m, &b.images);
            if (last_is_merged_user && !last->task) {
                last->blocks->push_back(std::move(b));
            } else {
                Item it{};
                it.role = Role::kUser;
                it.content = b.text;
                it.content_images = b.images;
                it.blocks = std::vector<Block>{std::move(b)};
                it.task = m.task;
                it.wo_eos = m.wo_eos;
                out.push_back(std::move(it));
            }
        } else {
            Item it{};
            it.role = m.role;
            it.content = flatten(m, &it.content_images);
            it.reasoning = m.reasoning;
            it.tool_calls = m.tool_calls;
            it.tools = m.tools;
            it.response_format = m.response_format;
            it.task = m.task;
            it.wo_eos = m.wo_eos;
            out.push_back(std::move(it));
        }
    }
    return out;
}

// Tool results in a user turn follow the order of the calls in the last assistant turn with calls.
void sort_tool_results(std::vector<Item>& items) {
    std::map<std::string, int> order;
    for (Item& it : items) {
        if (it.role == Role::kAssistant && !it.tool_calls.empty()) {
            order.clear();
            for (std::size_t i = 0; i < it.tool_calls.size(); ++i)
                if (!it.tool_calls[i].id.empty()) order[it.tool_calls[i].id] = static_cast<int>(i);
        } else if (it.role == Role::kUser && it.blocks) {
            std::vector<Block> results;
            for (const Block& b : *it.blocks)
                if (b.kind == Block::Kind::kToolResult) results.push_back(b);
            if (results.size() < 2 || order.empty()) continue;
            auto key = [&](const Block& b) {
                auto f = order.find(b.tool_use_id);
                return f == order.end() ? 0 : f->second;
            };
            std::stable_sort(results.begin(), results.end(),
                             [&](const Block& a, const Block& b) { return key(a) < key(b); });
            std::size_t k = 0;
            for (Block& b : *it.blocks)
                if (b.kind == Block::Kind::kToolResult) b = results[k++];
        }
    }
}

int last_user_index(const std::vector<Item>& items) {
    for (int i = static_cast<int>(items.size()) - 1; i >= 0; --i)
        if (items[i].role == Role::kUser || items[i].role == Role::kDeveloper) return i;
    return -1;
}

// Before the last user turn: assistant reasoning is removed and developer turns are dropped.
std::vector<Item> drop_thinking(std::vector<Item> items) {
    const int last = last_user_index(items);
    std::vector<Item> out;
    for (int i = 0; i < static_cast<int>(items.size()); ++i) {
        Item& it = items[i];
        const bool keep = it.role == Role::kUser || it.role == Role::kSystem || it.role == Role::kTool ||
                          it.role == Role::kLatestReminder;
        if (keep || i >= last) {
            out.push_back(std::move(it));
        } else if (it.role == Role::kAssistant) {
            it.reasoning.reset();
            out.push_back(std::move(it));
        }
    }
    return out;
}

Result<std::string> render_tools(const Json& tools) {
    std::string schemas;
    bool first = true;
    for (const Json& t : tools) {
        if (!t.is_object() || !t.contains("function"))
            return core::invalid_argument("tools: each tool must be an object with a 'function' member");
        if (!first) schemas += "\n";
        first = false;
        schemas += python_json_dumps(t["function"]);
    }
    return tools_prompt(schemas);
}

Result<std::string> render_arguments(const ToolCall& call) {
    Json args;
    try {
        args = Json::parse(call.arguments);
    } catch (const std::exception& e) {
        return core::invalid_argument("tool call '" + call.name +
                                      "': arguments are not valid JSON: " + e.what());
    }
    if (!args.is_object())
        return core::invalid_argument("tool call '" + call.name + "': arguments must be a JSON object");
    std::string out;
    bool first = true;
    for (const auto& [k, v] : args.items()) {
        if (!first) out += "\n";
        first = false;
        const bool is_str = v.is_string();
        out += "<" + std::string(kDsml) + "parameter name=\"" + k + "\" string=\"" +
               (is_str ? "true" : "false") + "\">" + (is_str ? v.get<std::string>() : python_json_dumps(v)) +
               "</" + std::string(kDsml) + "parameter>";
    }
    return out;
}

struct RenderContext {
    bool thinking;
    bool drop;
    std::string_view effort_prompt;
    int last_user;
    // When set, receives the prompt byte ranges that hold message text (for plain-content encoding);
    // `base` is where this item's text starts in the prompt.
    std::vector<ContentRange>* content = nullptr;
    std::size_t base = 0;
};

Result<std::string> render_item(int index, const std::vector<Item>& items, const RenderContext& cx) {
    const Item& it = items[index];
    std::string p;
    // Appends message text, recording it as content except for the image placeholders flatten() put in.
    auto add_text = [&](const std::string& text, const std::vector<std::size_t>& images = {}) {
        if (cx.content) {
            std::size_t from = 0;
            const std::size_t at = cx.base + p.size();
            for (std::size_t img : images) {
                if (img > from) cx.content->push_back({at + from, at + img});
                from = img + kImagePlaceholder.size();
            }
            if (text.size() > from) cx.content->push_back({at + from, at + text.size()});
        }
        p += text;
    };
    if (index == 0 && cx.thinking) p += cx.effort_prompt;
    auto append_tools_and_format = [&](std::string& s) -> Status {
        if (it.tools.is_array() && !it.tools.empty()) {
            DI_ASSIGN_OR_RETURN(std::string t, render_tools(it.tools));
            s += "\n\n" + t;
        }
        if (!it.response_format.is_null() && !(it.response_format.is_object() && it.response_format.empty()))
            s += "\n\n" + response_format_prompt(python_json_dumps(it.response_format));
        return {};
    };
    switch (it.role) {
    case Role::kSystem:
        add_text(it.content, it.content_images);
        DI_RETURN_IF_ERROR(append_tools_and_format(p));
        break;
    case Role::kDeveloper:
        if (it.content.empty()) return core::invalid_argument("developer message must have content");
        p += kUserToken;
        add_text(it.content, it.content_images);
        DI_RETURN_IF_ERROR(append_tools_and_format(p));
        break;
    case Role::kUser:
        p += kUserToken;
        if (it.blocks && !it.blocks->empty()) {
            for (std::size_t i = 0; i < it.blocks->size(); ++i) {
                if (i) p += "\n\n";
                const Block& b = (*it.blocks)[i];
                if (b.kind == Block::Kind::kToolResult) {
                    p += "<tool_result>";
                    add_text(b.text);
                    p += "</tool_result>";
                } else {
                    add_text(b.text, b.images);
                }
            }
        } else {
            add_text(it.content, it.content_images);
        }
        break;
    case Role::kLatestReminder:
        p += kLatestReminderToken;
        add_text(it.content, it.content_images);
        break;
    case Role::kTool:
        return core::internal_error("tool message survived merging");
    case Role::kAssistant: {
        std::string calls;
        if (!it.tool_calls.empty()) {
            std::string invokes;
            for (std::size_t i = 0; i < it.tool_calls.size(); ++i) {
                DI_ASSIGN_OR_RETURN(std::string args, render_arguments(it.tool_calls[i]));
                if (i) invokes += "\n";
                invokes += "<" + std::string(kDsml) + "invoke name=\"" + it.tool_calls[i].name + "\">\n" +
                           args + "\n</" + std::string(kDsml) + "invoke>";
            }
            calls = "\n\n<" + std::string(kDsml) + "tool_calls>\n" + invokes + "\n</" + std::string(kDsml) +
                    "tool_calls>";
        }
        const bool prev_has_task = index > 0 && items[index - 1].task.has_value();
        if (cx.thinking && !prev_has_task && (!cx.drop || index > cx.last_user)) {
            add_text(it.reasoning.value_or(""));
            p += kThinkEnd;
        }
        add_text(it.content, it.content_images);
        p += calls;
        if (!it.wo_eos) p += kEosToken;
        break;
    }
    }

    // What follows decides whether this message opens a generation header.
    if (index + 1 < static_cast<int>(items.size()) && items[index + 1].role != Role::kAssistant &&
        items[index + 1].role != Role::kLatestReminder)
        return p;
    if (it.task) {
        auto tok = task_token(*it.task);
        if (!tok) return core::invalid_argument("unknown task '" + *it.task + "'");
        if (*it.task != "action") {
            p += *tok;
        } else {
            p += kAssistantToken;
            p += cx.thinking ? kThinkStart : kThinkEnd;
            p += *tok;
        }
    } else if (it.role == Role::kUser || it.role == Role::kDeveloper ||
               (it.role == Role::kSystem &&
                (index + 1 == static_cast<int>(items.size()) || items[index + 1].role == Role::kAssistant))) {
        p += kAssistantToken;
        const bool open_think = cx.thinking && (!cx.drop || index >= cx.last_user);
        p += open_think ? kThinkStart : kThinkEnd;
    }
    return p;
}

} // namespace

Result<std::string> render_chat(const Conversation& conversation, const ChatOptions& options) {
    return render_chat(conversation, options, nullptr);
}

Result<std::string> render_chat(const Conversation& conversation, const ChatOptions& options,
                                std::vector<ContentRange>* content) {
    std::vector<Message> messages = conversation.messages;
    std::size_t context_messages = options.context_messages;
    if (conversation.tools.is_array() && !conversation.tools.empty()) {
        auto sys = std::find_if(messages.begin(), messages.end(),
                                [](const Message& m) { return m.role == Role::kSystem; });
        if (sys == messages.end()) {
            Message m;
            m.role = Role::kSystem;
            sys = messages.insert(messages.begin(), m);
            if (context_messages > 0) ++context_messages; // the synthesized system message is context too
        }
        sys->tools = conversation.tools;
    }
    if (context_messages > messages.size())
        return core::invalid_argument("context: " + std::to_string(options.context_messages) +
                                      " context messages but the conversation has " +
                                      std::to_string(messages.size()));
    // Like encode_messages(context=...): context and new messages merge tool turns separately.
    const auto split = messages.begin() + static_cast<std::ptrdiff_t>(context_messages);
    std::vector<Item> items = merge_tool_messages(std::vector<Message>(messages.begin(), split));
    const std::vector<Item> context_items = items;
    for (Item& it : merge_tool_messages(std::vector<Message>(split, messages.end())))
        items.push_back(std::move(it));
    sort_tool_results(items);

    const bool thinking = options.mode != ThinkingMode::kNonThinking;
    bool drop = options.drop_thinking;
    for (const Item& it : items)
        if (it.tools.is_array() && !it.tools.empty()) drop = false;
    std::size_t context_len = context_items.size();
    if (thinking && drop) {
        items = drop_thinking(std::move(items));
        context_len = drop_thinking(context_items).size();
    }

    RenderContext cx{thinking, drop, reasoning_effort_prompt(options.mode, options.effort_table),
                     last_user_index(items), content};
    std::string prompt = options.add_bos && context_items.empty() ? std::string(kBosToken) : std::string();
    for (int i = static_cast<int>(context_len); i < static_cast<int>(items.size()); ++i) {
        cx.base = prompt.size();
        DI_ASSIGN_OR_RETURN(std::string part, render_item(i, items, cx));
        prompt += part;
    }
    return prompt;
}

} // namespace deepinfer::tokenizer

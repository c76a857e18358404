#pragma once
// Stop strings over streamed text. push() returns the text that is safe to emit: anything that could still
// be the start of a stop string is held back until later text rules it out, so a partial stop string is
// never sent to the client. Once a stop string matches, the text before it is returned and stopped()
// turns true; the stop string itself is not part of the output (OpenAI semantics) unless include_stop is set
// (vLLM's include_stop_str_in_output).

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::server {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false);

    std::string push(std::string_view text);
    // End of generation: releases what was held back (no stop string can complete any more).
    std::string flush();
    bool stopped() const { return stopped_; }
    // The stop string that matched (empty until stopped()).
    const std::string& matched() const { return matched_; }

private:
    std::vector<std::string> stops_;
    std::string pending_; // held-back tail
    bool include_stop_ = false;
    bool stopped_ = false;
    std::string matched_;
};

} // namespace deepinfer::server

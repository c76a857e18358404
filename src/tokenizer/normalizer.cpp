#include "tokenizer/normalizer.h"

namespace deepinfer::tokenizer {

namespace {

bool is_ws(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

} // namespace

std::string Normalizer::apply(std::string_view text) const {
    std::string s(text);
    for (const Step& st : steps_) {
        switch (st.kind) {
        case Step::Kind::kReplace: {
            if (st.pattern.empty()) break;
            std::string out;
            std::size_t pos = 0;
            while (true) {
                const std::size_t hit = s.find(st.pattern, pos);
                if (hit == std::string::npos) break;
                out.append(s, pos, hit - pos);
                out += st.content;
                pos = hit + st.pattern.size();
            }
            out.append(s, pos, std::string::npos);
            s = std::move(out);
            break;
        }
        case Step::Kind::kReplaceRegex: {
            std::vector<Regex::Match> m;
            st.regex->find_all(s, m);
            std::string out;
            std::size_t pos = 0;
            for (const auto& x : m) {
                out.append(s, pos, x.start - pos);
                out += st.content;
                pos = x.end;
            }
            out.append(s, pos, std::string::npos);
            s = std::move(out);
            break;
        }
        case Step::Kind::kPrepend:
            if (!s.empty()) s = st.content + s;
            break;
        case Step::Kind::kStrip: {
            std::size_t b = 0, e = s.size();
            if (st.strip_left)
                while (b < e && is_ws(static_cast<unsigned char>(s[b]))) ++b;
            if (st.strip_right)
                while (e > b && is_ws(static_cast<unsigned char>(s[e - 1]))) --e;
            s = s.substr(b, e - b);
            break;
        }
        }
    }
    return s;
}

} // namespace deepinfer::tokenizer

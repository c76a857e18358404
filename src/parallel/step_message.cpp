#include "parallel/step_message.h"

#include <cstring>
#include <string>

namespace deepinfer::parallel {
namespace {

constexpr std::uint32_t kMagic = 0x31534944; // "DIS1" read little-endian
constexpr std::size_t kHeaderBytes = 4 + 2 + 1 + 1 + 8 + 4 + 4 + 4;

class Writer {
public:
    template <typename T> void put(T v) {
        static_assert(std::is_integral_v<T>);
        for (std::size_t i = 0; i < sizeof(T); ++i) {
            out_.push_back(static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
        }
    }
    template <typename T> void put_all(const std::vector<T>& v) {
        for (auto x : v) put(x);
    }
    std::vector<std::byte> take() { return std::move(out_); }
    std::vector<std::byte>& bytes() { return out_; }

private:
    std::vector<std::byte> out_;
};

class Reader {
public:
    explicit Reader(std::span<const std::byte> in) : in_(in) {}
    template <typename T> Status get(T& v, const char* field) {
        if (in_.size() - pos_ < sizeof(T)) return truncated(field);
        std::uint64_t u = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i) u |= static_cast<std::uint64_t>(in_[pos_ + i]) << (8 * i);
        v = static_cast<T>(u);
        pos_ += sizeof(T);
        return {};
    }
    template <typename T> Status get_all(std::vector<T>& v, std::uint64_t n, const std::string& field) {
        if ((in_.size() - pos_) / sizeof(T) < n) return truncated(field.c_str());
        v.resize(n);
        for (auto& x : v) (void)get(x, field.c_str());
        return {};
    }
    std::size_t pos() const { return pos_; }
    std::size_t remaining() const { return in_.size() - pos_; }
    Status truncated(const char* field) const {
        return core::data_loss("step message: field '" + std::string(field) + "' truncated at byte " +
                               std::to_string(pos_) + " of " + std::to_string(in_.size()));
    }

private:
    std::span<const std::byte> in_;
    std::size_t pos_ = 0;
};

Status validate(const StepMessage& m) {
    const std::size_t n = m.token_ids.size();
    if (m.positions.size() != n) {
        return core::data_loss("step message: " + std::to_string(m.positions.size()) + " positions for " +
                               std::to_string(n) + " tokens");
    }
    std::size_t rows = 0;
    for (std::size_t i = 0; i < m.sequences.size(); ++i) {
        const StepSequence& q = m.sequences[i];
        if (q.num_tokens < 0 || q.start_pos < 0) {
            return core::data_loss("step message: sequences[" + std::to_string(i) +
                                   "] has a negative num_tokens or start_pos");
        }
        if (static_cast<std::size_t>(q.token_offset) != rows || q.token_offset < 0) {
            return core::data_loss("step message: sequences[" + std::to_string(i) + "].token_offset is " +
                                   std::to_string(q.token_offset) + ", the chunks before it cover " +
                                   std::to_string(rows) + " rows");
        }
        rows += static_cast<std::size_t>(q.num_tokens);
    }
    if (rows != n) {
        return core::data_loss("step message: sequences cover " + std::to_string(rows) +
                               " token rows, the step has " + std::to_string(n));
    }
    for (std::size_t i = 0; i < m.logits_rows.size(); ++i) {
        if (m.logits_rows[i] < 0 || static_cast<std::size_t>(m.logits_rows[i]) >= n) {
            return core::data_loss("step message: logits_rows[" + std::to_string(i) +
                                   "] = " + std::to_string(m.logits_rows[i]) + " is not a row of the " +
                                   std::to_string(n) + " tokens");
        }
    }
    for (std::size_t i = 0; i < m.ops.size(); ++i) {
        const StepOp& op = m.ops[i];
        if (static_cast<std::uint8_t>(op.kind) > static_cast<std::uint8_t>(StepOpKind::kConfigureRuntime))
            return core::data_loss("step message: ops[" + std::to_string(i) + "] has unknown kind " +
                                   std::to_string(static_cast<int>(op.kind)));
        if (op.a < 0 || op.b < 0 || op.c < 0)
            return core::data_loss("step message: ops[" + std::to_string(i) + "] has a negative operand");
    }
    if ((m.kind == StepKind::kIdle || m.kind == StepKind::kShutdown) && !m.ops.empty())
        return core::data_loss("step message: an idle or shutdown step carries no ops");
    if (m.kind != StepKind::kForward && (n != 0 || !m.sequences.empty() || !m.logits_rows.empty())) {
        return core::data_loss("step message: an idle or shutdown step carries no tokens, sequences or rows");
    }
    return {};
}

} // namespace

std::uint64_t fnv1a64(std::span<const std::byte> bytes, std::uint64_t seed) {
    std::uint64_t h = seed;
    for (std::byte b : bytes) {
        h ^= static_cast<std::uint8_t>(b);
        h *= 0x100000001b3ull;
    }
    return h;
}

Result<std::vector<std::byte>> encode_step_message(const StepMessage& m) {
    DI_RETURN_IF_ERROR(validate(m));
    Writer w;
    w.put<std::uint32_t>(kMagic);
    w.put<std::uint16_t>(kStepMessageVersion);
    w.put<std::uint8_t>(static_cast<std::uint8_t>(m.kind));
    w.put<std::uint8_t>(0);
    w.put<std::uint64_t>(m.step);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(m.token_ids.size()));
    w.put<std::uint32_t>(static_cast<std::uint32_t>(m.sequences.size()));
    w.put<std::uint32_t>(static_cast<std::uint32_t>(m.logits_rows.size()));
    w.put_all(m.token_ids);
    w.put_all(m.positions);
    for (const StepSequence& s : m.sequences) {
        w.put<std::int64_t>(s.seq_id);
        w.put<std::int32_t>(s.slot);
        w.put<std::int64_t>(s.start_pos);
        w.put<std::int32_t>(s.num_tokens);
        w.put<std::int32_t>(s.token_offset);
        w.put<std::uint8_t>(static_cast<std::uint8_t>((s.restore_slot_from_block ? 1 : 0) |
                                                      (s.reset_slot ? 2 : 0) | (s.is_padding ? 4 : 0)));
        w.put<std::uint32_t>(static_cast<std::uint32_t>(s.block_table.size()));
        w.put_all(s.block_table);
    }
    w.put_all(m.logits_rows);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(m.ops.size()));
    for (const StepOp& op : m.ops) {
        w.put<std::uint8_t>(static_cast<std::uint8_t>(op.kind));
        w.put<std::int64_t>(op.a);
        w.put<std::int64_t>(op.b);
        w.put<std::int64_t>(op.c);
    }
    w.put<std::uint64_t>(fnv1a64(w.bytes()));
    return w.take();
}

Result<StepMessage> decode_step_message(std::span<const std::byte> bytes) {
    if (bytes.size() < kHeaderBytes + 8) {
        return core::data_loss("step message: " + std::to_string(bytes.size()) +
                               " bytes is shorter than the " + std::to_string(kHeaderBytes + 8) +
                               "-byte header and checksum");
    }
    // The header is read (its size was checked) and the version judged before the checksum, whose
    // definition could change with the version.
    const std::size_t body = bytes.size() - 8;
    Reader in(bytes.first(body));
    std::uint32_t magic = 0;
    std::uint16_t version = 0;
    std::uint8_t kind = 0, reserved = 0;
    StepMessage m;
    (void)in.get(magic, "magic");
    if (magic != kMagic) return core::data_loss("step message: bad magic (not a deepinfer step message)");
    (void)in.get(version, "version");
    if (version != kStepMessageVersion) {
        return core::failed_precondition("step message: version " + std::to_string(version) +
                                         ", this build speaks " + std::to_string(kStepMessageVersion) +
                                         " (ranks run different deepinfer builds)");
    }
    (void)in.get(kind, "kind");
    if (kind > static_cast<std::uint8_t>(StepKind::kControl)) {
        return core::data_loss("step message: unknown kind " + std::to_string(kind));
    }
    m.kind = static_cast<StepKind>(kind);
    (void)in.get(reserved, "reserved");
    if (reserved != 0) return core::data_loss("step message: reserved byte is " + std::to_string(reserved));
    // The checksum, before any length is trusted.
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < 8; ++i) sum |= static_cast<std::uint64_t>(bytes[body + i]) << (8 * i);
    if (sum != fnv1a64(bytes.first(body))) {
        return core::data_loss("step message: checksum mismatch (corrupt message)");
    }
    std::uint32_t n_tokens = 0, n_seqs = 0, n_rows = 0;
    DI_RETURN_IF_ERROR(in.get(m.step, "step"));
    DI_RETURN_IF_ERROR(in.get(n_tokens, "n_tokens"));
    DI_RETURN_IF_ERROR(in.get(n_seqs, "n_sequences"));
    DI_RETURN_IF_ERROR(in.get(n_rows, "n_logits_rows"));
    DI_RETURN_IF_ERROR(in.get_all(m.token_ids, n_tokens, "token_ids"));
    DI_RETURN_IF_ERROR(in.get_all(m.positions, n_tokens, "positions"));
    // Each sequence takes at least 33 bytes: bound the count before reserving.
    if (n_seqs > in.remaining() / 33) return in.truncated("sequences");
    m.sequences.resize(n_seqs);
    for (std::uint32_t i = 0; i < n_seqs; ++i) {
        StepSequence& s = m.sequences[i];
        const std::string f = "sequences[" + std::to_string(i) + "]";
        std::uint32_t n_blocks = 0;
        std::uint8_t flags = 0;
        DI_RETURN_IF_ERROR(in.get(s.seq_id, (f + ".seq_id").c_str()));
        DI_RETURN_IF_ERROR(in.get(s.slot, (f + ".slot").c_str()));
        DI_RETURN_IF_ERROR(in.get(s.start_pos, (f + ".start_pos").c_str()));
        DI_RETURN_IF_ERROR(in.get(s.num_tokens, (f + ".num_tokens").c_str()));
        DI_RETURN_IF_ERROR(in.get(s.token_offset, (f + ".token_offset").c_str()));
        DI_RETURN_IF_ERROR(in.get(flags, (f + ".flags").c_str()));
        if (flags & ~7u)
            return core::data_loss("step message: " + f + ".flags has unknown bits " + std::to_string(flags));
        s.restore_slot_from_block = flags & 1;
        s.reset_slot = flags & 2;
        s.is_padding = flags & 4;
        DI_RETURN_IF_ERROR(in.get(n_blocks, (f + ".n_blocks").c_str()));
        DI_RETURN_IF_ERROR(in.get_all(s.block_table, n_blocks, f + ".block_table"));
    }
    DI_RETURN_IF_ERROR(in.get_all(m.logits_rows, n_rows, "logits_rows"));
    std::uint32_t n_ops = 0;
    DI_RETURN_IF_ERROR(in.get(n_ops, "n_ops"));
    if (n_ops > in.remaining() / 25) return in.truncated("ops");
    m.ops.resize(n_ops);
    for (std::uint32_t i = 0; i < n_ops; ++i) {
        const std::string f = "ops[" + std::to_string(i) + "]";
        std::uint8_t kind_byte = 0;
        DI_RETURN_IF_ERROR(in.get(kind_byte, (f + ".kind").c_str()));
        m.ops[i].kind = static_cast<StepOpKind>(kind_byte);
        DI_RETURN_IF_ERROR(in.get(m.ops[i].a, (f + ".a").c_str()));
        DI_RETURN_IF_ERROR(in.get(m.ops[i].b, (f + ".b").c_str()));
        DI_RETURN_IF_ERROR(in.get(m.ops[i].c, (f + ".c").c_str()));
    }
    if (in.remaining() != 0) {
        return core::data_loss("step message: " + std::to_string(in.remaining()) +
                               " trailing bytes after ops");
    }
    DI_RETURN_IF_ERROR(validate(m));
    return m;
}

} // namespace deepinfer::parallel

// Checks shared by the generation endpoints, before anything runs.

#include "server/server_state.h"

namespace deepinfer::server {

std::optional<ApiError> HttpServer::State::check_request(const CommonRequest& r) const {
    if (r.model != model_name) return unknown_model(r.model);
    if (!r.forced_output.empty() && !config.enable_test_hooks) {
        return invalid_param("deepinfer_test", "test hooks are disabled");
    }
    const OutputConstraint& c = r.constraint;
    if (c.kind == OutputConstraint::Kind::kNone) return std::nullopt;
    core::Status st = backend.check_constraint(c);
    if (st.ok()) return std::nullopt;
    if (st.code() == core::StatusCode::kInvalidArgument)
        return invalid_param(c.field, "'" + c.field + "' cannot be enforced: " + st.message());
    return from_status(st, c.field);
}

} // namespace deepinfer::server

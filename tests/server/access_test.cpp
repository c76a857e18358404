// Authorization header matching, Host header parsing and the default allowed hosts (http_server.h).

#include <gtest/gtest.h>

#include <algorithm>

#include "server/http_server.h"

namespace deepinfer::server {
namespace {

TEST(Access, BearerSchemeIsCaseInsensitiveAndTheKeyExact) {
    EXPECT_TRUE(authorization_matches("Bearer k3y", "k3y"));
    EXPECT_TRUE(authorization_matches("bearer k3y", "k3y"));
    EXPECT_TRUE(authorization_matches("BEARER \tk3y", "k3y"));
    EXPECT_FALSE(authorization_matches("Bearer K3Y", "k3y"));
    EXPECT_FALSE(authorization_matches("Bearer k3y ", "k3y"));
    EXPECT_FALSE(authorization_matches("Bearer k3", "k3y"));
    EXPECT_FALSE(authorization_matches("Bearer k3yy", "k3y"));
    EXPECT_FALSE(authorization_matches("Bearerk3y", "k3y"));
    EXPECT_FALSE(authorization_matches("Basic k3y", "k3y"));
    EXPECT_FALSE(authorization_matches("Bearer ", "k3y"));
    EXPECT_FALSE(authorization_matches("", "k3y"));
    EXPECT_FALSE(authorization_matches("Bearer ", "")); // an empty key never authorizes
}

TEST(Access, HostAllowedIgnoresThePortAndCaseAndAllowsAnyWhenTheListIsEmpty) {
    const std::vector<std::string> loopback = {"localhost", "127.0.0.1", "::1"};
    EXPECT_TRUE(http::host_allowed(loopback, "LOCALHOST:8000"));
    EXPECT_TRUE(http::host_allowed(loopback, "[::1]:80"));
    EXPECT_FALSE(http::host_allowed(loopback, "evil.example:8000"));
    EXPECT_FALSE(http::host_allowed(loopback, ""));
    EXPECT_TRUE(http::host_allowed({}, "evil.example"));
}

TEST(Access, KeyPresentedAsBearerOrAnthropicHeader) {
    const std::string right = "k3y", wrong = "nope";
    EXPECT_TRUE(http::key_presented("Bearer k3y", nullptr, "k3y"));
    EXPECT_TRUE(http::key_presented("", &right, "k3y"));
    EXPECT_TRUE(http::key_presented("Bearer nope", &right, "k3y"));
    EXPECT_FALSE(http::key_presented("Bearer nope", &wrong, "k3y"));
    EXPECT_FALSE(http::key_presented("", nullptr, "k3y"));
    EXPECT_FALSE(http::key_presented("Bearer ", nullptr, "")); // an empty key never authorizes
}

TEST(Access, HostNameOfAHostHeader) {
    EXPECT_EQ(host_name_of("Example.COM:8000"), "example.com");
    EXPECT_EQ(host_name_of("localhost"), "localhost");
    EXPECT_EQ(host_name_of("[::1]:8000"), "::1");
    EXPECT_EQ(host_name_of("[::1]"), "::1");
    EXPECT_EQ(host_name_of("127.0.0.1:1"), "127.0.0.1");
    EXPECT_EQ(host_name_of(""), "");
}

TEST(Access, DefaultAllowedHostsOnlyForAKeylessLoopbackServer) {
    auto loop = default_allowed_hosts("127.0.0.1", "");
    EXPECT_NE(std::find(loop.begin(), loop.end(), "localhost"), loop.end());
    EXPECT_NE(std::find(loop.begin(), loop.end(), "127.0.0.1"), loop.end());
    EXPECT_NE(std::find(loop.begin(), loop.end(), "::1"), loop.end());
    auto other = default_allowed_hosts("127.0.0.2", "");
    EXPECT_NE(std::find(other.begin(), other.end(), "127.0.0.2"), other.end());
    EXPECT_FALSE(default_allowed_hosts("::1", "").empty());
    EXPECT_TRUE(default_allowed_hosts("127.0.0.1", "key").empty()); // the key guards it
    EXPECT_TRUE(default_allowed_hosts("0.0.0.0", "").empty());      // served by any name on purpose
    EXPECT_TRUE(default_allowed_hosts("10.1.2.3", "").empty());
}

} // namespace
} // namespace deepinfer::server

// The EP exports' text form (see ep_exchange.h).
#include "launch/ep_exchange.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ppsim::launch {

namespace {

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

[[noreturn]] void malformed(const std::string& why) {
  throw InputError("expert parallelism: a process published malformed EP exports (" + why +
                       "): are all processes the same ppsim build, run with the same command?",
                   {}, kExitInternal);
}

std::string from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) malformed("odd hex length");
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) malformed("not hex");
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return out;
}

}  // namespace

std::string encode_ep_exports(const EpExports& e) {
  nlohmann::json j;
  j["ok"] = e.ok;
  j["error"] = e.error;
  j["chunks"] = nlohmann::json::array();
  for (const EpExport& x : e.chunks)
    j["chunks"].push_back({{"stage", x.stage}, {"shard", x.shard}, {"bytes", x.bytes}, {"handle", to_hex(x.handle)}});
  return j.dump();
}

EpExports decode_ep_exports(const std::string& text) {
  EpExports e;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    e.ok = j.at("ok").get<bool>();
    e.error = j.at("error").get<std::string>();
    for (const auto& c : j.at("chunks")) {
      EpExport x;
      x.stage = c.at("stage").get<int>();
      x.shard = c.at("shard").get<int>();
      x.bytes = c.at("bytes").get<std::size_t>();
      x.handle = from_hex(c.at("handle").get<std::string>());
      e.chunks.push_back(std::move(x));
    }
  } catch (const nlohmann::json::exception& ex) {
    malformed(ex.what());
  }
  return e;
}

const EpExport* find_ep_export(const EpExports& e, int stage, int shard) {
  for (const EpExport& x : e.chunks)
    if (x.stage == stage && x.shard == shard) return &x;
  return nullptr;
}

}  // namespace ppsim::launch

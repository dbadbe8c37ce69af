#include "core/error.h"

#include <algorithm>
#include <vector>

namespace ppsim {

InputError::InputError(SourceLoc loc, std::string message, std::string suggestion, int exit_code)
    : std::runtime_error(message), loc_(std::move(loc)), message_(std::move(message)),
      suggestion_(std::move(suggestion)), exit_code_(exit_code) {}

std::string InputError::one_line() const {
  std::string out;
  if (!loc_.file.empty()) {
    out += loc_.file;
    if (loc_.line > 0) out += fmt::format(":{}", loc_.line);
    if (loc_.col > 0) out += fmt::format(":{}", loc_.col);
    out += ": ";
  }
  out += message_;
  if (!suggestion_.empty()) out += ", did you mean '" + suggestion_ + "'?";
  return printable(out);
}

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char c) { out += fmt::format("\\x{:02X}", static_cast<unsigned>(c)); };
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      escape(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: lead byte, then 1..3 continuation bytes (no overlong forms, no
    // surrogates, at most U+10FFFF); anything else is escaped one byte at a time.
    std::size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    for (std::size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (ok && len >= 3) {
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      if (c == 0xE0) ok = c1 >= 0xA0;
      if (c == 0xED) ok = c1 < 0xA0;
      if (c == 0xF0) ok = c1 >= 0x90;
      if (c == 0xF4) ok = c1 < 0x90;
    }
    if (!ok) {
      escape(c);
      ++i;
      continue;
    }
    out.append(text, i, len);
    i += len;
  }
  return out;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_d) { best_d = d; best = c; }
  }
  // Suggest only when at most a third of the word (and at least one edit) differs.
  std::size_t limit = std::max<std::size_t>(1, (word.size() + 2) / 3);
  return best_d <= limit ? best : std::string{};
}

void check_failed(const char* cond, const char* file, int line, const std::string& detail) {
  throw InternalError(fmt::format("{}:{}: check '{}' failed: {}", file, line, cond, detail));
}

}  // namespace ppsim

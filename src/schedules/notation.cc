#include "schedules/notation.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "schedules/registry.h"
#include "schedules/validator.h"

namespace ppsim {

std::string schedule_to_csv(const Schedule& s) {
  std::string out;
  for (const auto& rank : s.ranks) {
    for (std::size_t i = 0; i < rank.size(); ++i) {
      if (i) out += ',';
      out += format_action(rank[i]);
    }
    out += '\n';
  }
  return out;
}

Layout parse_layout(const std::string& name) {
  if (name == "auto") return Layout::Auto;
  if (name == "linear") return Layout::Linear;
  if (name == "v" || name == "v-shape") return Layout::VShape;
  if (name == "bidirectional" || name == "two-pipes") return Layout::Bidirectional;
  throw InputError(fmt::format("--layout: unknown layout '{}' (auto, linear, v, bidirectional)", name),
                   closest_match(name, {"auto", "linear", "v", "bidirectional"}), kExitUsage);
}

namespace {

// Stage and micro-batch numbers above this are refused while parsing (the limits in
// registry.h refuse smaller ones with their own message).
constexpr long long kMaxNumber = 100'000'000;

// Parses `{stage}{kind}{mb}` at text[pos..end); returns false on bad syntax, and sets
// `too_large` when a number is over kMaxNumber.
bool parse_op(const std::string& t, Op& op, bool& too_large) {
  std::size_t i = 0;
  auto number = [&](std::int32_t& out) {
    const std::size_t start = i;
    long long v = 0;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
      v = v * 10 + (t[i] - '0');
      if (v > kMaxNumber) {
        too_large = true;
        return false;
      }
      ++i;
    }
    out = static_cast<std::int32_t>(v);
    return i > start;
  };
  if (!number(op.stage) || i >= t.size()) return false;
  switch (t[i]) {
    case 'F': op.kind = OpKind::F; break;
    case 'I': op.kind = OpKind::I; break;
    case 'W': op.kind = OpKind::W; break;
    case 'B': op.kind = OpKind::B; break;
    default: return false;
  }
  ++i;
  if (!number(op.microbatch)) return false;
  return i == t.size();
}

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

Action parse_action(const std::string& token, const SourceLoc& loc) {
  static const std::string kSuffix = ")OVERLAP_F_B";
  auto bad = [&](const std::string& why) {
    return InputError(loc, fmt::format("bad action '{}': {}", token.size() > 60 ? token.substr(0, 57) + "..." : token, why));
  };
  bool too_large = false;
  const std::string kTooLarge = fmt::format("stage and micro-batch numbers must be at most {}", kMaxNumber);
  if (!token.empty() && token.front() == '(') {
    if (token.size() < kSuffix.size() + 2 || token.compare(token.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
      throw bad("an overlapped pair is written (aFm;bBn)OVERLAP_F_B");
    const std::string inner = token.substr(1, token.size() - 1 - kSuffix.size());
    const std::size_t semi = inner.find(';');
    if (semi == std::string::npos) throw bad("an overlapped pair needs two ops separated by ';'");
    Op f, b;
    if (!parse_op(trim(inner.substr(0, semi)), f, too_large) || !parse_op(trim(inner.substr(semi + 1)), b, too_large))
      throw bad(too_large ? kTooLarge : "each op is {stage}{F|I|W|B}{micro-batch}, e.g. 3F7");
    if (f.kind != OpKind::F || (b.kind != OpKind::B && b.kind != OpKind::I))
      throw bad("an overlapped pair is a forward then a backward, e.g. (0F7;7B3)OVERLAP_F_B");
    return Action::pair(f, b);
  }
  Op op;
  if (!parse_op(token, op, too_large)) throw bad(too_large ? kTooLarge : "expected {stage}{F|I|W|B}{micro-batch}, e.g. 3F7");
  return Action::single(op);
}

Schedule import_csv(const std::string& text, const std::string& filename, int pp, int microbatches, Layout layout) {
  Schedule s;
  s.family = "file";
  std::vector<std::vector<std::pair<Action, SourceLoc>>> rows;
  // A UTF-8 byte-order mark (spreadsheets write one) is not part of the first action.
  const bool bom = text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0;
  std::istringstream in(bom ? text.substr(3) : text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    if (trim(line)[0] == '#') continue;
    std::vector<std::pair<Action, SourceLoc>> row;
    std::size_t pos = 0;
    while (pos <= line.size()) {
      std::size_t comma = line.find(',', pos);
      if (comma == std::string::npos) comma = line.size();
      const std::string raw = line.substr(pos, comma - pos);
      std::size_t lead = 0;
      while (lead < raw.size() && std::isspace(static_cast<unsigned char>(raw[lead]))) ++lead;
      const std::string tok = trim(raw);
      const SourceLoc loc{filename, lineno, static_cast<int>(pos + lead + 1)};
      if (!tok.empty() && tok != "None") row.emplace_back(parse_action(tok, loc), loc);
      if (comma == line.size()) break;
      pos = comma + 1;
    }
    rows.push_back(std::move(row));
  }
  const SourceLoc file_loc{filename, 0, 0};
  if (rows.empty()) throw InputError(file_loc, "no ranks: the file has no action lines");
  if (static_cast<long long>(rows.size()) > limits().max_pp)
    throw InputError(file_loc, fmt::format("the file has {} rank lines, over the limit of {} ranks (docs/ROBUSTNESS.md)",
                                           rows.size(), limits().max_pp), {}, kExitLimit);
  const int ranks = static_cast<int>(rows.size());
  if (pp > 0 && pp != ranks)
    throw InputError(file_loc, fmt::format("the file has {} rank lines, but --pp is {}", ranks, pp));
  int max_stage = -1, max_mb = -1;
  for (const auto& row : rows)
    for (const auto& [a, loc] : row)
      for (int i = 0; i < a.size(); ++i) {
        max_stage = std::max(max_stage, a.op(i).stage);
        max_mb = std::max(max_mb, a.op(i).microbatch);
      }
  if (max_stage < 0) throw InputError(file_loc, "the file has no actions");
  const int stages = max_stage + 1;
  if (stages > 64 * ranks)
    throw InputError(file_loc, fmt::format("stage {} is out of range for {} ranks", max_stage, ranks));

  // Which rank each stage's ops are on (first sighting), for layout inference.
  std::vector<int> seen_rank(stages, -1);
  for (int r = 0; r < ranks; ++r)
    for (const auto& [a, loc] : rows[r])
      for (int i = 0; i < a.size(); ++i)
        if (seen_rank[a.op(i).stage] < 0) seen_rank[a.op(i).stage] = r;

  if (layout == Layout::Auto) {
    bool linear = stages % ranks == 0;
    for (int st = 0; linear && st < stages; ++st) linear = seen_rank[st] < 0 || seen_rank[st] == st % ranks;
    bool mirrored = stages == 2 * ranks;
    for (int st = 0; mirrored && st < stages; ++st)
      mirrored = seen_rank[st] < 0 || seen_rank[st] == (st < ranks ? st : 2 * ranks - 1 - st);
    if (linear) layout = Layout::Linear;
    else if (mirrored) {
      // Two pipes when the reverse pipe's first stage (P) starts micro-batch 0 on rank P-1
      // before stage P-1 does: in a V, stage P waits for stage P-1's output.
      int pos_rev = -1, pos_fwd = -1, k = 0;
      for (const auto& [a, loc] : rows[ranks - 1]) {
        for (int i = 0; i < a.size(); ++i) {
          const Op& op = a.op(i);
          if (op.kind == OpKind::F && op.microbatch == 0 && op.stage == ranks && pos_rev < 0) pos_rev = k;
          if (op.kind == OpKind::F && op.microbatch == 0 && op.stage == ranks - 1 && pos_fwd < 0) pos_fwd = k;
        }
        ++k;
      }
      layout = (pos_rev >= 0 && pos_fwd >= 0 && pos_rev < pos_fwd) ? Layout::Bidirectional : Layout::VShape;
    } else {
      throw InputError(file_loc, fmt::format("cannot tell the stage layout of {} stages on {} ranks; pass --layout", stages, ranks));
    }
  }
  switch (layout) {
    case Layout::Linear:
      if (stages % ranks != 0)
        throw InputError(file_loc, fmt::format("linear layout needs a multiple of {} stages, got {}", ranks, stages));
      layout_linear(s, ranks, stages / ranks);
      break;
    case Layout::VShape:
      if (stages != 2 * ranks) throw InputError(file_loc, fmt::format("v layout needs 2P = {} stages, got {}", 2 * ranks, stages));
      layout_v_shape(s, ranks);
      break;
    case Layout::Bidirectional:
      if (stages != 2 * ranks)
        throw InputError(file_loc, fmt::format("bidirectional layout needs 2P = {} stages, got {}", 2 * ranks, stages));
      layout_bidirectional(s, ranks);
      s.parameter_copies = 2;
      break;
    case Layout::Auto: break;
  }
  const int mbp = max_mb + 1;
  if (mbp > limits().max_microbatches)
    throw InputError(file_loc, fmt::format("micro-batch {} is over the limit of {}", max_mb, limits().max_microbatches), {},
                     kExitLimit);
  // Validation keeps a table of (stage, micro-batch) entries. A complete file lists an F and a
  // backward for each, so a table larger than the file's op count means missing ops: refuse it
  // before allocating (a 15-byte file naming stage 63 and micro-batch 10^6 asked for 2 GB).
  // Small tables go on to the validator, which names the first missing op.
  std::size_t n_ops = 0;
  for (const auto& row : rows)
    for (const auto& [a, loc] : row) n_ops += static_cast<std::size_t>(a.size());
  const long long entries = static_cast<long long>(stages) * mbp;
  if (entries > (1LL << 16) && entries > static_cast<long long>(n_ops))
    throw InputError(file_loc, fmt::format("the file lists {} ops, but {} stages x {} micro-batches need {} (one F and "
                                           "one backward each): ops are missing", n_ops, stages, mbp, 2 * entries));
  s.microbatches = mbp * s.num_pipes;
  if (microbatches > 0 && microbatches != s.microbatches)
    throw InputError(file_loc, fmt::format("the file holds {} micro-batches, but --microbatches is {}", s.microbatches,
                                           microbatches));
  // Place actions, checking each op's rank against the layout with the token's location.
  for (int r = 0; r < ranks; ++r) {
    for (const auto& [a, loc] : rows[r]) {
      for (int i = 0; i < a.size(); ++i)
        if (s.stage_rank[a.op(i).stage] != r)
          throw InputError(loc, fmt::format("op {} is on rank {}, but stage {} lives on rank {} in this layout",
                                            format_op(a.op(i)), r, a.op(i).stage, s.stage_rank[a.op(i).stage]));
      s.ranks[r].push_back(a);
    }
  }
  try {
    validate_schedule(s);
  } catch (const InputError& e) {
    throw InputError(SourceLoc{filename, 0, 0}, e.message(), e.suggestion(), e.exit_code());
  }
  return s;
}

Schedule import_csv_file(const std::string& path, int pp, int microbatches, Layout layout) {
  constexpr std::size_t kMaxBytes = 64u << 20;
  const SourceLoc where{path, 0, 0};
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(where, "cannot open the schedule file (it is a directory)", {}, kExitIo);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(where, "cannot open the schedule file", {}, kExitIo);
  // Read at most one byte over the limit, so that a huge file (or an endless pipe) is refused
  // without being read into memory.
  std::string text;
  char buf[1 << 16];
  while (text.size() <= kMaxBytes && in.read(buf, sizeof buf).gcount() > 0) text.append(buf, static_cast<std::size_t>(in.gcount()));
  if (in.bad()) throw InputError(where, "cannot read the schedule file", {}, kExitIo);
  if (text.size() > kMaxBytes) throw InputError(where, "schedule file larger than 64 MiB", {}, kExitLimit);
  return import_csv(text, path, pp, microbatches, layout);
}

}  // namespace ppsim

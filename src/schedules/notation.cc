#include "schedules/notation.h"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/text_file.h"
#include "schedules/registry.h"
#include "schedules/validator.h"

namespace ppsim {

Dialect parse_dialect(const std::string& name) {
  if (name == "auto") return Dialect::Auto;
  if (name == "current" || name == "2.6") return Dialect::Current;
  if (name == "2.5") return Dialect::Torch25;
  throw InputError(fmt::format("--csv-dialect: unknown dialect '{}' (auto, current, 2.5)", name),
                   closest_match(name, {"auto", "current", "2.5"}), kExitUsage);
}

std::string describe_dialect(Dialect d) {
  return d == Dialect::Torch25 ? "torch <= 2.5 (B input-grad where a W is listed, else full backward; BW full backward)"
                               : "torch >= 2.6 (I input-grad, W weight-grad, B full backward)";
}

std::string dialect_key(Dialect d) { return d == Dialect::Torch25 ? "2.5" : "current"; }

namespace {
std::string format_op_in(const Op& op, bool old) {
  if (!old) return format_op(op);
  // torch <= 2.5: the input-grad pass is B, the full backward BW.
  const char* kind = op.kind == OpKind::I ? "B" : op.kind == OpKind::B ? "BW" : op.kind == OpKind::F ? "F" : "W";
  return fmt::format("{}{}{}", op.stage, kind, op.microbatch);
}
}  // namespace

std::vector<std::vector<std::string>> schedule_tokens(const Schedule& s, Dialect dialect) {
  const bool old = dialect == Dialect::Torch25 || (dialect == Dialect::Auto && s.dialect == "2.5");
  std::vector<std::vector<std::string>> out(s.ranks.size());
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const auto& rank = s.ranks[r];
    const std::vector<CommAction>* comm = r < s.comm.size() ? &s.comm[r] : nullptr;
    std::vector<std::string>& toks = out[r];
    std::size_t c = 0;
    auto put_comm_until = [&](std::size_t after) {
      while (comm && c < comm->size() && (*comm)[c].after <= after) toks.push_back(format_comm((*comm)[c++]));
    };
    for (std::size_t i = 0; i < rank.size(); ++i) {
      put_comm_until(i);
      const Action& a = rank[i];
      if (a.overlapped) toks.push_back(fmt::format("({};{})OVERLAP_F_B", format_op_in(a.first, old), format_op_in(a.second, old)));
      else toks.push_back(format_op_in(a.first, old));
    }
    put_comm_until(rank.size());
  }
  return out;
}

std::string schedule_to_csv(const Schedule& s, Dialect dialect) {
  std::string out;
  for (const std::vector<std::string>& toks : schedule_tokens(s, dialect)) {
    for (std::size_t i = 0; i < toks.size(); ++i) out += (i ? "," : "") + toks[i];
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

// The op kinds a token may carry before the dialect is known: BW is torch <= 2.5's full backward.
enum class RawKind : std::uint8_t { F, I, W, B, BW };

// One token: a compute op or a comm action.
struct RawOp {
  bool comm = false;
  RawKind kind = RawKind::F;
  CommKind comm_kind = CommKind::SendF;
  std::int32_t stage = 0;
  std::int32_t microbatch = -1;
};

// Parses `{stage}{kind}{mb}` (or `{stage}UNSHARD` etc.); returns false on bad syntax, and sets
// `too_large` when a number is over kMaxNumber.
bool parse_raw(const std::string& t, RawOp& op, bool& too_large) {
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
  const std::size_t k0 = i;
  while (i < t.size() && (std::isupper(static_cast<unsigned char>(t[i])) || t[i] == '_')) ++i;
  const std::string kind = t.substr(k0, i - k0);
  static const std::pair<const char*, RawKind> kCompute[] = {
      {"F", RawKind::F}, {"I", RawKind::I}, {"W", RawKind::W}, {"B", RawKind::B}, {"BW", RawKind::BW}};
  static const std::pair<const char*, CommKind> kComm[] = {
      {"SEND_F", CommKind::SendF},   {"RECV_F", CommKind::RecvF},   {"SEND_B", CommKind::SendB},
      {"RECV_B", CommKind::RecvB},   {"UNSHARD", CommKind::Unshard}, {"RESHARD", CommKind::Reshard},
      {"REDUCE_GRAD", CommKind::ReduceGrad}};
  bool found = false;
  for (const auto& [name, k] : kCompute)
    if (kind == name) {
      op.comm = false;
      op.kind = k;
      found = true;
    }
  for (const auto& [name, k] : kComm)
    if (kind == name) {
      op.comm = true;
      op.comm_kind = k;
      found = true;
    }
  if (!found) return false;
  if (op.comm && op.comm_kind >= CommKind::Unshard) {  // no micro-batch
    op.microbatch = -1;
    return i == t.size();
  }
  if (!number(op.microbatch)) return false;
  return i == t.size();
}

// A compute op as today's dialect reads it (BW as the full backward).
Op to_op(const RawOp& r) {
  Op op;
  op.stage = r.stage;
  op.microbatch = r.microbatch;
  switch (r.kind) {
    case RawKind::F: op.kind = OpKind::F; break;
    case RawKind::I: op.kind = OpKind::I; break;
    case RawKind::W: op.kind = OpKind::W; break;
    case RawKind::B:
    case RawKind::BW: op.kind = OpKind::B; break;
  }
  return op;
}

// A token read before the dialect is resolved: a compute action (one or two raw ops) or a comm.
struct RawAction {
  RawOp a, b;
  bool overlapped = false;
  SourceLoc loc;
};

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

namespace {

RawAction parse_raw_action(const std::string& token, const SourceLoc& loc) {
  static const std::string kSuffix = ")OVERLAP_F_B";
  auto bad = [&](const std::string& why) {
    return InputError(loc, fmt::format("bad action '{}': {}", token.size() > 60 ? token.substr(0, 57) + "..." : token, why));
  };
  bool too_large = false;
  const std::string kTooLarge = fmt::format("stage and micro-batch numbers must be at most {}", kMaxNumber);
  RawAction out;
  out.loc = loc;
  if (!token.empty() && token.front() == '(') {
    if (token.size() < kSuffix.size() + 2 || token.compare(token.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
      throw bad("an overlapped pair is written (aFm;bBn)OVERLAP_F_B");
    const std::string inner = token.substr(1, token.size() - 1 - kSuffix.size());
    const std::size_t semi = inner.find(';');
    if (semi == std::string::npos) throw bad("an overlapped pair needs two ops separated by ';'");
    RawOp f, b;
    if (!parse_raw(trim(inner.substr(0, semi)), f, too_large) || !parse_raw(trim(inner.substr(semi + 1)), b, too_large) ||
        f.comm || b.comm)
      throw bad(too_large ? kTooLarge : "each op is {stage}{F|I|W|B}{micro-batch}, e.g. 3F7");
    if (f.kind != RawKind::F || (b.kind != RawKind::B && b.kind != RawKind::I && b.kind != RawKind::BW))
      throw bad("an overlapped pair is a forward then a backward, e.g. (0F7;7B3)OVERLAP_F_B");
    out.a = f;
    out.b = b;
    out.overlapped = true;
    return out;
  }
  if (!parse_raw(token, out.a, too_large)) throw bad(too_large ? kTooLarge : "expected {stage}{F|I|W|B}{micro-batch}, e.g. 3F7");
  return out;
}

}  // namespace

Action parse_action(const std::string& token, const SourceLoc& loc) {
  const RawAction r = parse_raw_action(token, loc);
  if (r.a.comm)
    throw InputError(loc, fmt::format("bad action '{}': a communication action where a compute action is expected", token));
  return r.overlapped ? Action::pair(to_op(r.a), to_op(r.b)) : Action::single(to_op(r.a));
}

namespace {

using Rows = std::vector<std::vector<std::pair<Action, SourceLoc>>>;
using CommRows = std::vector<std::vector<std::pair<CommAction, SourceLoc>>>;
using BackwardMarks = std::map<std::pair<int, int>, int>;  // (stage, mb) -> bit 1: B listed, bit 2: W listed

// The file's lines as raw actions, one row per rank line (blank and '#' lines skipped).
std::vector<std::vector<RawAction>> read_raw_rows(const std::string& text, const std::string& filename) {
  std::vector<std::vector<RawAction>> raw_rows;
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
    std::vector<RawAction> row;
    std::size_t pos = 0;
    while (pos <= line.size()) {
      std::size_t comma = line.find(',', pos);
      if (comma == std::string::npos) comma = line.size();
      const std::string raw = line.substr(pos, comma - pos);
      std::size_t lead = 0;
      while (lead < raw.size() && std::isspace(static_cast<unsigned char>(raw[lead]))) ++lead;
      const std::string tok = trim(raw);
      const SourceLoc loc{filename, lineno, static_cast<int>(pos + lead + 1)};
      if (!tok.empty() && tok != "None") row.push_back(parse_raw_action(tok, loc));
      if (comma == line.size()) break;
      pos = comma + 1;
    }
    raw_rows.push_back(std::move(row));
  }
  return raw_rows;
}

// The dialect: BW or a B beside a W of the same (stage, micro-batch) is torch <= 2.5's; I is
// today's. Both in one file is refused at the second kind's first token.
Dialect resolve_dialect(const std::vector<std::vector<RawAction>>& raw_rows, Dialect dialect, BackwardMarks& marks) {
  const RawAction* first_bw = nullptr;
  const RawAction* first_i = nullptr;
  for (const auto& row : raw_rows)
    for (const auto& ra : row)
      for (const RawOp* op : {&ra.a, ra.overlapped ? &ra.b : nullptr}) {
        if (!op || op->comm) continue;
        if (op->kind == RawKind::BW && !first_bw) first_bw = &ra;
        if (op->kind == RawKind::I && !first_i) first_i = &ra;
        if (op->kind == RawKind::B) marks[{op->stage, op->microbatch}] |= 1;
        if (op->kind == RawKind::W) marks[{op->stage, op->microbatch}] |= 2;
      }
  bool b_beside_w = false;
  for (const auto& [key, m] : marks) b_beside_w |= m == 3;
  if (dialect == Dialect::Auto) {
    if (first_bw && first_i)
      throw InputError(first_i->loc, "this file mixes torch <= 2.5's BW (full backward) with today's I (input-grad); "
                                     "pass --csv-dialect to say which it is");
    dialect = (first_bw || (b_beside_w && !first_i)) ? Dialect::Torch25 : Dialect::Current;
  }
  if (dialect == Dialect::Torch25 && first_i)
    throw InputError(first_i->loc, "I is not an action of torch <= 2.5's dialect (its input-grad is B)",
                     "--csv-dialect current");
  if (dialect == Dialect::Current && first_bw)
    throw InputError(first_bw->loc, "BW is torch <= 2.5's full backward, not an action of today's dialect",
                     "--csv-dialect 2.5");
  return dialect;
}

// Raw actions to compute actions (in the dialect) and comm actions, row by row.
void resolve_rows(const std::vector<std::vector<RawAction>>& raw_rows, Dialect dialect, BackwardMarks& marks,
                  Rows& rows, CommRows& comm_rows) {
  auto resolve = [&](const RawOp& r) {
    Op op = to_op(r);
    if (dialect == Dialect::Torch25 && r.kind == RawKind::B && marks[{r.stage, r.microbatch}] == 3) op.kind = OpKind::I;
    return op;
  };
  for (const auto& row : raw_rows) {
    rows.emplace_back();
    comm_rows.emplace_back();
    for (const auto& ra : row) {
      if (ra.a.comm) {
        CommAction c;
        c.kind = ra.a.comm_kind;
        c.stage = ra.a.stage;
        c.microbatch = ra.a.microbatch;
        c.after = rows.back().size();
        comm_rows.back().emplace_back(c, ra.loc);
        continue;
      }
      rows.back().emplace_back(ra.overlapped ? Action::pair(resolve(ra.a), resolve(ra.b)) : Action::single(resolve(ra.a)),
                               ra.loc);
    }
  }
}

// The file's ranks, stages and largest micro-batch, each checked against the limits and --pp.
struct Extent {
  int ranks = 0, stages = 0, max_mb = -1;
};

Extent file_extent(const Rows& rows, const SourceLoc& file_loc, int pp) {
  Extent x;
  if (rows.empty()) throw InputError(file_loc, "no ranks: the file has no action lines");
  if (static_cast<long long>(rows.size()) > limits().max_pp)
    throw InputError(file_loc, fmt::format("the file has {} rank lines, over the limit of {} ranks (docs/ROBUSTNESS.md)",
                                           rows.size(), limits().max_pp), {}, kExitLimit);
  x.ranks = static_cast<int>(rows.size());
  if (pp > 0 && pp != x.ranks)
    throw InputError(file_loc, fmt::format("the file has {} rank lines, but --pp is {}", x.ranks, pp));
  int max_stage = -1;
  for (const auto& row : rows)
    for (const auto& [a, loc] : row)
      for (int i = 0; i < a.size(); ++i) {
        max_stage = std::max(max_stage, a.op(i).stage);
        x.max_mb = std::max(x.max_mb, a.op(i).microbatch);
      }
  if (max_stage < 0) throw InputError(file_loc, "the file has no actions");
  x.stages = max_stage + 1;
  if (x.stages > 64 * x.ranks)
    throw InputError(file_loc, fmt::format("stage {} is out of range for {} ranks", max_stage, x.ranks));
  return x;
}

// The layout the ops imply: linear when every stage st sits on rank st % P, else with 2P stages
// mirrored a V or two pipes.
Layout infer_layout(const Rows& rows, const Extent& x, const SourceLoc& file_loc) {
  const int ranks = x.ranks, stages = x.stages;
  // Which rank each stage's ops are on (first sighting).
  std::vector<int> seen_rank(stages, -1);
  for (int r = 0; r < ranks; ++r)
    for (const auto& [a, loc] : rows[r])
      for (int i = 0; i < a.size(); ++i)
        if (seen_rank[a.op(i).stage] < 0) seen_rank[a.op(i).stage] = r;
  bool linear = stages % ranks == 0;
  for (int st = 0; linear && st < stages; ++st) linear = seen_rank[st] < 0 || seen_rank[st] == st % ranks;
  bool mirrored = stages == 2 * ranks;
  for (int st = 0; mirrored && st < stages; ++st)
    mirrored = seen_rank[st] < 0 || seen_rank[st] == (st < ranks ? st : 2 * ranks - 1 - st);
  if (linear) return Layout::Linear;
  if (!mirrored)
    throw InputError(
        file_loc, fmt::format("cannot tell the stage layout of {} stages on {} ranks; pass --layout", stages, ranks));
  // Two pipes when the reverse pipe's first stage (P) starts micro-batch 0 on rank P-1 before
  // stage P-1 does: in a V, stage P waits for stage P-1's output.
  int pos_rev = -1, pos_fwd = -1, k = 0;
  for (const auto& [a, loc] : rows[ranks - 1]) {
    for (int i = 0; i < a.size(); ++i) {
      const Op& op = a.op(i);
      if (op.kind == OpKind::F && op.microbatch == 0 && op.stage == ranks && pos_rev < 0) pos_rev = k;
      if (op.kind == OpKind::F && op.microbatch == 0 && op.stage == ranks - 1 && pos_fwd < 0) pos_fwd = k;
    }
    ++k;
  }
  return (pos_rev >= 0 && pos_fwd >= 0 && pos_rev < pos_fwd) ? Layout::Bidirectional : Layout::VShape;
}

void apply_layout(Schedule& s, Layout layout, const Extent& x, const SourceLoc& file_loc) {
  const int ranks = x.ranks, stages = x.stages;
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
}

// The micro-batch count, checked against the limits, the ops listed and --microbatches.
void set_microbatches(Schedule& s, const Rows& rows, const Extent& x, int microbatches, const SourceLoc& file_loc) {
  const int mbp = x.max_mb + 1;
  if (mbp > limits().max_microbatches)
    throw InputError(file_loc,
                     fmt::format("micro-batch {} is over the limit of {}", x.max_mb, limits().max_microbatches), {},
                     kExitLimit);
  // Validation keeps a table of (stage, micro-batch) entries. A complete file lists an F and a
  // backward for each, so a table larger than the file's op count means missing ops: refuse it
  // before allocating (a 15-byte file naming stage 63 and micro-batch 10^6 asked for 2 GB).
  // Small tables go on to the validator, which names the first missing op.
  std::size_t n_ops = 0;
  for (const auto& row : rows)
    for (const auto& [a, loc] : row) n_ops += static_cast<std::size_t>(a.size());
  const long long entries = static_cast<long long>(x.stages) * mbp;
  if (entries > (1LL << 16) && entries > static_cast<long long>(n_ops))
    throw InputError(file_loc, fmt::format("the file lists {} ops, but {} stages x {} micro-batches need {} (one F and "
                                           "one backward each): ops are missing",
                                           n_ops, x.stages, mbp, 2 * entries));
  s.microbatches = mbp * s.num_pipes;
  if (microbatches > 0 && microbatches != s.microbatches)
    throw InputError(file_loc, fmt::format("the file holds {} micro-batches, but --microbatches is {}", s.microbatches,
                                           microbatches));
}

// Places actions, checking each op's rank against the layout with the token's location.
void place_actions(Schedule& s, const Rows& rows) {
  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    for (const auto& [a, loc] : rows[r]) {
      for (int i = 0; i < a.size(); ++i)
        if (s.stage_rank[a.op(i).stage] != r)
          throw InputError(loc, fmt::format("op {} is on rank {}, but stage {} lives on rank {} in this layout",
                                            format_op(a.op(i)), r, a.op(i).stage, s.stage_rank[a.op(i).stage]));
      s.ranks[r].push_back(a);
    }
  }
}

// Comm actions: on the rank of their stage, toward a neighbour stage that exists, once each.
void place_comms(Schedule& s, const CommRows& comm_rows, const Extent& x) {
  const int ranks = x.ranks, stages = x.stages, mbp = x.max_mb + 1;
  bool any = false;
  for (const auto& row : comm_rows) any |= !row.empty();
  if (any) s.comm.assign(static_cast<std::size_t>(ranks), {});
  std::map<std::tuple<int, int, int>, SourceLoc> seen;
  for (int r = 0; r < ranks && any; ++r)
    for (const auto& [c, loc] : comm_rows[r]) {
      const std::string tok = format_comm(c);
      if (c.stage >= stages)
        throw InputError(
            loc, fmt::format("{} names stage {}, but the file's ops use stages 0..{}", tok, c.stage, stages - 1));
      if (s.stage_rank[c.stage] != r)
        throw InputError(loc, fmt::format("{} is on rank {}, but stage {} lives on rank {} in this layout", tok, r,
                                          c.stage, s.stage_rank[c.stage]));
      if (c.microbatch >= mbp)
        throw InputError(
            loc, fmt::format("{} names micro-batch {}, but the file's ops use 0..{}", tok, c.microbatch, mbp - 1));
      const bool no_next = s.is_last_stage(c.stage), no_prev = s.is_first_stage(c.stage);
      if ((c.kind == CommKind::SendF && no_next) || (c.kind == CommKind::RecvB && no_next))
        throw InputError(loc, fmt::format("{}: stage {} is the last of its pipe, it has no next stage", tok, c.stage));
      if ((c.kind == CommKind::RecvF && no_prev) || (c.kind == CommKind::SendB && no_prev))
        throw InputError(loc,
                         fmt::format("{}: stage {} is the first of its pipe, it has no previous stage", tok, c.stage));
      auto [it, fresh] = seen.emplace(std::make_tuple(static_cast<int>(c.kind), c.stage, c.microbatch), loc);
      if (!fresh && c.microbatch >= 0)
        throw InputError(
            loc, fmt::format("{} is listed twice (first at line {}, column {})", tok, it->second.line, it->second.col));
      s.comm[r].push_back(c);
    }
}

// What the validator would refuse without a place, refused at the action's line:col: an op listed
// twice, and a stage's micro-batch with both a full backward and a split one.
void check_listed_once(const Rows& rows) {
  std::map<std::tuple<int, int, int>, SourceLoc> seen;                // (kind, stage, micro-batch)
  std::map<std::pair<int, int>, std::pair<int, SourceLoc>> backward;  // (stage, mb) -> 1: B, 2: I or W
  for (const auto& row : rows)
    for (const auto& [a, loc] : row)
      for (int i = 0; i < a.size(); ++i) {
        const Op op = a.op(i);
        const auto [it, fresh] = seen.emplace(std::tuple{static_cast<int>(op.kind), op.stage, op.microbatch}, loc);
        if (!fresh)
          throw InputError(
              loc, fmt::format("op {} appears twice (first at {}:{})", format_op(op), it->second.line, it->second.col));
        if (op.kind == OpKind::F) continue;
        const int kind = op.kind == OpKind::B ? 1 : 2;
        auto [b, first] = backward.emplace(std::pair{op.stage, op.microbatch}, std::pair{kind, loc});
        if (!first && b->second.first != kind)
          throw InputError(loc, fmt::format("stage {} micro-batch {} has both a full backward {} and a split one "
                                            "(the other at {}:{})",
                                            op.stage, op.microbatch, format_op(Op{OpKind::B, op.stage, op.microbatch}),
                                            b->second.second.line, b->second.second.col));
      }
}

}  // namespace

Schedule import_csv(const std::string& text, const std::string& filename, int pp, int microbatches, Layout layout,
                    Dialect dialect, bool keep_comm) {
  Schedule s;
  s.family = "file";
  const std::vector<std::vector<RawAction>> raw_rows = read_raw_rows(text, filename);
  BackwardMarks marks;
  dialect = resolve_dialect(raw_rows, dialect, marks);
  s.dialect = dialect_key(dialect);
  Rows rows;
  CommRows comm_rows;
  resolve_rows(raw_rows, dialect, marks, rows, comm_rows);
  const SourceLoc file_loc{filename, 0, 0};
  const Extent x = file_extent(rows, file_loc, pp);
  if (layout == Layout::Auto) layout = infer_layout(rows, x, file_loc);
  apply_layout(s, layout, x, file_loc);
  set_microbatches(s, rows, x, microbatches, file_loc);
  check_listed_once(rows);
  place_actions(s, rows);
  if (keep_comm) place_comms(s, comm_rows, x);
  try {
    validate_schedule(s);
  } catch (const InputError& e) {
    throw InputError(SourceLoc{filename, 0, 0}, e.message(), e.suggestion(), e.exit_code());
  }
  return s;
}

Schedule import_csv_file(const std::string& path, int pp, int microbatches, Layout layout, Dialect dialect,
                         bool keep_comm) {
  constexpr std::size_t kMaxBytes = 64u << 20;
  const SourceLoc where{path, 0, 0};
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(where, "cannot open the schedule file (it is a directory)", {}, kExitIo);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(where, "cannot open the schedule file", {}, kExitIo);
  std::string text;
  const bool whole = read_capped(in, kMaxBytes, text);
  if (in.bad()) throw InputError(where, "cannot read the schedule file", {}, kExitIo);
  if (!whole) throw InputError(where, "schedule file larger than 64 MiB", {}, kExitLimit);
  return import_csv(text, path, pp, microbatches, layout, dialect, keep_comm);
}

}  // namespace ppsim

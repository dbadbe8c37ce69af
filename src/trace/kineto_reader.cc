// The Kineto trace reader (kineto_reader.h): a JSON scanner (Scanner below) over zlib, driving a
// SAX handler with nlohmann-json's interface.
//
// Event shapes it keeps (Kineto's Chrome trace as torch.profiler writes it):
//   {"ph":"X","cat":"user_annotation"|"cpu_op"|"python_function","name":..,"pid":..,"tid":..,"ts":us,"dur":us}
//   {"ph":"X","cat":"cuda_runtime"|"cuda_driver","ts":..,"args":{"correlation":N}}        launches
//   {"ph":"X","cat":"kernel"|"gpu_memcpy"|"gpu_memset","args":{"correlation":N,"stream":S,"device":D}}
//   {"ph":"s"|"f","cat":"ac2g","id":N,"pid":..,"tid":..,"ts":..}                            flows
//   {"ph":"s"|"f","cat":"fwdbwd","id":N,...}                 forward op -> its backward op (autograd)
// Older traces name the categories Kernel, Memcpy, Memset, Runtime (compared without case).
// Timestamps are microseconds, integers or with up to 3 decimals (ns resolution), numbers or
// strings, since the epoch (~1.7e15 us, older Kineto) or since baseTimeNanoseconds: they are read
// from their text into exact int64 ns and kept relative to the earliest event (origin_ns).
#include "trace/kineto_reader.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <istream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <streambuf>
#include <string_view>

#include "core/error.h"

namespace ppsim::trace {

namespace {

// |ts| at most 4e15 us (the year 2096 as epoch us): differences of two stay inside 64-bit ns.
constexpr std::int64_t kMaxAbsUs = 4'000'000'000'000'000;
constexpr Time kMaxDurNs = 86'400'000'000'000;  // a day: longer is a broken trace

// Microseconds as written ("1712195495406752.8", "12", "-3.25", "1.7e12") to exact ns, the 4th
// decimal rounding. False for text that is no number or a |value| beyond kMaxAbsUs.
bool us_text_to_ns(std::string_view s, Time& out) {
  std::size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  std::int64_t ip = 0, frac = 0;
  int nd = 0, fd = 0;
  bool up = false;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (nd < 18) ip = ip * 10 + (s[i] - '0');
    ++nd, ++i;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (fd < 3)
        frac = frac * 10 + (s[i] - '0');
      else if (fd == 3)
        up = s[i] >= '5';
      ++fd, ++i;
    }
  }
  if (i != s.size() || nd > 17) {  // an exponent, or very many digits: through double
    const std::string text(s);
    char* end = nullptr;
    const double d = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !std::isfinite(d) || std::fabs(d) > static_cast<double>(kMaxAbsUs))
      return false;
    out = static_cast<Time>(std::llround(d * 1e3));
    return true;
  }
  if (nd == 0 && fd == 0) return false;
  if (ip > kMaxAbsUs) return false;
  for (int k = std::min(fd, 3); k < 3; ++k) frac *= 10;
  const Time ns = ip * 1000 + frac + (up ? 1 : 0);
  out = neg ? -ns : ns;
  return true;
}

using json = nlohmann::json;

// Collects the fields of one event object at a time. Depths: the event object is at
// `event_depth_`, its fields one below, args' fields two below; deeper values are skipped.
class Handler : public nlohmann::json_sax<json> {
 public:
  explicit Handler(KinetoTrace& out) : out_(out) {}
  std::string error;
  std::size_t error_position = 0;

  bool null() override { return value_done(); }
  bool boolean(bool) override { return value_done(); }
  bool number_integer(number_integer_t v) override { return number(v, nullptr); }
  bool number_unsigned(number_unsigned_t v) override {
    return number(v > static_cast<number_unsigned_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(v), nullptr);
  }
  bool number_float(number_float_t v, const string_t& text) override {
    const double c = std::clamp<double>(v, -9e18, 9e18);
    return number(std::isfinite(c) ? static_cast<std::int64_t>(std::llround(c)) : 0, &text);
  }
  bool string(string_t& v) override {
    if (in_event_field()) {
      switch (field_) {
        case Field::ph:
          ph_ = v.empty() ? ' ' : v[0];
          break;
        case Field::cat:
          cat_ = v;
          break;
        case Field::name:
          name_.swap(v);
          break;
        case Field::pid:
          pid_ = v;
          pid_num_ = -1;
          break;
        case Field::tid:
          tid_ = v;
          tid_num_ = -1;
          break;
        case Field::ts:
          has_ts_ = true;
          read_us(0, &v, ts_, ts_ok_, ts_text_);
          break;
        case Field::dur:
          read_us(0, &v, dur_, dur_ok_, dur_text_);
          break;
        case Field::id:
          id_ = static_cast<std::int64_t>(std::hash<std::string>{}(v) >> 1);
          has_id_ = true;
          break;
        default:
          break;
      }
    }
    if (depth_ == 1 && top_key_ == "baseTimeNanoseconds") base_from_text(v);
    return value_done();
  }
  bool binary(binary_t&) override { return value_done(); }
  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == event_depth_ && in_events_)
      begin_event();
    else if (in_event_ && depth_ == event_depth_ + 1 && field_ == Field::args)
      in_args_ = true;
    return true;
  }
  bool end_object() override {
    if (in_args_ && depth_ == event_depth_ + 1) in_args_ = false;
    if (in_event_ && depth_ == event_depth_) end_event();
    --depth_;
    return !bad_event_;  // stops the parse: the event is reported, not rounded
  }
  bool start_array(std::size_t) override {
    ++depth_;
    // The event list: the top-level array, or the array under the top-level key "traceEvents".
    if ((depth_ == 1) || (depth_ == 2 && top_key_ == "traceEvents")) {
      in_events_ = true;
      event_depth_ = depth_ + 1;
      saw_events_ = true;
    }
    return true;
  }
  bool end_array() override {
    if (in_events_ && depth_ == event_depth_ - 1) in_events_ = false;
    --depth_;
    return value_done();
  }
  bool key(string_t& k) override {
    if (depth_ == 1) top_key_ = k;
    sms_key_ = depth_ == 3 && top_key_ == "deviceProperties" && k == "numSms";
    dist_key_ = depth_ == 2 && top_key_ == "distributedInfo" ? (k == "rank" ? 1 : k == "world_size" ? 2 : 0) : 0;
    if (in_event_ && depth_ == event_depth_)
      field_ = field_of(k, false);
    else if (in_args_ && depth_ == event_depth_ + 1)
      field_ = field_of(k, true);
    else
      field_ = Field::none;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    error = ex.what();
    error_position = position;
    return false;
  }
  bool saw_events() const { return saw_events_; }
  bool bad_event() const { return bad_event_; }

 private:
  enum class Field {
    none,
    ph,
    cat,
    name,
    pid,
    tid,
    ts,
    dur,
    id,
    args,
    correlation,
    stream,
    device,
    grid,
    seq,
    fwd_thread
  };

  // Keys are compared by length first: most keys in a trace (args of kernels) are none of these.
  // Equality with a literal: the length is known, so no strlen per key.
  template <std::size_t N>
  static bool eq(const std::string& k, const char (&lit)[N]) {
    return k.size() == N - 1 && std::memcmp(k.data(), lit, N - 1) == 0;
  }
  static Field field_of(const std::string& k, bool args) {
    switch (k.size()) {
      case 2:
        if (args) return Field::none;
        if (eq(k, "ph")) return Field::ph;
        if (eq(k, "ts")) return Field::ts;
        if (eq(k, "id")) return Field::id;
        return Field::none;
      case 3:
        if (args) return Field::none;
        if (eq(k, "cat")) return Field::cat;
        if (eq(k, "pid")) return Field::pid;
        if (eq(k, "tid")) return Field::tid;
        if (eq(k, "dur")) return Field::dur;
        return Field::none;
      case 4:
        if (args) return eq(k, "grid") ? Field::grid : Field::none;
        if (eq(k, "name")) return Field::name;
        if (eq(k, "args")) return Field::args;
        return Field::none;
      case 6:
        return args && eq(k, "stream") ? Field::stream : args && eq(k, "device") ? Field::device : Field::none;
      case 11:
        return args && eq(k, "correlation") ? Field::correlation : Field::none;
      case 13:
        return args && eq(k, "Fwd thread id") ? Field::fwd_thread : Field::none;
      case 15:
        return args && eq(k, "Sequence number") ? Field::seq : Field::none;
      default:
        return Field::none;
    }
  }

  bool in_event_field() const {
    return in_event_ && ((depth_ == event_depth_ && !in_args_) || (in_args_ && depth_ == event_depth_ + 1));
  }
  // Values are consumed by the field their key named; the next key names the next one.
  static bool value_done() { return true; }
  // A time in microseconds (ts, dur) as written: its text (`text`), else the integer `i`; into
  // `ns`, whether it is in range (`ok`), and, for the message when not, the value as written.
  static void read_us(std::int64_t i, const std::string* text, Time& ns, bool& ok, std::string& as_written) {
    if (text != nullptr) {
      ok = us_text_to_ns(*text, ns);
      as_written = *text;
    } else {
      ok = i >= -kMaxAbsUs && i <= kMaxAbsUs;
      ns = ok ? i * 1000 : 0;
      if (!ok) as_written = std::to_string(i);
    }
  }
  void base_from_text(const std::string& v) {
    char* end = nullptr;
    const long long b = std::strtoll(v.c_str(), &end, 10);
    if (end != v.c_str()) out_.base_time_ns = b;
  }
  bool number(std::int64_t i, const std::string* text) {
    if (depth_ == 1 && top_key_ == "baseTimeNanoseconds") out_.base_time_ns = i;
    if (dist_key_ != 0 && depth_ == 2) {
      (dist_key_ == 1 ? out_.rank : out_.world_size) = static_cast<int>(std::clamp<std::int64_t>(i, -1, 1 << 30));
      dist_key_ = 0;
    }
    if (sms_key_ && depth_ == 3) {
      if (out_.sms == 0) out_.sms = static_cast<int>(i);
      sms_key_ = false;
    }
    if (in_args_ && field_ == Field::grid && depth_ == event_depth_ + 2)
      blocks_ =
          std::min<std::int64_t>(std::max<std::int64_t>(1, blocks_) * std::clamp<std::int64_t>(i, 1, 1 << 20), 1 << 30);
    if (in_event_field()) {
      switch (field_) {
        case Field::ts:
          has_ts_ = true;
          read_us(i, text, ts_, ts_ok_, ts_text_);
          break;
        case Field::dur:
          read_us(i, text, dur_, dur_ok_, dur_text_);
          break;
        case Field::pid:
          pid_num_ = i;
          pid_.clear();
          break;
        case Field::tid:
          tid_num_ = i;
          tid_.clear();
          break;
        case Field::seq:
          seq_ = i;
          break;
        case Field::fwd_thread:  // newer torch writes 0 on forward ops; a backward op names its forward thread
          fwd_thread_ = i > 0;
          break;
        case Field::id:
          id_ = i;
          has_id_ = true;
          break;
        case Field::correlation:
          correlation_ = i;
          break;
        case Field::stream:
          stream_ = i;
          break;
        case Field::device:
          device_ = i;
          break;
        default:
          break;
      }
    }
    return value_done();
  }

  void begin_event() {
    in_event_ = true;
    in_args_ = false;
    field_ = Field::none;
    ph_ = ' ';
    cat_.clear();
    name_.clear();
    pid_.clear();
    tid_.clear();
    pid_num_ = tid_num_ = -1;
    ts_ = dur_ = 0;
    has_ts_ = has_id_ = fwd_thread_ = false;
    ts_ok_ = dur_ok_ = true;
    seq_ = -1;
    id_ = 0;
    correlation_ = stream_ = device_ = -1;
    blocks_ = 0;
  }

  int intern(std::unordered_map<std::string, int>& map, std::vector<std::string>& list, const std::string& s) {
    auto it = map.find(s);
    if (it != map.end()) return it->second;
    const int id = static_cast<int>(list.size());
    list.push_back(s);
    map.emplace(s, id);
    return id;
  }
  // Threads by (pid, tid): numbers through a map of pairs (no string per event), else by text.
  int thread() {
    if (pid_.empty() && tid_.empty()) {
      const auto key = std::make_pair(pid_num_, tid_num_);
      if (auto it = num_thread_ids_.find(key); it != num_thread_ids_.end()) return it->second;
      const int id = add_thread(std::to_string(pid_num_) + "/" + std::to_string(tid_num_), static_cast<int>(pid_num_));
      num_thread_ids_.emplace(key, id);
      return id;
    }
    thread_key_ =
        (pid_.empty() ? std::to_string(pid_num_) : pid_) + "/" + (tid_.empty() ? std::to_string(tid_num_) : tid_);
    if (auto it = thread_ids_.find(thread_key_); it != thread_ids_.end()) return it->second;
    const int pid =
        pid_.empty() ? static_cast<int>(pid_num_) : static_cast<int>(std::hash<std::string>{}(pid_)&0x3fffffff);
    const int id = add_thread(thread_key_, pid);
    thread_ids_.emplace(thread_key_, id);
    return id;
  }
  int add_thread(std::string key, int pid) {
    out_.threads.push_back(std::move(key));
    out_.thread_pid.push_back(pid);
    return static_cast<int>(out_.threads.size()) - 1;
  }
  struct PairHash {
    std::size_t operator()(const std::pair<std::int64_t, std::int64_t>& p) const {
      return std::hash<std::int64_t>{}(p.first * 1000003 ^ p.second);
    }
  };

  static bool cat_is(const std::string& c, std::initializer_list<std::string_view> names) {
    for (const std::string_view n : names) {
      const std::size_t len = n.size();
      if (c.size() != len) continue;
      bool eq = true;
      for (std::size_t i = 0; i < len && eq; ++i)
        eq = std::tolower(static_cast<unsigned char>(c[i])) == static_cast<unsigned char>(n[i]);
      if (eq) return true;
    }
    return false;
  }

  void end_event() {
    in_event_ = false;
    in_args_ = false;
    ++out_.events;
    if (!has_ts_) return;
    // Absolute times up to 4e15 us (epoch us until 2096) and durations up to a day keep every ns
    // sum and difference inside 64 bits. Anything beyond is a broken trace, not a time to round.
    if (!ts_ok_) {
      error = fmt::format("event {} ('{}'): ts '{}' us is out of range or not a number (|ts| at most 4e15 us)",
                          out_.events, name_.substr(0, 60), ts_text_.substr(0, 40));
      bad_event_ = true;
      return;
    }
    if (!dur_ok_ || dur_ > kMaxDurNs) {
      error = fmt::format("event {} ('{}'): dur '{}' us is out of range (at most a day, 8.64e10 us)", out_.events,
                          name_.substr(0, 60),
                          dur_ok_ ? fmt::format("{:.3f}", static_cast<double>(dur_) / 1e3) : dur_text_.substr(0, 40));
      bad_event_ = true;
      return;
    }
    if (ph_ == 'X' || ph_ == 's' || ph_ == 'f') min_ts_ = std::min(min_ts_, ts_);
    if (ph_ == 'X') {
      if (cat_is(cat_, {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})) {
        GpuEvent g;
        g.ts = ts_;
        g.dur = std::max<Time>(0, dur_);
        g.correlation = correlation_;
        g.device = static_cast<int>(device_ >= 0 ? device_ : std::max<std::int64_t>(0, pid_num_));
        g.stream = stream_ >= 0 ? stream_ : tid_num_;
        g.thread = thread();
        g.name = intern(name_ids_, out_.names, name_);
        g.blocks = static_cast<int>(std::min<std::int64_t>(blocks_, 1 << 30));
        gpu_time_ += static_cast<double>(g.dur);
        if (gpu_time_ > 1e18) {  // keeps every sum of GPU time inside 64-bit ns
          error = fmt::format("event {}: the GPU events' durations sum to over 1e18 ns (31 years): a broken trace",
                              out_.events);
          bad_event_ = true;
          return;
        }
        out_.gpu.push_back(g);
      } else if (cat_is(cat_, {"cuda_runtime", "cuda_driver", "runtime"})) {
        if (correlation_ >= 0) out_.launches.push_back(Launch{ts_, thread(), correlation_});
      } else if (cat_is(cat_, {"user_annotation", "cpu_op", "operator", "python_function"})) {
        CpuRange r;
        r.ts = ts_;
        r.dur = std::max<Time>(0, dur_);
        r.thread = thread();
        r.name = intern(name_ids_, out_.names, name_);
        r.seq = seq_ >= 0 && seq_ <= INT32_MAX ? static_cast<int>(seq_) : -1;
        r.kind = cat_[0] == 'u' || cat_[0] == 'U'   ? RangeKind::user
                 : cat_[0] == 'p' || cat_[0] == 'P' ? RangeKind::python
                                                    : RangeKind::op;
        r.backward = fwd_thread_;
        out_.ranges.push_back(r);
      }
    } else if ((ph_ == 's' || ph_ == 'f') && has_id_) {
      if (cat_is(cat_, {"ac2g", "async_gpu"}))
        out_.flows.push_back(FlowPoint{id_, ts_, thread(), ph_ == 's'});
      else if (cat_is(cat_, {"fwdbwd"}))
        out_.fwdbwd.push_back(FlowPoint{id_, ts_, thread(), ph_ == 's'});
    }
  }

  KinetoTrace& out_;
  int depth_ = 0;
  int event_depth_ = -1;
  bool in_events_ = false, in_event_ = false, in_args_ = false, saw_events_ = false;
  std::string top_key_;
  Field field_ = Field::none;
  char ph_ = ' ';
  std::string cat_, name_, pid_, tid_, thread_key_;
  std::int64_t pid_num_ = -1, tid_num_ = -1, id_ = 0, correlation_ = -1, stream_ = -1, device_ = -1, seq_ = -1;
  Time ts_ = 0, dur_ = 0;
  std::string ts_text_, dur_text_;
  bool has_ts_ = false, has_id_ = false, sms_key_ = false, bad_event_ = false, fwd_thread_ = false;
  bool ts_ok_ = true, dur_ok_ = true;
  int dist_key_ = 0;
  std::int64_t blocks_ = 0;
  double gpu_time_ = 0;
  std::unordered_map<std::string, int> name_ids_, thread_ids_;
  std::unordered_map<std::pair<std::int64_t, std::int64_t>, int, PairHash> num_thread_ids_;

 public:
  Time min_ts_ = std::numeric_limits<Time>::max();
};

// The bytes of the trace: a gzip or plain file through zlib (gzread passes plain files through),
// or text in memory.
struct Source {
  gzFile f = nullptr;
  const char* text = nullptr;
  std::size_t text_size = 0;
  bool text_given = false;
  std::vector<char> buf;
  std::string error;  // zlib's, when it reports one (a truncated .gz)
  std::uint64_t bytes = 0;
  // The next chunk in [p, e); false at the end (or on a read error, kept in `error`).
  bool next(const char*& p, const char*& e) {
    if (f == nullptr) {
      if (text_given) return false;
      text_given = true;
      p = text, e = text + text_size, bytes = text_size;
      return text_size > 0;
    }
    if (!error.empty()) return false;
    if (buf.empty()) buf.resize(1 << 18);
    const int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    int code = 0;
    if (n <= 0) {
      const char* msg = gzerror(f, &code);
      if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) error = msg != nullptr ? msg : "read error";
      return false;
    }
    bytes += static_cast<std::uint64_t>(n);
    p = buf.data(), e = buf.data() + n;
    return true;
  }
};

struct ScanError {
  std::uint64_t line, col;
  bool eof;
  std::string what;
};

// A JSON scanner driving the SAX handler (the same calls nlohmann's sax_parse makes), written for
// traces of a GB: strings are found with memchr and copied once, numbers keep their text (the
// handler reads times from it), and only the line and column of an error are tracked. Strict
// JSON, but control characters inside strings are let through.
template <class H>
class Scanner {
 public:
  Scanner(Source& src, H& h) : src_(src), h_(h) {}
  // False when the handler stopped the parse; throws ScanError for bad JSON.
  bool parse() {
    ws();
    if (!value(0)) return false;
    ws();
    if (peek() != kEof) fail("unexpected content after the trace's end");
    return true;
  }

 private:
  static constexpr int kEof = -1;
  int peek() {
    if (p_ == e_ && !refill()) return kEof;
    return static_cast<unsigned char>(*p_);
  }
  bool refill() {
    consumed_ += static_cast<std::uint64_t>(e_ - start_);
    if (!src_.next(p_, e_)) {
      start_ = p_ = e_;
      return false;
    }
    start_ = p_;
    return true;
  }
  std::uint64_t offset() const { return consumed_ + static_cast<std::uint64_t>(p_ - start_); }
  [[noreturn]] void fail(const std::string& what) {
    const int c = p_ < e_ ? static_cast<unsigned char>(*p_) : kEof;
    throw ScanError{line_, offset() - line_start_ + 1, c == kEof,
                    c == kEof ? what + " (unexpected end of input)" : what};
  }
  int get() {
    const int c = peek();
    if (c == kEof) fail("unexpected end of input");
    ++p_;
    return c;
  }
  void ws() {
    for (;;) {
      while (p_ < e_) {
        const char c = *p_;
        if (c == '\n') {
          ++p_;
          ++line_;
          line_start_ = offset();
        } else if (c == ' ' || c == '\t' || c == '\r') {
          ++p_;
        } else {
          return;
        }
      }
      if (!refill()) return;
    }
  }
  void expect(char c, const char* what) {
    if (peek() != static_cast<unsigned char>(c)) fail(what);
    ++p_;
  }
  // An object's or an array's items, after its opening bracket, up to `close`: `item` reads one
  // (false: the handler stopped), `end` is called at the close.
  template <class Item, class End>
  bool items(char close, const char* expected, Item item, End end) {
    ws();
    if (peek() == static_cast<unsigned char>(close)) {
      ++p_;
      return end();
    }
    for (;;) {
      ws();
      if (!item()) return false;
      ws();
      const int d = get();
      if (d == ',') continue;
      if (d == static_cast<unsigned char>(close)) return end();
      --p_;
      fail(expected);
    }
  }
  bool value(int depth) {
    if (depth > 512) fail("nested more than 512 deep");
    const int c = peek();
    switch (c) {
      case '{':
        ++p_;
        if (!h_.start_object(static_cast<std::size_t>(-1))) return false;
        return items(
            '}', "expected ',' or '}'",
            [&] {
              expect('"', "expected a key in quotes");
              string(key_);
              if (!h_.key(key_)) return false;
              ws();
              expect(':', "expected ':' after a key");
              ws();
              return value(depth + 1);
            },
            [&] { return h_.end_object(); });
      case '[':
        ++p_;
        if (!h_.start_array(static_cast<std::size_t>(-1))) return false;
        return items(
            ']', "expected ',' or ']'", [&] { return value(depth + 1); }, [&] { return h_.end_array(); });
      case '"':
        ++p_;
        string(str_);
        return h_.string(str_);
      case 't':
        literal("true");
        return h_.boolean(true);
      case 'f':
        literal("false");
        return h_.boolean(false);
      case 'n':
        literal("null");
        return h_.null();
      case kEof:
        fail("expected a value");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        fail(fmt::format("unexpected character '{}'", static_cast<char>(c)));
    }
  }
  void literal(const char* word) {
    for (const char* w = word; *w != '\0'; ++w)
      if (get() != static_cast<unsigned char>(*w)) {
        --p_;
        fail(fmt::format("expected '{}'", word));
      }
  }
  void string(std::string& s) {
    s.clear();
    for (;;) {
      if (p_ == e_ && !refill()) fail("a string is not closed");
      const auto n = static_cast<std::size_t>(e_ - p_);
      const char* q = static_cast<const char*>(std::memchr(p_, '"', n));
      const char* lim = q != nullptr ? q : e_;
      const char* b = static_cast<const char*>(std::memchr(p_, '\\', static_cast<std::size_t>(lim - p_)));
      if (b != nullptr) {
        s.append(p_, b);
        p_ = b + 1;
        escape(s);
        continue;
      }
      s.append(p_, lim);
      p_ = lim;
      if (q != nullptr) {
        ++p_;
        return;
      }
    }
  }
  unsigned hex4() {
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const int c = get();
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else
        fail("bad \\u escape");
    }
    return v;
  }
  void escape(std::string& s) {
    const int c = get();
    switch (c) {
      case '"':
        s += '"';
        break;
      case '\\':
        s += '\\';
        break;
      case '/':
        s += '/';
        break;
      case 'b':
        s += '\b';
        break;
      case 'f':
        s += '\f';
        break;
      case 'n':
        s += '\n';
        break;
      case 'r':
        s += '\r';
        break;
      case 't':
        s += '\t';
        break;
      case 'u': {
        unsigned cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00 && peek() == '\\') {
          ++p_;
          if (get() != 'u') fail("bad surrogate pair");
          const unsigned lo = hex4();
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp < 0x80) {
          s += static_cast<char>(cp);
        } else if (cp < 0x800) {
          s += static_cast<char>(0xC0 | (cp >> 6));
          s += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          s += static_cast<char>(0xE0 | (cp >> 12));
          s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          s += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
          s += static_cast<char>(0xF0 | (cp >> 18));
          s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
          s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          s += static_cast<char>(0x80 | (cp & 0x3F));
        }
        break;
      }
      default:
        --p_;
        fail("bad escape in a string");
    }
  }
  static bool number_char(char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
  }
  bool number() {
    num_.clear();
    bool is_float = false;
    for (;;) {
      const char* q = p_;
      while (q < e_ && number_char(*q)) {
        is_float |= *q == '.' || *q == 'e' || *q == 'E';
        ++q;
      }
      num_.append(p_, q);
      p_ = q;
      if (p_ < e_ || !refill()) break;
    }
    const char* b = num_.data();
    const char* e = b + num_.size();
    if (!is_float) {
      std::int64_t v = 0;
      const auto r = std::from_chars(b, e, v);
      if (r.ec == std::errc() && r.ptr == e) return h_.number_integer(v);
      if (r.ec == std::errc::result_out_of_range && num_[0] != '-') {
        std::uint64_t u = 0;
        const auto r2 = std::from_chars(b, e, u);
        if (r2.ec == std::errc() && r2.ptr == e) return h_.number_unsigned(u);
      }
    }
    double d = 0;
    const auto r = std::from_chars(b, e, d);
    if (r.ptr != e || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range))
      fail("not a number: '" + num_.substr(0, 40) + "'");
    if (r.ec == std::errc::result_out_of_range) d = num_[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    return h_.number_float(d, num_);
  }

  Source& src_;
  H& h_;
  const char *p_ = nullptr, *e_ = nullptr, *start_ = nullptr;
  std::uint64_t consumed_ = 0, line_ = 1, line_start_ = 0;
  std::string key_, str_, num_;
};

KinetoTrace parse_source(Source& src, const std::string& name) {
  KinetoTrace out;
  Handler h(out);
  bool ok = true;
  std::optional<ScanError> bad;
  try {
    ok = Scanner<Handler>(src, h).parse();
  } catch (const ScanError& e) {
    bad = e;
  }
  if (h.bad_event()) throw InputError(SourceLoc{name, 0, 0}, h.error);
  if (!src.error.empty())
    throw InputError(SourceLoc{name, 0, 0},
                     fmt::format("the compressed trace cannot be read to its end ({}): a truncated .gz?", src.error));
  if (bad) {
    const int line = static_cast<int>(std::min<std::uint64_t>(bad->line, INT32_MAX));
    const int col = static_cast<int>(std::min<std::uint64_t>(bad->col, INT32_MAX));
    throw InputError(SourceLoc{name, line, col},
                     bad->eof ? fmt::format("the trace ends early (a truncated file?): {}", bad->what)
                              : fmt::format("not a valid JSON trace: {}", bad->what));
  }
  (void)ok;
  if (!h.saw_events())
    throw InputError(SourceLoc{name, 1, 1}, "no traceEvents list: not a Chrome trace (a PyTorch profiler export?)");
  if (out.gpu.empty())
    throw InputError(SourceLoc{name, 1, 1},
                     out.launches.empty()
                         ? "the trace has no GPU kernels (was the profiler run with ProfilerActivity.CUDA?)"
                         : fmt::format("the trace has no GPU kernels, though its host launched {} (CUDA "
                                       "activity was on: the profiler dropped the kernels' records, "
                                       "or the export did)",
                                       out.launches.size()));
  // Times relative to the earliest event: small numbers in reports, and any sum of them in 64 bits.
  const Time o = h.min_ts_;
  out.origin_ns = o;
  for (auto& r : out.ranges) r.ts -= o;
  for (auto& l : out.launches) l.ts -= o;
  for (auto& g : out.gpu) g.ts -= o;
  for (auto& f : out.flows) f.ts -= o;
  for (auto& f : out.fwdbwd) f.ts -= o;
  out.bytes = src.bytes;
  return out;
}

}  // namespace

KinetoTrace read_kineto(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(SourceLoc{path, 0, 0}, "is a directory, not a trace file", {}, kExitIo);
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw InputError(SourceLoc{path, 0, 0}, "cannot open the trace file", {}, kExitIo);
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{f};
  gzbuffer(f, 1 << 18);  // before the first read
  {                      // A git-LFS pointer (a repository's large trace not pulled) is not the trace.
    char head[40] = {};
    const int n = gzread(f, head, sizeof head - 1);
    if (n > 0 && std::string_view(head, static_cast<std::size_t>(n)).starts_with("version https://git-lfs"))
      throw InputError(SourceLoc{path, 1, 1},
                       "a git-LFS pointer, not the trace: fetch the file itself (git lfs pull) and read that");
    gzrewind(f);
  }
  Source src;
  src.f = f;
  return parse_source(src, path);
}

KinetoTrace read_kineto_text(const std::string& text, const std::string& name) {
  Source src;
  src.text = text.data();
  src.text_size = text.size();
  return parse_source(src, name);
}

}  // namespace ppsim::trace

// The Kineto trace reader (kineto_reader.h): a SAX handler over a zlib-backed stream buffer.
//
// Event shapes it keeps (Kineto's Chrome trace as torch.profiler writes it):
//   {"ph":"X","cat":"user_annotation"|"cpu_op"|"python_function","name":..,"pid":..,"tid":..,"ts":us,"dur":us}
//   {"ph":"X","cat":"cuda_runtime"|"cuda_driver","ts":..,"args":{"correlation":N}}        launches
//   {"ph":"X","cat":"kernel"|"gpu_memcpy"|"gpu_memset","args":{"correlation":N,"stream":S,"device":D}}
//   {"ph":"s"|"f","cat":"ac2g","id":N,"pid":..,"tid":..,"ts":..}                            flows
// Timestamps are microseconds with a fractional part; they become integer ns here.
#include "trace/kineto_reader.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <istream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <streambuf>

#include "core/error.h"

namespace ppsim::trace {

namespace {

// A read-only stream buffer over gzread (which also reads uncompressed files as they are).
class GzBuf : public std::streambuf {
 public:
  explicit GzBuf(gzFile f) : f_(f), buf_(1 << 18) {}
  std::string error;  // set when zlib reports one (a truncated .gz)
  std::uint64_t bytes = 0;

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (!error.empty()) return traits_type::eof();
    const int n = gzread(f_, buf_.data(), static_cast<unsigned>(buf_.size()));
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f_, &code);
      error = msg != nullptr ? msg : "read error";
      return traits_type::eof();
    }
    if (n == 0) {
      int code = 0;
      const char* msg = gzerror(f_, &code);
      if (code != Z_OK && code != Z_STREAM_END) error = msg != nullptr ? msg : "read error";
      return traits_type::eof();
    }
    bytes += static_cast<std::uint64_t>(n);
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  gzFile f_;
  std::vector<char> buf_;
};

Time us_to_ns(double us) { return static_cast<Time>(std::llround(us * 1e3)); }

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
  bool number_integer(number_integer_t v) override { return number(static_cast<double>(v), v); }
  bool number_unsigned(number_unsigned_t v) override {
    return number(static_cast<double>(v), static_cast<std::int64_t>(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    return number(v, static_cast<std::int64_t>(std::llround(v)));
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
          break;
        case Field::tid:
          tid_ = v;
          break;
        case Field::id:
          id_ = static_cast<std::int64_t>(std::hash<std::string>{}(v) >> 1);
          has_id_ = true;
          break;
        default:
          break;
      }
    }
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
    rank_key_ = depth_ == 2 && top_key_ == "distributedInfo" && k == "rank";
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
  enum class Field { none, ph, cat, name, pid, tid, ts, dur, id, args, correlation, stream, device, grid };

  // Keys are compared by length first: most keys in a trace (args of kernels) are none of these.
  static Field field_of(const std::string& k, bool args) {
    switch (k.size()) {
      case 2:
        if (args) return Field::none;
        if (k == "ph") return Field::ph;
        if (k == "ts") return Field::ts;
        if (k == "id") return Field::id;
        return Field::none;
      case 3:
        if (args) return Field::none;
        if (k == "cat") return Field::cat;
        if (k == "pid") return Field::pid;
        if (k == "tid") return Field::tid;
        if (k == "dur") return Field::dur;
        return Field::none;
      case 4:
        if (args) return k == "grid" ? Field::grid : Field::none;
        if (k == "name") return Field::name;
        if (k == "args") return Field::args;
        return Field::none;
      case 6:
        return args && k == "stream" ? Field::stream : args && k == "device" ? Field::device : Field::none;
      case 11:
        return args && k == "correlation" ? Field::correlation : Field::none;
      default:
        return Field::none;
    }
  }

  bool in_event_field() const {
    return in_event_ && ((depth_ == event_depth_ && !in_args_) || (in_args_ && depth_ == event_depth_ + 1));
  }
  // Values are consumed by the field their key named; the next key names the next one.
  static bool value_done() { return true; }
  bool number(double d, std::int64_t i) {
    if (sms_key_ && depth_ == 3) {
      if (out_.sms == 0) out_.sms = static_cast<int>(i);
      sms_key_ = false;
    }
    if (rank_key_ && depth_ == 2) {
      out_.rank = static_cast<int>(std::clamp<std::int64_t>(i, -1, 1 << 30));
      rank_key_ = false;
    }
    if (in_args_ && field_ == Field::grid && depth_ == event_depth_ + 2)
      blocks_ =
          std::min<std::int64_t>(std::max<std::int64_t>(1, blocks_) * std::clamp<std::int64_t>(i, 1, 1 << 20), 1 << 30);
    if (in_event_field()) {
      switch (field_) {
        case Field::ts:
          ts_ = d;
          has_ts_ = true;
          break;
        case Field::dur:
          dur_ = d;
          break;
        case Field::pid:
          pid_ = std::to_string(i);
          pid_num_ = i;
          break;
        case Field::tid:
          tid_ = std::to_string(i);
          tid_num_ = i;
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
    has_ts_ = has_id_ = false;
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
  int thread() {
    thread_key_.clear();
    thread_key_ += pid_;
    thread_key_ += '/';
    thread_key_ += tid_;
    return intern(thread_ids_, out_.threads, thread_key_);
  }

  static bool cat_is(const std::string& c, std::initializer_list<const char*> names) {
    for (const char* n : names) {
      const std::size_t len = std::char_traits<char>::length(n);
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
    // |ts| and dur under 1e15 us (31 years) keep every ns sum inside 64 bits; Kineto's epoch-based
    // timestamps are ~1.7e12 us. Anything beyond is a broken trace, not a time to round.
    if (!std::isfinite(ts_) || std::fabs(ts_) > 1e15 || !std::isfinite(dur_) || dur_ > 1e15) {
      error = fmt::format("event {} ('{}'): ts {} us, dur {} us is out of range (|ts| and dur at most 1e15 us)",
                          out_.events, name_.substr(0, 60), ts_, dur_);
      bad_event_ = true;
      return;
    }
    if (ph_ == 'X') {
      if (cat_is(cat_, {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})) {
        GpuEvent g;
        g.ts = us_to_ns(ts_);
        g.dur = std::max<Time>(0, us_to_ns(dur_));
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
        if (correlation_ >= 0) out_.launches.push_back(Launch{us_to_ns(ts_), thread(), correlation_});
      } else if (cat_is(cat_, {"user_annotation", "cpu_op", "operator", "python_function"})) {
        out_.ranges.push_back(
            CpuRange{us_to_ns(ts_), std::max<Time>(0, us_to_ns(dur_)), thread(), intern(name_ids_, out_.names, name_)});
      }
    } else if ((ph_ == 's' || ph_ == 'f') && has_id_ && cat_is(cat_, {"ac2g"})) {
      out_.flows.push_back(FlowPoint{id_, us_to_ns(ts_), thread(), ph_ == 's'});
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
  std::int64_t pid_num_ = -1, tid_num_ = -1, id_ = 0, correlation_ = -1, stream_ = -1, device_ = -1;
  double ts_ = 0, dur_ = 0;
  bool has_ts_ = false, has_id_ = false, sms_key_ = false, rank_key_ = false, bad_event_ = false;
  std::int64_t blocks_ = 0;
  double gpu_time_ = 0;
  std::unordered_map<std::string, int> name_ids_, thread_ids_;
};

// nlohmann's message carries "at line L, column C"; the rest after the last ": " says what.
[[noreturn]] void fail_parse(const std::string& name, const std::string& what, bool eof) {
  int line = 0, col = 0;
  std::smatch m;
  static const std::regex re(R"(line (\d+), column (\d+))");
  if (std::regex_search(what, m, re)) {
    line = std::stoi(m[1].str());
    col = std::stoi(m[2].str());
  }
  std::string detail = what;
  if (const auto p = what.find("column "); p != std::string::npos)
    if (const auto c = what.find(": ", p); c != std::string::npos) detail = what.substr(c + 2);
  throw InputError(SourceLoc{name, line, col}, eof ? fmt::format("the trace ends early (a truncated file?): {}", detail)
                                                   : fmt::format("not a valid JSON trace: {}", detail));
}

KinetoTrace parse_stream(std::istream& in, const std::string& name, GzBuf* gz, std::uint64_t text_size) {
  KinetoTrace out;
  Handler h(out);
  const bool ok = json::sax_parse(in, &h, json::input_format_t::json, true);
  if (h.bad_event()) throw InputError(SourceLoc{name, 0, 0}, h.error);
  if (gz != nullptr && !gz->error.empty())
    throw InputError(SourceLoc{name, 0, 0},
                     fmt::format("the compressed trace cannot be read to its end ({}): a truncated .gz?", gz->error));
  // An error at the last byte read is a file that stops early (most often a truncated trace).
  const std::uint64_t read = gz != nullptr ? gz->bytes : text_size;
  if (!ok) fail_parse(name, h.error, h.error.find("end of input") != std::string::npos || h.error_position + 1 >= read);
  if (!h.saw_events())
    throw InputError(SourceLoc{name, 1, 1}, "no traceEvents list: not a Chrome trace (a PyTorch profiler export?)");
  if (out.gpu.empty())
    throw InputError(SourceLoc{name, 1, 1},
                     "the trace has no GPU kernels (was the profiler run with ProfilerActivity.CUDA?)");
  if (gz != nullptr) out.bytes = gz->bytes;
  return out;
}

}  // namespace

KinetoTrace read_kineto(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(SourceLoc{path, 0, 0}, "is a directory, not a trace file", {}, kExitIo);
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw InputError(SourceLoc{path, 0, 0}, "cannot open the trace file", {}, kExitIo);
  gzbuffer(f, 1 << 18);
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{f};
  GzBuf buf(f);
  std::istream in(&buf);
  return parse_stream(in, path, &buf, 0);
}

KinetoTrace read_kineto_text(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  KinetoTrace t = parse_stream(in, name, nullptr, text.size());
  t.bytes = text.size();
  return t;
}

}  // namespace ppsim::trace

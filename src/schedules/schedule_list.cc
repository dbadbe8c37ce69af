#include "schedules/schedule_list.h"

namespace ppsim {

namespace {
std::string_view trim(std::string_view s) {
  const std::size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}
}  // namespace

bool is_all_schedules(std::string_view list) {
  const std::string_view t = trim(list);
  return t.empty() || t == "all";
}

std::vector<std::string> split_schedule_names(std::string_view list) {
  std::vector<std::string> out;
  if (is_all_schedules(list)) return out;
  while (true) {
    const std::size_t comma = list.find(',');
    const std::string_view name = trim(list.substr(0, comma));
    if (!name.empty()) out.emplace_back(name);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<const Family*> parse_schedule_list(std::string_view list) {
  std::vector<const Family*> out;
  if (is_all_schedules(list)) {
    for (const Family& f : families())
      if (family_in_all(f)) out.push_back(&f);
    return out;
  }
  for (const std::string& name : split_schedule_names(list)) out.push_back(&find_family(name));
  return out;
}

}  // namespace ppsim

// A bash launch script read as data: the commands it would run, with their words as bash would
// pass them, found WITHOUT running anything (a script from the internet is data).
//
// Read: variables (`X=1`, `export`, `declare`, `local`), arrays (`A=(...)`, `A+=(...)`,
// `"${A[@]}"`), parameter expansion (`$X`, `${X}`, `${X:-d}`, `${X-d}`, `${X:=d}`, `${X:+w}`,
// `${#X}`, `${A[i]}`, `${#A[@]}`), `$((...))` integer arithmetic, quoting and word splitting as
// bash does them (a quoted string is one word; an unquoted `$OPTS` is split at blanks), `\`
// continuations, comments, here-documents (skipped), `if`/`elif`/`else`, `case`, `&&`/`||`,
// `for` over a known list, functions, `source FILE` (read, not run), `bash -c '...'`, `eval`.
// A condition is decided where the script's own values decide it (`[ "$X" = y ]`, `-eq`, `-gt`,
// `-z`, `[[ ]]`, `(( ))`); otherwise both branches are read and every command and variable they
// touch carries the condition and its line (`undecided`/`unknown`), for the caller to refuse
// where it matters. A command substitution `$(...)` is not run: its value is unknown, except the
// script's own folder (`$(dirname "$0")`, `$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)`).
#pragma once
#include <string>
#include <vector>

#include "core/error.h"

namespace ppsim {

struct ShellWord {
  std::string text;     // the word as bash would pass it (when unknown: the script's text for it)
  SourceLoc loc;        // where the word starts in the script
  std::string unknown;  // why its value is not known without running the script; "" when known
};

struct ShellCommand {
  std::vector<ShellWord> words;
  SourceLoc loc;
  std::string undecided;  // the condition or loop it runs under, undecided by the script; "" when it runs
};

// `dir`: the script's folder, for `source FILE` and `$(dirname "$0")`.
std::vector<ShellCommand> shell_commands(const std::string& text, const std::string& name, const std::string& dir);

// Python's list expression as Megatron's --moe-layer-freq takes it ("([0]+[1]*15)", "[0,0,1,1]",
// "([1]*3+[0])*2"): list literals of integers, `+` concatenation, `*` repetition by an integer,
// parentheses; nothing else. InputError(loc) naming the flag when it is anything else.
std::vector<int> python_int_list(const std::string& expr, const SourceLoc& loc, const std::string& flag);

}  // namespace ppsim

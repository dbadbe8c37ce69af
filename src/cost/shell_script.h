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
//
// A set of scripts reads as one (a paper's launch scripts: run_table_1.sh sources CONFIG.sh,
// which builds the arguments, then SBATCH.sh submits SRUN.sh, which runs `srun ... sh -c "$CMD"`):
// the working folder is the top script's (`pwd`, `` `pwd` ``, `$(pwd)`, `$PWD`; `cd DIR` moves it),
// a relative `source FILE` is looked up there, then in the sourcing script's folder; a script run
// as a program (`bash X.sh`, `sh X.sh`, `./X.sh`, `sbatch [opts] X.sh`, and any of these or
// `sh -c TEXT` after `srun`/`mpirun`/`nohup`/... options) is read with the exported variables
// only (`sbatch --export=A,B`: those), its commands carrying the launcher words before it
// (`ShellCommand::launcher`: sbatch's options, its script's `#SBATCH` lines first, then srun's).
// A placeholder the script leaves to its user, `<path to data>` (a `<` then a letter, up to a
// `>` on the line), is a literal word, not a redirection.
#pragma once
#include <map>
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
  // The words of the commands that started the script this command is in, outermost first
  // (sbatch, its script's #SBATCH words, its options; srun and its options; ...).
  std::vector<ShellWord> launcher{};
};

struct ShellRead {
  std::vector<ShellCommand> commands;
  // The first `exit N` (N != 0) that the script's own values reach (`else echo "Invalid
  // configuration"; exit 1`): read past, as an error check, but named where a value is missing.
  std::string stop;  // "exit 1 after 'echo Invalid configuration'", or ""
  SourceLoc stop_at{};
  std::vector<std::string> missing;  // files sourced but not read: "F, sourced at a.sh:3 and not found"
};

// `dir`: the script's folder, for `source FILE` and `$(dirname "$0")`. `env`: variables the user
// sets; they replace the scripts' own assignments to them (as if the lines were edited), in every
// file read, and are exported.
ShellRead read_shell(const std::string& text, const std::string& name, const std::string& dir,
                     const std::map<std::string, std::string>& env = {});
std::vector<ShellCommand> shell_commands(const std::string& text, const std::string& name, const std::string& dir);

// Slurm's task counts as sbatch's, salloc's and srun's options state them among `words` (launch
// order: a later one wins, as srun's own over its allocation's): --nodes/-N, --ntasks/-n,
// --ntasks-per-node. `slurm`: one of those commands is among the words.
struct SlurmOption {
  const char* flag = "";
  std::string value, unknown;  // unknown: why the value is not known
  bool set = false;
};
struct SlurmTasks {
  bool slurm = false;
  SlurmOption nodes{"--nodes", {}, {}, false}, ntasks{"--ntasks", {}, {}, false},
      per_node{"--ntasks-per-node", {}, {}, false};
};
SlurmTasks slurm_tasks(const std::vector<ShellWord>& words);

// Python's list expression as Megatron's --moe-layer-freq takes it ("([0]+[1]*15)", "[0,0,1,1]",
// "([1]*3+[0])*2"): list literals of integers, `+` concatenation, `*` repetition by an integer,
// parentheses; nothing else. InputError(loc) naming the flag when it is anything else.
std::vector<int> python_int_list(const std::string& expr, const SourceLoc& loc, const std::string& flag);

}  // namespace ppsim

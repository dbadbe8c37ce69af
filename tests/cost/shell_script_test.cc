// Launch scripts read as bash would pass their words, without running them (src/cost/shell_script.cc):
// each construct on a small script written here, the expected words worked out from bash's rules.
#include "cost/shell_script.h"

#include <algorithm>
#include <string>
#include <vector>

#include "catch.h"

using namespace ppsim;

namespace {
// The words of the last command the script runs (the launch command in these scripts).
std::vector<std::string> last_words(const std::string& script) {
  const auto cmds = shell_commands(script, "s.sh", "/scripts");
  REQUIRE(!cmds.empty());
  std::vector<std::string> out;
  for (const auto& w : cmds.back().words) out.push_back(w.unknown.empty() ? w.text : "?" + w.text);
  return out;
}
using W = std::vector<std::string>;
}  // namespace

TEST_CASE("shell: arrays, quoting and word splitting as bash does them", "[cost][shell]") {
  // "${A[@]}": one word per element, an element with a blank stays one word; ${A[@]} unquoted
  // splits it; "$S" is one word, $S is split at blanks; '...' is literal.
  CHECK(last_words("A=(--x 1 'a b')\nrun \"${A[@]}\"") == W{"run", "--x", "1", "a b"});
  CHECK(last_words("A=(--x 1 'a b')\nrun ${A[@]}") == W{"run", "--x", "1", "a", "b"});
  CHECK(last_words("S=\"--fp8-format hybrid\"\nrun $S") == W{"run", "--fp8-format", "hybrid"});
  CHECK(last_words("S=\"--fp8-format hybrid\"\nrun \"$S\"") == W{"run", "--fp8-format hybrid"});
  CHECK(last_words("run '$X' \"a\"'b'c") == W{"run", "$X", "abc"});
  // Multi-line arrays with comments and continuations; A+=(...) appends; ${#A[@]} counts.
  CHECK(last_words("A=(\n  --a 1   # one\n  --b 2\n)\nA+=(--c)\nrun \"${A[@]}\" ${#A[@]} ${A[1]}") ==
        W{"run", "--a", "1", "--b", "2", "--c", "5", "1"});
  CHECK(last_words("run --a \\\n  --b") == W{"run", "--a", "--b"});
  // An element the script does not know stays one word and does not hide its neighbours.
  CHECK(last_words("A=(--x 1 \"--cache $HOME\" --y 2)\nrun ${A[@]}") ==
        W{"run", "--x", "1", "?--cache $HOME", "--y", "2"});
  // The same for a string split unquoted: only the word that holds the unknown piece is unknown;
  // a value an undecided branch chose stays unknown as a whole.
  CHECK(last_words("O=\"--x 1 --cache $HOME --y 2\"\nrun $O") == W{"run", "--x", "1", "--cache", "?$HOME", "--y", "2"});
  CHECK(last_words("if [ -f f ]; then O=\"--x 1\"; else O=\"--x 2\"; fi\nrun $O") == W{"run", "?$O"});
  // Each unknown piece says its own reason.
  const auto pieces = shell_commands("O=\"--a $A --b $B\"\nrun $O", "s.sh", "");
  CHECK(pieces.back().words[2].unknown == "$A is not set in the script (from the environment?)");
  CHECK(pieces.back().words[4].unknown == "$B is not set in the script (from the environment?)");
  // An empty unquoted expansion leaves no word; an empty quoted one is one empty word.
  CHECK(last_words("E=\nrun $E \"$E\"") == W{"run", ""});
}

TEST_CASE("shell: defaults, assignment forms and arithmetic", "[cost][shell]") {
  // Unset: ${X:-8} is 8 and X stays unset; ${Y:=4} sets Y; a set X wins over the default.
  CHECK(last_words("run ${X:-8} ${Y:=4} $Y") == W{"run", "8", "4", "4"});
  CHECK(last_words("X=2\nrun ${X:-8} ${X:+set} ${Z:+set}") == W{"run", "2", "set"});
  // ":-" treats empty as unset, "-" does not.
  CHECK(last_words("X=\nrun ${X:-a} \"${X-b}\"") == W{"run", "a", ""});
  // Megatron scripts' arithmetic: GPUS = 8 x 4 = 32; dp = 32 / (2 x 4) = 4; 2 ** 3 = 8, 7 % 4 = 3.
  CHECK(last_words("G=8\nN=${N:-4}\nW=$(($G*N))\nrun $W $((W / (2 * 4))) $((2**3)) $((7 % 4)) $(( (1+2)*3 ))") ==
        W{"run", "32", "4", "8", "3", "9"});
  CHECK(last_words("export TP=2 PP=4\ndeclare -i X=3\nlocal Z=1\nrun $TP$PP $X") == W{"run", "24", "3"});
  CHECK(last_words("S=a\nS+=b\nrun $S") == W{"run", "ab"});
  // Not known without running: the environment, a command substitution; the script's own folder is.
  const auto cmds = shell_commands("run $NODES $(hostname) $(dirname \"$0\")", "s.sh", "/scripts");
  REQUIRE(cmds.size() == 1);
  CHECK(cmds[0].words[1].unknown == "$NODES is not set in the script (from the environment?)");
  CHECK(cmds[0].words[2].unknown == "$(hostname) is a command, not run");
  CHECK(cmds[0].words[3].text == "/scripts");
  CHECK(cmds[0].words[3].unknown.empty());
}

TEST_CASE("shell: if/else decided by the script's values, else both read and marked", "[cost][shell]") {
  CHECK(last_words("X=y\nif [ \"$X\" = \"y\" ]; then A=1; else A=2; fi\nrun $A") == W{"run", "1"});
  CHECK(last_words("N=4\nif [ $N -gt 8 ]; then A=1\nelif [[ $N -eq 4 && x == x* ]]; then A=3\nelse A=2\nfi\nrun $A") ==
        W{"run", "3"});
  CHECK(last_words("if [ -z \"$U\" ]; then :; fi\nV=1\n[ \"$V\" -ne 1 ] && V=5\n[ -n \"$V\" ] || V=6\nrun $V") ==
        W{"run", "1"});
  CHECK(last_words("K=3\nif (( K > 2 )); then A=big; fi\nrun $A") == W{"run", "big"});
  CHECK(last_words("case 7B in\n  13B) L=40 ;;\n  7B|8B) L=32 ;;\n  *) L=0 ;;\nesac\nrun $L") == W{"run", "32"});
  // Undecided: a file test; both branches read, the variable they set differently is unknown and
  // says why; the branches' commands carry the condition.
  const auto cmds =
      shell_commands("if [ -f /ckpt ]; then\n  A=1\n  echo x\nelse\n  A=2\nfi\nB=7\nrun $A $B", "s.sh", "");
  REQUIRE(cmds.size() == 2);
  CHECK(cmds[0].undecided == "the condition '[ -f /ckpt ]' at line 1, which the script's own values do not decide");
  CHECK(cmds[1].undecided.empty());
  CHECK(cmds[1].words[1].unknown ==
        "$A is set under the condition '[ -f /ckpt ]' at line 1, which the script's own values do not decide");
  CHECK(cmds[1].words[2].text == "7");
  // Set alike in both branches: known.
  CHECK(last_words("if [ -d /x ]; then A=1; else A=1; fi\nrun $A") == W{"run", "1"});
}

TEST_CASE("shell: bash -c, eval, functions, loops, here-documents, exit", "[cost][shell]") {
  // bash -c '...': its text is read as a script; single quotes keep $X for the inner shell.
  CHECK(last_words("X=3\nbash -c 'run --n $X --m \"a b\"'") == W{"run", "--n", "3", "--m", "a b"});
  CHECK(last_words("X=3\neval \"run --n $X\"") == W{"run", "--n", "3"});
  // eval with an unknown word (an unset $o, a command's output with quotes inside): the known
  // words still lose their quotes, as bash's re-parse removes them; the unknown stays unknown.
  const auto ev = shell_commands(
      "opts=\" --freq '1' --n 2 \"\nrun_cmd=\"run $(nproc --all \\\"x\\\") ${opts} ${o}\"\neval ${run_cmd}", "s.sh",
      "");
  REQUIRE(!ev.empty());
  std::vector<std::string> texts;
  for (const auto& w : ev.back().words) texts.push_back(w.text);
  CHECK(std::find(texts.begin(), texts.end(), "1") != texts.end());
  CHECK(std::find(texts.begin(), texts.end(), "'1'") == texts.end());
  CHECK(last_words("f() {\n  run --n $1 \"$@\"\n}\nf 4 5") == W{"run", "--n", "4", "4", "5"});
  CHECK(last_words("A=\nfor x in 1 2 3; do A=$A$x; done\nrun $A") == W{"run", "123"});
  CHECK(last_words("cat <<EOF > f\nrun --not-this\nEOF\nrun --this 2>&1 >log") == W{"run", "--this"});
  const auto piped = shell_commands("run --this 2>&1 | tee log", "s.sh", "");
  REQUIRE(piped.size() == 2);
  CHECK(piped[0].words.size() == 2);
  CHECK(last_words("X=1\n[ $X -eq 1 ] || exit 1\nrun a\nexit 0\nrun b") == W{"run", "a"});
  // The script runs without arguments: `while [[ $# -gt 0 ]]` never runs, so its case does not taint.
  CHECK(last_words("T=MOCK\nwhile [[ $# -gt 0 ]]; do case $1 in --t) T=$2;; esac; shift; done\nrun $T") ==
        W{"run", "MOCK"});
  // slime's --moe-layer-freq: an arithmetic for loop builds the list, printf -v formats it and
  // a $(...) of builtins joins it with IFS's first character: 1 dense layer then 3 MoE layers.
  CHECK(last_words("N=4\nK=1\narr=()\nfor ((i=0; i<N; i++)); do\n  if (( i < K )); then arr+=(0); else arr+=(1); fi\n"
                   "done\nprintf -v F \"[%s]\" \"$(IFS=', '; echo \"${arr[*]}\")\"\nrun \"$F\" $(echo a b) $((i))") ==
        W{"run", "[0,1,1,1]", "a", "b", "4"});
  // A non-zero exit is an error check (here on an unset variable): the launch after it is read.
  CHECK(last_words("if [ -z \"${ADDR:-}\" ]; then echo set ADDR; exit 1; fi\nrun x") == W{"run", "x"});
  const auto loop = shell_commands("while true; do A=2; done\nrun $A", "s.sh", "");
  CHECK(loop.back().words[1].unknown == "$A is set under the 'while' loop at line 1");
  // A backtick substitution inside double quotes keeps its own quotes (BigScience's tr14 script):
  // the value is "--lr 1 --min-lr `bc <<< "x"` --n 2", whose substitution is not run (kept as
  // $(...)); read again by bash -c, its words are the flags around the unknown output.
  CHECK(last_words("M=\"--lr 1 --min-lr `bc <<< \"x\"` --n 2\"\nrun $M") ==
        W{"run", "--lr", "1", "--min-lr", "?$(bc <<< \"x\")", "--n", "2"});
  const auto twice = shell_commands("M=\"--min-lr `bc <<< \"x\"` --n 2\"\nbash -c \"run $M\"", "s.sh", "");
  REQUIRE(!twice.empty());
  CHECK(twice.back().words.front().text == "run");
  CHECK(twice.back().words.back().text == "2");
}

TEST_CASE("shell: located errors", "[cost][shell]") {
  auto error_of = [](const std::string& s) {
    try {
      (void)shell_commands(s, "s.sh", "");
    } catch (const InputError& e) {
      return e.one_line();
    }
    return std::string("no error");
  };
  CHECK(error_of("run \"abc") == "s.sh:1:5: unterminated quote");
  CHECK(error_of("if true; then\n  run\n") == "s.sh:1:1: cannot read the script: expected 'fi' for the one at line 1");
  CHECK(error_of("A=(1 2") == "s.sh:1:1: the array A=( is not closed");
}

TEST_CASE("shell: --moe-layer-freq's Python list expressions", "[cost][shell]") {
  const SourceLoc at{"s.sh", 1, 1};
  using V = std::vector<int>;
  CHECK(python_int_list("([0]+[1]*3)", at, "--f") == V{0, 1, 1, 1});
  CHECK(python_int_list("[0,0,1,1]", at, "--f") == V{0, 0, 1, 1});
  CHECK(python_int_list("([1]*3+[0]*1)*2", at, "--f") == V{1, 1, 1, 0, 1, 1, 1, 0});
  CHECK(python_int_list("2*[1,0]", at, "--f") == V{1, 0, 1, 0});
  CHECK(python_int_list("[0]*(1+2)+[1]", at, "--f") == V{0, 0, 0, 1});
  CHECK_THROWS_WITH(python_int_list("__import__('os')", at, "--f"),
                    PPSIM_CONTAINS("--f __import__('os'): unexpected '_'"));
  CHECK_THROWS_WITH(python_int_list("[1]*[2]", at, "--f"), PPSIM_CONTAINS("'*' of two lists"));
  CHECK_THROWS_WITH(python_int_list("3", at, "--f"), PPSIM_CONTAINS("an integer, not a list"));
}

TEST_CASE("shell: placeholders, the working folder, the user's variables", "[cost][shell]") {
  // `<path to data>` (a '<', a letter, a '>' on the line after a non-blank) is a word; `<in >out`,
  // `< f` and `<<EOF` stay redirections.
  CHECK(last_words("run --data <path to data> --x <N>/a.py") ==
        W{"run", "--data", "<path to data>", "--x", "<N>/a.py"});
  CHECK(last_words("run --a <in >out --b") == W{"run", "--a", "--b"});
  // A backslash-newline inside double quotes is removed, as bash removes it.
  CHECK(last_words("P=\" --a 1 \\\n\t--b 2\"\nrun $P") == W{"run", "--a", "1", "--b", "2"});
  // `pwd`, $(pwd), ${PWD}: the script's folder; cd moves it (relative to it), a cd to an unknown
  // folder makes it unknown.
  CHECK(last_words("run `pwd` $(pwd)/x ${PWD}") == W{"run", "/scripts", "/scripts/x", "/scripts"});
  CHECK(last_words("cd ../code\nrun $(pwd)/a.py") == W{"run", "/code/a.py"});
  CHECK(last_words("cd $CODE\nrun $(pwd)/a.py")[1].rfind("?", 0) == 0);
  // The user's variables replace the script's own assignments to them.
  const auto r =
      read_shell("M=small\nif [ $M == big ]; then L=48; else L=8; fi\nrun $L", "s.sh", "/scripts", {{"M", "big"}});
  REQUIRE(!r.commands.empty());
  CHECK(r.commands.back().words[1].text == "48");
  // A decided `exit 1` is read past and named.
  const auto e =
      read_shell("M=x\nif [ $M = a ]; then L=1; else\n  echo bad M\n  exit 1\nfi\nrun $L", "s.sh", "/scripts");
  CHECK(e.stop == "exit 1 after 'echo bad M'; the last condition decided: '[ $M = a ]' at line 2");
  CHECK(e.stop_at.line == 4);
}

TEST_CASE("shell: Slurm's options as the launcher of a command", "[cost][shell]") {
  // An #SBATCH script: its commands carry the options, and Slurm's variables are set from them
  // (2 nodes x 4 tasks: SLURM_NTASKS 8).
  const auto r =
      read_shell("#!/bin/bash\n#SBATCH --nodes=2 --ntasks-per-node=4  # a comment\n\nrun $SLURM_NNODES $SLURM_NTASKS\n",
                 "s.sh", "/scripts");
  REQUIRE(r.commands.size() == 1);
  CHECK(r.commands[0].words[1].text == "2");
  CHECK(r.commands[0].words[2].text == "8");
  const SlurmTasks t = slurm_tasks(r.commands[0].launcher);
  CHECK(t.slurm);
  CHECK(t.nodes.value == "2");
  CHECK(t.per_node.value == "4");
  CHECK_FALSE(t.ntasks.set);
  // srun's own -n wins over its allocation's; srun ... sh -c TEXT is read, srun's words its launcher.
  const auto s = read_shell("#SBATCH -N 2\nsrun -n 16 sh -c 'python train.py --x 1'", "s.sh", "/scripts");
  REQUIRE(s.commands.size() == 1);
  CHECK(s.commands[0].words[0].text == "python");
  CHECK(slurm_tasks(s.commands[0].launcher).ntasks.value == "16");
}

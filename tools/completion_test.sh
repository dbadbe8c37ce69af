#!/usr/bin/env bash
# CTest completion_bash: `ppsim --completion bash` loads in bash and completes what the options
# table declares (a command, a flag of it, the choices of a flag's value); `--completion zsh` is
# checked by zsh -n where zsh is installed.
set -euo pipefail
ppsim="$1"
# shellcheck disable=SC1090
source <("$ppsim" --completion bash)
complete -p ppsim >/dev/null
expect() {  # expect WORD: COMPREPLY holds it
  [[ " ${COMPREPLY[*]} " == *" $1 "* ]] || { echo "completion lacks '$1': ${COMPREPLY[*]}" >&2; exit 1; }
}
COMP_WORDS=(ppsim comp); COMP_CWORD=1; _ppsim; expect compare
COMP_WORDS=(ppsim compare --lay); COMP_CWORD=2; _ppsim; expect --layout
COMP_WORDS=(ppsim compare --layout ""); COMP_CWORD=3; _ppsim; expect bidirectional
COMP_WORDS=(ppsim compare -s ""); COMP_CWORD=3; _ppsim; expect dualpipev
COMP_WORDS=(ppsim validate --transport ""); COMP_CWORD=3; _ppsim; expect nccl
# A number completes to nothing (not to file names).
COMP_WORDS=(ppsim compare --pp ""); COMP_CWORD=3; _ppsim
[[ ${#COMPREPLY[@]} -eq 0 ]] || { echo "--pp offers ${COMPREPLY[*]}" >&2; exit 1; }
# A flag of another command is not offered.
COMP_WORDS=(ppsim model --lay); COMP_CWORD=2; _ppsim
[[ " ${COMPREPLY[*]} " != *" --layout "* ]] || { echo "model offers --layout" >&2; exit 1; }
if command -v zsh >/dev/null; then "$ppsim" --completion zsh | zsh -n; fi
if "$ppsim" --completion fish 2>/dev/null; then echo "fish accepted" >&2; exit 1; fi
echo "completion ok"

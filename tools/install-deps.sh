#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages ppsim builds against, then builds yaml-cpp's Debian source
# as a position-independent archive for the Python module (tools/build_yaml_pic.sh, into .deps/).
# Idempotent: prints nothing and touches nothing when every package is present and the archive
# built; names the package it cannot install and exits 1 otherwise. The CUDA Toolkit (nvcc,
# cuBLAS, cuDNN, NCCL) is expected at /usr/local/cuda and is not installed here.
set -euo pipefail

pkgs=(cmake ninja-build g++ libboost-graph-dev libcli11-dev libyaml-cpp-dev libfmt-dev
      nlohmann-json3-dev catch2 zlib1g-dev python3-dev pybind11-dev python3-pytest python3-numpy
      python3-venv python3-pip  # these two: `pip install .` (docs/PYTHON.md)
      universal-ctags)  # CTest function_length (tools/check_function_length.sh)
# Optional extras: clang + its sanitizer/libFuzzer runtime (tools/fuzz.sh), xmllint (SVG
# tests), OpenMPI (multi-process `validate` under mpirun/srun, and the mpi_check test); absence
# only skips those (ppsim builds without MPI and runs one process per job). CBC + pkg-config:
# the schedule search's exact method (docs/SEARCH.md); without them its tests skip, saying why.
# libtomlplusplus-dev: torchtitan TOML configs (docs/CONFIG.md); without it they are refused.
# emscripten: the HTML report's in-page engine (tools/build_wasm.sh); without it pages are static.
# dpkg-dev: `apt-get source` for tools/build_yaml_pic.sh; without it the wheel carries libyaml-cpp.so.
optional=(clang clang-format libclang-rt-dev libxml2-utils libopenmpi-dev openmpi-bin coinor-libcbc-dev pkg-config
          libtomlplusplus-dev emscripten dpkg-dev)

missing=()
for p in "${pkgs[@]}" "${optional[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exec bash "$(dirname "$0")/build_yaml_pic.sh"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null || { echo "install-deps: apt-get update failed" >&2; exit 1; }
for p in "${missing[@]}"; do
  if ! $SUDO apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1; then
    case " ${optional[*]} " in
      *" $p "*) echo "install-deps: optional package '$p' could not be installed; continuing" >&2 ;;
      *) echo "install-deps: cannot install required package '$p'" >&2; exit 1 ;;
    esac
  fi
done
exec bash "$(dirname "$0")/build_yaml_pic.sh"

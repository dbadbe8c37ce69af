#!/usr/bin/env bash
# Builds Debian's own yaml-cpp source package -- the version the installed libyaml-cpp-dev has, so
# that its headers are the ones ppsim compiles with -- as a static, position-independent archive
# into .deps/yaml-cpp-pic/{include,lib} (ignored by git). CMake links it into the Python module
# when present (PPSIM_YAML_PIC_DIR): Debian's own libyaml-cpp.a is position-dependent code, which
# cannot go into a shared object, so without this archive the wheel carries libyaml-cpp.so beside
# the module instead. tools/install-deps.sh runs it; it prints nothing when the archive is built.
#
# The source comes through apt, which checks the archive's signature and the files' hashes: a
# deb-src entry (/etc/apt/sources.list.d/ppsim-deb-src.sources, the deb entries' URIs, suites and
# keys; removed again afterwards) unless one exists, then `apt-get source` (dpkg-dev). Without
# network, root (or sudo) or dpkg-dev it says so in one line and exits 0: the fallback stands.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/.deps/yaml-cpp-pic
work=$PWD/.deps/yaml-cpp-src
say() { echo "build_yaml_pic: $*" >&2; }

ver=$(dpkg-query -W -f='${source:Version}' libyaml-cpp-dev 2>/dev/null || true)
[ -n "$ver" ] || { say "libyaml-cpp-dev is not installed (tools/install-deps.sh); nothing built"; exit 0; }
[ "$(cat "$out/VERSION" 2>/dev/null || true)" = "$ver" ] && [ -f "$out/lib/libyaml-cpp.a" ] && exit 0
fallback="the Python module will carry libyaml-cpp.so instead"
command -v dpkg-source >/dev/null || { say "no dpkg-source (Debian: dpkg-dev): $fallback"; exit 0; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null && sudo -n true 2>/dev/null || { say "fetching the source needs root: $fallback"; exit 0; }
  SUDO="sudo"
fi

# A deb-src twin of each deb822 'Types: deb' stanza, unless some deb-src entry exists already.
srcfile=/etc/apt/sources.list.d/ppsim-deb-src.sources
update=($SUDO apt-get update -qq)
if ! grep -Eqs '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/*; then
  stanzas=$(awk 'FNR == 1 && NR > 1 { print "" } { print }' /etc/apt/sources.list.d/*.sources 2>/dev/null |
             sed -E 's/^Types:.*/Types: deb-src/' || true)
  if [ -z "$stanzas" ]; then  # one-line format (/etc/apt/sources.list)
    srcfile=/etc/apt/sources.list.d/ppsim-deb-src.list
    stanzas=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | sed 's/^deb /deb-src /' || true)
  fi
  [ -n "$stanzas" ] || { say "no apt source entry to derive a deb-src one from: $fallback"; exit 0; }
  echo "$stanzas" | $SUDO tee "$srcfile" >/dev/null
  trap '$SUDO rm -f "$srcfile"' EXIT
  update+=(-o "Dir::Etc::sourcelist=$srcfile" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0)
fi
say "fetching yaml-cpp $ver's Debian source (apt-get source) to build a position-independent archive"
rm -rf "$work" && mkdir -p "$work"
if ! "${update[@]}" >"$work/apt.log" 2>&1 ||
   ! (cd "$work" && $SUDO apt-get source -qq "yaml-cpp=$ver" >>"$work/apt.log" 2>&1); then
  say "could not fetch yaml-cpp $ver's source (offline? $work/apt.log): $fallback"; exit 0
fi
[ -z "$SUDO" ] || $SUDO chown -R "$(id -u):$(id -g)" "$work"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'yaml-cpp-*' | head -1)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
rm -rf "$out"
if ! { cmake -S "$src" -B "$work/build" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
         -DYAML_BUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=OFF \
         -DYAML_CPP_INSTALL=ON -DCMAKE_INSTALL_PREFIX="$out" -DCMAKE_INSTALL_LIBDIR=lib &&
       cmake --build "$work/build" -j "$(nproc 2>/dev/null || echo 2)" &&
       cmake --install "$work/build"; } >"$work/build.log" 2>&1; then
  rm -rf "$out"; say "yaml-cpp $ver did not build ($work/build.log): $fallback"; exit 0
fi
echo "$ver" >"$out/VERSION"
say "built $out/lib/libyaml-cpp.a (yaml-cpp $ver, position-independent)"

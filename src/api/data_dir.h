// Where ppsim's shipped data lies when the caller runs from elsewhere: `ppsim fidelity` from /tmp,
// the pip-installed package (configs/published beside the module and the binary, in ppsim/), the
// build tree (build/ppsim, build/python/ppsim/_ppsim*.so: the source tree's configs/ above them).
#pragma once
#include <string>

namespace ppsim::api {

// `dir` when it is a directory; else, for a relative `dir` (the default "configs/published"),
// the first <d>/<dir> that is one, for d the folder of the binary or module this code is in and
// its parents (4 levels); else `dir` unchanged (the caller's error names it).
std::string shipped_dir(const std::string& dir);

}  // namespace ppsim::api

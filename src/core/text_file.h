// A user's input file read whole, one over its size limit refused without being read into memory
// (a huge file, or an endless pipe).
#pragma once
#include <cstddef>
#include <istream>
#include <string>

#include "core/error.h"

namespace ppsim {

// Appends `in`'s bytes to `text`, reading one byte over `max_bytes` at the most: false when there
// were more than `max_bytes` (the text then holds the first max_bytes + some).
bool read_capped(std::istream& in, std::size_t max_bytes, std::string& text);

// The text of the file at `path`, of at most `max_bytes`. InputError at `where` (at the file
// itself where `where` names none): "cannot open the {what} '{path}'" and "cannot read the {what}
// '{path}'" (kExitIo), "'{path}' is over {max_bytes in MiB} MiB{over}" (kExitLimit).
std::string read_text_file(const std::string& path, const SourceLoc& where, const std::string& what,
                           std::size_t max_bytes, const std::string& over = {});

}  // namespace ppsim

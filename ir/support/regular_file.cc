#include "ir/support/regular_file.h"

#include <cerrno>
#include <fstream>
#include <iterator>
#include <system_error>

#include "ir/support/error.h"

namespace kplan {

void require_regular_file(const std::filesystem::path& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows links; ELOOP comes back in ec
  const std::string where = path.string() + ": cannot open " + what + ": ";
  if (ec && ec.value() == ELOOP) throw Error(where + "too many levels of symbolic links");
  if (ec && ec != std::errc::no_such_file_or_directory) throw Error(where + ec.message());
  switch (st.type()) {
    case fs::file_type::regular: return;
    case fs::file_type::not_found: throw Error(where + "does not exist");
    case fs::file_type::directory: throw Error(where + "is a directory");
    case fs::file_type::fifo: throw Error(where + "is a FIFO, not a regular file");
    case fs::file_type::socket: throw Error(where + "is a socket, not a regular file");
    case fs::file_type::block:
    case fs::file_type::character: throw Error(where + "is a device, not a regular file");
    default: throw Error(where + "is not a regular file");
  }
}

std::string read_regular_file(const std::filesystem::path& path, const std::string& what) {
  require_regular_file(path, what);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open " + what);
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  if (in.bad()) throw Error(path.string() + ": read error in " + what);
  return bytes;
}

}  // namespace kplan

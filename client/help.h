// The memplan CLI's help texts: one per command, each flag with its
// default and allowed values (strategies, allocators, formats and the
// duration syntax come from the libraries that define them).
//
//   std::printf("%s", client::CommandHelp("plan").c_str());
#ifndef MEMPLAN_CLIENT_HELP_H_
#define MEMPLAN_CLIENT_HELP_H_

#include <string>

#include "absl/strings/string_view.h"

namespace memplan::client {

// The overview: commands, exit codes, where to read more.
std::string OverviewHelp();

// Help for "plan", "bench", "inspect" or "health"; empty for another name.
std::string CommandHelp(absl::string_view command);

// "memplan 0.2.0 (commit abc, Release build)".
std::string VersionLine();

}  // namespace memplan::client

#endif  // MEMPLAN_CLIENT_HELP_H_

// Starting and stopping real programs from tests: memplan-server on
// 127.0.0.1 with port 0 (the port is read from its first line of output),
// and the memplan CLI with its output and exit code. Every process a test
// starts is stopped by PID when its handle goes away.
#ifndef MEMPLAN_TESTS_TESTING_PROCESS_H_
#define MEMPLAN_TESTS_TESTING_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memplan::testing {

// A child process whose stdout is read up to its first line.
class ServerProcess {
 public:
  // Starts `binary` with `args` and waits (at most 20 s) for the line
  // "... listening on HOST:PORT". port() is 0 if that did not come. Unless
  // `args` set --metrics_address, metrics go on a free port.
  ServerProcess(const std::string& binary,
                const std::vector<std::string>& args);
  ~ServerProcess();  // SIGKILL if still running

  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const;
  const std::string& first_line() const { return first_line_; }
  // Sends `signal` and waits up to `timeout_s`; returns the exit status as
  // waitpid's, or -1 if it did not exit in time (then it is killed).
  int Stop(int signal, double timeout_s);

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string first_line_;
};

// The metrics port from memplan-server's first line ("metrics on
// HOST:PORT"), or 0.
int MetricsPort(const std::string& first_line);

struct CommandResult {
  int exit_code = -1;          // -1 when killed or timed out
  std::string out;             // standard output
  std::string err;             // standard error
  int64_t peak_rss_bytes = 0;  // the program's peak resident memory
};

// Runs `binary args...` with `stdin_text` on its input; kills it after
// `timeout_s`.
CommandResult RunCommand(const std::string& binary,
                         const std::vector<std::string>& args,
                         const std::string& stdin_text = "",
                         double timeout_s = 60);

// CPU time (user + system) a live process has used so far, in seconds, from
// /proc/PID/stat; -1 when it cannot be read.
double ProcessCpuSeconds(pid_t pid);

// Resident memory of a live process in bytes (VmRSS of /proc/PID/status);
// -1 when it cannot be read.
int64_t ProcessRssBytes(pid_t pid);

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_TESTING_PROCESS_H_

#include "tests/testing/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace memplan::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<char*> Argv(const std::string& binary,
                        const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return argv;
}

// Waits for `pid` until `deadline`; returns waitpid's status or -1.
int WaitUntil(pid_t pid, Clock::time_point deadline, rusage* usage = nullptr) {
  while (Clock::now() < deadline) {
    int status = 0;
    pid_t r = wait4(pid, &status, WNOHANG, usage);
    if (r == pid) return status;
    if (r < 0) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

// Reads from `fd` until a newline or `deadline`.
std::string ReadLine(int fd, Clock::time_point deadline) {
  std::string line;
  char c;
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (read(fd, &c, 1) != 1 || c == '\n') break;
    line.push_back(c);
  }
  return line;
}

}  // namespace

ServerProcess::ServerProcess(const std::string& binary,
                             const std::vector<std::string>& given) {
  // Never the default metrics port: tests run in parallel, and a developer's
  // own server may hold it.
  std::vector<std::string> args = given;
  bool has_metrics = false;
  for (const std::string& a : args) {
    has_metrics = has_metrics || a.rfind("--metrics_address", 0) == 0;
  }
  if (!has_metrics) args.push_back("--metrics_address=127.0.0.1:0");
  int out[2];
  if (pipe(out) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a killed test
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    std::vector<char*> argv = Argv(binary, args);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  first_line_ = ReadLine(out[0], Clock::now() + std::chrono::seconds(20));
  close(out[0]);  // the server's later output goes nowhere (SIGPIPE-safe:
                  // it prints only the first line)
  const size_t at = first_line_.find(" on ");
  const size_t colon = first_line_.find(':', at == std::string::npos ? 0 : at);
  if (at != std::string::npos && colon != std::string::npos) {
    port_ = std::atoi(first_line_.c_str() + colon + 1);
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string ServerProcess::address() const {
  return "127.0.0.1:" + std::to_string(port_);
}

int ServerProcess::Stop(int signal, double timeout_s) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  int status = WaitUntil(
      pid_, Clock::now() + std::chrono::milliseconds(
                               static_cast<int64_t>(timeout_s * 1000)));
  if (status == -1) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
  return status;
}

int MetricsPort(const std::string& first_line) {
  const size_t at = first_line.find("metrics on ");
  if (at == std::string::npos) return 0;
  const size_t colon = first_line.find(':', at);
  return colon == std::string::npos ? 0
                                    : std::atoi(first_line.c_str() + colon + 1);
}

CommandResult RunCommand(const std::string& binary,
                         const std::vector<std::string>& args,
                         const std::string& stdin_text, double timeout_s) {
  signal(SIGPIPE, SIG_IGN);  // a child that exits early must not kill us
  int in[2], out[2], err[2];
  CommandResult result;
  if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) return result;
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a killed test
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    std::vector<char*> argv = Argv(binary, args);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  // Feed stdin and drain both outputs without blocking on either.
  size_t written = 0;
  if (stdin_text.empty()) close(in[1]);
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  const auto deadline =
      Clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  bool out_open = true, err_open = true, in_open = !stdin_text.empty();
  char buf[65536];
  while ((out_open || err_open) && Clock::now() < deadline) {
    pollfd fds[3] = {{out[0], POLLIN, 0},
                     {err[0], POLLIN, 0},
                     {in_open ? in[1] : -1, POLLOUT, 0}};
    if (poll(fds, 3, 100) <= 0) continue;
    for (int k = 0; k < 2; ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP))) continue;
      ssize_t n = read(fds[k].fd, buf, sizeof buf);
      if (n <= 0) {
        (k == 0 ? out_open : err_open) = false;
      } else {
        (k == 0 ? result.out : result.err).append(buf, n);
      }
    }
    if (in_open && (fds[2].revents & (POLLOUT | POLLERR))) {
      ssize_t n = write(in[1], stdin_text.data() + written,
                        stdin_text.size() - written);
      if (n > 0) written += n;
      if (n < 0 || written == stdin_text.size()) {
        close(in[1]);
        in_open = false;
      }
    }
  }
  if (in_open) close(in[1]);
  close(out[0]);
  close(err[0]);
  rusage usage{};
  int status = WaitUntil(pid, deadline + std::chrono::seconds(1), &usage);
  if (status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return result;
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.peak_rss_bytes = int64_t{usage.ru_maxrss} * 1024;  // in KiB
  return result;
}

double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  // Fields after the command (which may hold spaces) start past its ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; fields >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stoll(field);
    if (i == 15) {
      stime = std::stoll(field);
      return static_cast<double>(utime + stime) /
             static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
  }
  return -1;
}

int64_t ProcessRssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stoll(line.substr(6)) * 1024;  // "VmRSS:   1234 kB"
    }
  }
  return -1;
}

}  // namespace memplan::testing

#include "tests/testing/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace memplan::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// Reads a label value starting after its opening quote; `i` ends past the
// closing quote.
std::string ReadQuoted(const std::string& line, size_t& i) {
  std::string value;
  while (i < line.size() && line[i] != '"') {
    if (line[i] == '\\' && i + 1 < line.size()) {
      ++i;
      value.push_back(line[i] == 'n' ? '\n' : line[i]);
    } else {
      value.push_back(line[i]);
    }
    ++i;
  }
  ++i;
  return value;
}

}  // namespace

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path_and_query,
                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = Loopback(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to port ", port));
  }
  const std::string request =
      absl::StrCat("GET ", path_and_query,
                   " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("send failed");
  }
  std::string response;
  char buf[65536];
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    response.append(buf, n);
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) {
    return absl::DeadlineExceededError(
        absl::StrCat("no complete HTTP answer from port ", port));
  }
  const size_t space = response.find(' ');
  if (response.compare(space + 1, 3, "200") != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("HTTP ", response.substr(0, response.find('\r')), ": ",
                     response.substr(body + 4, 500)));
  }
  return response.substr(body + 4);
}

std::vector<Sample> ParseExposition(const std::string& text) {
  std::vector<Sample> samples;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = line.find_first_of("{ ");
    if (i == std::string::npos) continue;
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        if (eq == std::string::npos) break;
        std::string key = line.substr(i, eq - i);
        i = eq + 2;  // past ="
        s.labels[key] = ReadQuoted(line, i);
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;
    }
    while (i < line.size() && line[i] == ' ') ++i;
    const std::string value = line.substr(i, line.find(' ', i) - i);
    if (value == "+Inf") {
      s.value = HUGE_VAL;
    } else if (!absl::SimpleAtod(value, &s.value)) {
      continue;
    }
    samples.push_back(std::move(s));
  }
  return samples;
}

double SumOf(const std::vector<Sample>& samples, const std::string& name,
             const std::map<std::string, std::string>& match) {
  double sum = 0;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : match) {
      auto it = s.labels.find(k);
      if (it == s.labels.end() || it->second != v) all = false;
    }
    if (all) sum += s.value;
  }
  return sum;
}

absl::StatusOr<double> MetricSum(
    int port, const std::string& name,
    const std::map<std::string, std::string>& match) {
  absl::StatusOr<std::string> text = HttpGet(port, "/metrics");
  if (!text.ok()) return text.status();
  return SumOf(ParseExposition(*text), name, match);
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += absl::StrCat("%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

}  // namespace memplan::testing

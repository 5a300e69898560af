// Reading Prometheus data in tests: free loopback ports, a plain HTTP GET
// on 127.0.0.1, the text exposition format parsed into samples, and
// Prometheus's HTTP API answers as protobuf Structs.
//
//   absl::StatusOr<std::string> text = HttpGet(9464, "/metrics");
//   std::vector<Sample> samples = ParseExposition(*text);
//   double ok = SumOf(samples, "grpc_server_handled_total",
//                     {{"grpc_method", "Plan"}, {"grpc_code", "OK"}});
#ifndef MEMPLAN_TESTS_TESTING_METRICS_H_
#define MEMPLAN_TESTS_TESTING_METRICS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace memplan::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (bound, then closed).
int FreePort();

// GET http://127.0.0.1:port/path_and_query; the body when the status is 200.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path_and_query,
                                    absl::Duration timeout = absl::Seconds(10));

// One sample of the text exposition format.
struct Sample {
  std::string name;                           // e.g. "..._bucket"
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

// Every sample line of `text` (comments and blank lines skipped).
std::vector<Sample> ParseExposition(const std::string& text);

// Sum of the values of samples named `name` whose labels include `match`.
double SumOf(const std::vector<Sample>& samples, const std::string& name,
             const std::map<std::string, std::string>& match = {});

// GET /metrics from 127.0.0.1:port, then SumOf(name, match).
absl::StatusOr<double> MetricSum(
    int port, const std::string& name,
    const std::map<std::string, std::string>& match = {});

// Percent-encodes `s` for a URL query value.
std::string UrlEncode(const std::string& s);

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_TESTING_METRICS_H_

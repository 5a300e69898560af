// libFuzzer target: arbitrary bytes as the names of a small graph or buffer
// list (tensors, ops, the graph, memory pools), planned by the engine with
// every text emitter asked for. Checks what each output's grammar needs:
// every name in the response follows the text rule (valid UTF-8 of
// printable characters, distinct where the input's were) and the response
// goes through strict JSON and back unchanged; the SVG is well-formed XML
// and the HTML parses without character errors (libxml2), its plan data is
// strict JSON; the C header is valid UTF-8, its comments close, and its
// macro and data names are C identifiers, each defined once.
//
// Input: one byte of switches (bit 0: a buffer list instead of a graph;
// bit 1: memory pools named like the tensors; bit 2: a c_header_id), then
// names, each one byte of length and that many bytes.
#include <libxml/HTMLparser.h>
#include <libxml/parser.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "base/text.h"
#include "engine/plan.h"
#include "formats/request_json.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/fuzz/fuzz_checks.h"

namespace memplan::fuzz {
namespace {

[[noreturn]] void Fail(const char* what, absl::string_view detail) {
  std::fprintf(stderr, "names_fuzz: %s: %.*s\n", what,
               static_cast<int>(std::min<size_t>(detail.size(), 400)),
               detail.data());
  std::abort();
}

// Valid UTF-8 whose characters all pass `ok`.
template <typename Ok>
bool AllChars(absl::string_view text, Ok ok) {
  for (size_t i = 0; i < text.size();) {
    char32_t c = 0;
    const size_t len = base::Utf8Sequence(text, i, &c);
    if (len == 0 || !ok(c)) return false;
    i += len;
  }
  return true;
}

void CheckName(absl::string_view name) {
  if (!AllChars(name, base::IsNameChar)) Fail("name breaks the rule", name);
}

// What the request is built from.
struct Input {
  bool buffers = false;
  bool pools = false;
  bool header_id = false;
  std::vector<std::string> names;  // as given, empty and repeated ones dropped
};

Input Read(const uint8_t* data, size_t size) {
  Input in;
  if (size == 0) return in;
  in.buffers = data[0] & 1;
  in.pools = data[0] & 2;
  in.header_id = data[0] & 4;
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 1; i < size && in.names.size() < 24;) {
    const size_t len = std::min<size_t>(data[i], size - i - 1);
    std::string name(reinterpret_cast<const char*>(data + i + 1), len);
    i += 1 + len;
    // Graphs need non-empty names, each once.
    if (!name.empty() && seen.insert(name).second) {
      in.names.push_back(std::move(name));
    }
  }
  return in;
}

// A chain of tensors named by the input (graph), or buffers with its ids,
// with every text emitter asked for.
v1::PlanRequest Request(const Input& in) {
  v1::PlanRequest request;
  const int n = static_cast<int>(in.names.size());
  if (in.buffers) {
    for (int i = 0; i < n; ++i) {
      v1::Buffer* b = request.add_buffers();
      b->set_id(in.names[i]);
      b->set_start(i);
      b->set_end(i + 2);
      b->set_size(32 * (1 + i % 3));
    }
  } else {
    v1::Graph* g = request.mutable_graph();
    g->set_name(n > 0 ? in.names[0] : "");
    for (int i = 0; i < n; ++i) {
      v1::Tensor* t = g->add_tensors();
      t->set_name(in.names[i]);
      t->set_size_bytes(64 * (1 + i % 3));
    }
    for (int i = 0; i + 1 < n; ++i) {
      v1::Op* op = g->add_ops();
      op->set_name(in.names[(i + 1) % n]);
      op->add_inputs(in.names[i]);
      op->add_outputs(in.names[i + 1]);
      op->set_in_place(i % 2 == 1);
    }
    if (n > 0) g->add_inputs(in.names[0]);
    if (n > 1) g->add_outputs(in.names[n - 1]);
  }
  if (in.pools) {
    for (const std::string& name : in.names) {
      v1::MemoryPool* pool = request.mutable_options()->add_memory_pools();
      pool->set_name(name);
      pool->set_capacity_bytes(128);
    }
    auto* pools = request.mutable_options()->mutable_memory_pools();
    if (!pools->empty()) pools->rbegin()->set_capacity_bytes(0);
  }
  if (in.header_id) request.set_c_header_id("net_1");
  for (const char* format : {"c_header", "svg", "html"}) {
    request.add_emit(format);
  }
  return request;
}

// Every name the response carries follows the rule; tensor names stay
// distinct.
void CheckResponse(const v1::PlanResponse& r) {
  absl::flat_hash_set<std::string> names;
  const auto add = [&](const std::string& name) {
    CheckName(name);
    if (!names.insert(name).second) Fail("two tensors, one name", name);
  };
  for (const v1::Assignment& a : r.assignments()) {
    add(a.name());
    CheckName(a.in_place_of());
    CheckName(a.memory_pool());
  }
  for (const v1::UnplannedTensor& u : r.unplanned()) add(u.name());
  for (const v1::MemoryPoolPlan& m : r.memory_pools()) CheckName(m.name());
  for (const v1::MemoryPool& m : r.options().memory_pools()) {
    CheckName(m.name());
  }
  for (const std::string& w : r.warnings()) CheckName(w);
  // Strict JSON both ways, nothing lost.
  const std::string json = formats::ToJson(r);
  v1::PlanResponse back;
  if (!google::protobuf::util::JsonStringToMessage(json, &back).ok()) {
    Fail("response JSON does not parse", json);
  }
  back.clear_files();  // bytes: base64 both ways
  v1::PlanResponse without_files = r;
  without_files.clear_files();
  std::string differences;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&differences);
  if (!differ.Compare(without_files, back)) {
    Fail("response changed through JSON", differences);
  }
}

// libxml2's errors while a document is parsed, counted (not printed).
void CountError(void* count, xmlErrorPtr error) {
  // HTML: tags libxml2's HTML 4 parser does not know (svg, canvas) are
  // fine; any other error (a bad character, bad markup) is not.
  if (error == nullptr || error->level < XML_ERR_ERROR ||
      error->code == XML_HTML_UNKNOWN_TAG) {
    return;
  }
  ++*static_cast<int*>(count);
}

void CheckSvg(const std::string& svg) {
  int errors = 0;
  xmlSetStructuredErrorFunc(&errors, CountError);
  xmlDocPtr doc = xmlReadMemory(svg.data(), static_cast<int>(svg.size()),
                                "plan.svg", "UTF-8", XML_PARSE_NONET);
  xmlSetStructuredErrorFunc(nullptr, nullptr);
  if (doc == nullptr || errors > 0) Fail("SVG is not well-formed XML", svg);
  xmlFreeDoc(doc);
}

void CheckHtml(const std::string& html) {
  int errors = 0;
  xmlSetStructuredErrorFunc(&errors, CountError);
  htmlDocPtr doc = htmlReadMemory(html.data(), static_cast<int>(html.size()),
                                  "plan.html", "UTF-8", HTML_PARSE_NONET);
  xmlSetStructuredErrorFunc(nullptr, nullptr);
  if (doc == nullptr || errors > 0) Fail("HTML does not parse", html);
  xmlFreeDoc(doc);
  if (!AllChars(html, base::IsXmlChar)) Fail("HTML character", html);
  // The plan's data is strict JSON.
  const std::string open = "id=\"plan-data\">\n";
  const size_t begin = html.find(open);
  const size_t end = html.find("\n</script>", begin);
  if (begin == std::string::npos || end == std::string::npos) {
    Fail("HTML without its plan data", html);
  }
  const std::string data =
      html.substr(begin + open.size(), end - begin - open.size());
  google::protobuf::Struct parsed;
  if (!google::protobuf::util::JsonStringToMessage(data, &parsed).ok()) {
    Fail("HTML plan data is not JSON", data);
  }
}

bool IsIdentifier(absl::string_view id) {
  if (id.empty() || absl::ascii_isdigit(static_cast<unsigned char>(id[0]))) {
    return false;
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

// The word after `at` on its line.
absl::string_view WordAfter(absl::string_view text, size_t at) {
  const size_t end = text.find_first_of(" \n", at);
  return text.substr(at, end == absl::string_view::npos ? end : end - at);
}

void CheckCHeader(const std::string& header) {
  if (!AllChars(header, base::IsXmlChar)) Fail("header character", header);
  if (absl::StrContains(header, "??")) Fail("header has a trigraph", header);
  // Comments close and do not nest; `h` is the code without them.
  std::string h;
  size_t done = 0;
  for (size_t at = header.find("/*"); at != std::string::npos;
       at = header.find("/*", done)) {
    const size_t close = header.find("*/", at + 2);
    if (close == std::string::npos) Fail("comment left open", header);
    if (header.substr(at + 2, close - at - 2).find("/*") != std::string::npos) {
      Fail("comment inside a comment", header.substr(at, close - at));
    }
    h.append(header, done, at - done);
    h += ' ';
    done = close + 2;
  }
  h.append(header, done, std::string::npos);
  // Every macro defined once; every name a C identifier.
  absl::flat_hash_set<std::string> macros;
  for (size_t at = h.find("#define "); at != std::string::npos;
       at = h.find("#define ", at + 1)) {
    const absl::string_view name = WordAfter(h, at + 8);
    if (!IsIdentifier(name)) Fail("macro name", name);
    if (!macros.insert(std::string(name)).second) Fail("macro twice", name);
  }
  for (size_t at = h.find("memplan_"); at != std::string::npos;
       at = h.find("memplan_", at + 1)) {
    size_t end = at;
    while (end < h.size() && (absl::ascii_isalnum(h[end]) || h[end] == '_')) {
      ++end;
    }
    if (end < h.size() && h[end] != ' ' && h[end] != '[' && h[end] != ';' &&
        h[end] != '\n') {
      Fail("data name", h.substr(at, end - at + 1));
    }
  }
}

}  // namespace
}  // namespace memplan::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memplan;  // NOLINT: one entry point
  const fuzz::Input in = fuzz::Read(data, size);
  base::CancelToken cancel(absl::Now() + absl::Seconds(2));
  absl::StatusOr<engine::PlanOutcome> outcome =
      engine::Plan(fuzz::Request(in), fuzz::SmallLimits(), nullptr, &cancel);
  if (!outcome.ok()) {
    // Any names plan: only a graph of no op may fail.
    if (in.names.size() < 2) return 0;
    fuzz::Fail("names made the plan fail", outcome.status().ToString());
  }
  fuzz::CheckPlan(outcome->result);
  const v1::PlanResponse response = engine::ToResponse(*outcome);
  fuzz::CheckResponse(response);
  for (const v1::EmittedFile& file : response.files()) {
    if (file.format() == "svg") fuzz::CheckSvg(file.data());
    if (file.format() == "html") fuzz::CheckHtml(file.data());
    if (file.format() == "c_header") fuzz::CheckCHeader(file.data());
  }
  if (response.files_size() != 3) fuzz::Fail("files missing", "");
  return 0;
}

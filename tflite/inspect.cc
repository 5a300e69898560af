#include "tflite/inspect.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tflite/model.h"
#include "tflite/reader.h"

namespace memplan::formats {
namespace {

// A -1 dim of a main input: the model's own shape stands in for it.
DefaultedDim DefaultDim(const tfl::Tensor& tensor, const std::string& name,
                        size_t d) {
  DefaultedDim out;
  out.value = name;
  out.dim = static_cast<int>(d);
  const auto* shape = tensor.shape();
  out.size =
      static_cast<int>(d) < Size(shape) ? shape->Get(static_cast<int>(d)) : -1;
  out.flag = d == 0 ? absl::StrCat("--dim ", kTfliteBatchDim, "=N")
                    : absl::StrCat("--input ", name, "=SHAPE");
  return out;
}

// The offline plan the file carries, if any.
std::optional<OfflinePlanSummary> OfflinePlanOf(const TfliteModel& m) {
  const TfliteOfflinePlan plan = m.OfflinePlan();
  if (!plan.present) return std::nullopt;
  OfflinePlanSummary out;
  out.version = plan.version;
  out.subgraphs = plan.subgraphs;
  out.offsets = plan.count;
  const size_t count = static_cast<size_t>(std::max(plan.count, 0));
  for (size_t k = 0; k < plan.offsets.size() && k < count; ++k) {
    out.placed += plan.offsets[k] != -1;
  }
  out.usable = plan.usable;
  return out;
}

}  // namespace

absl::StatusOr<ModelSummary> SummarizeTflite(absl::string_view bytes,
                                             absl::string_view name) {
  absl::StatusOr<TfliteModel> parsed = TfliteModel::Parse(bytes, name);
  if (!parsed.ok()) return parsed.status();
  const TfliteModel& m = *parsed;
  ModelSummary summary;
  summary.format = Format::kTflite;
  if (const auto* d = m.model().description()) {
    summary.producer =
        std::string(d->c_str(), std::min<size_t>(d->size(), 128));
  }
  summary.version = absl::StrCat("schema ", m.model().version());
  summary.subgraphs = m.subgraph_count();
  std::set<int> weight_buffers;
  bool batch = false;
  for (int s = 0; s < m.subgraph_count(); ++s) {
    for (int t = 0; t < m.tensor_count(s); ++t) {
      const tfl::Tensor& tensor = m.tensor(s, t);
      if (m.DataBytes(tensor) > 0 && !tensor.is_variable()) {
        if (weight_buffers.insert(tensor.buffer()).second) {
          summary.weight_bytes += m.DataBytes(tensor);
        }
      } else {
        const std::vector<int64_t> dims = TfliteDeclaredDims(tensor);
        batch = batch || TfliteHasDynamicBatch(dims);
        summary.dynamic_tensors += std::any_of(dims.begin(), dims.end(),
                                               [](int64_t d) { return d < 0; });
      }
    }
    summary.ops += m.op_count(s);
    for (int i = 0; i < m.op_count(s); ++i) {
      ++summary.op_types[m.OpType(m.op(s, i))];
    }
  }
  if (batch) summary.symbolic_dims.push_back(kTfliteBatchDim);
  const tfl::SubGraph& main = m.subgraph(0);
  for (const auto& [list, values] :
       {std::pair{main.inputs(), &summary.inputs},
        std::pair{main.outputs(), &summary.outputs}}) {
    for (int k = 0; k < Size(list); ++k) {
      const int t = list->Get(k);
      const tfl::Tensor& tensor = m.tensor(0, t);
      ValueSummary v;
      v.name = m.RawTensorName(0, t);  // the text rule applies on output
      v.element_type = TfliteTypeName(tensor.type());
      const std::vector<int64_t> dims = TfliteDeclaredDims(tensor);
      bool known = true;
      for (size_t d = 0; d < dims.size(); ++d) {
        known = known && dims[d] >= 0;
        v.dims.push_back(dims[d] >= 0 ? absl::StrCat(dims[d])
                         : d == 0     ? kTfliteBatchDim
                                      : "?");
        if (dims[d] < 0 && values == &summary.inputs) {
          summary.defaulted_dims.push_back(DefaultDim(tensor, v.name, d));
        }
      }
      const int type = tensor.type() == tfl::TensorType_INT4
                           ? tfl::TensorType_INT8
                           : tensor.type();
      absl::StatusOr<int64_t> size = TfliteTensorBytes(type, dims, v.name);
      v.bytes = known && size.ok() ? *size : -1;
      values->push_back(std::move(v));
    }
  }
  summary.offline_plan = OfflinePlanOf(m);
  return summary;
}

}  // namespace memplan::formats

#include "tflite/inspect.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tflite/model.h"
#include "tflite/reader.h"

namespace memplan::formats {

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
        batch = batch || TfliteHasDynamicBatch(TfliteDeclaredDims(tensor));
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
      v.name = m.TensorName(0, t);
      v.element_type = TfliteTypeName(tensor.type());
      const std::vector<int64_t> dims = TfliteDeclaredDims(tensor);
      bool known = true;
      for (size_t d = 0; d < dims.size(); ++d) {
        known = known && dims[d] >= 0;
        v.dims.push_back(dims[d] >= 0 ? absl::StrCat(dims[d])
                         : d == 0     ? kTfliteBatchDim
                                      : "?");
      }
      const int type = tensor.type() == tfl::TensorType_INT4
                           ? tfl::TensorType_INT8
                           : tensor.type();
      absl::StatusOr<int64_t> size = TfliteTensorBytes(type, dims, v.name);
      v.bytes = known && size.ok() ? *size : -1;
      values->push_back(std::move(v));
    }
  }
  return summary;
}

}  // namespace memplan::formats

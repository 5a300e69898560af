// Lean ONNX models: the same model without the payload of its large
// tensors, cut at the wire level before protobuf parses it, so that the
// import costs what the graph costs, not what the weights weigh. The import
// needs shapes, element types and the values of the small tensors shape
// computations read; the data of a tensor with more than kMaxOnnxContent
// elements is never read (SanitizeTensors clears it after the parse), so it
// need not be parsed or copied either.
//
//   absl::StatusOr<std::string> lean = formats::LeanOnnxModel(bytes);
//   if (!lean.ok()) return lean.status();
//   onnx::ModelProto model;
//   if (!model.ParseFromString(*lean)) ...  // as the input would have
//   // every initializer over 4096 elements: no data, data_location EXTERNAL
//
// The import (onnx/import.h) and `inspect` (onnx/inspect.h) parse the lean
// form of every model they read.
#ifndef MEMPLAN_ONNX_LEAN_H_
#define MEMPLAN_ONNX_LEAN_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cancel.h"

namespace memplan::formats {

// Copies a serialized ModelProto, leaving out the data of every tensor that
// the import's sanitizer would clear for its size: initializers and tensor
// attributes (`t`, `tensors`) of the main graph and of every subgraph
// (attributes `g`, `graphs`) with more than kMaxOnnxContent elements by
// their dims and data that matches them. Such a tensor loses its raw_data
// and typed data fields (skipped by their length, never read: no page
// inside them of a memory-mapped file is touched) and is marked data_location
// EXTERNAL; everything else is copied byte for byte, unknown fields
// included, so the parse and sanitizing of the result give what those of
// the input give. Tensors whose data the sanitizer would reject or keep
// (a negative dim, a count overflowing 64 bits, data not matching the dims,
// already external) stay as they are. Costs time in the bytes of the graph
// structure (and of packed varint data: int32_data, int64_data,
// uint64_data, which must be read to be counted).
//
// Malformed wire data is no error: the input comes back unchanged (copied),
// and the protobuf parse that follows reports it; so does an input over
// 2 GiB (protobuf's limit), and messages nested over 64 deep are copied as
// they are. The status is OK for every input today; callers check it.
//
// `release`, when given, is called with each part of `bytes` the walk is
// done with for now (it may read a part again later): a caller whose bytes
// are memory-mapped drops those pages (formats::FileBytes::Release), so the
// file's pages around each tensor's header do not stay resident.
// DEADLINE_EXCEEDED when `cancel` (may be null) fires during the walk
// (polled every few milliseconds of it).
[[nodiscard]] absl::StatusOr<std::string> LeanOnnxModel(
    absl::string_view bytes,
    const std::function<void(absl::string_view)>& release = {},
    const base::CancelToken* cancel = nullptr);

}  // namespace memplan::formats

#endif  // MEMPLAN_ONNX_LEAN_H_

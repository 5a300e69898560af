#include "client/input.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/model_import.h"
#include "formats/file_io.h"
#include "formats/request_json.h"
#include "proto/convert.h"

namespace memplan::client {

absl::StatusOr<formats::ModelOptions> ModelOptionsFromFlags(
    const std::vector<std::string>& dims,
    const std::vector<std::string>& shapes) {
  formats::ModelOptions options;
  for (const std::string& list : dims) {
    if (auto s = formats::ParseDimList(list, &options); !s.ok()) return s;
  }
  for (const std::string& list : shapes) {
    if (auto s = formats::ParseShapeList(list, &options); !s.ok()) return s;
  }
  return options;
}

namespace {

// A model file carried whole, with the dims and shapes to import it with.
absl::Status SetModel(const Input& input, std::string bytes,
                      const formats::ModelOptions& options,
                      v1::PlanRequest* request) {
  v1::ModelFile* model = request->mutable_model();
  model->set_format(std::string(formats::FormatName(input.format)));
  model->set_data(std::move(bytes));
  model->set_name(input.path == "-" ? "<stdin>" : input.path);
  for (const auto& [name, value] : options.dims) {
    (*model->mutable_dims())[name] = value;
  }
  for (const auto& [name, dims] : options.shapes) {
    v1::Shape& shape = (*model->mutable_shapes())[name];
    for (int64_t d : dims) shape.add_dims(d);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Input> ReadInput(const std::string& path,
                                const InputOptions& options) {
  // Mapped: a model's weights are never read (RequestModelBytes skips them).
  absl::StatusOr<formats::FileBytes> file = formats::FileBytes::Open(
      path, options.max_bytes, options.max_model_bytes);
  if (!file.ok()) return file.status();
  const absl::string_view bytes = file->view();
  absl::StatusOr<formats::Format> format =
      formats::DetectFormat(path, bytes, options.format);
  if (!format.ok()) return format.status();
  Input input;
  input.path = path;
  input.format = *format;
  const std::string name = path == "-" ? "<stdin>" : path;
  if (!formats::IsModel(*format) &&
      (!options.dims.empty() || !options.shapes.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dim and --input apply to model files (ONNX, TFLite); ",
                     name, " is ", formats::FormatName(*format)));
  }
  if (!formats::IsModel(*format) &&
      static_cast<int64_t>(bytes.size()) > options.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name, " is ", bytes.size(), " bytes, larger than ", options.max_bytes,
        " (the input limit, --max_input_bytes)"));
  }
  if (*format == formats::Format::kCsv) {
    absl::StatusOr<formats::MinimallocCsv> csv =
        formats::ReadMinimallocCsv(bytes, name);
    if (!csv.ok()) return csv.status();
    api::BuffersToProto(csv->problem, input.request.mutable_buffers());
    if (!csv->has_alignment) {
      // No alignment column: the buffers take the request's default, 1
      // (MiniMalloc's) unless --alignment sets another.
      for (v1::Buffer& b : *input.request.mutable_buffers()) {
        b.clear_alignment();
      }
      input.request.mutable_options()->set_alignment(1);
    }
    input.csv = *std::move(csv);
    return input;
  }
  if (*format == formats::Format::kJson) {
    absl::StatusOr<v1::PlanRequest> request =
        formats::ParseRequestJson(bytes, name);
    if (!request.ok()) return request.status();
    input.request = *std::move(request);
    return input;
  }
  absl::StatusOr<formats::ModelOptions> model_options =
      ModelOptionsFromFlags(options.dims, options.shapes);
  if (!model_options.ok()) return model_options.status();
  absl::StatusOr<std::string> model =
      engine::RequestModelBytes(*format, *file, name);
  if (!model.ok()) return model.status();
  if (auto s =
          SetModel(input, *std::move(model), *model_options, &input.request);
      !s.ok()) {
    return s;
  }
  return input;
}

}  // namespace memplan::client

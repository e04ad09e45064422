package tritonv1

import (
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/oip"
	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

// dataTypes maps V2 datatypes to the v1 model configuration's DataType.
var dataTypes = map[infer.Datatype]pb.DataType{
	oip.BOOL: pb.DataType_TYPE_BOOL, oip.UINT8: pb.DataType_TYPE_UINT8,
	oip.UINT16: pb.DataType_TYPE_UINT16, oip.UINT32: pb.DataType_TYPE_UINT32,
	oip.UINT64: pb.DataType_TYPE_UINT64, oip.INT8: pb.DataType_TYPE_INT8,
	oip.INT16: pb.DataType_TYPE_INT16, oip.INT32: pb.DataType_TYPE_INT32,
	oip.INT64: pb.DataType_TYPE_INT64, oip.FP16: pb.DataType_TYPE_FP16,
	oip.FP32: pb.DataType_TYPE_FP32, oip.FP64: pb.DataType_TYPE_FP64,
	oip.BYTES: pb.DataType_TYPE_STRING,
}

// dataType is d's v1 DataType (TYPE_INVALID for none).
func dataType(d infer.Datatype) pb.DataType { return dataTypes[d] }

// tensorSpec is one input or output of a model as v1 sees it: Dims
// without the batch dimension when the model batches.
type tensorSpec struct {
	Name     string
	Datatype infer.Datatype
	Dims     []int64
	// Reshape marks a tensor with no dimensions besides the batch (a
	// tensor model's label, V2 shape [-1]): v1 sees dims [1], reshaped to
	// [] for the model, as a v1 model configuration says it (dims may not
	// be empty there).
	Reshape bool
}

// modelSpec is a served model as the v1 API describes it.
type modelSpec struct {
	Name     string
	Version  string
	Platform string
	// MaxBatch is the v1 max_batch_size: a tensor model's rows per
	// request, whose V2 shapes start with the batch dimension; 0 for the
	// others (LLMs, embedding models), whose V2 shapes are their v1 dims
	// and whose requests have batch_size 1.
	MaxBatch int
	Inputs   []tensorSpec
	Outputs  []tensorSpec
	// cfg is the model's Triton configuration.
	cfg *tc.ModelConfig
}

// specOf describes m for the v1 API, from its V2 metadata and its Triton
// configuration (infer.TritonConfig): a tensor model's max_batch_size is
// the configuration's (its config.pbtxt's, or its adaptive batch size, or
// the rows one request may carry), and 0 means its dims are its V2 shapes.
func specOf(m infer.Model) *modelSpec {
	md := infer.Metadata(m)
	cfg := infer.TritonConfig(m)
	s := &modelSpec{Name: md.Name, Version: infer.VersionOf(m), Platform: md.Platform, cfg: cfg}
	if _, ok := infer.AsSignature(m); ok {
		s.MaxBatch = int(cfg.GetMaxBatchSize())
	}
	conv := func(ts []infer.TensorMetadata) []tensorSpec {
		out := make([]tensorSpec, len(ts))
		for i, t := range ts {
			dims := slices.Clone(t.Shape)
			if s.MaxBatch > 0 && len(dims) > 0 {
				dims = dims[1:]
			}
			out[i] = tensorSpec{Name: t.Name, Datatype: t.Datatype, Dims: dims}
			if len(dims) == 0 {
				out[i].Dims, out[i].Reshape = []int64{1}, true
			}
		}
		return out
	}
	s.Inputs, s.Outputs = conv(md.Inputs), conv(md.Outputs)
	return s
}

func (s *modelSpec) input(name string) (tensorSpec, bool) {
	i := slices.IndexFunc(s.Inputs, func(t tensorSpec) bool { return t.Name == name })
	if i < 0 {
		return tensorSpec{}, false
	}
	return s.Inputs[i], true
}

func (s *modelSpec) output(name string) (tensorSpec, bool) {
	i := slices.IndexFunc(s.Outputs, func(t tensorSpec) bool { return t.Name == name })
	if i < 0 {
		return tensorSpec{}, false
	}
	return s.Outputs[i], true
}

// versionNumber is the model version as v1's int64, -1 when it is not a
// number ("a version of -1 indicates the status is for requests for which
// the version could not be determined").
func (s *modelSpec) versionNumber() int64 {
	v, err := strconv.ParseInt(s.Version, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// config is the model's v1 ModelConfig: its Triton configuration in the
// v1 message, which has the same field numbers for what both have (name,
// platform, version_policy, max_batch_size, input, output with format and
// reshape, instance_group, dynamic_batching, parameters, ...); what v1
// lacks (backend, newer fields) is left out, and an empty platform is the
// V2 one ("llama.cpp" for a GGUF LLM, "onnx").
func (s *modelSpec) config() *pb.ModelConfig {
	c := &pb.ModelConfig{}
	if b, err := proto.Marshal(s.cfg); err == nil {
		_ = proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, c)
	}
	if c.Platform == "" {
		c.Platform = s.Platform
	}
	return c
}

// v1Dims is an output's shape as v1 reports it: without the batch
// dimension when the model batches, and [1] for a reshaped one.
func (s *modelSpec) v1Dims(name string, shape []int64) []int64 {
	dims := shape
	if s.MaxBatch > 0 && len(dims) > 0 {
		dims = dims[1:]
	}
	if o, ok := s.output(name); ok && o.Reshape && len(dims) == 0 {
		return []int64{1}
	}
	return slices.Clone(dims)
}

// names lists tensors as "name (TYPE_FP32 [6])" for error messages.
func names(ts []tensorSpec) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.Name + " (" + dataType(t.Datatype).String() + " " + dimsString(t.Dims) + ")"
	}
	return strings.Join(parts, ", ")
}

func dimsString(d []int64) string {
	parts := make([]string, len(d))
	for i, v := range d {
		parts[i] = strconv.FormatInt(v, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

package infer

import (
	"cmp"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
)

// tritonConfigured is a model loaded from a Triton model folder: its
// config.pbtxt (nil when it was not).
type tritonConfigured interface {
	TritonConfig() *tc.ModelConfig
}

// batchSizer is a model with an adaptive batch size of its own (a tensor
// model's or a custom runtime's max_batch_size setting).
type batchSizer interface{ MaxBatchSize() int }

// TritonConfig is m's Triton model configuration, as Triton's model
// configuration extension (GET /v2/models/{m}/config, gRPC ModelConfig)
// and Triton v1's status report it. A model loaded from a config.pbtxt
// reports that file (completed with the model's tensors where it leaves
// them out); another gets one made from its V2 metadata: its name, the
// V2 platform, a latest-version policy, max_batch_size and its inputs and
// outputs. A tensor model's or custom runtime's max_batch_size is its
// adaptive batch size where it has one (max_batch_size in its settings),
// else the rows one request may carry (maxBatch), and its dims leave out
// the batch dimension; other
// models (LLMs, embedding models) have max_batch_size 0 (a config.pbtxt's
// max_batch_size there is the LLM's max_num_seqs) and their V2 shapes as
// dims, whatever the max_batch_size. A tensor with no dimension besides the batch is dims
// [1] with an empty reshape, as Triton writes it. The answer is the
// caller's to change.
func TritonConfig(m Model) *tc.ModelConfig {
	md := Metadata(m)
	var c *tc.ModelConfig
	if t, ok := m.(tritonConfigured); ok && t.TritonConfig() != nil {
		c = proto.Clone(t.TritonConfig()).(*tc.ModelConfig)
	} else {
		c = &tc.ModelConfig{
			Name: md.Name, Platform: md.Platform,
			VersionPolicy: &tc.ModelVersionPolicy{PolicyChoice: &tc.ModelVersionPolicy_Latest_{Latest: &tc.ModelVersionPolicy_Latest{NumVersions: 1}}},
		}
		if sig, ok := AsSignature(m); ok && batchedShapes(md) {
			c.MaxBatchSize = int32(min(max(maxBatch(sig), 1), math.MaxInt32))
		}
	}
	_, tensorKind := AsSignature(m)
	dims := func(shape []int64) ([]int64, *tc.ModelTensorReshape) {
		d := slices.Clone(shape)
		if tensorKind && c.MaxBatchSize > 0 && len(d) > 0 {
			d = d[1:]
		}
		if len(d) == 0 {
			return []int64{1}, &tc.ModelTensorReshape{Shape: []int64{}}
		}
		return d, nil
	}
	if len(c.Input) == 0 {
		for _, t := range md.Inputs {
			d, r := dims(t.Shape)
			c.Input = append(c.Input, &tc.ModelInput{Name: t.Name, DataType: TritonDataType(t.Datatype), Dims: d, Reshape: r})
		}
	}
	if len(c.Output) == 0 {
		for _, t := range md.Outputs {
			d, r := dims(t.Shape)
			c.Output = append(c.Output, &tc.ModelOutput{Name: t.Name, DataType: TritonDataType(t.Datatype), Dims: d, Reshape: r})
		}
	}
	return c
}

// maxBatch is the rows a model with declared tensors takes at once, as
// Triton's max_batch_size: its adaptive batch size where it has one,
// else the rows one request may carry (a tensor model's MaxRequestRows;
// a custom runtime bounds none here).
func maxBatch(sig Signature) int {
	if b, ok := sig.(batchSizer); ok && b.MaxBatchSize() > 1 {
		return b.MaxBatchSize()
	}
	if t, ok := sig.(TensorModel); ok {
		return t.MaxRequestRows()
	}
	return math.MaxInt32
}

// batchedShapes reports whether every tensor's V2 shape starts with the
// batch dimension (-1), as a tensor model's do.
func batchedShapes(md ModelMetadata) bool {
	for _, t := range slices.Concat(md.Inputs, md.Outputs) {
		if len(t.Shape) == 0 || t.Shape[0] != -1 {
			return false
		}
	}
	return true
}

// TritonDataType is d as Triton's model configuration names it
// (TYPE_STRING for BYTES; TYPE_INVALID for none): oip's table.
func TritonDataType(d Datatype) tc.DataType { return d.Triton() }

// SortedMapKeys returns a protobuf map's keys in the order both text
// forms of a configuration write them (Triton's JSON here, v1's text
// format in api/tritonv1): numbers by value, strings and bools by text.
func SortedMapKeys(m protoreflect.Map) []protoreflect.MapKey {
	ks := make([]protoreflect.MapKey, 0, m.Len())
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		ks = append(ks, k)
		return true
	})
	slices.SortFunc(ks, func(a, b protoreflect.MapKey) int {
		switch a.Interface().(type) {
		case int32, int64:
			return cmp.Compare(a.Int(), b.Int())
		case uint32, uint64:
			return cmp.Compare(a.Uint(), b.Uint())
		}
		return cmp.Compare(a.String(), b.String())
	})
	return ks
}

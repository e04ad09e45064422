package v2

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
)

// TestConfigJSON: the configuration in Triton's JSON reads back as it was
// (protojson takes numbers for int64), with dims as numbers, every scalar
// field, unset messages left out, and the same bytes every time.
func TestConfigJSON(t *testing.T) {
	c := &tc.ModelConfig{
		Name: "clf", Platform: "onnxruntime_onnx", MaxBatchSize: 8,
		Input:            []*tc.ModelInput{{Name: "x", DataType: tc.DataType_TYPE_FP32, Format: tc.ModelInput_FORMAT_NCHW, Dims: []int64{3, 224, 224}}},
		Output:           []*tc.ModelOutput{{Name: "label", DataType: tc.DataType_TYPE_INT64, Dims: []int64{1}, Reshape: &tc.ModelTensorReshape{}}},
		SchedulingChoice: &tc.ModelConfig_DynamicBatching{DynamicBatching: &tc.ModelDynamicBatching{PreferredBatchSize: []int32{4}, MaxQueueDelayMicroseconds: 500}},
		Parameters:       map[string]*tc.ModelParameter{"b": {StringValue: "2"}, "a": {StringValue: "1 \"q\" é"}},
	}
	b := configJSON(c.ProtoReflect())
	if string(b) != string(configJSON(c.ProtoReflect())) {
		t.Fatal("not stable")
	}
	var got tc.ModelConfig
	if err := protojson.Unmarshal(b, &got); err != nil || !proto.Equal(&got, c) {
		t.Fatalf("%s read back as %v (%v)", b, &got, err)
	}
	for _, want := range []string{`"dims":[3,224,224]`, `"format":"FORMAT_NCHW"`, `"backend":""`, `"max_queue_delay_microseconds":500`, `"reshape":{"shape":[]}`, `"parameters":{"a":`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("%s lacks %s", b, want)
		}
	}
	if strings.Contains(string(b), `"sequence_batching"`) || strings.Contains(string(b), `"optimization"`) {
		t.Fatalf("%s has unset messages", b)
	}
	if !json.Valid(b) {
		t.Fatalf("%s is not JSON", b)
	}
}

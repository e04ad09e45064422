package infer

import (
	"context"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/oip"
	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
)

// batchingTensor is a tensor model with an adaptive batch size of its own,
// as a custom runtime with max_batch_size 8 in its settings has.
type batchingTensor struct {
	batch int
	cfg   *tc.ModelConfig
}

func (batchingTensor) Name() string     { return "rt" }
func (batchingTensor) Ready() bool      { return true }
func (batchingTensor) Platform() string { return "custom" }
func (batchingTensor) Inputs() []oip.Spec {
	return []oip.Spec{{Name: "x", DType: oip.FP32, Shape: []int64{-1, 2}}}
}
func (batchingTensor) Outputs() []oip.Spec {
	return []oip.Spec{{Name: "y", DType: oip.INT64, Shape: []int64{-1}}}
}
func (batchingTensor) MaxRequestRows() int { return 1<<31 - 1 }
func (b batchingTensor) MaxBatchSize() int { return b.batch }
func (batchingTensor) Infer(context.Context, []oip.Tensor) ([]oip.Tensor, error) {
	return nil, nil
}
func (b batchingTensor) TritonConfig() *tc.ModelConfig { return b.cfg }

// TestTritonConfig: a model without a config.pbtxt reports its own
// max_batch_size (a runtime's 8, not 2147483647) and its tensors without
// the batch dimension; one with a config.pbtxt reports the file, with the
// tensors it leaves out filled in, and is not changed by the caller.
func TestTritonConfig(t *testing.T) {
	c := TritonConfig(batchingTensor{batch: 8})
	if c.GetName() != "rt" || c.GetPlatform() != "custom" || c.GetMaxBatchSize() != 8 || !slices.Equal(c.GetInput()[0].GetDims(), []int64{2}) ||
		!slices.Equal(c.GetOutput()[0].GetDims(), []int64{1}) || c.GetOutput()[0].GetReshape() == nil || c.GetOutput()[0].GetDataType() != tc.DataType_TYPE_INT64 {
		t.Fatalf("config %v", c)
	}
	if c := TritonConfig(batchingTensor{}); c.GetMaxBatchSize() != 1<<31-1 {
		t.Fatalf("without a batch size: max_batch_size %d, want the rows a request may carry", c.GetMaxBatchSize())
	}
	file := &tc.ModelConfig{Name: "rt", Backend: "llama.cpp", MaxBatchSize: 4}
	c = TritonConfig(batchingTensor{batch: 8, cfg: file})
	if c.GetBackend() != "llama.cpp" || c.GetMaxBatchSize() != 4 || len(c.GetInput()) != 1 || len(file.Input) != 0 {
		t.Fatalf("config %v (file now %v)", c, file)
	}
}

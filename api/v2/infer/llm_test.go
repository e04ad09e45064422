package infer

import (
	"strings"
	"testing"
)

// TestDecodeLLMOptionalInputs: the inputs chat's features came with
// (thinking_token_budget, return_reasoning_content, image) decode into
// parameters, and an unknown name is refused with a list that includes
// them, as reasoning_content is among the outputs.
func TestDecodeLLMOptionalInputs(t *testing.T) {
	text := NewBytesTensor(InputText, []int64{1}, [][]byte{[]byte("Once")})
	budget := NewInt32Tensor(ParamThinkingBudget, []int64{1}, []int32{7})
	img := NewBytesTensor(InputImage, []int64{2}, [][]byte{tinyPNG, tinyPNG})
	lr, err := DecodeLLM(&Request{Inputs: []*Tensor{text, budget, img}, Outputs: []RequestedOutput{{Name: OutputText}, {Name: OutputReasoning}}})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := lr.Params.Int64(ParamThinkingBudget); !ok || err != nil || v != 7 {
		t.Errorf("%s: %v %v %v, want 7", ParamThinkingBudget, v, ok, err)
	}
	if imgs, _ := lr.Params[InputImage].([][]byte); len(imgs) != 2 {
		t.Errorf("%s: %v, want the 2 elements", InputImage, lr.Params[InputImage])
	}
	if strings.Join(lr.Outputs, ",") != OutputText+","+OutputReasoning {
		t.Errorf("outputs %v", lr.Outputs)
	}

	for _, tc := range []struct {
		name    string
		req     *Request
		wantAll []string
	}{
		{"unknown input", &Request{Inputs: []*Tensor{text, NewBytesTensor("pixels", []int64{1}, [][]byte{tinyPNG})}},
			[]string{`"pixels"`, InputText, ParamThinkingBudget, "return_reasoning_content", InputImage}},
		{"unknown output", &Request{Inputs: []*Tensor{text}, Outputs: []RequestedOutput{{Name: "thoughts"}}},
			[]string{`"thoughts"`, OutputText, OutputReasoning}},
		{"image not BYTES", &Request{Inputs: []*Tensor{text, NewInt32Tensor(InputImage, []int64{1}, []int32{1})}},
			[]string{InputImage, "BYTES"}},
	} {
		_, err := DecodeLLM(tc.req)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.wantAll {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %s", tc.name, err, w)
			}
		}
	}
}

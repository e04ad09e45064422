package infer

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/llmserve/llmserve/oip"
)

// The LLM's tensors, with Triton's vLLM backend's names. Every sampling
// setting can also be a request parameter (or a key of the
// sampling_parameters JSON); a tensor wins over a parameter.
const (
	InputText        = "text_input"
	InputStream      = "stream"
	InputSampling    = "sampling_parameters"
	InputExclude     = "exclude_input_in_output"
	OutputText       = "text_output"
	OutputFinish     = "finish_reason"
	OutputNumInput   = "num_input_tokens"
	OutputNumOutput  = "num_output_tokens"
	OutputCumLogprob = "cumulative_logprob"
	// OutputReasoning is the thinking of a model with a reasoning parser
	// (the tags dropped; text_output is then the answer alone), as chat's
	// reasoning_content; empty for other models.
	OutputReasoning = "reasoning_content"
)

// returnFlags are Triton's vLLM backend's BOOL inputs (or parameters) that
// add an output, as asking for it by name does.
var returnFlags = [][2]string{
	{"return_finish_reason", OutputFinish},
	{"return_num_input_tokens", OutputNumInput},
	{"return_num_output_tokens", OutputNumOutput},
	{"return_cumulative_logprob", OutputCumLogprob},
	{"return_reasoning_content", OutputReasoning},
}

var llmInputs = []TensorMetadata{
	{Name: InputText, Datatype: oip.BYTES, Shape: []int64{-1}},
	{Name: InputStream, Datatype: oip.BOOL, Shape: []int64{1}, Optional: true},
	{Name: InputSampling, Datatype: oip.BYTES, Shape: []int64{1}, Optional: true},
	{Name: InputExclude, Datatype: oip.BOOL, Shape: []int64{1}, Optional: true},
	{Name: "max_tokens", Datatype: oip.INT32, Shape: []int64{1}, Optional: true},
	{Name: "min_tokens", Datatype: oip.INT32, Shape: []int64{1}, Optional: true},
	{Name: "temperature", Datatype: oip.FP32, Shape: []int64{1}, Optional: true},
	{Name: "top_p", Datatype: oip.FP32, Shape: []int64{1}, Optional: true},
	{Name: "top_k", Datatype: oip.INT32, Shape: []int64{1}, Optional: true},
	{Name: "min_p", Datatype: oip.FP32, Shape: []int64{1}, Optional: true},
	{Name: "repetition_penalty", Datatype: oip.FP32, Shape: []int64{1}, Optional: true},
	{Name: "presence_penalty", Datatype: oip.FP32, Shape: []int64{1}, Optional: true},
	{Name: "frequency_penalty", Datatype: oip.FP32, Shape: []int64{1}, Optional: true},
	{Name: "seed", Datatype: oip.UINT64, Shape: []int64{1}, Optional: true},
	{Name: "ignore_eos", Datatype: oip.BOOL, Shape: []int64{1}, Optional: true},
	{Name: "stop", Datatype: oip.BYTES, Shape: []int64{-1}, Optional: true},
	{Name: "return_finish_reason", Datatype: oip.BOOL, Shape: []int64{1}, Optional: true},
	{Name: "return_num_input_tokens", Datatype: oip.BOOL, Shape: []int64{1}, Optional: true},
	{Name: "return_num_output_tokens", Datatype: oip.BOOL, Shape: []int64{1}, Optional: true},
	{Name: "return_cumulative_logprob", Datatype: oip.BOOL, Shape: []int64{1}, Optional: true},
}

var llmOutputs = []TensorMetadata{
	{Name: OutputText, Datatype: oip.BYTES, Shape: []int64{-1}},
	{Name: OutputFinish, Datatype: oip.BYTES, Shape: []int64{-1}},
	{Name: OutputNumInput, Datatype: oip.INT32, Shape: []int64{-1}},
	{Name: OutputNumOutput, Datatype: oip.INT32, Shape: []int64{-1}},
	{Name: OutputCumLogprob, Datatype: oip.FP32, Shape: []int64{-1}},
}

// reasoningInputs and reasoningOutputs are what a model with a reasoning
// parser takes and produces beyond llmInputs and llmOutputs; its metadata
// lists them. Any LLM request may name them: the budget is refused for a
// model without a parser, reasoning_content is empty for it.
var (
	reasoningInputs = []TensorMetadata{
		{Name: ParamThinkingBudget, Datatype: oip.INT32, Shape: []int64{1}, Optional: true},
		{Name: "return_reasoning_content", Datatype: oip.BOOL, Shape: []int64{1}, Optional: true},
	}
	reasoningOutputs = []TensorMetadata{
		{Name: OutputReasoning, Datatype: oip.BYTES, Shape: []int64{-1}},
	}
)

// llmInput is the metadata of the LLM input called name.
func llmInput(name string) (TensorMetadata, bool) {
	for _, list := range [][]TensorMetadata{llmInputs, reasoningInputs, mediaInputs} {
		if i := slices.IndexFunc(list, func(m TensorMetadata) bool { return m.Name == name }); i >= 0 {
			return list[i], true
		}
	}
	return TensorMetadata{}, false
}

// llmOutput is the metadata of the LLM output called name.
func llmOutput(name string) (TensorMetadata, bool) {
	for _, list := range [][]TensorMetadata{llmOutputs, reasoningOutputs} {
		if i := slices.IndexFunc(list, func(m TensorMetadata) bool { return m.Name == name }); i >= 0 {
			return list[i], true
		}
	}
	return TensorMetadata{}, false
}

// LLMRequest is an inference request for a generative model, decoded from
// its tensors.
type LLMRequest struct {
	ID string
	// Prompts are text_input's elements; PromptShape is its shape, which
	// text_output and the other outputs take.
	Prompts     []string
	PromptShape []int64
	// Params are the request's parameters, the sampling_parameters JSON
	// and the optional input tensors, merged in that order (later wins).
	Params Parameters
	// Outputs are the output names to return, in order.
	Outputs []string
}

// DecodeLLM checks an inference request against the LLM's inputs and
// outputs and decodes it.
func DecodeLLM(r *Request) (*LLMRequest, error) {
	if err := r.CheckInputs(); err != nil {
		return nil, err
	}
	if err := applyContentTypes(r); err != nil {
		return nil, err
	}
	lr := &LLMRequest{ID: r.ID, Params: Parameters{}}
	for k, v := range r.Parameters {
		lr.Params[k] = v
	}
	for _, t := range r.Inputs {
		if _, ok := llmInput(t.Name); !ok {
			return nil, invalidf("unknown input %q: an LLM takes %s", truncate(t.Name), metadataNames(llmInputs, reasoningInputs, mediaInputs))
		}
	}
	text := r.input(InputText)
	if text == nil {
		return nil, invalidf("input %q (BYTES, one prompt per element) is required", InputText)
	}
	if text.Datatype != oip.BYTES {
		return nil, invalidf("input %q must have datatype BYTES, got %s", InputText, text.Datatype)
	}
	if len(text.Bytes) == 0 {
		return nil, invalidf("input %q has no elements; send at least one prompt", InputText)
	}
	for i, b := range text.Bytes {
		if !utf8.Valid(b) {
			return nil, invalidf("input %q element %d is not valid UTF-8 text", InputText, i)
		}
		lr.Prompts = append(lr.Prompts, string(b))
	}
	lr.PromptShape = text.Shape
	for _, t := range r.Inputs {
		if t.Name == InputText {
			continue
		}
		if r.RequestContentType() == ContentPandas {
			// Every column has a row per prompt; a setting is one value.
			if err := collapseColumn(t); err != nil {
				return nil, err
			}
		}
	}
	if t := r.input(InputSampling); t != nil {
		if t.Datatype != oip.BYTES || len(t.Bytes) != 1 {
			return nil, invalidf("input %q must be one BYTES element holding a JSON object", InputSampling)
		}
		if err := mergeSamplingJSON(lr.Params, t.Bytes[0]); err != nil {
			return nil, err
		}
	}
	for _, t := range r.Inputs {
		if t.Name == InputText || t.Name == InputSampling {
			continue
		}
		if t.Name == InputImage {
			if t.Datatype != oip.BYTES {
				return nil, invalidf("input %q must have datatype BYTES (one encoded image per element), got %s", InputImage, t.Datatype)
			}
			lr.Params[InputImage] = t.Bytes
			continue
		}
		v, err := scalarOf(t)
		if err != nil {
			return nil, err
		}
		lr.Params[t.Name] = v
	}
	if len(r.Outputs) == 0 {
		lr.Outputs = []string{OutputText}
	}
	for _, o := range r.Outputs {
		md, ok := llmOutput(o.Name)
		if !ok {
			return nil, invalidf("unknown output %q: an LLM produces %s", truncate(o.Name), metadataNames(llmOutputs, reasoningOutputs))
		}
		if ct, _ := o.Parameters[ParamContentType].(string); (ct == ContentStr || ct == ContentBase64) && md.Datatype != oip.BYTES {
			return nil, invalidf("output %q has datatype %s; content type %s takes BYTES (ask for np, or no content type)", o.Name, md.Datatype, ct)
		}
		lr.Outputs = append(lr.Outputs, o.Name)
	}
	for _, f := range returnFlags {
		flag, out := f[0], f[1]
		on, _, err := lr.Params.Bool(flag)
		if err != nil {
			return nil, invalidf("%v", err)
		}
		if on && !slices.Contains(lr.Outputs, out) {
			lr.Outputs = append(lr.Outputs, out)
		}
	}
	if slices.Contains(lr.Outputs, OutputCumLogprob) {
		lr.Params["return_cumulative_logprob"] = true
	}
	return lr, nil
}

// mergeSamplingJSON adds the keys of Triton's sampling_parameters JSON.
func mergeSamplingJSON(p Parameters, raw []byte) error {
	sp, err := DecodeParameters(raw)
	if err != nil {
		return invalidf("input %q must hold a JSON object of sampling parameters: %v", InputSampling, err)
	}
	for k, v := range sp {
		p[k] = v
	}
	return nil
}

// scalarOf turns an optional input tensor into a parameter value, checking
// its datatype against what the parameter takes.
func scalarOf(t *Tensor) (any, error) {
	md, _ := llmInput(t.Name)
	want := md.Datatype
	if t.Name == "stop" {
		if t.Datatype != oip.BYTES {
			return nil, invalidf("input %q must have datatype BYTES (one stop string per element), got %s", t.Name, t.Datatype)
		}
		out := make([]string, len(t.Bytes))
		for i, b := range t.Bytes {
			out[i] = string(b)
		}
		return out, nil
	}
	if t.Len() != 1 {
		return nil, invalidf("input %q must hold exactly one element, got %d", t.Name, t.Len())
	}
	switch {
	case want == oip.BOOL:
		if t.Datatype != oip.BOOL {
			return nil, invalidf("input %q must have datatype BOOL, got %s", t.Name, t.Datatype)
		}
		return t.Raw[0] == 1, nil
	case want.IsInt():
		if !t.Datatype.IsInt() {
			return nil, invalidf("input %q must have an integer datatype (such as %s), got %s", t.Name, want, t.Datatype)
		}
		if t.Datatype == oip.UINT64 {
			return t.uint(0), nil
		}
		v, _ := t.Int(0)
		return v, nil
	default: // floats
		if !t.Datatype.IsFloat() && !t.Datatype.IsInt() {
			return nil, invalidf("input %q must have a numeric datatype (such as %s), got %s", t.Name, want, t.Datatype)
		}
		v, _ := t.Float(0)
		return v, nil
	}
}

// metadataNames lists the names in lists, comma-separated.
func metadataNames(lists ...[]TensorMetadata) string {
	var b strings.Builder
	for _, m := range slices.Concat(lists...) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.Name)
	}
	return b.String()
}

// BuildOutputs builds the response tensors of a finished LLM request.
func (lr *LLMRequest) BuildOutputs(res []Result) []*Tensor {
	shape := slices.Clone(lr.PromptShape)
	out := make([]*Tensor, 0, len(lr.Outputs))
	for _, name := range lr.Outputs {
		var t *Tensor
		switch name {
		case OutputText, OutputReasoning, OutputFinish:
			vals := make([][]byte, len(res))
			for i := range res {
				vals[i] = []byte(res[i].text(name))
			}
			t = NewBytesTensor(name, shape, vals)
		case OutputNumInput, OutputNumOutput:
			vals := make([]int32, len(res))
			for i := range res {
				if name == OutputNumInput {
					vals[i] = int32(res[i].PromptTokens)
				} else {
					vals[i] = int32(res[i].OutputTokens)
				}
			}
			t = NewInt32Tensor(name, shape, vals)
		case OutputCumLogprob:
			vals := make([]float32, len(res))
			for i := range res {
				vals[i] = float32(res[i].CumLogprob)
			}
			t = NewFP32Tensor(name, shape, vals)
		}
		out = append(out, t)
	}
	return out
}

// text is the BYTES output called name of the result (OutputText,
// OutputReasoning or OutputFinish).
func (r *Result) text(name string) string {
	switch name {
	case OutputReasoning:
		return r.Reasoning
	case OutputFinish:
		return r.Finish
	}
	return r.Text
}

package tests

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
	"github.com/llmserve/llmserve/tokenizer"
)

// What chat accepts reaches V2 generate, generate_stream and infer through
// the shared frontend (issue 27): the thinking budget, reasoning_content
// in the output, logprobs with alternatives.

// thinkerPrompt is the thinker's chat prompt as its template renders it:
// the answer starts inside a thinking section.
const thinkerPrompt = "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n<think>\n"

type v2GenAnswer struct {
	TextOutput       string `json:"text_output"`
	ReasoningContent string `json:"reasoning_content"`
	Details          struct {
		FinishReason string `json:"finish_reason"`
		Logprobs     []struct {
			ID          int32   `json:"id"`
			Text        string  `json:"text"`
			Logprob     float32 `json:"logprob"`
			TopLogprobs []struct {
				ID      int32   `json:"id"`
				Text    string  `json:"text"`
				Logprob float32 `json:"logprob"`
			} `json:"top_logprobs"`
		} `json:"logprobs"`
	} `json:"details"`
}

// v2Gen posts a generate request to model and returns the status and body.
func (s *server) v2Gen(t *testing.T, model string, params map[string]any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"text_input": params["text_input"], "parameters": params})
	code, _, raw := s.v2Do(t, "POST", "/v2/models/"+model+"/generate", b, nil)
	return code, raw
}

func (s *server) v2GenOK(t *testing.T, model string, params map[string]any) v2GenAnswer {
	t.Helper()
	code, raw := s.v2Gen(t, model, params)
	var a v2GenAnswer
	if code != 200 || json.Unmarshal(raw, &a) != nil {
		t.Fatalf("generate %v: %d %s", params, code, raw)
	}
	return a
}

// v2GenStream runs generate_stream on model and returns the concatenated
// reasoning_content and text_output of its events.
func (s *server) v2GenStream(t *testing.T, model string, params map[string]any) (reasoning, text string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"text_input": params["text_input"], "parameters": params})
	resp, err := http.Post(s.URL+"/v2/models/"+model+"/generate_stream", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("generate_stream: %d %s", resp.StatusCode, raw)
	}
	var r, c strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev v2GenAnswer
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		r.WriteString(ev.ReasoningContent)
		c.WriteString(ev.TextOutput)
	}
	return r.String(), c.String()
}

// TestV2GenerateThinkingBudget: thinking_token_budget and reasoning_content
// on V2 generate, generate_stream and infer, over the real engine. The
// synthesized thinker never closes its thinking by itself: without a
// budget all of max_tokens is reasoning; with one, </think> is forced after
// exactly that many tokens and the answer follows. The split matches the
// raw text /v1/completions returns for the same prompt and budget.
func TestV2GenerateThinkingBudget(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{Name: "thinker", Path: thinkerModel(t), ReasoningParser: tokenizer.ReasoningQwen3},
		models.GenerativeConfig{})
	const maxTokens = 30
	params := func(extra map[string]any) map[string]any {
		p := map[string]any{"text_input": thinkerPrompt, "max_tokens": maxTokens, "temperature": 0, "details": true}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}

	free := s.v2GenOK(t, "thinker", params(nil))
	if free.TextOutput != "" || free.ReasoningContent == "" || len(free.Details.Logprobs) != maxTokens {
		t.Fatalf("no budget: text_output %q, reasoning_content %q, %d tokens; want all thinking", free.TextOutput, free.ReasoningContent, len(free.Details.Logprobs))
	}
	for _, budget := range []int{0, 1, 8} {
		a := s.v2GenOK(t, "thinker", params(map[string]any{"thinking_token_budget": budget}))
		toks := a.Details.Logprobs
		if len(toks) != maxTokens || toks[budget].Text != "</think>" {
			t.Fatalf("budget %d: %d tokens, token %d is %q; want </think> after the budget", budget, len(toks), budget, toks[min(budget, len(toks)-1)].Text)
		}
		for i := range budget {
			if toks[i].ID != free.Details.Logprobs[i].ID {
				t.Errorf("budget %d: token %d is %d, without a budget %d", budget, i, toks[i].ID, free.Details.Logprobs[i].ID)
			}
		}
		if a.TextOutput == "" || strings.Contains(a.TextOutput+a.ReasoningContent, "think>") || !strings.HasPrefix(free.ReasoningContent, a.ReasoningContent) {
			t.Errorf("budget %d: reasoning %q, answer %q (free reasoning %q)", budget, a.ReasoningContent, a.TextOutput, free.ReasoningContent)
		}
		// The raw text of the same request on /v1/completions.
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if code, _ := s.post(t, "/v1/completions", map[string]any{"model": "thinker", "prompt": thinkerPrompt, "max_tokens": maxTokens,
			"temperature": 0, "thinking_token_budget": budget}, &c); code != 200 || len(c.Choices) != 1 {
			t.Fatalf("completions: %d %+v", code, c)
		}
		if want := a.ReasoningContent + "</think>" + a.TextOutput; c.Choices[0].Text != want {
			t.Errorf("budget %d: completions %q, generate's parts joined %q", budget, c.Choices[0].Text, want)
		}
		if r, x := s.v2GenStream(t, "thinker", params(map[string]any{"thinking_token_budget": budget, "details": false})); r != a.ReasoningContent || x != a.TextOutput {
			t.Errorf("budget %d: streamed reasoning %q answer %q; generate %q %q", budget, r, x, a.ReasoningContent, a.TextOutput)
		}
	}

	// infer: the budget as an INT32 input, reasoning_content as an output.
	a := s.v2GenOK(t, "thinker", params(map[string]any{"thinking_token_budget": 8}))
	code, _, raw := s.v2Do(t, "POST", "/v2/models/thinker/infer", []byte(mustJSON(map[string]any{
		"inputs": []map[string]any{
			{"name": "text_input", "datatype": "BYTES", "shape": []int{1}, "data": []string{thinkerPrompt}},
			{"name": "max_tokens", "datatype": "INT32", "shape": []int{1}, "data": []int{maxTokens}},
			{"name": "temperature", "datatype": "FP32", "shape": []int{1}, "data": []float32{0}},
			{"name": "thinking_token_budget", "datatype": "INT32", "shape": []int{1}, "data": []int{8}},
		},
		"outputs": []map[string]any{{"name": "text_output"}, {"name": "reasoning_content"}},
	})), nil)
	var inf struct {
		Outputs []struct {
			Name string   `json:"name"`
			Data []string `json:"data"`
		} `json:"outputs"`
	}
	if code != 200 || json.Unmarshal(raw, &inf) != nil || len(inf.Outputs) != 2 ||
		inf.Outputs[0].Data[0] != a.TextOutput || inf.Outputs[1].Name != "reasoning_content" || inf.Outputs[1].Data[0] != a.ReasoningContent {
		t.Errorf("infer with a budget: %d %s; generate %q %q", code, raw, a.ReasoningContent, a.TextOutput)
	}

	// The metadata lists the budget and reasoning_content for the thinker
	// only.
	for _, tc := range []struct {
		model string
		want  bool
	}{{"thinker", true}, {"stories260K", false}} {
		var md struct {
			Inputs, Outputs []struct {
				Name string `json:"name"`
			}
		}
		code, _, raw := s.v2Do(t, "GET", "/v2/models/"+tc.model, nil, nil)
		if code != 200 || json.Unmarshal(raw, &md) != nil {
			t.Fatalf("metadata %s: %d %s", tc.model, code, raw)
		}
		in := slices.ContainsFunc(md.Inputs, func(x struct {
			Name string `json:"name"`
		}) bool {
			return x.Name == "thinking_token_budget"
		})
		out := slices.ContainsFunc(md.Outputs, func(x struct {
			Name string `json:"name"`
		}) bool {
			return x.Name == "reasoning_content"
		})
		if in != tc.want || out != tc.want {
			t.Errorf("metadata of %s: thinking_token_budget %v, reasoning_content %v; want %v", tc.model, in, out, tc.want)
		}
	}

	// Refused: a negative budget, one that is not an integer, and one for a
	// model without a reasoning parser, each a 400 naming the parameter.
	for _, tc := range []struct {
		model  string
		budget any
	}{{"thinker", -1}, {"thinker", "ten"}, {"stories260K", 4}} {
		code, raw := s.v2Gen(t, tc.model, map[string]any{"text_input": "Hi", "max_tokens": 2, "thinking_token_budget": tc.budget})
		if code != http.StatusBadRequest || !strings.Contains(v2Error(t, raw), "thinking_token_budget") {
			t.Errorf("%s, budget %v: %d %s", tc.model, tc.budget, code, raw)
		}
	}
}

// TestV2GenerateLogprobs: logprobs and top_logprobs, as chat takes them,
// on V2 generate: each token of the greedy reference with its logprob and
// its most likely alternatives, the chosen one first; the same numbers as
// /v1/completions gives. Out-of-range top_logprobs is a 400.
func TestV2GenerateLogprobs(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ref := stories260k.ReferenceGreedy()
	a := s.v2GenOK(t, "stories260K", map[string]any{"text_input": ref.Prompt, "max_tokens": 6, "temperature": 0, "logprobs": true, "top_logprobs": 3})
	var c struct {
		Choices []struct {
			Logprobs struct {
				TokenLogprobs []float32            `json:"token_logprobs"`
				TopLogprobs   []map[string]float32 `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if code, _ := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": ref.Prompt, "max_tokens": 6,
		"temperature": 0, "logprobs": 3}, &c); code != 200 || len(c.Choices) != 1 {
		t.Fatalf("completions: %d", code)
	}
	want := c.Choices[0].Logprobs
	if len(a.Details.Logprobs) != 6 || len(want.TokenLogprobs) != 6 {
		t.Fatalf("%d tokens in generate's details, %d in completions'", len(a.Details.Logprobs), len(want.TokenLogprobs))
	}
	for i, tok := range a.Details.Logprobs {
		if tok.ID != ref.GeneratedTokens[i] || tok.Logprob != want.TokenLogprobs[i] || len(tok.TopLogprobs) != 3 {
			t.Fatalf("token %d: %+v; want id %d, logprob %v, 3 alternatives", i, tok, ref.GeneratedTokens[i], want.TokenLogprobs[i])
		}
		if top := tok.TopLogprobs[0]; top.ID != tok.ID || top.Logprob != tok.Logprob {
			t.Errorf("token %d: the first alternative %+v is not the greedy choice", i, top)
		}
		for _, alt := range tok.TopLogprobs {
			if lp, ok := want.TopLogprobs[i][alt.Text]; !ok || lp != alt.Logprob {
				t.Errorf("token %d: alternative %q has logprob %v; completions lists %v", i, alt.Text, alt.Logprob, want.TopLogprobs[i])
			}
		}
	}
	for _, bad := range []any{-1, 21, "3"} {
		code, raw := s.v2Gen(t, "stories260K", map[string]any{"text_input": "Hi", "max_tokens": 2, "top_logprobs": bad})
		if code != http.StatusBadRequest || !strings.Contains(v2Error(t, raw), "top_logprobs") {
			t.Errorf("top_logprobs %v: %d %s", bad, code, raw)
		}
	}
}

// TestV2GenerateImage: an image beside text_input, on the tiny vision
// model TestImageChat checks against llama-server: V2 generate (the image
// parameter, base64 or a data: URL) and infer (a BYTES image input, base64
// content type) read the image into the same prompt as chat and give its
// answer and prompt token count. A text-only model, a marker count that
// does not match, and bytes that are no image are 400s.
func TestV2GenerateImage(t *testing.T) {
	png, err := os.ReadFile("../evals/synth/testdata/mmproj/gradient-64.png")
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(png)
	s := visionServer(t)
	// The chatml prompt chat renders for [image, "Describe"] (parts joined
	// by newlines).
	const prompt = "<|im_start|>user\n<__media__>\nDescribe<|im_end|>\n<|im_start|>assistant\n"
	const answer = "\"Momeape-eapy?\"\n\""
	for _, tc := range []struct {
		name, text string
		image      any
	}{
		{"base64", prompt, b64},
		{"data URL in a list", prompt, []string{"data:image/png;base64," + b64}},
	} {
		a := s.v2GenOK(t, "vision", map[string]any{"text_input": tc.text, "image": tc.image, "max_tokens": 16, "temperature": 0})
		if a.TextOutput != answer {
			t.Errorf("%s: %q, chat answers %q", tc.name, a.TextOutput, answer)
		}
	}
	// Without the marker, the images go in front of the text.
	front := s.v2GenOK(t, "vision", map[string]any{"text_input": "<__media__>Once", "image": b64, "max_tokens": 8, "temperature": 0})
	if a := s.v2GenOK(t, "vision", map[string]any{"text_input": "Once", "image": b64, "max_tokens": 8, "temperature": 0}); a.TextOutput != front.TextOutput {
		t.Errorf("no marker: %q; with the marker in front %q", a.TextOutput, front.TextOutput)
	}
	code, _, raw := s.v2Do(t, "POST", "/v2/models/vision/infer", []byte(mustJSON(map[string]any{
		"inputs": []map[string]any{
			{"name": "text_input", "datatype": "BYTES", "shape": []int{1}, "data": []string{prompt}},
			{"name": "image", "datatype": "BYTES", "shape": []int{1}, "data": []string{b64}, "parameters": map[string]any{"content_type": "base64"}},
			{"name": "max_tokens", "datatype": "INT32", "shape": []int{1}, "data": []int{16}},
			{"name": "temperature", "datatype": "FP32", "shape": []int{1}, "data": []float32{0}},
		},
		"outputs": []map[string]any{{"name": "text_output"}, {"name": "num_input_tokens"}},
	})), nil)
	var inf struct {
		Outputs []struct {
			Data []any `json:"data"`
		} `json:"outputs"`
	}
	if code != 200 || json.Unmarshal(raw, &inf) != nil || len(inf.Outputs) != 2 || inf.Outputs[0].Data[0] != answer || inf.Outputs[1].Data[0] != float64(98) {
		t.Errorf("infer with an image: %d %s; want %q and 98 prompt tokens, as chat", code, raw, answer)
	}
	var md struct {
		Inputs []struct {
			Name string `json:"name"`
		} `json:"inputs"`
	}
	if code, _, raw := s.v2Do(t, "GET", "/v2/models/vision", nil, nil); code != 200 || json.Unmarshal(raw, &md) != nil ||
		md.Inputs[len(md.Inputs)-1].Name != "image" {
		t.Errorf("metadata of the vision model does not list the image input: %s", raw)
	}

	for _, tc := range []struct {
		name, model, text string
		image             any
		want              string
	}{
		{"two markers, one image", "vision", prompt + "<__media__>", b64, "2 times"},
		{"not an image", "vision", prompt, base64.StdEncoding.EncodeToString([]byte("hello")), "image element 0"},
		{"not base64", "vision", prompt, "%%%", "image element 0"},
	} {
		code, raw := s.v2Gen(t, tc.model, map[string]any{"text_input": tc.text, "image": tc.image, "max_tokens": 2})
		if code != http.StatusBadRequest || !strings.Contains(v2Error(t, raw), tc.want) {
			t.Errorf("%s: %d %s; want a 400 saying %q", tc.name, code, raw, tc.want)
		}
	}
	text := startServer(t, models.GenerativeConfig{})
	if code, raw := text.v2Gen(t, "stories260K", map[string]any{"text_input": "Hi", "image": b64, "max_tokens": 2}); code != http.StatusBadRequest ||
		!strings.Contains(v2Error(t, raw), "reads text only") {
		t.Errorf("an image for a text-only model: %d %s", code, raw)
	}
}

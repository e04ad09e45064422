package tests

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"
)

// TestTritonV1LLMFeatures: what V2 generate takes from chat reaches Triton
// v1 clients as the optional inputs their wire has (InferRequestHeader has
// no parameters): a reasoning model's thinking_token_budget input and
// reasoning_content output, a vision model's image input (TYPE_STRING, the
// file's bytes). Each answer equals V2 generate's on the same server.
func TestTritonV1LLMFeatures(t *testing.T) {
	dir := t.TempDir()
	thinker, err := os.ReadFile(thinkerModel(t))
	if err != nil {
		t.Fatal(err)
	}
	writeRepoFile(t, dir, "thinker", "1", thinker, map[string]any{"reasoning_parser": "qwen3"})
	text, mm := visionFiles(t)
	vision, err := os.ReadFile(text)
	if err != nil {
		t.Fatal(err)
	}
	writeRepoFile(t, dir, "vision", "1", vision, map[string]any{"mmproj": mm})
	p := startServeProc(t, "--model-repository", dir)

	str := func(b []byte, s string) []byte {
		return append(binary.LittleEndian.AppendUint32(b, uint32(len(s))), s...)
	}
	greedy := func(b []byte, maxTokens uint32) []byte {
		b = binary.LittleEndian.AppendUint32(b, maxTokens)
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(0))
	}
	generate := func(model string, params map[string]any) map[string]any {
		t.Helper()
		params["max_tokens"], params["temperature"] = 12, 0
		code, raw := p.post(t, "/v2/models/"+model+"/generate", map[string]any{"text_input": params["text_input"], "parameters": params})
		var out map[string]any
		if code != 200 || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("generate %s: %d %s", model, code, raw)
		}
		return out
	}

	// The thinking budget as an INT32 input, reasoning_content as an output.
	hdr := `batch_size: 1 input { name: "text_input" dims: 1 } input { name: "max_tokens" } input { name: "temperature" } input { name: "thinking_token_budget" }` +
		` output { name: "text_output" } output { name: "reasoning_content" }`
	body := greedy(str(nil, thinkerPrompt), 12)
	body = binary.LittleEndian.AppendUint32(body, 4)
	a := v1Do(t, "POST", p.url+"/api/infer/thinker", hdr, body)
	want := generate("thinker", map[string]any{"text_input": thinkerPrompt, "thinking_token_budget": 4})
	if a.code != 200 || v1Strings(t, a.raw["text_output"])[0] != want["text_output"] || v1Strings(t, a.raw["reasoning_content"])[0] != want["reasoning_content"] ||
		want["reasoning_content"] == "" || want["text_output"] == "" {
		t.Errorf("thinker over v1: %d %s %q %q; generate %v", a.code, a.status, a.raw["text_output"], a.raw["reasoning_content"], want)
	}

	// An image as a TYPE_STRING input holding the PNG file.
	png, err := os.ReadFile("../evals/synth/testdata/mmproj/gradient-64.png")
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "<|im_start|>user\n<__media__>\nDescribe<|im_end|>\n<|im_start|>assistant\n"
	hdr = `batch_size: 1 input { name: "text_input" dims: 1 } input { name: "max_tokens" } input { name: "temperature" } input { name: "image" dims: 1 } output { name: "text_output" }`
	body = str(greedy(str(nil, prompt), 12), string(png))
	a = v1Do(t, "POST", p.url+"/api/infer/vision", hdr, body)
	want = generate("vision", map[string]any{"text_input": prompt, "image": pngBase64(png)})
	if a.code != 200 || v1Strings(t, a.raw["text_output"])[0] != want["text_output"] || want["text_output"] == "" {
		t.Errorf("image over v1: %d %s %q; generate %v", a.code, a.status, a.raw["text_output"], want)
	}
	// The text-only answer differs: the image was read.
	if plain := generate("vision", map[string]any{"text_input": "<|im_start|>user\nDescribe<|im_end|>\n<|im_start|>assistant\n"}); plain["text_output"] == want["text_output"] {
		t.Errorf("the answer with the image is the text-only one: %v", plain)
	}
}

func pngBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/models"
)

// grpcurlVersion is the version `make grpcurl` installs.
const grpcurlVersion = "v1.9.3"

// grpcurlPath finds grpcurl: $LLMSERVE_GRPCURL (make test sets it), the
// pinned one `make grpcurl` installs, or one on PATH.
func grpcurlPath(t *testing.T) string {
	if p := os.Getenv("LLMSERVE_GRPCURL"); p != "" {
		return p
	}
	if dir, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(dir, "llmserve", "bin", "grpcurl-"+grpcurlVersion)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	t.Fatal("grpcurl is not installed: run `make grpcurl` (make test does)")
	return ""
}

// grpcurl runs grpcurl against addr through reflection (no proto files)
// and returns stdout, stderr and whether it succeeded.
func grpcurl(t *testing.T, bin, addr, data string, args ...string) (string, string, bool) {
	t.Helper()
	full := []string{"-plaintext"}
	if data != "" {
		full = append(full, "-d", "@")
	}
	full = append(full, addr)
	full = append(full, args...)
	cmd := exec.Command(bin, full...)
	cmd.Stdin = strings.NewReader(data)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), err == nil
}

// jsonObjects splits grpcurl's output, one JSON object per message.
func jsonObjects(t *testing.T, s string) []map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	var out []map[string]any
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("grpcurl output %q: %v", s, err)
		}
		out = append(out, m)
	}
}

func TestV2Grpcurl(t *testing.T) {
	bin := grpcurlPath(t)
	s := startServer(t, models.GenerativeConfig{})
	addr, _ := s.startGRPC(t)
	want := s.v2Generate(t, "Once upon a time", 16)

	out, errOut, ok := grpcurl(t, bin, addr, "", "list")
	if !ok || !strings.Contains(out, "inference.GRPCInferenceService") {
		t.Fatalf("list: %s %s", out, errOut)
	}
	out, errOut, ok = grpcurl(t, bin, addr, "", "describe", "inference.GRPCInferenceService.ModelStreamInfer")
	if !ok || !strings.Contains(out, "stream .inference.ModelInferRequest") {
		t.Fatalf("describe: %s %s", out, errOut)
	}
	out, errOut, ok = grpcurl(t, bin, addr, `{"name": "stories260K"}`, "inference.GRPCInferenceService/ModelMetadata")
	if !ok || !strings.Contains(out, `"platform": "llama.cpp"`) {
		t.Fatalf("ModelMetadata: %s %s", out, errOut)
	}

	prompt := base64.StdEncoding.EncodeToString([]byte("Once upon a time"))
	req := `{"model_name": "stories260K", "id": "q1",
		"parameters": {"max_tokens": {"int64_param": 16}, "temperature": {"double_param": 0}},
		"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1], "contents": {"bytes_contents": ["` + prompt + `"]}}]}`
	out, errOut, ok = grpcurl(t, bin, addr, req, "inference.GRPCInferenceService/ModelInfer")
	if !ok {
		t.Fatalf("ModelInfer: %s", errOut)
	}
	resp := jsonObjects(t, out)[0]
	text := resp["outputs"].([]any)[0].(map[string]any)["contents"].(map[string]any)["bytesContents"].([]any)[0].(string)
	if got, _ := base64.StdEncoding.DecodeString(text); string(got) != want || resp["id"] != "q1" {
		t.Fatalf("ModelInfer: %q, want %q (%s)", got, want, out)
	}

	// Two requests on one stream; the answers concatenate per id.
	req2 := strings.Replace(req, `"q1"`, `"q2"`, 1)
	out, errOut, ok = grpcurl(t, bin, addr, req+"\n"+req2, "inference.GRPCInferenceService/ModelStreamInfer")
	if !ok {
		t.Fatalf("ModelStreamInfer: %s", errOut)
	}
	texts := map[string]string{}
	finals := map[string]int{}
	for _, m := range jsonObjects(t, out) {
		ir := m["inferResponse"].(map[string]any)
		id := ir["id"].(string)
		b64 := ir["outputs"].([]any)[0].(map[string]any)["contents"].(map[string]any)["bytesContents"].([]any)[0].(string)
		piece, _ := base64.StdEncoding.DecodeString(b64)
		texts[id] += string(piece)
		if ir["parameters"].(map[string]any)["triton_final_response"].(map[string]any)["boolParam"] == true {
			finals[id]++
		}
	}
	for _, id := range []string{"q1", "q2"} {
		if texts[id] != want || finals[id] != 1 {
			t.Errorf("%s: streamed %q with %d finals, want %q with 1", id, texts[id], finals[id], want)
		}
	}

	// An unknown model: NotFound with a message.
	_, errOut, ok = grpcurl(t, bin, addr, strings.Replace(req, "stories260K", "nope", 1), "inference.GRPCInferenceService/ModelInfer")
	if ok || !strings.Contains(errOut, "NotFound") || !strings.Contains(errOut, `"nope"`) {
		t.Fatalf("unknown model: ok=%v %s", ok, errOut)
	}
}

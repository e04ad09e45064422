package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/models/tensor"
)

func runSynth(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"synth", "mlp"}, args...))
	err := root.Execute()
	return out.String(), err
}

// TestSynthMLPFromJSON writes both formats from JSON weights and checks
// that each loads and computes what the weights say.
func TestSynthMLPFromJSON(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.json")
	js := `{"layers": [
	  {"weights": [[1, 0], [0, 1], [1, 1]], "bias": [0.5, -10], "activation": "relu"},
	  {"weights": [[2, 0, 1], [0, 3, 1]], "bias": [0, 0, 0]}],
	 "argmax": true}`
	if err := os.WriteFile(w, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	onnx, gguf := filepath.Join(dir, "m.onnx"), filepath.Join(dir, "m.gguf")
	out, err := runSynth(t, "--weights", w, "--onnx", onnx, "--gguf", gguf)
	if err != nil {
		t.Fatal(err, out)
	}
	if !strings.Contains(out, "wrote "+onnx+": ONNX MLP 3-2-3 +argmax") || !strings.Contains(out, "wrote "+gguf+": GGUF") {
		t.Errorf("output %q", out)
	}
	for _, p := range []string{onnx, gguf} {
		e, err := tensor.Open(p, tensor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// x = [1, 2, 3]: layer 0 = relu([1+3+0.5, 2+3-10]) = [4.5, 0];
		// layer 1 = [9, 0, 4.5]; label 0.
		res, err := e.Run(context.Background(), []tensor.Tensor{{Name: "input", DType: tensor.FP32, Shape: []int64{1, 3}, F32: []float32{1, 2, 3}}})
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := res[0].F32; len(got) != 3 || got[0] != 9 || got[1] != 0 || got[2] != 4.5 {
			t.Errorf("%s: output %v, want [9 0 4.5]", p, got)
		}
		if res[1].I64[0] != 0 {
			t.Errorf("%s: label %v, want 0", p, res[1].I64)
		}
	}
}

func TestSynthMLPRandom(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.onnx")
	for _, p := range []string{a, b} {
		if out, err := runSynth(t, "--layers", "784,256,128,10", "--seed", "1", "--softmax", "--argmax", "--onnx", p); err != nil {
			t.Fatal(err, out)
		}
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if !bytes.Equal(x, y) {
		t.Error("the same seed wrote different files")
	}
	e, err := tensor.Open(a, tensor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if in, out := e.Inputs(), e.Outputs(); in[0].Shape[1] != 784 || out[0].Shape[1] != 10 || len(out) != 2 {
		t.Errorf("inputs %v outputs %v", in, out)
	}
}

func TestSynthMLPErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"layers": [{"weights": [[1, 2], [3]]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.json")
	if err := os.WriteFile(typo, []byte(`{"layers": [{"weights": [[1]], "activaton": "relu"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "o.onnx")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--layers", "4,2"}, "--onnx, --gguf"},
		{[]string{"--onnx", out}, "exactly one of --weights"},
		{[]string{"--layers", "4,x", "--onnx", out}, `"x" is not a number`},
		{[]string{"--layers", "4", "--onnx", out}, "at least 2"},
		{[]string{"--weights", bad, "--onnx", out}, "row 1 has 1 values"},
		{[]string{"--weights", typo, "--onnx", out}, "activaton"},
		{[]string{"--weights", filepath.Join(dir, "none.json"), "--onnx", out}, "no such file"},
	} {
		if _, err := runSynth(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

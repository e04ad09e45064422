package models

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/llmserve/llmserve/models/tensor"
	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
)

// TestTritonConfigTensor: config.pbtxt's fields map onto a tensor model's
// settings, and each field llmserve cannot honour is an error naming it.
func TestTritonConfigTensor(t *testing.T) {
	const onnx = `platform: "onnxruntime_onnx"
`
	for _, c := range []struct {
		name   string
		config string
		files  map[string]string
		want   *TensorConfig
		err    string
	}{
		{"batching", onnx + `max_batch_size: 8
dynamic_batching { preferred_batch_size: [2, 4] max_queue_delay_microseconds: 500 }
instance_group [{ count: 2 kind: KIND_CPU }, { count: 1 }]`, nil,
			&TensorConfig{MaxRequestRows: 8, MaxBatchSize: 4, MaxBatchTime: 500 * time.Microsecond, ParallelWorkers: 3}, ""},
		{"no dynamic batching", onnx + "max_batch_size: 8", nil, &TensorConfig{MaxRequestRows: 8}, ""},
		{"backend name", `backend: "onnxruntime" max_batch_size: 2`, nil, &TensorConfig{MaxRequestRows: 2}, ""},
		{"highest version", onnx, map[string]string{"3/model.onnx": "x"}, &TensorConfig{Version: "3", Path: "3/model.onnx"}, ""},
		{"specific version", onnx + "version_policy { specific { versions: 1 } }", map[string]string{"3/model.onnx": "x"}, &TensorConfig{}, ""},
		{"default_model_filename", onnx + `default_model_filename: "net.onnx"`, map[string]string{"1/net.onnx": "x"}, &TensorConfig{Path: "1/net.onnx"}, ""},

		{"syntax", "max_batch_size: eight", nil, nil, "config.pbtxt:"},
		{"unsupported field", onnx + "sequence_batching {}", nil, nil, "sequence_batching is not supported"},
		{"unsupported nested field", onnx + "max_batch_size: 4 dynamic_batching { preserve_ordering: true }", nil, nil, "dynamic_batching.preserve_ordering is not supported"},
		{"unsupported input field", onnx + `input [{ name: "x" data_type: TYPE_FP32 dims: [2] optional: true }]`, nil, nil, "input[0].optional is not supported"},
		{"python backend", `backend: "python"`, nil, nil, `backend "python"`},
		{"unknown platform", `platform: "tensorrt_plan"`, nil, nil, `platform "tensorrt_plan" is not supported`},
		{"other name", `name: "other"`, nil, nil, `name "other" differs`},
		{"gpu", onnx + "instance_group { kind: KIND_GPU }", nil, nil, "KIND_GPU"},
		{"all versions", onnx + "version_policy { all {} }", map[string]string{"3/model.onnx": "x"}, nil, "version_policy.all"},
		{"latest 2", onnx + "version_policy { latest { num_versions: 2 } }", map[string]string{"3/model.onnx": "x"}, nil, "version_policy.latest.num_versions 2"},
		{"specific missing", onnx + "version_policy { specific { versions: 7 } }", nil, nil, "no folder 7/"},
		{"preferred too big", onnx + "max_batch_size: 4 dynamic_batching { preferred_batch_size: 8 }", nil, nil, "preferred_batch_size 8"},
		{"batching without batch", onnx + "dynamic_batching {}", nil, nil, "dynamic_batching needs max_batch_size"},
		{"parameters", onnx + `parameters { key: "k" value { string_value: "v" } }`, nil, nil, "parameters"},
		{"both files", onnx, map[string]string{SettingsFile: "{}"}, nil, "both config.pbtxt and model-settings.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{"1/model.onnx": "x", ConfigFile: c.config}
			for k, v := range c.files {
				files[k] = v
			}
			writeFiles(t, filepath.Join(root, "m"), files)
			repo, err := NewRepository(RepositoryConfig{Dir: root}, NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			lc, err := repo.config("m", filepath.Join(root, "m"))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := *c.want
			if w.Path == "" {
				w.Path = "1/model.onnx"
			}
			if w.Version == "" {
				w.Version = "1"
			}
			w.Name, w.Path, w.Triton = "m", filepath.Join(root, "m", w.Path), lc.tensor.Triton
			if lc.tensor == nil || *lc.tensor != w || lc.tensor.Triton.GetName() != "m" {
				t.Fatalf("tensor config %+v, want %+v", lc.tensor, w)
			}
		})
	}
}

// TestTritonConfigLLM: a GGUF LLM in a Triton folder; parameters are its
// settings.
func TestTritonConfigLLM(t *testing.T) {
	for _, c := range []struct{ name, config, err string }{
		{"ok", `backend: "llama.cpp" max_batch_size: 4 input [{ name: "text_input" data_type: TYPE_STRING dims: -1 }, { name: "stream" data_type: TYPE_BOOL dims: 1 }] output { name: "text_output" data_type: TYPE_STRING dims: -1 } parameters { key: "max_model_len" value { string_value: "128" } } parameters { key: "reasoning_parser" value { string_value: "deepseek_r1" } }`, ""},
		{"unknown parameter", `backend: "llama.cpp" parameters { key: "nope" value { string_value: "1" } }`, `unknown field "nope"`},
		{"config field as parameter", `backend: "llama.cpp" parameters { key: "max_batch_size" value { string_value: "1" } }`, "parameters[max_batch_size]"},
		{"instances", `backend: "llama.cpp" instance_group { count: 2 }`, "instance_group count 2"},
		{"input", `backend: "llama.cpp" input { name: "prompt" data_type: TYPE_STRING dims: -1 }`, `input[0] "prompt": this model has no such input`},
		{"input dims", `backend: "llama.cpp" input { name: "text_input" data_type: TYPE_STRING dims: 1 }`, `dims [1]: the model's are [-1]`},
		{"onnx platform", `platform: "onnxruntime_onnx"`, "no model file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, filepath.Join(root, "m"), map[string]string{"1/model.gguf": ggufWithArch("llama"), ConfigFile: c.config})
			repo, err := NewRepository(RepositoryConfig{Dir: root, Base: GenerativeConfig{MaxNumSeqs: 16}}, NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			lc, err := repo.config("m", filepath.Join(root, "m"))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := lc.gen
			if lc.tensor != nil || g.MaxNumSeqs != 4 || g.MaxModelLen != 128 || g.ReasoningParser != "deepseek_r1" || g.Version != "1" {
				t.Fatalf("config %+v", g)
			}
			if g.Triton.GetName() != "m" || g.Triton.GetBackend() != "llama.cpp" || g.Triton.GetVersionPolicy().GetLatest() == nil {
				t.Fatalf("served config %v", g.Triton)
			}
		})
	}
}

// TestTritonConfigChecksTensors: input and output are checked against the
// model's own at load, and filled in when left out.
func TestTritonConfigChecksTensors(t *testing.T) {
	fakeRuntime(t, "")
	for _, c := range []struct{ name, config, err string }{
		{"complete", `max_batch_size: 4`, ""},
		{"matching", `max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [2] } output { name: "y" data_type: TYPE_FP32 dims: [2] }`, ""},
		{"no batch", `input { name: "x" data_type: TYPE_FP32 dims: [-1, 2] }`, ""},
		{"wrong name", `max_batch_size: 4 input { name: "z" data_type: TYPE_FP32 dims: [2] }`, `input[0] "z": the model has no such input (it has x)`},
		{"wrong type", `max_batch_size: 4 input { name: "x" data_type: TYPE_INT32 dims: [2] }`, "data_type TYPE_INT32: the model's is TYPE_FP32"},
		{"wrong dims", `max_batch_size: 4 output { name: "y" data_type: TYPE_FP32 dims: [3] }`, "dims [3]: the model's are [2]"},
		{"reshape", `max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [2] reshape { shape: [1, 2] } }`, "does not reshape"},
		{"format", `max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [2] format: FORMAT_NCHW }`, "format FORMAT_NCHW needs 3 dims"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, filepath.Join(root, "m"), map[string]string{"1/model.onnx": "x", ConfigFile: c.config})
			reg := NewRegistry()
			defer reg.Close()
			repo, err := NewRepository(RepositoryConfig{Dir: root}, reg)
			if err != nil {
				t.Fatal(err)
			}
			err = repo.Load(context.Background(), "m")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, _ := reg.GetTensor("m")
			cfg := m.TritonConfig()
			if len(cfg.Input) != 1 || cfg.Input[0].Name != "x" || len(cfg.Output) != 1 || cfg.Output[0].Name != "y" || cfg.GetVersionPolicy().GetLatest().GetNumVersions() != 1 {
				t.Fatalf("served config %v", cfg)
			}
		})
	}
}

// FuzzTritonConfig: any config.pbtxt is loaded or refused with an error,
// never a panic.
func FuzzTritonConfig(f *testing.F) {
	for _, s := range []string{
		`platform: "onnxruntime_onnx" max_batch_size: 8 dynamic_batching { preferred_batch_size: [4] } instance_group { count: 2 }`,
		`backend: "llama.cpp" parameters { key: "max_model_len" value { string_value: "64" } }`,
		`version_policy { specific { versions: [1, 2] } }`,
		`input { name: "x" data_type: TYPE_FP32 dims: [2] reshape { shape: [] } }`,
	} {
		f.Add(s)
	}
	root := f.TempDir()
	writeFiles(f, filepath.Join(root, "m"), map[string]string{"1/model.onnx": "x", "1/model.gguf": ggufWithArch("llama")})
	repo, err := NewRepository(RepositoryConfig{Dir: root}, NewRegistry())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var c tc.ModelConfig
		if prototext.Unmarshal([]byte(text), &c) != nil {
			return
		}
		lc, err := repo.tritonConfig("m", filepath.Join(root, "m"), &c)
		if err == nil && lc.tensor != nil {
			_ = completeTensorConfig(lc.tensor.Triton, (&identity{}).Inputs(), (&identity{}).Outputs())
		}
	})
}

// imageExec is an Executor with an NCHW image input, as an image classifier
// has: x FP32 [-1, 3, 2, 2] → probs FP32 [-1, 4].
type imageExec struct{ identity }

func (imageExec) Inputs() []tensor.Spec {
	return []tensor.Spec{{Name: "x", DType: tensor.FP32, Shape: []int64{-1, 3, 2, 2}}}
}

func (imageExec) Outputs() []tensor.Spec {
	return []tensor.Spec{{Name: "probs", DType: tensor.FP32, Shape: []int64{-1, 4}}}
}

// TestTritonConfigImageFormat: an image model's input format (NCHW) is
// kept in the configuration the model reports, which an image client
// (grpc_image_client.py) reads.
func TestTritonConfigImageFormat(t *testing.T) {
	old := OpenTensorExecutor
	t.Cleanup(func() { OpenTensorExecutor = old })
	OpenTensorExecutor = func(string, int) (tensor.Executor, error) { return &imageExec{}, nil }
	root := t.TempDir()
	writeFiles(t, filepath.Join(root, "m"), map[string]string{"1/model.onnx": "x", ConfigFile: `platform: "onnxruntime_onnx" max_batch_size: 2
input { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [3, 2, 2] }`})
	reg := NewRegistry()
	defer reg.Close()
	repo, err := NewRepository(RepositoryConfig{Dir: root}, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Load(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	m, _ := reg.GetTensor("m")
	c := m.TritonConfig()
	if c.Input[0].Format != tc.ModelInput_FORMAT_NCHW || c.MaxBatchSize != 2 || len(c.Output) != 1 || c.Output[0].Name != "probs" || c.Output[0].Dims[0] != 4 || m.MaxRequestRows() != 2 {
		t.Fatalf("config %v", c)
	}
}

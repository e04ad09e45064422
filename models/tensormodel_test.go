package models

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/models/tensor"
)

// ggufWithArch is the head of a GGUF whose only metadata is
// general.architecture = arch, after a key that must be skipped.
func ggufWithArch(arch string) string {
	var b []byte
	b = append(b, "GGUF"...)
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = binary.LittleEndian.AppendUint64(b, 0) // tensors
	b = binary.LittleEndian.AppendUint64(b, 2) // kvs
	str := func(s string) {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	str("general.alignment")
	b = binary.LittleEndian.AppendUint32(b, 4) // u32
	b = binary.LittleEndian.AppendUint32(b, 32)
	str("general.architecture")
	b = binary.LittleEndian.AppendUint32(b, 8) // string
	str(arch)
	return string(b)
}

func TestGGUFArchitecture(t *testing.T) {
	for _, tc := range []struct {
		name, content, want, err string
	}{
		{"graph", ggufWithArch(GraphArchitecture), GraphArchitecture, ""},
		{"llm", ggufWithArch("llama"), "llama", ""},
		{"no metadata", ggufHead, "", "reading the GGUF metadata"},
		{"not gguf", "PK\x03\x04", "", "not a GGUF file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			writeFiles(t, filepath.Dir(path), map[string]string{"m.gguf": tc.content})
			got, err := ggufArchitecture(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestRepositoryTensorConfig: a folder with a .onnx or a graph GGUF is a
// tensor model with MLServer's batching settings.
func TestRepositoryTensorConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  *TensorConfig
		err   string
	}{
		{"onnx", map[string]string{"1/m.onnx": "x", SettingsFile: `{"max_batch_size":16,"max_batch_time":0.5,"parallel_workers":2}`},
			&TensorConfig{Path: "1/m.onnx", MaxBatchSize: 16, MaxBatchTime: 500 * time.Millisecond, ParallelWorkers: 2}, ""},
		{"graph gguf", map[string]string{"2/m.gguf": ggufWithArch(GraphArchitecture)}, &TensorConfig{Path: "2/m.gguf"}, ""},
		{"llm gguf", map[string]string{"1/m.gguf": ggufWithArch("llama")}, nil, ""},
		{"onnx and gguf", map[string]string{"1/m.onnx": "x", "1/m.gguf": ggufHead}, nil, "holds 1 .gguf and 1 .onnx files"},
		{"negative workers", map[string]string{"1/m.onnx": "x", SettingsFile: `{"parallel_workers":-1}`}, nil, "parallel_workers -1"},
		{"negative batch time", map[string]string{"1/m.onnx": "x", SettingsFile: `{"max_batch_time":-1}`}, nil, "max_batch_time -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, filepath.Join(root, "m"), tc.files)
			repo, err := NewRepository(RepositoryConfig{Dir: root, TensorThreads: 3}, NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			lc, err := repo.config("m", filepath.Join(root, "m"))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if lc.tensor != nil {
					t.Fatalf("an LLM GGUF was taken for a tensor model: %+v", lc.tensor)
				}
				return
			}
			w := *tc.want
			w.Name, w.Path, w.Threads, w.Version = "m", filepath.Join(root, "m", w.Path), 3, lc.version
			if lc.tensor == nil || *lc.tensor != w {
				t.Fatalf("tensor config %+v, want %+v", lc.tensor, w)
			}
		})
	}
}

// identity is an Executor that returns its input x as y.
type identity struct{ closed bool }

func (e *identity) Inputs() []tensor.Spec {
	return []tensor.Spec{{Name: "x", DType: tensor.FP32, Shape: []int64{-1, 2}}}
}

func (e *identity) Outputs() []tensor.Spec {
	return []tensor.Spec{{Name: "y", DType: tensor.FP32, Shape: []int64{-1, 2}}}
}

func (e *identity) Run(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	y := in[0]
	y.Name, y.F32 = "y", slices.Clone(y.F32) // outputs share no memory with the inputs
	return []tensor.Tensor{y}, ctx.Err()
}

func (e *identity) Close() error { e.closed = true; return nil }

func fakeRuntime(t *testing.T, failOn string) {
	t.Helper()
	old := OpenTensorExecutor
	t.Cleanup(func() { OpenTensorExecutor = old })
	OpenTensorExecutor = func(path string, threads int) (tensor.Executor, error) {
		if failOn != "" && strings.Contains(path, failOn) {
			return nil, errors.New(`unsupported operator "Einsum" (node "e0")`)
		}
		return &identity{}, nil
	}
}

// TestRepositoryServesTensorModels: a good tensor model loads beside a
// bad one, whose load error names the operator; unloading drains it.
func TestRepositoryServesTensorModels(t *testing.T) {
	fakeRuntime(t, "bad")
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"good/1/m.onnx": "x", "bad/1/bad.onnx": "x"})
	reg := NewRegistry()
	var unloaded []string
	repo, err := NewRepository(RepositoryConfig{Dir: root, Registerer: prometheus.NewRegistry(), OnUnload: func(name, _ string) { unloaded = append(unloaded, name) }}, reg)
	if err != nil {
		t.Fatal(err)
	}
	repo.LoadAll(context.Background())
	idx := repo.Index(false)
	if len(idx) != 2 || idx[0].Name != "bad" || idx[0].State != StateUnavailable || !strings.Contains(idx[0].Reason, "Einsum") ||
		idx[1].Name != "good" || idx[1].State != StateReady {
		t.Fatalf("index %+v", idx)
	}
	var le *LoadError
	if err := repo.Load(context.Background(), "bad"); !errors.As(err, &le) || !strings.Contains(err.Error(), "Einsum") {
		t.Fatalf("load bad: %v", err)
	}
	m, ok := reg.GetTensor("good")
	if !ok || m.Platform() != PlatformONNX || !reg.Ready() {
		t.Fatalf("good not served: %v %v", ok, reg.Ready())
	}
	x := tensor.Tensor{Name: "x", DType: tensor.FP32, Shape: []int64{1, 2}, F32: []float32{1, 2}}
	out, err := m.Infer(context.Background(), []tensor.Tensor{x})
	if err != nil || out[0].F32[1] != 2 {
		t.Fatalf("infer: %v %v", out, err)
	}
	if err := repo.Unload(context.Background(), "good"); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.GetTensor("good"); ok {
		t.Fatal("good is still served after unload")
	}
	if len(unloaded) != 1 || unloaded[0] != "good" {
		t.Fatalf("OnUnload saw %v, want [good]", unloaded)
	}
	if _, err := m.Infer(context.Background(), []tensor.Tensor{x}); !errors.Is(err, ErrClosed) {
		t.Fatalf("infer after unload: %v", err)
	}
	if !m.exec.(*identity).closed {
		t.Fatal("unload did not close the executor")
	}
	if err := repo.Load(context.Background(), "good"); err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryTensorModels: names are unique across kinds, readiness
// counts tensor models, Stop fails their new requests.
func TestRegistryTensorModels(t *testing.T) {
	fakeRuntime(t, "")
	reg := NewRegistry()
	if reg.Ready() {
		t.Fatal("an empty registry is ready")
	}
	m, err := LoadTensor(TensorConfig{Path: filepath.Join(t.TempDir(), "clf.onnx"), MaxBatchSize: 4, MaxBatchTime: time.Millisecond}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "clf" || m.Version() != "1" || m.MaxRequestRows() != DefaultMaxRequestRows {
		t.Fatalf("model %s version %s rows %d", m.Name(), m.Version(), m.MaxRequestRows())
	}
	if err := reg.AddTensor(m); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddTensor(m); err == nil || !strings.Contains(err.Error(), "already served") {
		t.Fatalf("second add: %v", err)
	}
	if !reg.Ready() || len(reg.ListTensors()) != 1 || len(reg.List()) != 0 {
		t.Fatal("the tensor model does not count")
	}
	if cut := reg.Stop(); cut != 0 || reg.Ready() || m.Ready() {
		t.Fatalf("after Stop: cut %d, ready %v %v", cut, reg.Ready(), m.Ready())
	}
	x := tensor.Tensor{Name: "x", DType: tensor.FP32, Shape: []int64{1, 2}, F32: []float32{1, 2}}
	if _, err := m.Infer(context.Background(), []tensor.Tensor{x}); !errors.Is(err, ErrClosed) {
		t.Fatalf("infer after Stop: %v", err)
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
}

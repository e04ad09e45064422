package models

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles creates files (path → content) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const ggufHead = "GGUF\x03\x00\x00\x00 the rest"

func TestRepositoryConfig(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		version string // want
		path    string // want, relative to the model folder
		check   func(GenerativeConfig) bool
		err     string
	}{
		{"highest version", map[string]string{"1/a.gguf": ggufHead, "10/b.gguf": ggufHead, "9/c.gguf": ggufHead, "x/d.gguf": ggufHead}, "10", "10/b.gguf", nil, ""},
		{"settings pick the version and file", map[string]string{"1/a.gguf": ggufHead, "1/b.gguf": ggufHead, "2/c.gguf": ggufHead,
			SettingsFile: `{"name":"m","parameters":{"version":"1","uri":"b.gguf"}}`}, "1", "1/b.gguf", nil, ""},
		{"no version folder", map[string]string{"m.gguf": ggufHead}, "1", "m.gguf", nil, ""},
		{"LLM settings", map[string]string{"1/a.gguf": ggufHead, "tmpl.jinja": "{{ x }}",
			SettingsFile: `{"max_batch_size":3,"max_model_len":128,"pooling":"mean","chat_template":"tmpl.jinja","reasoning_parser":"qwen3","kv_cache_memory_bytes":1048576,"request_timeout":"2m","max_batch_time":0.5,"implementation":"llmserve","parameters":{"task":"embed"}}`},
			"1", "1/a.gguf", func(c GenerativeConfig) bool {
				return c.MaxNumSeqs == 3 && c.MaxModelLen == 128 && c.Pooling == "mean" && c.ChatTemplate == "{{ x }}" && c.ReasoningParser == "qwen3" &&
					c.KVMemoryBytes == 1<<20 && c.RequestTimeout.Minutes() == 2 && c.Task == TaskEmbed && c.Threads == 2
			}, ""},
		{"max_num_seqs beats max_batch_size", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"max_batch_size":3,"max_num_seqs":5}`}, "1", "1/a.gguf",
			func(c GenerativeConfig) bool { return c.MaxNumSeqs == 5 }, ""},
		{"unknown key", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"max_model_len":1,"colour":"blue"}`}, "", "", nil, `unknown field "colour"`},
		{"unknown nested key", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"parameters":{"shape":1}}`}, "", "", nil, `unknown field "shape"`},
		{"bad task", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"parameters":{"task":"classify"}}`}, "", "", nil, "parameters.task"},
		{"bad timeout", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"request_timeout":"soon"}`}, "", "", nil, "request_timeout"},
		{"name differs", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"name":"other"}`}, "", "", nil, `name "other" differs`},
		{"missing version", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"parameters":{"version":"7"}}`}, "", "", nil, `version "7" has no folder`},
		{"two files", map[string]string{"1/a.gguf": ggufHead, "1/b.gguf": ggufHead}, "", "", nil, "holds 2 .gguf and 0 .onnx files"},
		{"no file", map[string]string{"1/readme": "x"}, "", "", nil, "holds 0 .gguf and 0 .onnx files"},
		{"not a gguf", map[string]string{"1/a.gguf": "PK\x03\x04zip"}, "", "", nil, `m/1/a.gguf is not a GGUF file`},
		{"empty file", map[string]string{"1/a.gguf": ""}, "", "", nil, "only 0 bytes"},
		{"missing template", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"chat_template":"nope.jinja"}`}, "", "", nil, "chat_template"},
		{"LoRA adapters", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"lora_adapters":[{"name":"sql","path":"adapters/sql.gguf"},{"name":"abs","path":"/x/abs.gguf"}],"max_loras":2}`}, "1", "1/a.gguf",
			func(c GenerativeConfig) bool {
				return len(c.LoRAs) == 2 && c.LoRAs[0].Name == "sql" && c.LoRAs[0].Path == filepath.Join(filepath.Dir(filepath.Dir(c.Path)), "adapters/sql.gguf") &&
					c.LoRAs[1].Path == "/x/abs.gguf" && c.MaxLoRAs == 2
			}, ""},
		{"LoRA adapter without a path", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"lora_adapters":[{"name":"sql"}]}`}, "", "", nil, "lora_adapters entry 0 has no path"},
		{"LoRA adapter without a name", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"lora_adapters":[{"path":"a"}]}`}, "", "", nil, "lora_adapters entry 0"},
		{"negative max_loras", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"max_loras":-1}`}, "", "", nil, "max_loras"},
		{"settings not JSON", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{`}, "", "", nil, SettingsFile},
		{"speculative config", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"speculative_config":{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3}}`},
			"1", "1/a.gguf", func(c GenerativeConfig) bool {
				sp := c.Speculative
				return sp.Method == "ngram" && sp.NumTokens == 4 && sp.PromptLookupMin == 3 && sp.PromptLookupMax == 3
			}, ""},
		{"speculative tokens out of range", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"speculative_config":{"method":"ngram","num_speculative_tokens":0.5}}`},
			"", "", nil, "speculative_config"},
		{"speculative K too large", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"speculative_config":{"method":"ngram","num_speculative_tokens":32}}`},
			"", "", nil, "speculative_config: num_speculative_tokens 32 is outside [1, 16]"},
		{"speculative draft model", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"speculative_config":{"model":"draft.gguf","num_speculative_tokens":3}}`},
			"1", "1/a.gguf", func(c GenerativeConfig) bool {
				sp := c.Speculative
				return sp.Method == "draft" && sp.NumTokens == 3 && sp.Model == filepath.Join(filepath.Dir(filepath.Dir(c.Path)), "draft.gguf")
			}, ""},
		{"speculative draft model, absolute", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"speculative_config":{"method":"draft","model":"/x/d.gguf"}}`},
			"1", "1/a.gguf", func(c GenerativeConfig) bool {
				sp := c.Speculative
				return sp.Method == "draft" && sp.NumTokens == 5 && sp.Model == "/x/d.gguf"
			}, ""},
		{"speculative method draft without a model", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"speculative_config":{"method":"draft"}}`},
			"", "", nil, `speculative_config: speculative method "draft" needs a draft model (model)`},
		{"speculative unknown method", map[string]string{"1/a.gguf": ggufHead, SettingsFile: `{"speculative_config":{"method":"medusa"}}`},
			"", "", nil, `speculative method "medusa" is unknown`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, filepath.Join(root, "m"), tt.files)
			repo, err := NewRepository(RepositoryConfig{Dir: root, Base: GenerativeConfig{Threads: 2}}, NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			lc, err := repo.config("m", filepath.Join(root, "m"))
			cfg, version := lc.gen, lc.version
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if version != tt.version || cfg.Version != tt.version || cfg.Path != filepath.Join(root, "m", tt.path) || cfg.Name != "m" {
				t.Fatalf("version %q path %q name %q, want %q %q", version, cfg.Path, cfg.Name, tt.version, tt.path)
			}
			if tt.check != nil && !tt.check(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}

// TestRepositoryRuntimeConfig: an implementation that is a command line
// makes a custom runtime model, run in the model's folder with MLServer's
// batching settings; it needs no model file.
func TestRepositoryRuntimeConfig(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, filepath.Join(root, "m"), map[string]string{
		"2/weights.npy": "x",
		SettingsFile: `{"implementation":"/usr/bin/python3 -m llmserve_runtime model:M","max_batch_size":8,"max_batch_time":0.25,"parallel_workers":3,"request_timeout":"5s","platform":"sklearn",` +
			`"inputs":[{"name":"x","datatype":"BYTES","shape":[-1],"parameters":{"content_type":"str"}}],"parameters":{"extra":{"k":1}}}`,
	})
	repo, err := NewRepository(RepositoryConfig{Dir: root}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	lc, err := repo.config("m", filepath.Join(root, "m"))
	if err != nil {
		t.Fatal(err)
	}
	c := lc.runtime
	if c == nil || lc.version != "2" || c.Version != "2" || c.Command != "/usr/bin/python3 -m llmserve_runtime model:M" || c.Dir != filepath.Join(root, "m") ||
		c.SettingsPath != filepath.Join(root, "m", SettingsFile) || c.MaxBatchSize != 8 || c.MaxBatchTime.Seconds() != 0.25 || c.Workers != 3 ||
		c.RequestTimeout.Seconds() != 5 || c.Platform != "sklearn" || len(c.Inputs) != 1 || c.Inputs[0].Datatype != "BYTES" {
		t.Fatalf("runtime config %+v (version %q)", c, lc.version)
	}
	// MLServer's form: a class path, run with runtimes/python.
	writeFiles(t, filepath.Join(root, "sum"), map[string]string{SettingsFile: `{"name":"sum","implementation":"models.SumModel","parameters":{"version":"v1.2.3","extra":{"scale":2}}}`})
	lc, err = repo.config("sum", filepath.Join(root, "sum"))
	if err != nil || lc.runtime == nil || lc.runtime.Command != "/usr/bin/python3 -m llmserve_runtime models.SumModel" || lc.version != "v1.2.3" {
		t.Fatalf("class path: %+v, %v", lc.runtime, err)
	}
	writeFiles(t, filepath.Join(root, "n"), map[string]string{SettingsFile: `{"implementation":"./serve","inputs":[{"datatype":"FP32"}]}`})
	if _, err := repo.config("n", filepath.Join(root, "n")); err == nil || !strings.Contains(err.Error(), "inputs and outputs need a name") {
		t.Fatalf("nameless input: %v", err)
	}
}

func TestRepositoryNames(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a/1/x.gguf": "", ".hidden/1/x.gguf": "", "file.txt": ""})
	reg := NewRegistry()
	repo, err := NewRepository(RepositoryConfig{Dir: root}, reg)
	if err != nil {
		t.Fatal(err)
	}
	idx := repo.Index(false)
	if len(idx) != 1 || idx[0].Name != "a" || idx[0].State != "" {
		t.Fatalf("index %+v", idx)
	}
	if len(repo.Index(true)) != 0 {
		t.Fatal("a model never loaded is listed as ready")
	}
	for _, name := range []string{"nosuch", "..", ".hidden", "a/1", ""} {
		if err := repo.Load(context.Background(), name); err == nil || !strings.Contains(err.Error(), "no such model") {
			t.Errorf("Load(%q) = %v, want ErrNotInRepository", name, err)
		}
	}
	if err := repo.Unload(context.Background(), "nosuch"); err == nil {
		t.Error("Unload of an unknown model succeeded")
	}
	if err := repo.Unload(context.Background(), "a"); err != nil {
		t.Errorf("Unload of a model not loaded: %v", err)
	}
	if !reg.Ready() {
		t.Error("not strict: the server is ready when up")
	}
	strict, _ := NewRepository(RepositoryConfig{Dir: root, Strict: true}, reg)
	if reg.Ready() || strict == nil {
		t.Error("strict: ready with a model not loaded")
	}
}

func TestRegistryRequestsEndedBefore(t *testing.T) {
	reg := NewRegistry()
	ctx1, exit1 := reg.Enter(context.Background())
	_, exit2 := reg.Enter(context.Background())
	mark := reg.mark()
	_, exit3 := reg.Enter(context.Background())
	defer exit3()
	if reg.endedBefore(context.Background(), mark) {
		t.Fatal("requests 1 and 2 are running")
	}
	exit2()
	if !reg.endedBefore(ctx1, mark) {
		t.Fatal("only the caller's own request (1) and a later one (3) run")
	}
	if reg.endedBefore(context.Background(), mark) {
		t.Fatal("request 1 runs")
	}
	exit1()
	if !reg.endedBefore(context.Background(), mark) {
		t.Fatal("every request before the mark ended")
	}
}

package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/llmserve/llmserve/models/tensor"
	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
)

// ConfigFile is the name of a Triton model configuration in a model's
// repository folder: text protobuf of Triton's ModelConfig.
const ConfigFile = "config.pbtxt"

// Backend names config.pbtxt takes (platform or backend).
const (
	// PlatformONNXRuntime is Triton's platform of an ONNX model; its
	// backend is BackendONNXRuntime.
	PlatformONNXRuntime = "onnxruntime_onnx"
	BackendONNXRuntime  = "onnxruntime"
	// BackendLlamaCpp is the backend (or platform) of a GGUF model in
	// config.pbtxt: an LLM, or a tensor graph GGUF.
	BackendLlamaCpp = "llama.cpp"
)

// ReadTritonConfig reads the config.pbtxt in a model's folder: nil when
// there is none, an error naming the line and column when it is not text
// protobuf of Triton's ModelConfig.
func ReadTritonConfig(dir string) (*tc.ModelConfig, error) {
	b, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c tc.ModelConfig
	if err := prototext.Unmarshal(b, &c); err != nil {
		// protobuf-go's errors put a non-breaking space after "proto:" at
		// random (so that nobody matches them); the reason has a plain one.
		return nil, fmt.Errorf("%s: %s", ConfigFile, strings.ReplaceAll(err.Error(), "\u00a0", " "))
	}
	return &c, nil
}

// supported lists the fields of each config.pbtxt message that llmserve
// honours; setting any other is a load error that names it.
var supported = map[protoreflect.FullName][]protoreflect.Name{
	"inference.ModelConfig": {"name", "platform", "backend", "version_policy", "max_batch_size", "input", "output",
		"instance_group", "default_model_filename", "dynamic_batching", "parameters"},
	"inference.ModelInput":                  {"name", "data_type", "format", "dims", "reshape"},
	"inference.ModelOutput":                 {"name", "data_type", "dims", "reshape"},
	"inference.ModelTensorReshape":          {"shape"},
	"inference.ModelDynamicBatching":        {"preferred_batch_size", "max_queue_delay_microseconds"},
	"inference.ModelInstanceGroup":          {"name", "kind", "count"},
	"inference.ModelVersionPolicy":          {"latest", "all", "specific"},
	"inference.ModelVersionPolicy.Latest":   {"num_versions"},
	"inference.ModelVersionPolicy.All":      {},
	"inference.ModelVersionPolicy.Specific": {"versions"},
	"inference.ModelParameter":              {"string_value"},
}

// checkFields refuses a field of m (and of the messages in it) that
// llmserve does not honour, naming it by its path in the file.
func checkFields(m protoreflect.Message, path string) error {
	var err error
	allowed, known := supported[m.Descriptor().FullName()]
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := string(fd.Name())
		if path != "" {
			p = path + "." + p
		}
		if !known || !slices.Contains(allowed, fd.Name()) {
			err = fmt.Errorf("%s: %s is not supported by llmserve (it supports %s)", ConfigFile, p, supportedList(allowed))
			return false
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					err = checkFields(mv.Message(), p+"["+k.String()+"]")
					return err == nil
				})
			}
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				if err = checkFields(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", p, i)); err != nil {
					break
				}
			}
		case fd.Message() != nil:
			err = checkFields(v.Message(), p)
		}
		return err == nil
	})
	return err
}

func supportedList(ns []protoreflect.Name) string {
	if len(ns) == 0 {
		return "no field"
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// tritonModel is what config.pbtxt says about how to load a model, before
// its file is opened.
type tritonModel struct {
	cfg *tc.ModelConfig
	// onnx: the platform or backend says ONNX; gguf: llama.cpp; neither:
	// the file decides.
	onnx, gguf bool
	// workers is the instance groups' count in all.
	workers int
	gpu     bool
}

// tritonConfig is how to load the model in dir whose config.pbtxt is c:
// each field mapped onto what llmserve has (see docs/API.md, "Triton
// model repositories"), a field it cannot honour a load error naming it.
func (r *Repository) tritonConfig(name, dir string, c *tc.ModelConfig) (loadConfig, error) {
	lc, err := r.tritonConfigOf(name, dir, c)
	if err != nil && lc.version == "" {
		// The version the model failed as, for the index, when the
		// version policy picks one.
		lc.version, _ = tritonVersion(dir, c.GetVersionPolicy())
	}
	return lc, err
}

func (r *Repository) tritonConfigOf(name, dir string, c *tc.ModelConfig) (loadConfig, error) {
	if _, err := os.Stat(filepath.Join(dir, SettingsFile)); err == nil {
		return loadConfig{}, fmt.Errorf("the folder holds both %s and %s: keep one", ConfigFile, SettingsFile)
	}
	if err := checkFields(c.ProtoReflect(), ""); err != nil {
		return loadConfig{}, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: "+format, append([]any{ConfigFile}, args...)...)
	}
	if c.Name != "" && c.Name != name {
		return loadConfig{}, bad("name %q differs from the folder's name %q", c.Name, name)
	}
	tm := tritonModel{cfg: c}
	switch c.Platform {
	case "":
	case PlatformONNXRuntime:
		tm.onnx = true
	case BackendLlamaCpp:
		tm.gguf = true
	default:
		return loadConfig{}, bad("platform %q is not supported: llmserve serves %q (ONNX) and %q (GGUF)", c.Platform, PlatformONNXRuntime, BackendLlamaCpp)
	}
	switch c.Backend {
	case "":
	case BackendONNXRuntime:
		if tm.gguf {
			return loadConfig{}, bad("backend %q contradicts platform %q", c.Backend, c.Platform)
		}
		tm.onnx = true
	case BackendLlamaCpp:
		if tm.onnx {
			return loadConfig{}, bad("backend %q contradicts platform %q", c.Backend, c.Platform)
		}
		tm.gguf = true
	case "python":
		return loadConfig{}, bad("backend \"python\" (Triton's Python backend, model.py with TritonPythonModel) is not supported: serve the model as a custom runtime with a %s instead (docs/API.md)", SettingsFile)
	default:
		return loadConfig{}, bad("backend %q is not supported: llmserve serves %q (ONNX) and %q (GGUF)", c.Backend, BackendONNXRuntime, BackendLlamaCpp)
	}
	if c.MaxBatchSize < 0 {
		return loadConfig{}, bad("max_batch_size %d is negative", c.MaxBatchSize)
	}
	for i, g := range c.InstanceGroup {
		n := int(g.Count)
		if n < 0 {
			return loadConfig{}, bad("instance_group[%d].count %d is negative", i, g.Count)
		}
		tm.workers += max(n, 1) // Triton's default count is 1
		if g.Kind == tc.ModelInstanceGroup_KIND_GPU {
			tm.gpu = true
		}
	}
	version, err := tritonVersion(dir, c.VersionPolicy)
	if err != nil {
		return loadConfig{}, err
	}
	vdir := filepath.Join(dir, version)
	path, err := tritonModelFile(vdir, tm)
	if err != nil {
		return loadConfig{}, err
	}
	if !strings.EqualFold(filepath.Ext(path), ".onnx") {
		if err := checkGGUF(path, r.cfg.Dir); err != nil {
			return loadConfig{}, err
		}
	}
	if IsTensorFile(path) {
		return tritonTensorConfig(name, version, path, tm, r.cfg.TensorThreads)
	}
	return r.tritonLLMConfig(name, dir, version, path, tm)
}

// tritonVersion is the version folder the policy picks: llmserve serves
// one version of a model, so the policy must come down to one.
func tritonVersion(dir string, p *tc.ModelVersionPolicy) (string, error) {
	versions := versionFolders(dir)
	if len(versions) == 0 {
		return "", fmt.Errorf("%s: the model has no version folder (a number, such as 1/, holding the model file)", dir)
	}
	latest := strconv.FormatInt(versions[len(versions)-1], 10)
	switch p.GetPolicyChoice().(type) {
	case nil, *tc.ModelVersionPolicy_Latest_:
		if n := p.GetLatest().GetNumVersions(); n > 1 && len(versions) > 1 {
			return "", fmt.Errorf("%s: version_policy.latest.num_versions %d: llmserve serves one version of a model (the folder has %d); use 1", ConfigFile, n, len(versions))
		}
		return latest, nil
	case *tc.ModelVersionPolicy_All_:
		if len(versions) > 1 {
			return "", fmt.Errorf("%s: version_policy.all: llmserve serves one version of a model and the folder has %d (%v); use latest or specific with one version", ConfigFile, len(versions), versions)
		}
		return latest, nil
	}
	vs := p.GetSpecific().GetVersions()
	if len(vs) != 1 {
		return "", fmt.Errorf("%s: version_policy.specific.versions %v: llmserve serves one version of a model; name one", ConfigFile, vs)
	}
	if !slices.Contains(versions, vs[0]) {
		return "", fmt.Errorf("%s: version_policy.specific.versions [%d]: the model has no folder %d/ (it has %v)", ConfigFile, vs[0], vs[0], versions)
	}
	return strconv.FormatInt(vs[0], 10), nil
}

// versionFolders lists the numbered folders in dir, ascending.
func versionFolders(dir string) []int64 {
	des, _ := os.ReadDir(dir)
	var out []int64
	for _, de := range des {
		if n, err := strconv.ParseInt(de.Name(), 10, 64); err == nil && n >= 0 && de.IsDir() {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// tritonModelFile finds the model file in the version folder:
// default_model_filename, else Triton's default name for the backend
// (model.onnx, model.gguf), else the one .onnx or .gguf file there.
func tritonModelFile(vdir string, tm tritonModel) (string, error) {
	if f := tm.cfg.DefaultModelFilename; f != "" {
		if strings.ContainsAny(f, `/\`) || f == ".." {
			return "", fmt.Errorf("%s: default_model_filename %q must be a file name in the version folder", ConfigFile, f)
		}
		path := filepath.Join(vdir, f)
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("%s: default_model_filename: %w", ConfigFile, err)
		}
		return path, nil
	}
	var pattern []string
	switch {
	case tm.onnx:
		pattern = []string{"model.onnx", "*.onnx"}
	case tm.gguf:
		pattern = []string{"model.gguf", "*.gguf"}
	default:
		pattern = []string{"model.onnx", "model.gguf", "*.onnx", "*.gguf"}
	}
	for _, p := range pattern {
		m, _ := filepath.Glob(filepath.Join(vdir, p))
		switch {
		case len(m) == 1:
			return m[0], nil
		case len(m) > 1:
			return "", fmt.Errorf("%s holds %d files matching %s; name one in default_model_filename", vdir, len(m), p)
		}
	}
	return "", fmt.Errorf("%s holds no model file (%s); name it in default_model_filename", vdir, strings.Join(pattern, ", "))
}

// tritonTensorConfig maps config.pbtxt onto a tensor model: max_batch_size
// bounds a request's rows; dynamic_batching turns adaptive batching on,
// closing a batch at the largest preferred_batch_size (max_batch_size
// without one) or after max_queue_delay_microseconds; instance_group's
// counts are the parallel workers.
func tritonTensorConfig(name, version, path string, tm tritonModel, threads int) (loadConfig, error) {
	c := tm.cfg
	if tm.gguf && strings.EqualFold(filepath.Ext(path), ".onnx") || tm.onnx && !strings.EqualFold(filepath.Ext(path), ".onnx") {
		return loadConfig{}, fmt.Errorf("%s: %s does not go with the configured platform/backend", ConfigFile, filepath.Base(path))
	}
	if len(c.Parameters) > 0 {
		return loadConfig{}, fmt.Errorf("%s: parameters: a tensor model takes none (parameters set an LLM's settings)", ConfigFile)
	}
	if tm.gpu {
		return loadConfig{}, fmt.Errorf("%s: instance_group kind KIND_GPU: tensor models run on the CPU; use KIND_CPU or KIND_AUTO", ConfigFile)
	}
	tcfg := &TensorConfig{Name: name, Path: path, Version: version, ParallelWorkers: tm.workers, Threads: threads, Triton: servedConfig(c, name)}
	if c.MaxBatchSize > 0 {
		tcfg.MaxRequestRows = int(c.MaxBatchSize)
	}
	if db := c.GetDynamicBatching(); db != nil {
		if c.MaxBatchSize == 0 {
			return loadConfig{}, fmt.Errorf("%s: dynamic_batching needs max_batch_size > 0 (the model's first dimension is the batch)", ConfigFile)
		}
		tcfg.MaxBatchSize = int(c.MaxBatchSize)
		for _, p := range db.PreferredBatchSize {
			if p < 1 || p > c.MaxBatchSize {
				return loadConfig{}, fmt.Errorf("%s: dynamic_batching.preferred_batch_size %d is outside [1, max_batch_size %d]", ConfigFile, p, c.MaxBatchSize)
			}
		}
		if len(db.PreferredBatchSize) > 0 {
			tcfg.MaxBatchSize = int(slices.Max(db.PreferredBatchSize))
		}
		tcfg.MaxBatchTime = time.Duration(db.MaxQueueDelayMicroseconds) * time.Microsecond
	}
	return loadConfig{version: version, tensor: tcfg, triton: c}, nil
}

// settingsFromConfig are the keys of model-settings.json that
// config.pbtxt's own fields say instead.
var settingsFromConfig = []string{"name", "implementation", "platform", "inputs", "outputs", "max_batch_size", "max_batch_time", "parallel_workers", "parameters"}

// tritonLLMConfig maps config.pbtxt onto an LLM: max_batch_size is its
// max_num_seqs, and parameters are its model-settings.json settings
// (string_value holds the JSON value, or a bare string).
func (r *Repository) tritonLLMConfig(name, dir, version, path string, tm tritonModel) (loadConfig, error) {
	c := tm.cfg
	if tm.onnx {
		return loadConfig{}, fmt.Errorf("%s: %s is not an ONNX file", ConfigFile, filepath.Base(path))
	}
	if tm.workers > 1 {
		return loadConfig{}, fmt.Errorf("%s: instance_group count %d: an LLM runs as one instance that batches its requests continuously; use count 1 and max_batch_size for the sequences it runs at once", ConfigFile, tm.workers)
	}
	if db := c.GetDynamicBatching(); db != nil && len(db.PreferredBatchSize) > 0 {
		return loadConfig{}, fmt.Errorf("%s: dynamic_batching.preferred_batch_size: an LLM batches continuously (every step takes what is waiting); leave it out", ConfigFile)
	}
	obj := map[string]json.RawMessage{}
	task := ""
	for k, p := range c.Parameters {
		v := p.GetStringValue()
		if k == "task" {
			task = v
			continue
		}
		if slices.Contains(settingsFromConfig, k) {
			return loadConfig{}, fmt.Errorf("%s: parameters[%s]: set it with config.pbtxt's own field", ConfigFile, k)
		}
		raw := json.RawMessage(v)
		if !json.Valid(raw) {
			raw, _ = json.Marshal(v)
		}
		obj[k] = raw
	}
	b, _ := json.Marshal(obj)
	var s ModelSettings
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return loadConfig{}, fmt.Errorf("%s: parameters: %w", ConfigFile, err)
	}
	switch task {
	case "", "generate", "embed":
		s.Parameters.Task = task
	default:
		return loadConfig{}, fmt.Errorf("%s: parameters[task] %q is not generate or embed", ConfigFile, task)
	}
	if s.RequestTimeout != "" {
		if d, err := time.ParseDuration(s.RequestTimeout); err != nil || d < 0 {
			return loadConfig{}, fmt.Errorf("%s: parameters[request_timeout] %q is not a duration such as 10m", ConfigFile, s.RequestTimeout)
		}
	}
	s.MaxBatchSize = int(c.MaxBatchSize)
	cfg, err := s.apply(r.cfg.Base, dir)
	if err != nil {
		return loadConfig{}, fmt.Errorf("%s: parameters: %w", ConfigFile, err)
	}
	cfg.Name, cfg.Path, cfg.Version = name, path, version
	served := servedConfig(c, name)
	if err := checkLLMTensors(served, cfg.Task); err != nil {
		return loadConfig{}, err
	}
	cfg.Triton = served
	return loadConfig{version: version, gen: cfg, triton: c}, nil
}

// TritonTensor is one input or output as config.pbtxt writes it.
type TritonTensor struct {
	DataType tc.DataType
	Dims     []int64
}

// LLMInputs and LLMOutputs are an LLM's tensors over the tensor protocols
// (text_input and the optional inputs Triton's vLLM backend and llmserve's
// sampling settings take; api/v2/infer's metadata of an LLM, which a test
// in tests/ holds them to), and EmbedOutputs an embedding model's.
var (
	LLMInputs = map[string]TritonTensor{
		"text_input": {tc.DataType_TYPE_STRING, []int64{-1}}, "stream": {tc.DataType_TYPE_BOOL, []int64{1}},
		"sampling_parameters": {tc.DataType_TYPE_STRING, []int64{1}}, "exclude_input_in_output": {tc.DataType_TYPE_BOOL, []int64{1}},
		"max_tokens": {tc.DataType_TYPE_INT32, []int64{1}}, "min_tokens": {tc.DataType_TYPE_INT32, []int64{1}},
		"temperature": {tc.DataType_TYPE_FP32, []int64{1}}, "top_p": {tc.DataType_TYPE_FP32, []int64{1}},
		"top_k": {tc.DataType_TYPE_INT32, []int64{1}}, "min_p": {tc.DataType_TYPE_FP32, []int64{1}},
		"repetition_penalty": {tc.DataType_TYPE_FP32, []int64{1}}, "presence_penalty": {tc.DataType_TYPE_FP32, []int64{1}},
		"frequency_penalty": {tc.DataType_TYPE_FP32, []int64{1}}, "seed": {tc.DataType_TYPE_UINT64, []int64{1}},
		"ignore_eos": {tc.DataType_TYPE_BOOL, []int64{1}}, "stop": {tc.DataType_TYPE_STRING, []int64{-1}},
		"return_finish_reason": {tc.DataType_TYPE_BOOL, []int64{1}}, "return_num_input_tokens": {tc.DataType_TYPE_BOOL, []int64{1}},
		"return_num_output_tokens": {tc.DataType_TYPE_BOOL, []int64{1}}, "return_cumulative_logprob": {tc.DataType_TYPE_BOOL, []int64{1}},
	}
	LLMOutputs = map[string]TritonTensor{
		"text_output": {tc.DataType_TYPE_STRING, []int64{-1}}, "finish_reason": {tc.DataType_TYPE_STRING, []int64{-1}},
		"num_input_tokens": {tc.DataType_TYPE_INT32, []int64{-1}}, "num_output_tokens": {tc.DataType_TYPE_INT32, []int64{-1}},
		"cumulative_logprob": {tc.DataType_TYPE_FP32, []int64{-1}},
	}
	EmbedOutputs = map[string]TritonTensor{"embedding": {tc.DataType_TYPE_FP32, []int64{-1, -1}}}
)

// checkLLMTensors checks an LLM's input and output in config.pbtxt
// against LLMInputs and LLMOutputs (EmbedOutputs for an embedding model):
// name, data_type and dims. Left out, the protocols report the model's
// own (api/v2/infer.TritonConfig).
func checkLLMTensors(c *tc.ModelConfig, task string) error {
	outs := LLMOutputs
	if task == "embed" {
		outs = EmbedOutputs
	}
	check := func(what string, i int, name string, dt tc.DataType, dims []int64, reshape *tc.ModelTensorReshape, table map[string]TritonTensor) error {
		want, ok := table[name]
		switch {
		case !ok:
			names := make([]string, 0, len(table))
			for n := range table {
				names = append(names, n)
			}
			slices.Sort(names)
			return fmt.Errorf("%s: %s[%d] %q: this model has no such %s (it has %s)", ConfigFile, what, i, name, what, strings.Join(names, ", "))
		case dt != want.DataType:
			return fmt.Errorf("%s: %s[%d] %q data_type %s: the model's is %s", ConfigFile, what, i, name, dt, want.DataType)
		case !slices.Equal(dims, want.Dims):
			return fmt.Errorf("%s: %s[%d] %q dims %v: the model's are %v", ConfigFile, what, i, name, dims, want.Dims)
		case reshape != nil:
			return fmt.Errorf("%s: %s[%d] %q reshape: llmserve does not reshape an LLM's tensors", ConfigFile, what, i, name)
		}
		return nil
	}
	for i, in := range c.Input {
		if err := check("input", i, in.Name, in.DataType, in.Dims, in.Reshape, LLMInputs); err != nil {
			return err
		}
		if in.Format != tc.ModelInput_FORMAT_NONE {
			return fmt.Errorf("%s: input[%d] %q format %s: an LLM's inputs have none", ConfigFile, i, in.Name, in.Format)
		}
	}
	for i, o := range c.Output {
		if err := check("output", i, o.Name, o.DataType, o.Dims, o.Reshape, outs); err != nil {
			return err
		}
	}
	return nil
}

// completeTensorConfig checks config.pbtxt's input and output against the
// tensor model's own (name, data_type, dims, reshape) and fills in what
// the file leaves out, as Triton's auto-complete does, so that the
// configuration served is the model's.
func completeTensorConfig(c *tc.ModelConfig, inputs, outputs []tensor.Spec) error {
	// shape is a spec's dims as config.pbtxt writes them: without the
	// batch dimension when max_batch_size > 0.
	shape := func(s tensor.Spec) []int64 {
		if c.MaxBatchSize > 0 {
			return slices.Clone(s.Shape[1:])
		}
		return slices.Clone(s.Shape)
	}
	check := func(what string, i int, name string, dt tc.DataType, dims []int64, reshape *tc.ModelTensorReshape, specs []tensor.Spec) error {
		at := slices.IndexFunc(specs, func(s tensor.Spec) bool { return s.Name == name })
		if at < 0 {
			var have []string
			for _, s := range specs {
				have = append(have, s.Name)
			}
			return fmt.Errorf("%s: %s[%d] %q: the model has no such %s (it has %s)", ConfigFile, what, i, name, what, strings.Join(have, ", "))
		}
		s := specs[at]
		if want := s.DType.Triton(); dt != want {
			return fmt.Errorf("%s: %s[%d] %q data_type %s: the model's is %s", ConfigFile, what, i, name, dt, want)
		}
		model := shape(s)
		if reshape != nil {
			// dims [1] reshaped to [] is a tensor with no dimension besides
			// the batch; another reshape would change the model's shapes,
			// which llmserve does not do.
			scalar := len(reshape.Shape) == 0 && slices.Equal(dims, []int64{1}) && len(model) == 0
			if !scalar && !slices.Equal(reshape.Shape, dims) {
				return fmt.Errorf("%s: %s[%d] %q reshape %v: llmserve does not reshape tensors (only dims [1] to [] for a tensor with no dimension besides the batch)", ConfigFile, what, i, name, reshape.Shape)
			}
			if len(reshape.Shape) == 0 {
				return nil
			}
		}
		if !slices.Equal(dims, model) {
			return fmt.Errorf("%s: %s[%d] %q dims %v: the model's are %v (max_batch_size %d: %s)", ConfigFile, what, i, name, dims, model, c.MaxBatchSize, batchWord(c.MaxBatchSize))
		}
		return nil
	}
	for i, in := range c.Input {
		if err := check("input", i, in.Name, in.DataType, in.Dims, in.Reshape, inputs); err != nil {
			return err
		}
		if in.Format != tc.ModelInput_FORMAT_NONE && len(in.Dims) != 3 {
			return fmt.Errorf("%s: input[%d] %q format %s needs 3 dims (besides the batch), not %v", ConfigFile, i, in.Name, in.Format, in.Dims)
		}
	}
	for i, o := range c.Output {
		if err := check("output", i, o.Name, o.DataType, o.Dims, o.Reshape, outputs); err != nil {
			return err
		}
	}
	if c.MaxBatchSize > 0 {
		for _, s := range slices.Concat(inputs, outputs) {
			if len(s.Shape) == 0 || s.Shape[0] != -1 {
				return fmt.Errorf("%s: max_batch_size %d: tensor %q has no batch dimension (shape %v)", ConfigFile, c.MaxBatchSize, s.Name, s.Shape)
			}
		}
	}
	if len(c.Input) > 0 && len(c.Input) != len(inputs) {
		return fmt.Errorf("%s: input lists %d tensors and the model takes %d: list them all, or leave input out", ConfigFile, len(c.Input), len(inputs))
	}
	if len(c.Input) == 0 {
		for _, s := range inputs {
			c.Input = append(c.Input, &tc.ModelInput{Name: s.Name, DataType: s.DType.Triton(), Dims: dimsOrOne(shape(s)), Reshape: reshapeIfEmpty(shape(s))})
		}
	}
	if len(c.Output) == 0 {
		for _, s := range outputs {
			c.Output = append(c.Output, &tc.ModelOutput{Name: s.Name, DataType: s.DType.Triton(), Dims: dimsOrOne(shape(s)), Reshape: reshapeIfEmpty(shape(s))})
		}
	}
	return nil
}

func batchWord(n int32) string {
	if n > 0 {
		return "dims leave out the batch dimension"
	}
	return "dims include the batch dimension"
}

// dimsOrOne is dims, or [1] for none: config.pbtxt's dims may not be empty.
func dimsOrOne(d []int64) []int64 {
	if len(d) == 0 {
		return []int64{1}
	}
	return d
}

func reshapeIfEmpty(d []int64) *tc.ModelTensorReshape {
	if len(d) == 0 {
		return &tc.ModelTensorReshape{Shape: []int64{}}
	}
	return nil
}

// servedConfig is the configuration a model loaded from config.pbtxt
// reports: the file's, with name, backend and version policy filled in.
func servedConfig(c *tc.ModelConfig, name string) *tc.ModelConfig {
	c = proto.Clone(c).(*tc.ModelConfig)
	c.Name = name
	if c.VersionPolicy == nil {
		c.VersionPolicy = &tc.ModelVersionPolicy{PolicyChoice: &tc.ModelVersionPolicy_Latest_{Latest: &tc.ModelVersionPolicy_Latest{NumVersions: 1}}}
	}
	return c
}

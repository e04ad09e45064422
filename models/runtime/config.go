package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"
)

// The errors Infer returns wrap one of these, with a message for the
// client that names the model and says what went wrong; the API layer
// maps them to its status codes.
var (
	// ErrUnavailable: no runtime process can take the request (they are
	// starting or restarting), or the one serving it died (HTTP 503).
	ErrUnavailable = errors.New("runtime unavailable")
	// ErrTimeout: the runtime did not answer within request_timeout
	// (HTTP 504).
	ErrTimeout = errors.New("runtime timed out")
	// ErrBadAnswer: the runtime answered something malformed, or an
	// error of its own (HTTP 500).
	ErrBadAnswer = errors.New("runtime failed")
	// ErrInvalid: the runtime refused the request as invalid
	// (INVALID_ARGUMENT from it; HTTP 400).
	ErrInvalid = errors.New("runtime refused the request")
	// ErrClosed: the model was unloaded or the server is stopping.
	ErrClosed = errors.New("runtime closed")
)

// Environment variables a runtime process is started with (beside
// llmserve's own environment).
const (
	// EnvSocket is the Unix socket path the process must serve the Open
	// Inference Protocol's gRPC service (and the metrics service) on.
	EnvSocket = "LLMSERVE_RUNTIME_SOCKET"
	// EnvModelName and EnvModelVersion name the model.
	EnvModelName    = "LLMSERVE_MODEL_NAME"
	EnvModelVersion = "LLMSERVE_MODEL_VERSION"
	// EnvSettings is the path of the model's model-settings.json ("" if
	// it has none).
	EnvSettings = "LLMSERVE_MODEL_SETTINGS"
	// EnvWorker is the process's index among the model's
	// parallel_workers, from 0.
	EnvWorker = "LLMSERVE_RUNTIME_WORKER"
	// EnvParentPID is llmserve's process id: a runtime should exit when
	// that process is gone (llmserve stops its runtimes with SIGTERM, but
	// if it is killed, a runtime that a shell started is orphaned).
	EnvParentPID = "LLMSERVE_PARENT_PID"
)

// MetricsMethod is the gRPC method of our metrics service (see
// runtimes/proto/llmserve_runtime.proto): it takes a google.protobuf.Empty
// and answers a google.protobuf.StringValue holding the runtime's own
// metrics in Prometheus' text format. A runtime that does not serve it has
// no metrics of its own.
const MetricsMethod = "/llmserve.runtime.v1.RuntimeMetrics/Metrics"

// PythonCommand is the command that runs an implementation written as
// MLServer writes it, a Python class path ("models.SumModel"):
// runtimes/python's llmserve_runtime imports the class from the model's
// folder and serves it, and its mlserver package gives the class
// MLServer's imports (from mlserver import MLModel). Both must be
// importable by Debian's python3 (PYTHONPATH, or installed).
const PythonCommand = "/usr/bin/python3 -m llmserve_runtime"

// classPath matches a dotted Python name: MLServer's implementation.
var classPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$`)

// IsClassPath reports whether implementation is a Python class path
// (MODULE.CLASS), MLServer's form of it.
func IsClassPath(implementation string) bool { return classPath.MatchString(implementation) }

// Command is the command line that runs implementation: PythonCommand
// with the class for a class path, else implementation itself.
func Command(implementation string) string {
	if IsClassPath(implementation) {
		return PythonCommand + " " + implementation
	}
	return implementation
}

// Config configures a custom runtime model.
type Config struct {
	// Name and Version are the model's (Version default "1").
	Name, Version string
	// Dir is the folder the command runs in (the model's folder).
	Dir string
	// Command is the implementation: a command line run by /bin/sh -c
	// in Dir.
	Command string
	// SettingsPath is passed to the process in EnvSettings.
	SettingsPath string
	// Env is added to the process's environment (KEY=value).
	Env []string
	// Workers is how many processes serve the model (parallel_workers;
	// default 1).
	Workers int
	// MaxBatchSize is the most rows one ModelInfer call merges; <= 1:
	// every request is its own call.
	MaxBatchSize int
	// MaxBatchTime is how long a batch waits for more requests after its
	// first one.
	MaxBatchTime time.Duration
	// RequestTimeout bounds each request from its arrival to its answer
	// (0: none but the client's).
	RequestTimeout time.Duration
	// StartTimeout bounds how long a process may take to answer
	// ServerReady and ModelReady (default 2 minutes).
	StartTimeout time.Duration
	// StopGrace is how long a process has between SIGTERM and SIGKILL
	// (default 10 s).
	StopGrace time.Duration
	// SocketDir holds the processes' sockets (default: a new folder in
	// the system's temporary folder).
	SocketDir string
	// Inputs, Outputs and Platform are the model's V2 metadata, as its
	// settings declare them.
	Inputs, Outputs []TensorSpec
	Platform        string
	// ContentTypes are the content types the runtime's own codecs decode:
	// requests may carry them besides the ones llmserve checks.
	ContentTypes []string
	Logger       *slog.Logger
}

// TensorSpec is one input or output of the model's metadata.
type TensorSpec struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
	// Parameters are MLServer's (content_type, ...): kept in the
	// settings for the runtime, not used by llmserve.
	Parameters map[string]any `json:"parameters,omitempty"`
}

func (c *Config) validate() error {
	switch {
	case c.Name == "":
		return errors.New("runtime: the model has no name")
	case c.Command == "":
		return fmt.Errorf("runtime: model %q has no implementation command", c.Name)
	}
	if c.Version == "" {
		c.Version = "1"
	}
	if c.Workers < 1 {
		c.Workers = 1
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

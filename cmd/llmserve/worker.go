package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/llmserve/llmserve/api/worker"
	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/models"
)

// workerFlags are what `llmserve worker` adds to serve's flags.
type workerFlags struct {
	role string
	port int
}

func newWorkerCommand() *cobra.Command {
	wf := &workerFlags{}
	cmd := serveFamily(&cobra.Command{
		Use:   "worker",
		Short: "Serve a model as serve does, plus the internal worker service a head routes to",
		Long: `Serve one GGUF model exactly as serve does (same flags, same HTTP and gRPC
routes), plus the internal gRPC service llmserve.worker.v1.Worker on
--worker-port, for a head (llmserve head) and for peer workers pulling KV:
generation by token ids, prefill with the KV kept for a transfer under a
lease, KV pulls in checksummed chunks, load and cache statistics and the
prefix cache's block events (proto/workerpb/worker.proto).

--role says what the head uses the worker for: both (whole requests and
prefills), prefill (prefills; it still serves whole requests when asked) or
decode (whole requests, pulling a remote prefill's KV; it refuses to
prefill for others). Every flag can also be set with LLMSERVE_<FLAG>.`,
	}, func(ctx context.Context, f *serveFlags) error { return serve(ctx, f, wf) })
	fl := cmd.Flags()
	fl.StringVar(&wf.role, "role", "both", "what the head uses this worker for: both, prefill or decode")
	fl.IntVar(&wf.port, "worker-port", 8090, "port of the internal worker gRPC service (listens on --host)")
	return cmd
}

// validate checks the worker's flags; nil (plain serve) is valid.
func (wf *workerFlags) validate(f *serveFlags) error {
	if wf == nil {
		return nil
	}
	if _, err := worker.ParseRole(wf.role); err != nil {
		return fmt.Errorf("--role: %q: %w", wf.role, err)
	}
	return firstFailed(
		flagCheck{wf.port < 1 || wf.port > 65535, fmt.Errorf("--worker-port: %d is not a TCP port (1 to 65535)", wf.port)},
		flagCheck{wf.port == f.httpPort, fmt.Errorf("--worker-port: %d is also the HTTP port", wf.port)},
		flagCheck{wf.port == f.grpcPort, fmt.Errorf("--worker-port: %d is also the gRPC port", wf.port)},
		flagCheck{f.modelRepository != "" || len(f.models) > 1, errors.New("--model: a worker serves exactly one model (no --model-repository, one --model)")},
	)
}

// newWorkerService builds the worker service over the registry's one
// generative model (serve with several models answers UNAVAILABLE).
func newWorkerService(wf *workerFlags, f *serveFlags, registry *models.Registry, apiKeys []string, log *slog.Logger, reg prometheus.Registerer) (*worker.Server, error) {
	role := "both"
	if wf != nil {
		role = wf.role
	}
	r, err := worker.ParseRole(role)
	if err != nil {
		return nil, err
	}
	key := ""
	if len(apiKeys) > 0 {
		key = apiKeys[0]
	}
	return worker.New(worker.Options{
		Model: func() (*models.Generative, error) {
			ms := registry.List()
			if len(ms) != 1 {
				return nil, fmt.Errorf("the worker service needs exactly one model; this server has %d", len(ms))
			}
			return ms[0], nil
		},
		Role: r, Version: versionString(), Commit: vcsRevision(), LlamaCommit: llamacpp.LlamaCommit(), APIKey: key, Logger: log, Registerer: reg, GRPCPort: f.grpcPort, Lease: f.kvLease,
	})
}

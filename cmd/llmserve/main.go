// Command llmserve serves LLMs over the OpenAI API (and, as it grows, the
// Open Inference Protocol), and benchmarks OpenAI-compatible servers.
//
//	llmserve serve        serve models (the embedded stories260K by default)
//	llmserve worker       serve one model plus the internal worker service a head routes to
//	llmserve head         serve the public API over workers: KV-aware routing, P/D, migration (docs/ROUTING.md)
//	llmserve bench        load-test any OpenAI-compatible server
//	llmserve synth        write a dummy-weight model of a real shape, for benchmarks
//	llmserve synth mlp    write an MLP tensor model (ONNX, GGUF) from JSON or random weights
//	llmserve synth lora   write a LoRA adapter (and the merged model) for a base GGUF
//	llmserve synth mmproj write a vision or audio projector (mmproj) GGUF for a text model
//	llmserve version      print the version
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/evals/bench"
	"github.com/llmserve/llmserve/evals/bench/agent"
	"github.com/llmserve/llmserve/evals/synth"
)

// version and commit are set at link time with -ldflags "-X
// main.version=... -X main.commit=..." (make build sets commit to the
// checkout's git commit).
var version, commit = "", ""

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "llmserve",
		Short:         "A model server for large language models",
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("llmserve {{.Version}}\n")
	synthCmd := synth.NewCommand()
	synthCmd.AddCommand(newSynthMLPCommand(), synth.NewLoRACommand(), synth.NewProjectorCommand())
	benchCmd := bench.NewCommand()
	benchCmd.AddCommand(agent.NewCommand())
	root.AddCommand(newServeCommand(), newWorkerCommand(), newHeadCommand(), benchCmd, synthCmd, newVersionCommand())
	return root
}

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "llmserve:", err)
		os.Exit(1)
	}
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// vcsRevision is the commit the binary was built from, with "-dirty" when
// the checkout had changes, or "unknown": main.commit when the link set
// it, else Go's VCS stamp (absent with -buildvcs=false).
func vcsRevision() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// versionLine is the version, the commit and the llama.cpp commit.
func versionLine() string {
	return fmt.Sprintf("%s (commit %s, llama.cpp %s)", versionString(), vcsRevision(), llamacpp.LlamaCommit())
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit and the llama.cpp commit",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "llmserve", versionLine())
		},
	}
}

// Command llmserve serves LLMs over the OpenAI API (and, as it grows, the
// Open Inference Protocol), and benchmarks OpenAI-compatible servers.
//
//	llmserve serve        serve models (the embedded stories260K by default)
//	llmserve bench        load-test any OpenAI-compatible server
//	llmserve synth        write a dummy-weight model of a real shape, for benchmarks
//	llmserve version      print the version
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/llmserve/llmserve/evals/bench"
	"github.com/llmserve/llmserve/evals/synth"
)

// version is set at link time with -ldflags "-X main.version=...".
var version = ""

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "llmserve",
		Short:         "A model server for large language models",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), bench.NewCommand(), synth.NewCommand(), newVersionCommand())
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

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "llmserve", versionString())
		},
	}
}

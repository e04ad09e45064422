package synth

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// NewCommand returns the `synth` subcommand, which writes a dummy-weight
// model with Write and prints a one-line summary to stdout.
func NewCommand() *cobra.Command {
	var (
		shape, dtype, vocabPath, output string
		context                         int
		seed                            uint64
		reasoning                       bool
		templatePath                    string
	)
	var table strings.Builder
	writeShapes(&table)
	cmd := &cobra.Command{
		Use:   "synth",
		Short: "Write a dummy-weight GGUF model of a real model's shape, for benchmarks",
		Long: `Write a GGUF model with pseudo-random weights and the shape of a real model
(like vLLM's --load-format dummy), to measure serving speed on a model whose
compute is that of the real one. Its output is garbage: never use it to judge
quality.

The tokenizer is copied from --vocab, a GGUF file (vocabulary-only, such as
llama.cpp's models/ggml-vocab-*.gguf, or a whole model); its number of tokens
sets the rows of the embedding and output layers. For an output layer the
size of the real model's, give a vocabulary of about the real size.

Shapes:

` + table.String() + `
Example:

  llmserve synth --shape smollm2-135m --dtype q8_0 \
      --vocab ggml-vocab-llama-spm.gguf -o smollm2-135m-q8_0.gguf`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return errors.New("no output file: give -o")
			}
			s, err := LookupShape(shape)
			if err != nil {
				return err
			}
			dt, err := ParseDType(dtype)
			if err != nil {
				return err
			}
			opts := Options{Shape: s, DType: dt, VocabPath: vocabPath, Context: context, Seed: seed}
			if reasoning {
				if templatePath != "" {
					return errors.New("--reasoning writes its own chat template: leave out --chat-template")
				}
				opts.AddedTokens, opts.ChatTemplate = ReasoningTokens, ReasoningTemplate
			}
			if templatePath != "" {
				b, err := os.ReadFile(templatePath)
				if err != nil {
					return fmt.Errorf("--chat-template: %w", err)
				}
				opts.ChatTemplate = string(b)
			}
			sum, err := Write(output, opts)
			if err != nil {
				return err
			}
			printSummary(cmd.OutOrStdout(), s, dt, sum)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&shape, "shape", "smollm2-135m", "model shape (see the table above)")
	fl.StringVar(&dtype, "dtype", string(Q8_0), "type of the weight matrices: f32, f16 or q8_0")
	fl.StringVar(&vocabPath, "vocab", "", "GGUF file whose tokenizer is copied (required)")
	fl.StringVarP(&output, "output", "o", "", "GGUF file to write (required)")
	fl.IntVar(&context, "context", 0, "training context length to write (llama.context_length); 0: the shape's")
	fl.Uint64Var(&seed, "seed", 1, "seed of the pseudo-random weights")
	fl.StringVar(&templatePath, "chat-template", "", "file with a Jinja chat template to write as tokenizer.chat_template (replacing the vocabulary's), e.g. one that renders tools")
	fl.BoolVar(&reasoning, "reasoning", false, "add <think> and </think> to the vocabulary and write a chat template that opens a thinking section (serve it with --reasoning-parser qwen3)")
	_ = cmd.MarkFlagRequired("vocab")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// writeShapes writes the table of known shapes.
func writeShapes(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  name\tembd\tlayers\theads\tkv heads\tff\tcontext\trope theta\ttied\treal vocab\tshape of")
	for _, s := range shapes {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t%g\t%v\t%d\t%s\n",
			s.Name, s.Embd, s.Layers, s.Heads, s.HeadsKV, s.FF, s.Context, s.RopeTheta, s.Tied, s.Vocab, s.Of)
	}
	_ = tw.Flush() // to a terminal: nothing to do about a failure
}

func printSummary(w io.Writer, s Shape, dt DType, sum Summary) {
	fmt.Fprintf(w, "wrote %s: %s %s, %.1fM params, %d tensors, vocabulary of %d tokens, %d bytes (%.1f MiB)\n",
		sum.Path, s.Name, dt, float64(sum.Params)/1e6, sum.Tensors, sum.VocabSize, sum.Bytes, float64(sum.Bytes)/(1<<20))
	if len(sum.F16Fallback) > 0 {
		fmt.Fprintf(w, "note: %d matrices are F16, their rows not being whole Q8_0 blocks: %s\n",
			len(sum.F16Fallback), strings.Join(sum.F16Fallback, ", "))
	}
	if s.Vocab > 0 && sum.VocabSize != s.Vocab {
		fmt.Fprintf(w, "note: the vocabulary has %d tokens, %s has %d: the embedding and output layers are %.2fx the real ones\n",
			sum.VocabSize, s.Of, s.Vocab, float64(sum.VocabSize)/float64(s.Vocab))
	}
}

package synth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// NewLoRACommand returns `synth lora`, which writes a LoRA adapter for a
// base GGUF model with WriteLoRA (and, with --merged, the base with the
// adapter merged in, with WriteMerged).
func NewLoRACommand() *cobra.Command {
	var (
		o              LoRAOptions
		output, merged string
		targets        string
	)
	cmd := &cobra.Command{
		Use:   "lora",
		Short: "Write a LoRA adapter GGUF with pseudo-random weights for a base model",
		Long: `Write a LoRA adapter for a base GGUF model, in the layout llama.cpp's
convert_lora_to_gguf.py writes (general.type=adapter, adapter.type=lora,
adapter.lora.alpha, F32 tensors <weight>.lora_a [n_in, rank] and
<weight>.lora_b [rank, n_out]). Serve it with --lora NAME=PATH, or give it to
llama.cpp's --lora. With --merged, also write the base model with the adapter
merged in (W + alpha/rank * B·A, F32): the model the adapter is equivalent to.

Example:

  llmserve synth lora --base stories260K.gguf --rank 8 --seed 2 -o story-lora.gguf`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" || o.Base == "" {
				return errors.New("give --base and -o")
			}
			if targets != "" {
				o.Targets = strings.Split(targets, ",")
			}
			sum, err := WriteLoRA(output, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: LoRA for %s (%s), rank %d, alpha %g, %d weights adapted, %d bytes\n",
				sum.Path, o.Base, sum.Architecture, sum.Rank, sum.Alpha, len(sum.Adapted), sum.Bytes)
			if merged != "" {
				if err := WriteMerged(merged, o.Base, output, 1); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s with the adapter merged\n", merged, o.Base)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Base, "base", "", "base GGUF model the adapter is for (required)")
	fl.StringVarP(&output, "output", "o", "", "adapter GGUF file to write (required)")
	fl.IntVar(&o.Rank, "rank", 4, "LoRA rank")
	fl.Float32Var(&o.Alpha, "alpha", 0, "adapter.lora.alpha; 0: the rank (scale 1)")
	fl.StringVar(&targets, "targets", strings.Join(DefaultLoRATargets, ","), "comma-separated weight kinds to adapt (attn_q, ffn_up, output, ...)")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the pseudo-random weights")
	fl.Float32Var(&o.Strength, "strength", 1, "scale of lora_b's weights")
	fl.StringVar(&merged, "merged", "", "also write the base model with the adapter merged to this file")
	return cmd
}

package synth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// NewProjectorCommand returns `synth mmproj`, which writes a multimodal
// projector GGUF (a vision encoder and an idefics3 projector) with
// WriteProjector.
func NewProjectorCommand() *cobra.Command {
	var (
		o             ProjectorOptions
		shape, dtype  string
		output        string
		baseOut       string
		shapesListing strings.Builder
	)
	for _, s := range projectorShapes {
		if s.IsAudio() {
			fmt.Fprintf(&shapesListing, "  %-13s audio (qwen2a), %d mel bins, %d positions, width %d, ff %d, %d layers, %d heads, %d tokens per 30 s (%s)\n",
				s.Name, s.NMel, s.Positions, s.Embd, s.FF, s.Layers, s.Heads, s.TokensPerAudioChunk(), s.Of)
			continue
		}
		fmt.Fprintf(&shapesListing, "  %-13s image %d, patch %d, width %d, ff %d, %d layers, %d heads, scale %d, %d tokens per tile (%s)\n",
			s.Name, s.ImageSize, s.PatchSize, s.Embd, s.FF, s.Layers, s.Heads, s.ScaleFactor, s.TokensPerTile(), s.Of)
	}
	cmd := &cobra.Command{
		Use:   "mmproj",
		Short: "Write a multimodal projector GGUF (vision or audio encoder) with pseudo-random weights",
		Long: `Write a multimodal projector ("mmproj") GGUF for a text model, as llama.cpp's
libmtmd loads it (llama-server --mmproj, llama-mtmd-cli --mmproj): a SigLIP-style
vision transformer and SmolVLM's idefics3 projector (pixel shuffle, one linear
map to the text model's width), with pseudo-random weights. It lets image chat
run end to end without a real vision model; what the model says about an
image is garbage.

The output width is the text model's: --base reads <arch>.embedding_length
from a GGUF model, or give --n-embd.

libmtmd frames an idefics3 image with tokens it looks up in the text model's
vocabulary by their text ("\n\n", "<fake_token_around_image>", "<global-img>");
a vocabulary without them (stories260K's) makes it fail ("invalid token[0] =
-1"). --base-out writes a copy of --base with the missing ones added as
user-defined tokens (zero embeddings, zero logits), the rest unchanged.

--shape tiny-audio writes an audio projector instead: a Whisper-style encoder
(128 mel bins) and Qwen2-Audio's "qwen2a" projector, for llama-mtmd-cli
--audio. libmtmd pads audio to 30-s windows of 750 tokens each (any clip of up
to 31 s is one), so a text model needs a context of at least that (-c 1024
with stories260K). --base-out then adds "<|audio_bos|>" and "<|audio_eos|>",
which libmtmd puts around the audio.

Shapes:

` + shapesListing.String() + `
Example:

  llmserve synth mmproj --base stories260K.gguf --base-out stories260K-img.gguf \
      -o stories-mmproj.gguf
  llama-mtmd-cli -m stories260K-img.gguf --mmproj stories-mmproj.gguf \
      --image img.png -p Describe --chat-template chatml`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return errors.New("no output file: give -o")
			}
			if (o.Base == "") == (o.NEmbd == 0) {
				return errors.New("give one of --base and --n-embd")
			}
			s, err := LookupProjectorShape(shape)
			if err != nil {
				return err
			}
			if baseOut != "" && o.Base == "" {
				return errors.New("--base-out needs --base")
			}
			if o.DType, err = ParseDType(dtype); err != nil {
				return err
			}
			o.Shape = s
			sum, err := WriteProjector(output, o)
			if err != nil {
				return err
			}
			if s.IsAudio() {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: qwen2a audio projector %s, output width %d, %d tokens per 30 s of audio, %.2fM parameters, %d bytes\n",
					sum.Path, s.Name, sum.NEmbd, s.TokensPerAudioChunk(), float64(sum.Params)/1e6, sum.Bytes)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: idefics3 projector %s, output width %d, %d tokens per tile, %.2fM parameters, %d bytes\n",
					sum.Path, s.Name, sum.NEmbd, s.TokensPerTile(), float64(sum.Params)/1e6, sum.Bytes)
			}
			if baseOut != "" {
				added, err := WriteWithMarkerTokens(baseOut, o.Base, s)
				if err != nil {
					return err
				}
				kind := map[bool]string{false: "image", true: "audio"}[s.IsAudio()]
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s with %d %s tokens added %q\n", baseOut, o.Base, len(added), kind, added)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Base, "base", "", "text model GGUF whose <arch>.embedding_length is the output width")
	fl.IntVar(&o.NEmbd, "n-embd", 0, "output width (the text model's n_embd), instead of --base")
	fl.StringVar(&shape, "shape", "tiny", "encoder shape (see above)")
	fl.StringVar(&dtype, "dtype", string(F32), "type of the weight matrices: f32 or f16")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the pseudo-random weights")
	fl.StringVarP(&output, "output", "o", "", "GGUF file to write (required)")
	fl.StringVar(&baseOut, "base-out", "", "also write --base with the projector's marker tokens it lacks (idefics3's image tokens, qwen2a's audio tokens) added to its vocabulary, to this file")
	return cmd
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llmserve/llmserve/models/tensor"
)

// newSynthMLPCommand is `llmserve synth mlp`: an MLP tensor model as ONNX
// and/or GGUF, from weights in JSON or random weights of given sizes.
func newSynthMLPCommand() *cobra.Command {
	var (
		weights, onnxPath, ggufPath, layers string
		seed                                uint64
		softmax, argmax                     bool
	)
	cmd := &cobra.Command{
		Use:   "mlp",
		Short: "Write an MLP tensor model (ONNX and/or GGUF) from JSON weights or random ones",
		Long: `Write a multilayer perceptron as an ONNX model, a GGUF graph (llmserve.graph),
or both, for tests, examples and benchmarks of tensor models. Its input is
"input" [batch, inputs] FP32, its output "output" [batch, outputs] FP32 and,
with an argmax head, "label" [batch] INT64.

The weights come from --weights, a JSON file:

  {"layers": [
     {"weights": [[0.1, -0.2], [0.3, 0.4], [0.5, 0.6]], "bias": [0.1, 0.2], "activation": "relu"},
     {"weights": [[1, -1], [-1, 1]], "bias": [0, 0]}],
   "softmax": true, "argmax": true}

where each layer's "weights" is [inputs][outputs], "bias" is optional and
"activation" is relu, tanh, sigmoid, gelu, gelu_tanh or absent; or from
--layers, the layer sizes inputs first, with pseudo-random weights (seeded
by --seed), relu between layers, and the head from --softmax and --argmax.

Examples:

  llmserve synth mlp --weights w.json --onnx mlp.onnx --gguf mlp.gguf
  llmserve synth mlp --layers 784,256,128,10 --seed 1 --softmax --argmax --onnx mnist.onnx`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if onnxPath == "" && ggufPath == "" {
				return errors.New("no output file: give --onnx, --gguf or both")
			}
			var m *tensor.MLP
			switch {
			case (weights == "") == (layers == ""):
				return errors.New("give exactly one of --weights (a JSON file) and --layers (sizes such as 784,256,10)")
			case weights != "":
				var err error
				if m, err = readMLP(weights); err != nil {
					return err
				}
				if cmd.Flags().Changed("softmax") || cmd.Flags().Changed("argmax") {
					return errors.New("--softmax and --argmax go with --layers; with --weights, set them in the JSON")
				}
			default:
				sizes, err := parseSizes(layers)
				if err != nil {
					return err
				}
				if m, err = tensor.RandomMLP(sizes, seed, softmax, argmax); err != nil {
					return err
				}
			}
			for _, out := range []struct {
				path, format string
				encode       func() ([]byte, error)
			}{{onnxPath, "ONNX", m.ONNX}, {ggufPath, "GGUF", m.GGUF}} {
				if out.path == "" {
					continue
				}
				b, err := out.encode()
				if err != nil {
					return err
				}
				if err := os.WriteFile(out.path, b, 0o644); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s MLP %s, %d parameters, %d bytes\n", out.path, out.format, describe(m), params(m), len(b))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&weights, "weights", "", "JSON file with the layers' weights")
	fl.StringVar(&layers, "layers", "", "layer sizes, inputs first (e.g. 784,256,128,10), for random weights")
	fl.Uint64Var(&seed, "seed", 1, "seed of the random weights (with --layers)")
	fl.BoolVar(&softmax, "softmax", false, "softmax on the output (with --layers)")
	fl.BoolVar(&argmax, "argmax", false, `add the "label" output, the argmax of the output (with --layers)`)
	fl.StringVar(&onnxPath, "onnx", "", "ONNX file to write")
	fl.StringVar(&ggufPath, "gguf", "", "GGUF file to write")
	return cmd
}

func readMLP(path string) (*tensor.MLP, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m tensor.MLP
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

func parseSizes(s string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--layers %q: %q is not a number", s, f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

func describe(m *tensor.MLP) string {
	sizes := []string{strconv.Itoa(m.Inputs())}
	for _, l := range m.Layers {
		sizes = append(sizes, strconv.Itoa(len(l.Weights[0])))
	}
	s := strings.Join(sizes, "-")
	if m.Softmax {
		s += " +softmax"
	}
	if m.ArgMax {
		s += " +argmax"
	}
	return s
}

func params(m *tensor.MLP) int {
	n := 0
	for _, l := range m.Layers {
		n += len(l.Weights)*len(l.Weights[0]) + len(l.Bias)
	}
	return n
}

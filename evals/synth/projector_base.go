package synth

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/llmserve/llmserve/gguf"
)

// IdeficsImageTokens are the tokens libmtmd's idefics3 template looks up
// in the text model's vocabulary by their text (mtmd.cpp: "\n\n",
// "<fake_token_around_image>", "<global-img>" open the global image,
// "<fake_token_around_image>" closes it, "\n" ends a row of tiles). A
// vocabulary without one of them makes mtmd put token id -1 in the
// prompt, and llama_decode refuses it ("invalid token[0] = -1"): SmolVLM's
// own vocabulary has them, stories260K's has none but "\n".
var IdeficsImageTokens = []string{"\n", "\n\n", "<fake_token_around_image>", "<global-img>"}

// WriteWithImageTokens writes to path a copy of the GGUF text model base
// with those of IdeficsImageTokens its vocabulary lacks appended as
// user-defined tokens (see Options.AddedTokens), so that an idefics3
// projector can run with it, and returns the tokens added. The new rows
// of token_embd.weight and output.weight are zero (a zero embedding, a
// logit of 0); every other tensor is copied as it is, and
// <arch>.vocab_size, if present, is updated. The model is otherwise
// unchanged: it generates what base generates after the same tokens.
func WriteWithImageTokens(path, base string) (added []string, err error) {
	return writeWithTokens(path, base, IdeficsImageTokens)
}

// WriteWithAudioTokens is WriteWithImageTokens for an audio projector of
// type qwen2a: it adds those of Qwen2AudioTokens the vocabulary lacks.
func WriteWithAudioTokens(path, base string) (added []string, err error) {
	return writeWithTokens(path, base, Qwen2AudioTokens)
}

// WriteWithMarkerTokens adds the marker tokens of the shape's projector
// (WriteWithImageTokens or WriteWithAudioTokens).
func WriteWithMarkerTokens(path, base string, s ProjectorShape) (added []string, err error) {
	if s.IsAudio() {
		return WriteWithAudioTokens(path, base)
	}
	return WriteWithImageTokens(path, base)
}

// writeWithTokens writes base with those of want its vocabulary lacks
// appended (see WriteWithImageTokens).
func writeWithTokens(path, base string, want []string) (added []string, err error) {
	bf, data, err := loadGGUF(base)
	if err != nil {
		return nil, err
	}
	toks, _ := bf.Lookup("tokenizer.ggml.tokens")
	tokens, ok := toks.([]string)
	if !ok || len(tokens) == 0 {
		return nil, fmt.Errorf("%s: no tokenizer.ggml.tokens", base)
	}
	for _, t := range want {
		if !hasPiece(tokens, t) {
			added = append(added, t)
		}
	}
	var v vocab
	for _, e := range bf.KVs {
		if strings.HasPrefix(e.Key, "tokenizer.") {
			v.kvs = append(v.kvs, e)
		}
	}
	v.size = len(tokens)
	nv, err := v.withAdded(added)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", base, err)
	}
	arch, _ := bf.Lookup("general.architecture")
	archName, _ := arch.(string)
	var kvs []gguf.KV
	for _, e := range bf.KVs {
		switch {
		case e.Key == "general.alignment":
			continue
		case strings.HasPrefix(e.Key, "tokenizer."):
			i := slices.IndexFunc(nv.kvs, func(n gguf.KV) bool { return n.Key == e.Key })
			e = nv.kvs[i]
		case archName != "" && e.Key == archName+".vocab_size":
			switch n := e.Value.(type) {
			case uint32:
				e.Value = uint32(nv.size)
			case int32:
				e.Value = int32(nv.size)
			case uint64:
				e.Value = uint64(nv.size)
			default:
				return nil, fmt.Errorf("%s: %s is a %T", base, e.Key, n)
			}
		}
		kvs = append(kvs, e)
	}
	var tensors []gguf.Tensor
	for _, t := range bf.Tensors {
		raw, err := bf.TensorData(data, t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", base, err)
		}
		nt := t
		if (t.Name == "token_embd.weight" || t.Name == "output.weight") && len(t.Shape) == 2 && t.Shape[1] == uint64(v.size) {
			rowBytes := len(raw) / v.size
			nt.Shape = []uint64{t.Shape[0], uint64(nv.size)}
			raw = append(slices.Clip(raw), make([]byte, rowBytes*len(added))...)
		}
		tensors = append(tensors, nt.WithData(raw))
	}
	if _, err := writeGGUFFile(path, kvs, tensors); err != nil {
		return nil, err
	}
	return added, nil
}

// hasPiece reports whether a token's text is piece, as llama.cpp prints
// it: a byte token <0xNN> is its byte.
func hasPiece(tokens []string, piece string) bool {
	if slices.Contains(tokens, piece) {
		return true
	}
	if len(piece) == 1 {
		return slices.Contains(tokens, fmt.Sprintf("<0x%02X>", piece[0]))
	}
	return false
}

// WriteWithContextLength writes to path a copy of the GGUF model base
// whose <arch>.context_length is n: a one-window audio clip takes 750
// positions, more than stories260K's 512 (llama-mtmd-cli runs it with
// -c 1024). Nothing else changes: the model computes every position as
// before (its RoPE has no scaling that depends on the trained length).
func WriteWithContextLength(path, base string, n int) error {
	bf, data, err := loadGGUF(base)
	if err != nil {
		return err
	}
	arch, _ := bf.Lookup("general.architecture")
	archName, _ := arch.(string)
	found := false
	var kvs []gguf.KV
	for _, e := range bf.KVs {
		switch {
		case e.Key == "general.alignment":
			continue
		case archName != "" && e.Key == archName+".context_length":
			switch e.Value.(type) {
			case uint32:
				e.Value = uint32(n)
			case uint64:
				e.Value = uint64(n)
			default:
				return fmt.Errorf("%s: %s is a %T", base, e.Key, e.Value)
			}
			found = true
		}
		kvs = append(kvs, e)
	}
	if !found {
		return fmt.Errorf("%s: no %s.context_length", base, archName)
	}
	var tensors []gguf.Tensor
	for _, t := range bf.Tensors {
		raw, err := bf.TensorData(data, t)
		if err != nil {
			return fmt.Errorf("%s: %w", base, err)
		}
		tensors = append(tensors, t.WithData(raw))
	}
	_, err = writeGGUFFile(path, kvs, tensors)
	return err
}

// WriteTinyVision writes into dir the vision pair the mmproj goldens use
// (testdata/mmproj/golden.json): the text model base with idefics3's
// image tokens added, and the tiny projector of seed 1 for it. It returns
// their paths.
func WriteTinyVision(dir, base string) (text, projector string, err error) {
	text = filepath.Join(dir, "stories260K-img.gguf")
	if _, err := WriteWithImageTokens(text, base); err != nil {
		return "", "", err
	}
	shape, err := LookupProjectorShape("tiny")
	if err != nil {
		return "", "", err
	}
	projector = filepath.Join(dir, "mmproj-tiny.gguf")
	if _, err := WriteProjector(projector, ProjectorOptions{Shape: shape, Base: text, Seed: 1}); err != nil {
		return "", "", err
	}
	return text, projector, nil
}

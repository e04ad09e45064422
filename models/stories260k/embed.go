package stories260k

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Name is the model id the server uses for the embedded model.
const Name = "stories260K"

// SHA256 is the checksum of the embedded GGUF file.
const SHA256 = "5a9d168bd9d9e29302e0d604e9a4c97184057ad87661cd7e7cc4318fdeba6d9c"

//go:embed stories260K-f32.gguf
var gguf []byte

//go:embed reference-greedy-once-upon-a-time.json
var referenceJSON []byte

// GGUF returns the embedded model bytes. Callers must not modify them.
func GGUF() []byte { return gguf }

// File returns the path of a file holding the embedded model, writing it
// under dir (the user cache dir when dir is "") if it is not there yet.
func File(dir string) (string, error) {
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "llmserve", "models")
	}
	path := filepath.Join(dir, "stories260K-f32-"+SHA256[:12]+".gguf")
	if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, gguf) {
		return path, nil
	}
	sum := sha256.Sum256(gguf)
	if hex.EncodeToString(sum[:]) != SHA256 {
		return "", fmt.Errorf("embedded %s: checksum mismatch", Name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write %s: %w", Name, err)
	}
	tmp, err := os.CreateTemp(dir, ".stories260K-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", Name, err)
	}
	if _, err := tmp.Write(gguf); err != nil {
		return "", errors.Join(fmt.Errorf("write %s: %w", Name, err), tmp.Close(), os.Remove(tmp.Name()))
	}
	if err := tmp.Close(); err != nil {
		return "", errors.Join(fmt.Errorf("write %s: %w", Name, err), os.Remove(tmp.Name()))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", errors.Join(fmt.Errorf("write %s: %w", Name, err), os.Remove(tmp.Name()))
	}
	return path, nil
}

// Reference is llama.cpp's greedy continuation of a prompt.
type Reference struct {
	Prompt          string  `json:"prompt"`
	PromptTokens    []int32 `json:"prompt_tokens"`
	GeneratedTokens []int32 `json:"generated_tokens"`
	GeneratedText   string  `json:"generated_text"`
}

// ReferenceGreedy returns the reference for "Once upon a time", 60 tokens.
func ReferenceGreedy() Reference {
	var r Reference
	if err := json.Unmarshal(referenceJSON, &r); err != nil {
		panic(fmt.Sprintf("embedded reference is not valid JSON: %v", err))
	}
	return r
}

//go:build !cgo

package llamacpp

import (
	"context"
	"errors"
	"log/slog"

	"github.com/llmserve/llmserve/engine"
)

// ErrNoCgo is returned when the binary was built without cgo.
var ErrNoCgo = errors.New("llamacpp: built without cgo; llama.cpp is not available")

// Init loads the ggml backends; without cgo there are none.
func Init() {}

// Model is unavailable without cgo.
type Model struct{}

// Load fails without cgo.
func Load(string, ModelParams) (*Model, error) { return nil, ErrNoCgo }

// LlamaCommit is empty without cgo.
func LlamaCommit() string { return "" }

// SetLogger does nothing without cgo.
func SetLogger(*slog.Logger, slog.Level) {}

func (*Model) Info() Info                                     { return Info{} }
func (*Model) Meta(string) string                             { return "" }
func (*Model) Tokenize(string, bool, bool) ([]int32, error)   { return nil, ErrNoCgo }
func (*Model) Detokenize([]int32, bool, bool) (string, error) { return "", ErrNoCgo }
func (*Model) Piece(int32, bool) []byte                       { return nil }
func (*Model) NumTokens() int                                 { return 0 }
func (*Model) BOS() int32                                     { return -1 }
func (*Model) FIMTokens() (int32, int32, int32)               { return -1, -1, -1 }
func (*Model) EOS() int32                                     { return -1 }
func (*Model) SEP() int32                                     { return -1 }
func (*Model) IsEOG(int32) bool                               { return false }
func (*Model) IsControl(int32) bool                           { return false }
func (*Model) Close() error                                   { return nil }
func (*Model) CheckGrammar(string) error                      { return ErrNoCgo }

// CheckDraftVocab returns ErrNoCgo.
func CheckDraftVocab(target, draft *Model) error { return ErrNoCgo }

// Adapter is a LoRA adapter; without cgo none can be loaded.
type Adapter struct{ name string }

// LoadAdapter returns ErrNoCgo.
func (*Model) LoadAdapter(string, string, float32) (*Adapter, error) { return nil, ErrNoCgo }

func (a *Adapter) AdapterName() string { return a.name }
func (*Adapter) Path() string          { return "" }
func (*Adapter) Alpha() float32        { return 0 }
func (*Adapter) Model() *Model         { return nil }
func (*Adapter) Users() int            { return 0 }
func (*Adapter) Close() error          { return nil }

// PoolingName returns "" without cgo.
func PoolingName(int) string { return "" }

// Context is unavailable without cgo.
type Context struct{}

// NewContext fails without cgo.
func NewContext(*Model, ContextParams) (*Context, error) { return nil, ErrNoCgo }

func (*Context) Slots() int                 { return 0 }
func (*Context) SlotTokens() int            { return 0 }
func (*Context) SlotLen(engine.Slot) int    { return 0 }
func (*Context) KVLayout() *engine.KVLayout { return nil }
func (*Context) KVMemory() engine.KVMemory  { return engine.KVMemory{} }
func (*Context) Stats() Stats               { return Stats{} }
func (*Context) Execute(context.Context, *engine.Step) (engine.StepResult, error) {
	return engine.StepResult{}, ErrNoCgo
}
func (*Context) EmbedCapacity() engine.EmbedCapacity { return engine.EmbedCapacity{} }
func (*Context) Close() error                        { return nil }
func (*Context) Idle()                               {}
func (*Context) AdapterSwitches() uint64             { return 0 }

// GGUFString needs cgo (ggml's GGUF reader).
func GGUFString(string, string) (string, bool, error) { return "", false, ErrNoCgo }

// GGUFMetadataOnly needs cgo (ggml's GGUF reader and writer).
func GGUFMetadataOnly(string, map[string]string) ([]byte, error) { return nil, ErrNoCgo }

// Projector is a multimodal projector (needs cgo).
type Projector struct{}

// Bitmap is a media item for Tokenize (needs cgo).
type Bitmap struct{}

// Chunks is a tokenized multimodal prompt (needs cgo).
type Chunks struct{}

func (*Model) LoadProjector(string, ProjectorParams) (*Projector, error) { return nil, ErrNoCgo }
func NewImageBitmap(int, int, []byte, string) (*Bitmap, error)           { return nil, ErrNoCgo }
func (*Projector) Vision() bool                                          { return false }
func (*Projector) Audio() bool                                           { return false }
func (*Projector) Close() error                                          { return nil }
func (*Projector) NewMediaBitmap([]byte, string) (*Bitmap, error)        { return nil, ErrNoCgo }
func (*Projector) Tokenize(string, bool, []*Bitmap) (*Chunks, error)     { return nil, ErrNoCgo }
func (*Bitmap) IsAudio() bool                                            { return false }
func (*Bitmap) Free()                                                    {}
func (*Chunks) Len() int                                                 { return 0 }
func (*Chunks) Free()                                                    {}
func (*Chunks) Text(int) ([]int32, bool)                                 { return nil, false }
func (*Chunks) ID(int) string                                            { return "" }
func (*Chunks) MediaRows(int) int                                        { return 0 }
func (*Chunks) Encode(int) ([]float32, error)                            { return nil, ErrNoCgo }

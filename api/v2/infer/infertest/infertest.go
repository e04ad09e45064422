// Package infertest provides a fake V2 LLM and backend for tests of the V2
// protocol packages (api/v2's REST routes and api/v2/grpc): a model whose
// every request is answered with a fixed list of outputs, over a
// vocabulary of one token per lower-case letter. It loads nothing and
// has no cgo. It is for tests only (depguard's fakes-only-in-tests).
package infertest

import (
	"context"
	"testing"
	"time"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// EOS is Letters' end-of-sequence token; tokens 0 to 25 are 'a' to 'z'.
const EOS int32 = 26

// Letters is a vocabulary of one token per lower-case letter and EOS.
// Tokenize drops every other character.
type Letters struct{}

// Tokenize implements tokenizer.Vocab.
func (Letters) Tokenize(text string, _, _ bool) ([]int32, error) {
	var out []int32
	for _, r := range text {
		if r >= 'a' && r <= 'z' {
			out = append(out, r-'a')
		}
	}
	return out, nil
}

// Piece implements tokenizer.Vocab.
func (Letters) Piece(tok int32, _ bool) []byte {
	if tok == EOS {
		return nil
	}
	return []byte{byte('a' + tok)}
}

func (Letters) NumTokens() int           { return int(EOS) + 1 }
func (Letters) BOS() int32               { return -1 }
func (Letters) EOS() int32               { return EOS }
func (Letters) IsEOG(tok int32) bool     { return tok == EOS }
func (Letters) IsControl(tok int32) bool { return tok == EOS }

// Scripted is an infer.Model that answers every request with Outs, each
// output pushed in turn, then ends. Build it with New.
type Scripted struct {
	name  string
	tok   *tokenizer.Tokenizer
	ready bool
	outs  []scheduler.Output
}

// New is a model named name ("m" when empty) over Letters, ready or not,
// that answers with outs.
func New(t testing.TB, name string, ready bool, outs ...scheduler.Output) *Scripted {
	t.Helper()
	tok, err := tokenizer.New(Letters{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if name == "" {
		name = "m"
	}
	return &Scripted{name: name, tok: tok, ready: ready, outs: outs}
}

func (m *Scripted) Name() string                    { return m.name }
func (m *Scripted) Ready() bool                     { return m.ready }
func (m *Scripted) MaxModelLen() int                { return 64 }
func (m *Scripted) RequestTimeout() time.Duration   { return 0 }
func (m *Scripted) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Submit answers the first request with the script.
func (m *Scripted) Submit(_ context.Context, reqs []*scheduler.Request) ([]*core.Stream, error) {
	s := core.NewStream(reqs[0].ID, 1, func(int, bool) {})
	for _, o := range m.outs {
		s.Push([]scheduler.Output{o}, scheduler.Usage{})
	}
	return []*core.Stream{s}, nil
}

// Backend serves one model, ready when it is.
type Backend struct{ M *Scripted }

func (b Backend) Model(name string) (infer.Model, bool) { return b.M, name == b.M.name }
func (b Backend) Models() []infer.Model                 { return []infer.Model{b.M} }
func (b Backend) Ready() bool                           { return b.M.ready }

package tokenizer

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Limits on one render. A model's template is trusted like its weights,
// but a client may send its own (chat_template in a request), so every
// render is bounded: a template that loops, recurses or grows strings
// without end gets an error, never a hung request or a crashed process
// (a Go stack overflow or a failed huge allocation cannot be recovered).
// Real chat templates stay far below these.
const (
	// MaxChatTemplateBytes bounds the source of a template.
	MaxChatTemplateBytes = 1 << 20
	// maxLoopIterations bounds the iterations of all loops of a render.
	maxLoopIterations = 1 << 18
	// maxMacroDepth bounds macro calls within macro calls.
	maxMacroDepth = 100
	// maxRenderBytes bounds the rendered prompt and every string a
	// template builds (a million-token prompt is a few MiB of text).
	maxRenderBytes = 16 << 20
)

var errTooLarge = fmt.Errorf("rendering exceeds %d bytes", maxRenderBytes)

// renderState is the per-render budget, reached through the template
// variable stateVar. Its name, like those of the functions the syntax
// rewrite calls (py:add, ...), is no identifier a template can write, so a
// template can neither read nor replace it.
type renderState struct {
	iterations int
	depth      int
}

const stateVar = "py:render-state"

func stateOf(r *exec.Renderer) *renderState {
	if v, ok := r.Environment.Context.Get(stateVar); ok {
		if s, ok := v.(*renderState); ok {
			return s
		}
	}
	return &renderState{} // not reached: Render always sets it
}

// countIterations charges n loop iterations to the render.
func (s *renderState) countIterations(n int) error {
	s.iterations += n
	if s.iterations > maxLoopIterations {
		return fmt.Errorf("rendering exceeds %d loop iterations", maxLoopIterations)
	}
	return nil
}

// limitWriter fails once more than n bytes are written.
type limitWriter struct {
	b strings.Builder
	n int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.n {
		return 0, errTooLarge
	}
	return w.b.Write(p)
}

var _ io.Writer = (*limitWriter)(nil)

// checkSize refuses a string result over the limit.
func checkSize(n int) error {
	if n > maxRenderBytes {
		return errTooLarge
	}
	return nil
}

// pyConcat is a ~ b (both as strings), size-limited.
func pyConcat(args *exec.VarArgs) (any, error) {
	if len(args.Args) != 2 {
		return nil, errors.New("~ takes two operands")
	}
	a, b := args.Args[0].String(), args.Args[1].String()
	if err := checkSize(len(a) + len(b)); err != nil {
		return nil, err
	}
	return a + b, nil
}

// pyMul is Python's a * b: numbers multiply, a string or list times an
// int repeats (size-limited).
func pyMul(args *exec.VarArgs) (any, error) {
	if len(args.Args) != 2 {
		return nil, errors.New("* takes two operands")
	}
	a, b := args.Args[0], args.Args[1]
	if b.IsString() || b.IsList() {
		a, b = b, a
	}
	switch {
	case a.IsInteger() && b.IsInteger():
		return a.Integer() * b.Integer(), nil
	case a.IsNumber() && b.IsNumber():
		return a.Float() * b.Float(), nil
	case (a.IsString() || a.IsList()) && b.IsInteger():
		n := max(b.Integer(), 0)
		if n > 0 && a.Len() > maxRenderBytes/n {
			return nil, errTooLarge
		}
		if a.IsString() {
			return strings.Repeat(a.String(), n), nil
		}
		out := make(pyList, 0, a.Len()*n)
		for range n {
			for i := range a.Len() {
				out = append(out, a.Index(i).Interface())
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("TypeError: unsupported operand type(s) for *: %q and %q", typeName(a), typeName(b))
}

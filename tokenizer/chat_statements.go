package tokenizer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// The statements a template runs are the engine's, with for and macro
// replaced: a for loop refuses None as Python does (chat_values.go) and
// charges its iterations to the render's budget, and macro calls nest
// only so deep (chat_limits.go).

// errNotIterable is Python's TypeError for a loop over None.
var errNotIterable = errors.New("'NoneType' object is not iterable")

// newControlStructures returns the engine's statements, with a for loop
// that refuses to iterate None as Python does (the engine's iterates
// anything that is not a sequence as empty).
func newControlStructures() *exec.ControlStructureSet {
	set := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{})
	for _, name := range strings.Fields("autoescape block extends filter for from if import include macro raw set with do break continue trans call") {
		if p, ok := builtins.ControlStructures.Get(name); ok {
			_ = set.Register(name, p)
		}
	}
	_ = set.Register("pyroot", pyRootParser)
	_ = set.Replace("macro", limitedMacroParser)
	forParser, _ := builtins.ControlStructures.Get("for")
	_ = set.Replace("for", func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := forParser(p, args)
		if err != nil {
			return nil, err
		}
		f, ok := cs.(*controlStructures.ForControlStructure)
		if !ok {
			return cs, nil
		}
		if f.Recursive {
			// loop(...) recurses outside any budget; no chat template
			// uses it.
			return nil, errors.New("recursive for loops are not supported in chat templates")
		}
		return &pyFor{f}, nil
	})
	return set
}

// pyFor is the engine's for loop, refusing None.
type pyFor struct {
	*controlStructures.ForControlStructure
}

// Execute implements exec.ControlStructure.
func (f *pyFor) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	// Evaluating the iterable twice is harmless: expressions have no
	// side effects a template can observe, except list.append, which
	// chat templates may not call (Python's sandbox refuses it).
	obj := r.Eval(f.ObjectEvaluator)
	if isPyNone(obj) {
		return errNotIterable
	}
	if !obj.IsError() && !obj.IsNil() {
		if err := stateOf(r).countIterations(obj.Len()); err != nil {
			return err
		}
	}
	return f.ForControlStructure.Execute(r, tag)
}

// pyMacro is the engine's macro statement with its calls depth-limited.
type pyMacro struct {
	*controlStructures.MacroControlStructure
}

// Execute implements exec.ControlStructure: it defines the macro as the
// engine does, then wraps the function it defined.
func (m *pyMacro) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if err := m.MacroControlStructure.Execute(r, tag); err != nil {
		return err
	}
	v, ok := r.Environment.Context.Get(m.Name)
	if !ok {
		return nil
	}
	inner, ok := v.(exec.Macro)
	if !ok {
		return nil
	}
	state := stateOf(r)
	r.Environment.Context.Set(m.Name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if state.depth >= maxMacroDepth {
			return exec.AsValue(fmt.Errorf("macro calls nested deeper than %d", maxMacroDepth))
		}
		state.depth++
		defer func() { state.depth-- }()
		return inner(params)
	}))
	return nil
}

func limitedMacroParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	base, _ := builtins.ControlStructures.Get("macro")
	cs, err := base(p, args)
	if err != nil {
		return nil, err
	}
	if m, ok := cs.(*controlStructures.MacroControlStructure); ok {
		return &pyMacro{m}, nil
	}
	return cs, nil
}

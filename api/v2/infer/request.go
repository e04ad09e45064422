package infer

// Request is an inference request in the form both protocols decode into.
type Request struct {
	// ID is echoed in the response.
	ID         string
	Parameters Parameters
	Inputs     []*Tensor
	// Outputs are the outputs asked for by name; none means the default.
	Outputs []RequestedOutput
}

// RequestedOutput is one output the client asked for.
type RequestedOutput struct {
	Name       string
	Parameters Parameters
}

// Response is an inference response before its wire encoding.
type Response struct {
	ModelName    string
	ModelVersion string
	ID           string
	Parameters   Parameters
	Outputs      []*Tensor
}

// CheckInputs verifies every input's datatype, shape and data, and that no
// name repeats.
func (r *Request) CheckInputs() error {
	seen := make(map[string]bool, len(r.Inputs))
	for _, t := range r.Inputs {
		if seen[t.Name] {
			return Errorf(Invalid, "input %q appears twice", truncate(t.Name))
		}
		seen[t.Name] = true
		if err := t.Check(); err != nil {
			return Errorf(Invalid, "input %q: %v", truncate(t.Name), err)
		}
	}
	seen = make(map[string]bool, len(r.Outputs))
	for _, o := range r.Outputs {
		if seen[o.Name] {
			return Errorf(Invalid, "output %q is requested twice", truncate(o.Name))
		}
		seen[o.Name] = true
	}
	return nil
}

// input returns the input called name, or nil.
func (r *Request) input(name string) *Tensor {
	for _, t := range r.Inputs {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func invalidf(format string, args ...any) *Error { return Errorf(Invalid, format, args...) }

package openaitest

// Named is what Backend needs of a model: its name.
type Named interface{ Name() string }

// Backend serves a fixed list of models. Instantiated with openai.Model
// (NewBackend[openai.Model](models...)), it is an openai.Backend.
type Backend[M Named] struct{ models []M }

// NewBackend returns the backend of models, listed in the order given.
func NewBackend[M Named](models ...M) *Backend[M] { return &Backend[M]{models: models} }

// Model returns the first model called name.
func (b *Backend[M]) Model(name string) (M, bool) {
	for _, m := range b.models {
		if m.Name() == name {
			return m, true
		}
	}
	var none M
	return none, false
}

// Models lists the models.
func (b *Backend[M]) Models() []M { return b.models }

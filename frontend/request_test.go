package frontend

import (
	"encoding/json"
	"testing"
)

// FunctionTool writes another protocol's tool as OpenAI's function tool,
// the form chat templates read, with description and parameters only when
// given.
func TestFunctionTool(t *testing.T) {
	desc := "Weather <now>"
	tests := []struct {
		name   string
		desc   *string
		params json.RawMessage
		want   string
	}{
		{"name only", nil, nil, `{"function":{"name":"f"},"type":"function"}`},
		{"all", &desc, json.RawMessage(`{ "type": "object" }`),
			`{"function":{"description":"Weather \u003cnow\u003e","name":"f","parameters":{"type":"object"}},"type":"function"}`},
	}
	for _, tt := range tests {
		got, err := FunctionTool("f", tt.desc, tt.params)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: %s %v, want %s", tt.name, got, err, tt.want)
		}
	}
}

func TestName(t *testing.T) {
	if Name("", "messages") != "messages" || Name("input", "messages") != "input" {
		t.Error("Name does not default")
	}
}

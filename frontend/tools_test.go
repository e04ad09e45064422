package frontend

import (
	"encoding/json"
	"strings"
	"testing"
)

// The tool plan decides the mode from the choice and the tools, and its
// errors name the request's fields in its protocol's terms.
func TestNewToolPlan(t *testing.T) {
	tools := []Tool{{Name: "now"}, {Name: "add", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}}
	for _, tt := range []struct {
		tools  []Tool
		choice ToolChoice
		mode   ToolMode
	}{
		{nil, ToolChoice{}, ToolNone},
		{tools, ToolChoice{}, ToolAuto},
		{tools, ToolChoice{Mode: ToolNone}, ToolNone},
		{tools, ToolChoice{Mode: ToolRequired}, ToolRequired},
		{tools, ToolChoice{Mode: ToolNamed, Name: "add"}, ToolNamed},
	} {
		tp, err := NewToolPlan(&Request{Tools: tt.tools, ToolChoice: tt.choice}, "")
		if err != nil || tp.Mode != tt.mode {
			t.Errorf("%+v: %+v %v, want mode %d", tt.choice, tp, err, tt.mode)
		}
	}
	_, err := NewToolPlan(&Request{Tools: tools, ToolChoice: ToolChoice{Mode: ToolNamed, Name: "later"}, Fields: Fields{ToolChoiceName: "tool_choice.name"}}, "")
	badParam(t, err, "tool_choice.name")
	_, err = NewToolPlan(&Request{ToolChoice: ToolChoice{Mode: ToolRequired, Text: `"required"`}}, "")
	badParam(t, err, "tool_choice")

	no := false
	tp, _ := NewToolPlan(&Request{Tools: tools, ToolChoice: ToolChoice{Mode: ToolRequired}, ParallelToolCalls: &no}, echo)
	if s := string(tp.Schema()); !strings.Contains(s, `"maxItems": 1`) || !json.Valid(tp.Schema()) {
		t.Errorf("schema %s", s)
	}
	if g, err := tp.Grammar(nil, "tools[%d].parameters"); err != nil || g == "" {
		t.Errorf("grammar %q %v", g, err)
	}
	bad := &ToolPlan{Mode: ToolRequired, Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"nope"}`)}}}
	_, err = bad.Grammar(nil, "tools[%d].parameters")
	badParam(t, err, "tools[0].parameters")
}

package openai

import (
	"encoding/json"
	"errors"
	"github.com/llmserve/llmserve/frontend"
	"strings"
	"testing"
)

func TestDecodeToolPlan(t *testing.T) {
	tools := []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`),
		json.RawMessage(`{"type":"function","function":{"name":"now"}}`),
	}
	tests := []struct {
		body  string
		tools []json.RawMessage
		mode  frontend.ToolMode
		param string // "" when valid
	}{
		{`{}`, tools, frontend.ToolAuto, ""},
		{`{}`, nil, frontend.ToolNone, ""},
		{`{"tool_choice":"none"}`, tools, frontend.ToolNone, ""},
		{`{"tool_choice":"required"}`, tools, frontend.ToolRequired, ""},
		{`{"tool_choice":{"type":"function","function":{"name":"now"}}}`, tools, frontend.ToolNamed, ""},
		{`{"tool_choice":{"type":"function","function":{"name":"later"}}}`, tools, 0, "tool_choice.function.name"},
		{`{"tool_choice":{"type":"function"}}`, tools, 0, "tool_choice.function.name"},
		{`{"tool_choice":"sometimes"}`, tools, 0, "tool_choice"},
		{`{"tool_choice":"required"}`, nil, 0, "tool_choice"},
		{`{"tool_choice":5}`, tools, 0, "tool_choice"},
		{`{"parallel_tool_calls":"yes"}`, tools, 0, "parallel_tool_calls"},
	}
	plan := func(body string, tools []json.RawMessage) (*frontend.ToolPlan, error) {
		req := &frontend.Request{}
		for _, raw := range tools {
			tool, err := decodeTool(raw)
			if err != nil {
				t.Fatal(err)
			}
			req.Tools = append(req.Tools, tool)
		}
		if err := decodeToolChoice([]byte(body), req); err != nil {
			return nil, err
		}
		return frontend.NewToolPlan(req, "")
	}
	for _, tt := range tests {
		tp, err := plan(tt.body, tt.tools)
		if tt.param != "" {
			var ve *frontend.Error
			if !errors.As(err, &ve) || ve.Param != tt.param {
				t.Errorf("%s: err %v, want a 400 naming %s", tt.body, err, tt.param)
			}
			continue
		}
		if err != nil || tp.Mode != tt.mode {
			t.Errorf("%s: %+v %v", tt.body, tp, err)
		}
	}
	tp, _ := plan(`{"tool_choice":"required","parallel_tool_calls":false}`, tools)
	// The fallback template renders no tools: the generic format's one
	// call.
	if s := string(tp.Schema()); !strings.Contains(s, `"tool_call":`) || !json.Valid(tp.Schema()) {
		t.Errorf("schema %s", s)
	}
}

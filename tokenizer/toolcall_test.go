package tokenizer_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/tokenizer"
)

func call(name, args string) tokenizer.ToolCall {
	return tokenizer.ToolCall{Type: "function", Name: name, Arguments: args}
}

const paris = `{"location": "Paris"}`

// Real output shapes of each family, as their chat templates write calls
// back into the prompt and as the models produce them.
var toolCallCases = []struct {
	name, parser, text, content string
	calls                       []tokenizer.ToolCall
}{
	{"hermes", tokenizer.ToolsHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>", "", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"hermes content and two calls", tokenizer.ToolsHermes,
		"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"timezone\": \"Europe/Paris\"}}\n</tool_call>",
		"Let me check.\n", []tokenizer.ToolCall{call("get_weather", paris), call("get_time", `{"timezone": "Europe/Paris"}`)}},
	{"hermes unclosed", tokenizer.ToolsHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", "", []tokenizer.ToolCall{call("f", "{}")}},
	{"hermes no call", tokenizer.ToolsHermes, "It is sunny in Paris.", "It is sunny in Paris.", nil},
	{"hermes malformed is content", tokenizer.ToolsHermes, "<tool_call>\n{not json\n</tool_call>", "<tool_call>\n{not json\n</tool_call>", nil},
	{"llama3", tokenizer.ToolsLlama3JSON, `{"name": "get_weather", "parameters": {"location": "Paris"}}`, "", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"llama3 python_tag", tokenizer.ToolsLlama3JSON, `<|python_tag|>{"name": "get_weather", "parameters": {"location": "Paris"}}`, "", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"llama3 two calls", tokenizer.ToolsLlama3JSON, `{"name": "a", "parameters": {}}; {"name": "b", "arguments": {"x": 1}}`, "", []tokenizer.ToolCall{call("a", "{}"), call("b", `{"x": 1}`)}},
	{"llama3 text", tokenizer.ToolsLlama3JSON, "  The weather in Paris is sunny {really}.", "  The weather in Paris is sunny {really}.", nil},
	{"llama3 json that is no call", tokenizer.ToolsLlama3JSON, `{"answer": 4}`, `{"answer": 4}`, nil},
	{"mistral nemo", tokenizer.ToolsMistral, `[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris"}}, {"name": "f", "arguments": {}}]`, "", []tokenizer.ToolCall{call("get_weather", paris), call("f", "{}")}},
	{"mistral v11", tokenizer.ToolsMistral, `[TOOL_CALLS]get_weather[ARGS]{"location": "Paris"}`, "", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"mistral v11 two calls and content", tokenizer.ToolsMistral, `Sure. [TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]b[ARGS]{"x": [1, 2]}`, "Sure. ", []tokenizer.ToolCall{call("a", "{}"), call("b", `{"x": [1, 2]}`)}},
	{"mistral call id", tokenizer.ToolsMistral, `[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"location": "Paris"}`, "", []tokenizer.ToolCall{{ID: "a1B2c3D4e", Type: "function", Name: "get_weather", Arguments: paris}}},
	{"qwen3 coder", tokenizer.ToolsQwen3Coder, "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>", "", []tokenizer.ToolCall{call("get_weather", `{"location": "Paris", "days": 3}`)}},
	{"seed oss", tokenizer.ToolsSeedOSS, "I'll look.<seed:tool_call>\n<function=get_weather>\n<parameter=location>Paris</parameter>\n</function>\n</seed:tool_call>", "I'll look.", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"glm45", tokenizer.ToolsGLM45, "\n<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", "\n", []tokenizer.ToolCall{call("get_weather", `{"location": "Paris", "days": 3}`)}},
	{"kimi k2", tokenizer.ToolsKimiK2, `<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"location": "Paris"}<|tool_call_end|><|tool_calls_section_end|>`, "", []tokenizer.ToolCall{{ID: "functions.get_weather:0", Type: "function", Name: "get_weather", Arguments: paris}}},
	{"deepseek v3.1", tokenizer.ToolsDeepSeekV31, `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"location": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`, "", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"deepseek r1", tokenizer.ToolsDeepSeekV3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"functionary v3.1", tokenizer.ToolsFunctionaryV31, `<function=get_weather>{"location": "Paris"}</function>`, "", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"minimax m2", tokenizer.ToolsMiniMaxM2, "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"location\">Paris</parameter>\n</invoke>\n</minimax:tool_call>", "", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"granite", tokenizer.ToolsGranite, `<|tool_call|>[{"name": "get_weather", "arguments": {"location": "Paris"}}]`, "", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"firefunction", tokenizer.ToolsFirefunction, ` functools[{"name": "get_weather", "arguments": {"location": "Paris"}}]`, " ", []tokenizer.ToolCall{call("get_weather", paris)}},
	{"double-encoded arguments", tokenizer.ToolsHermes, `<tool_call>{"name": "f", "arguments": "{\"a\": \"é\"}"}</tool_call>`, "", []tokenizer.ToolCall{call("f", `{"a": "é"}`)}},
}

func TestParseToolCalls(t *testing.T) {
	for _, tt := range toolCallCases {
		t.Run(tt.name, func(t *testing.T) {
			content, calls, err := tokenizer.ParseToolCalls(tt.parser, tt.text)
			if err != nil || content != tt.content || !reflect.DeepEqual(calls, tt.calls) {
				t.Fatalf("got %q %+v %v\nwant %q %+v", content, calls, err, tt.content, tt.calls)
			}
			// Streamed a byte at a time: the same result, and the content
			// never holds call text.
			p, _ := tokenizer.NewToolCallParser(tt.parser)
			var got strings.Builder
			for i := range len(tt.text) {
				got.WriteString(p.Push(tt.text[i : i+1]))
				if len(tt.calls) > 0 && !strings.HasPrefix(tt.content, got.String()) {
					t.Fatalf("streamed content %q is not a prefix of %q", got.String(), tt.content)
				}
			}
			c, calls := p.Flush()
			got.WriteString(c)
			if got.String() != tt.content || !reflect.DeepEqual(calls, tt.calls) {
				t.Fatalf("streamed: got %q %+v", got.String(), calls)
			}
		})
	}
	if _, err := tokenizer.NewToolCallParser("pythonic"); err == nil {
		t.Fatal("unknown parser accepted")
	}
}

// Every template in testdata gets the parser for the syntax it writes
// calls in.
func TestToolCallParserFor(t *testing.T) {
	want := map[string]string{
		"ByteDance-Seed-OSS":                  tokenizer.ToolsSeedOSS,
		"GLM-4.6":                             tokenizer.ToolsGLM45,
		"Kimi-K2-Instruct":                    tokenizer.ToolsKimiK2,
		"Kimi-K2-Thinking":                    tokenizer.ToolsKimiK2,
		"moonshotai-Kimi-K2":                  tokenizer.ToolsKimiK2,
		"MiMo-VL":                             tokenizer.ToolsHermes,
		"MiniMax-M2":                          tokenizer.ToolsMiniMaxM2,
		"Mistral-Small-3.2-24B-Instruct-2506": tokenizer.ToolsMistral,
		"mistralai-Ministral-3-14B-Reasoning-2512":      tokenizer.ToolsMistral,
		"mistralai-Mistral-Nemo-Instruct-2407":          tokenizer.ToolsMistral,
		"unsloth-mistral-Devstral-Small-2507":           tokenizer.ToolsMistral,
		"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16":           tokenizer.ToolsQwen3Coder,
		"Qwen3-Coder":                                   tokenizer.ToolsQwen3Coder,
		"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": tokenizer.ToolsHermes,
		"NousResearch-Hermes-3-Llama-3.1-8B-tool_use":   tokenizer.ToolsHermes,
		"Qwen-QwQ-32B":                                  tokenizer.ToolsHermes,
		"Qwen-Qwen2.5-7B-Instruct":                      tokenizer.ToolsHermes,
		"Qwen-Qwen3-0.6B":                               tokenizer.ToolsHermes,
		"unsloth-Apriel-1.5":                            tokenizer.ToolsHermes,
		"deepseek-ai-DeepSeek-V3.1":                     tokenizer.ToolsDeepSeekV31,
		"deepseek-ai-DeepSeek-R1-Distill-Llama-8B":      tokenizer.ToolsDeepSeekV3,
		"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B":      tokenizer.ToolsDeepSeekV3,
		"llama-cpp-deepseek-r1":                         tokenizer.ToolsDeepSeekV3,
		"meetkai-functionary-medium-v3.1":               tokenizer.ToolsFunctionaryV31,
		"fireworks-ai-llama-3-firefunction-v2":          tokenizer.ToolsFirefunction,
		"ibm-granite-granite-3.3-2B-Instruct":           tokenizer.ToolsGranite,
		"meta-llama-Llama-3.1-8B-Instruct":              tokenizer.ToolsLlama3JSON,
		"meta-llama-Llama-3.2-3B-Instruct":              tokenizer.ToolsLlama3JSON,
		"meta-llama-Llama-3.3-70B-Instruct":             tokenizer.ToolsLlama3JSON,
	}
	files, _ := filepath.Glob("testdata/chat/templates/*.jinja")
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".jinja")
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := tokenizer.ToolCallParserFor(string(src)); got != want[base] {
			t.Errorf("%s: parser %q, want %q", base, got, want[base])
		}
	}
}

// FuzzToolCallParser: any text, pushed in any pieces, gives what the
// one-shot parse gives, without panicking.
func FuzzToolCallParser(f *testing.F) {
	for _, tt := range toolCallCases {
		f.Add(tt.parser, tt.text, []byte{3, 1, 4, 1, 5})
	}
	f.Fuzz(func(t *testing.T, parser, text string, cuts []byte) {
		wantC, wantCalls, err := tokenizer.ParseToolCalls(parser, text)
		if err != nil {
			return
		}
		p, _ := tokenizer.NewToolCallParser(parser)
		var got strings.Builder
		rest := text
		for _, c := range cuts {
			n := min(int(c), len(rest))
			got.WriteString(p.Push(rest[:n]))
			rest = rest[n:]
		}
		got.WriteString(p.Push(rest))
		c, calls := p.Flush()
		got.WriteString(c)
		if got.String() != wantC || !reflect.DeepEqual(calls, wantCalls) {
			t.Fatalf("pieces: %q %+v; whole: %q %+v", got.String(), calls, wantC, wantCalls)
		}
	})
}

package frontend

import (
	"encoding/json"
	"testing"
)

// The scanner finds every call's name and arguments in the required
// mode's JSON, however the text is cut into pushes.
func TestCallArrayScanner(t *testing.T) {
	text := `[{"name": "get_weather", "parameters": {"city": "Paris \"}]", "days": [1, {"x": 2}]}},
  {"name":"add","parameters":{}}]`
	want := []struct{ name, args string }{
		{"get_weather", `{"city": "Paris \"}]", "days": [1, {"x": 2}]}`},
		{"add", `{}`},
	}
	for _, size := range []int{1, 2, 3, 7, 1000} {
		var sc callArrayScanner
		var got []struct{ name, args string }
		for i := 0; i < len(text); i += size {
			for _, ev := range sc.push(text[i:min(i+size, len(text))]) {
				if ev.start {
					got = append(got, struct{ name, args string }{name: ev.name})
				}
				if ev.arguments != "" {
					got[len(got)-1].args += ev.arguments
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("pushes of %d: %+v", size, got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("pushes of %d, call %d: %+v, want %+v", size, i, got[i], want[i])
			}
			if !json.Valid([]byte(got[i].args)) {
				t.Errorf("call %d arguments are not JSON: %s", i, got[i].args)
			}
		}
	}
}

package infer

import (
	"reflect"
	"testing"
)

// FuzzDecodeParameters: where the fast path for flat objects accepts its
// input, the general decoder reads the same parameters from it.
func FuzzDecodeParameters(f *testing.F) {
	for _, s := range []string{
		`{"binary_data_size": 3136}`, `{}`, ` { } `, `{"a":1,"b":-2.5e3,"c":"s","d":true,"e":false,"f":null}`,
		`{"a":1,"a":null}`, `{"a":null,"a":2}`, `{"a":9223372036854775808}`, `{"a":1e999}`, `{"a":01}`,
		`{"a":"\u00e9"}`, `{"a":"é"}`, `{"stop":["x"]}`, `{"a":{}}`, `{"a":1,}`, `{"a" 1}`, `{"a":tru}`, `{"a":-}`,
		`{"a":1.}`, `{"a":1e}`, `{"a":1} x`, `[1]`, `"s"`, `{"a":"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, ok := decodeFlatParameters(raw)
		if !ok {
			return
		}
		slow, err := decodeParameters(raw)
		if err != nil {
			t.Fatalf("%q: the fast path read %v, the decoder refused it: %v", raw, fast, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: the fast path read %#v, the decoder %#v", raw, fast, slow)
		}
	})
}

func TestDecodeFlatParameters(t *testing.T) {
	p, ok := decodeFlatParameters([]byte(` {"binary_data_size" : 3136, "x": -1.5, "s": "a b", "t": true, "n": null} `))
	want := Parameters{"binary_data_size": int64(3136), "x": -1.5, "s": "a b", "t": true}
	if !ok || !reflect.DeepEqual(p, want) {
		t.Fatalf("%#v %v, want %#v", p, ok, want)
	}
	for _, other := range []string{`{"stop":["x"]}`, `{"a":"\n"}`, `{"a":1e999}`, `{"a":1}x`, `{"a":{}}`} {
		if _, ok := decodeFlatParameters([]byte(other)); ok {
			t.Errorf("%s: taken by the fast path", other)
		}
	}
}

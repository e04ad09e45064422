package v2

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/llmserve/llmserve/api/v2/infer"
)

// modelConfig answers Triton's model configuration extension: the
// model's ModelConfig (infer.TritonConfig) in Triton's JSON form.
func (h *handler) modelConfig(w http.ResponseWriter, r *http.Request) {
	m, err := h.lookup(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(configJSON(infer.TritonConfig(m).ProtoReflect()))
}

// configJSON writes a message as Triton's server writes a model
// configuration: the proto's field names, every scalar field (defaults
// included) and every repeated or map field, message fields only when
// set, enums by name, and 64-bit integers as JSON numbers (protobuf's
// JSON mapping writes them as strings; Triton turns them back into
// numbers, and its clients read numbers). Fields come in their number
// order, map entries in key order, so the answer is byte-stable.
func configJSON(m protoreflect.Message) []byte {
	return appendMessage(nil, m)
}

func appendMessage(b []byte, m protoreflect.Message) []byte {
	b = append(b, '{')
	fields := m.Descriptor().Fields()
	first := true
	for i := range fields.Len() {
		fd := fields.Get(i)
		if (fd.Message() != nil && !fd.IsList() && !fd.IsMap() || fd.ContainingOneof() != nil) && !m.Has(fd) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = strconv.AppendQuote(b, string(fd.Name()))
		b = append(b, ':')
		v := m.Get(fd)
		switch {
		case fd.IsMap():
			b = append(b, '{')
			keys := infer.SortedMapKeys(v.Map())
			for j, k := range keys {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendQuote(b, k.String())
				b = append(b, ':')
				b = appendValue(b, fd.MapValue(), v.Map().Get(k))
			}
			b = append(b, '}')
		case fd.IsList():
			b = append(b, '[')
			for j := range v.List().Len() {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendValue(b, fd, v.List().Get(j))
			}
			b = append(b, ']')
		default:
			b = appendValue(b, fd, v)
		}
	}
	return append(b, '}')
}

func appendValue(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return appendMessage(b, v.Message())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return strconv.AppendQuote(b, string(ev.Name()))
		}
		return strconv.AppendInt(b, int64(v.Enum()), 10)
	case protoreflect.StringKind:
		s, _ := json.Marshal(v.String())
		return append(b, s...)
	case protoreflect.BytesKind:
		return strconv.AppendQuote(b, base64.StdEncoding.EncodeToString(v.Bytes()))
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool())
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			return append(b, `"NaN"`...)
		case math.IsInf(f, 1):
			return append(b, `"Infinity"`...)
		case math.IsInf(f, -1):
			return append(b, `"-Infinity"`...)
		}
		bits := 64
		if fd.Kind() == protoreflect.FloatKind {
			bits = 32
		}
		return strconv.AppendFloat(b, f, 'g', -1, bits)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(b, v.Uint(), 10)
	}
	return strconv.AppendInt(b, v.Int(), 10)
}

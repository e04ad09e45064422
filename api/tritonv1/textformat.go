package tritonv1

import (
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/llmserve/llmserve/api/v2/infer"
)

// marshalText writes m in protobuf's text format as the reference parsers
// read it (C++ TextFormat::Parse, Python's text_format.Parse): fields in
// number order with "name: value" or "name { ... }", map entries in key
// order, strings and bytes in double quotes with every byte that is not
// printable ASCII as a three-digit octal escape. It is deterministic, byte
// for byte: Go's prototext is not, by design, and it writes U+00A0 (a
// non-breaking space) where a field separator goes at random, which the
// reference parsers refuse. oneLine writes one line (an HTTP header);
// otherwise one field per line, indented by two spaces per level.
func marshalText(m proto.Message, oneLine bool) []byte {
	w := textWriter{oneLine: oneLine}
	w.message(m.ProtoReflect(), 0)
	out := w.b.String()
	if oneLine {
		return []byte(strings.TrimSuffix(out, " "))
	}
	return []byte(out)
}

type textWriter struct {
	b       strings.Builder
	oneLine bool
}

// line starts a field at depth.
func (w *textWriter) line(depth int) {
	if !w.oneLine {
		w.b.WriteString(strings.Repeat("  ", depth))
	}
}

// end ends a field.
func (w *textWriter) end() {
	if w.oneLine {
		w.b.WriteByte(' ')
	} else {
		w.b.WriteByte('\n')
	}
}

func (w *textWriter) message(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsMap():
			keys := infer.SortedMapKeys(v.Map())
			for _, k := range keys {
				w.line(depth)
				w.b.WriteString(string(fd.Name()) + " {")
				w.end()
				w.field(fd.MapKey(), k.Value(), depth+1)
				w.field(fd.MapValue(), v.Map().Get(k), depth+1)
				w.line(depth)
				w.b.WriteString("}")
				w.end()
			}
		case fd.IsList():
			for j := range v.List().Len() {
				w.field(fd, v.List().Get(j), depth)
			}
		default:
			w.field(fd, v, depth)
		}
	}
}

// field writes one value of fd (one element of a repeated field).
func (w *textWriter) field(fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) {
	w.line(depth)
	w.b.WriteString(string(fd.Name()))
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		w.b.WriteString(" {")
		w.end()
		w.message(v.Message(), depth+1)
		w.line(depth)
		w.b.WriteString("}")
		w.end()
		return
	}
	w.b.WriteString(": ")
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			w.b.WriteString(string(ev.Name()))
		} else {
			w.b.WriteString(strconv.FormatInt(int64(v.Enum()), 10))
		}
	case protoreflect.StringKind:
		w.quote([]byte(v.String()))
	case protoreflect.BytesKind:
		w.quote(v.Bytes())
	case protoreflect.BoolKind:
		w.b.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		bits := 64
		if fd.Kind() == protoreflect.FloatKind {
			bits = 32
		}
		w.b.WriteString(formatFloat(v.Float(), bits))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		w.b.WriteString(strconv.FormatUint(v.Uint(), 10))
	default:
		w.b.WriteString(strconv.FormatInt(v.Int(), 10))
	}
	w.end()
}

// formatFloat writes f as both parsers read it: "inf", "-inf", "nan", or
// the shortest decimal that reads back as f.
func formatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// quote writes b in double quotes, C-escaped: \" \\ \n \r \t, and every
// other byte outside printable ASCII as \ooo.
func (w *textWriter) quote(b []byte) {
	w.b.WriteByte('"')
	for _, c := range b {
		switch {
		case c == '"':
			w.b.WriteString(`\"`)
		case c == '\\':
			w.b.WriteString(`\\`)
		case c == '\n':
			w.b.WriteString(`\n`)
		case c == '\r':
			w.b.WriteString(`\r`)
		case c == '\t':
			w.b.WriteString(`\t`)
		case c < 0x20 || c >= 0x7f:
			w.b.WriteByte('\\')
			w.b.WriteByte('0' + c>>6)
			w.b.WriteByte('0' + c>>3&7)
			w.b.WriteByte('0' + c&7)
		default:
			w.b.WriteByte(c)
		}
	}
	w.b.WriteByte('"')
}

package infer

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/llmserve/llmserve/oip"
)

// ParamContentType is the parameter that names a content type (MLServer's
// codecs) on a request, an input or a requested output.
const ParamContentType = "content_type"

// MLServer's content types.
const (
	ContentStr      = "str"      // BYTES elements are UTF-8 text
	ContentBase64   = "base64"   // BYTES elements are base64 of the bytes meant
	ContentNumpy    = "np"       // a plain tensor (NumPy array)
	ContentPandas   = "pd"       // request level: every input is a column of one table
	ContentDatetime = "datetime" // BYTES elements are ISO 8601 dates or date-times
)

// ContentTypes lists the content types this server knows, sorted.
var ContentTypes = []string{ContentBase64, ContentDatetime, ContentNumpy, ContentPandas, ContentStr}

// requestContentTypes are those a whole request may carry (MLServer's
// request codecs).
var requestContentTypes = []string{ContentNumpy, ContentPandas, ContentStr}

// outputContentTypes are those a requested output may ask for.
var outputContentTypes = []string{ContentBase64, ContentNumpy, ContentStr}

// applyContentTypes checks the content types of r (request, inputs and
// requested outputs) and decodes its inputs in place: a base64 input's
// elements become the bytes they encode; the other content types only
// check (str: valid UTF-8; datetime: ISO 8601; pd: every input a column
// of the same number of rows). An input's own content type wins over the
// request's, as in MLServer; a request-level str is the default of its
// BYTES inputs that have none. Every error is Invalid and names the
// input, and the element where one is at fault; an unknown content type
// lists the known ones. It decodes again if called again (base64 twice),
// so it is called once per request, by the decoder of the model's kind:
// DecodeLLM, RunEmbed, ConvertInputs (a custom runtime's request is only
// checked: CheckContentTypes). A request reaches one of them, once: the
// protocols never call it.
func applyContentTypes(r *Request) error {
	return contentTypes(r, true, nil)
}

// CheckContentTypes makes applyContentTypes' checks and changes nothing:
// the bytes stay as the client sent them, for a model that decodes them
// with codecs of its own (a custom runtime). known adds content types the
// caller accepts unchecked (a runtime's own codecs); the others must be
// one of ContentTypes, used where MLServer allows them.
func CheckContentTypes(r *Request, known ...string) error {
	return contentTypes(r, false, known)
}

// RequestContentType is the request-level content type ("" when none).
func (r *Request) RequestContentType() string {
	s, _ := r.Parameters[ParamContentType].(string)
	return s
}

// contentTypes checks (and with apply, decodes) r's content types.
func contentTypes(r *Request, apply bool, extra []string) error {
	reqCT, err := contentTypeOf(r.Parameters, "the request", extra)
	if err != nil {
		return err
	}
	if reqCT != "" && !slices.Contains(extra, reqCT) && !slices.Contains(requestContentTypes, reqCT) {
		return invalidf("the request's content type %q applies to inputs, not to a whole request: set it in an input's parameters; a request takes %s", reqCT, strings.Join(requestContentTypes, ", "))
	}
	rows := int64(-1)
	for _, t := range r.Inputs {
		where := fmt.Sprintf("input %q", truncate(t.Name))
		ct, err := contentTypeOf(t.Parameters, where, extra)
		if err != nil {
			return err
		}
		if reqCT == ContentPandas && !slices.Contains(extra, reqCT) {
			if len(t.Shape) == 0 {
				return invalidf("%s: the request's content type is pd, so every input is a column of rows, but its shape is []; give it shape [rows] or [rows, ...]", where)
			}
			if rows >= 0 && t.Shape[0] != rows {
				return invalidf("%s: the request's content type is pd, so every input is a column of the same table, but it has %d rows (shape[0]) and input %q has %d", where, t.Shape[0], truncate(r.Inputs[0].Name), rows)
			}
			rows = t.Shape[0]
		}
		if ct == "" && reqCT == ContentStr && t.Datatype == oip.BYTES {
			ct = ContentStr
		}
		if ct == "" || slices.Contains(extra, ct) {
			continue
		}
		if err := decodeInput(t, ct, apply, where); err != nil {
			return err
		}
	}
	for _, o := range r.Outputs {
		where := fmt.Sprintf("output %q", truncate(o.Name))
		ct, err := contentTypeOf(o.Parameters, where, extra)
		if err != nil {
			return err
		}
		if ct != "" && !slices.Contains(extra, ct) && !slices.Contains(outputContentTypes, ct) {
			return invalidf("%s: content type %q decodes inputs; an output can be %s", where, ct, strings.Join(outputContentTypes, ", "))
		}
	}
	return nil
}

// contentTypeOf reads and checks p's content_type ("" when absent).
func contentTypeOf(p Parameters, where string, extra []string) (string, error) {
	v, ok := p[ParamContentType]
	if !ok {
		return "", nil
	}
	s, isString := v.(string)
	if !isString {
		return "", invalidf("%s: parameter content_type must be a string, got %s; known content types: %s", where, describeValue(v), strings.Join(ContentTypes, ", "))
	}
	if !slices.Contains(ContentTypes, s) && !slices.Contains(extra, s) {
		return "", invalidf("%s: unknown content type %q; known content types: %s", where, truncate(s), strings.Join(ContentTypes, ", "))
	}
	return s, nil
}

// decodeInput checks (and with apply, decodes) one input of content type
// ct.
func decodeInput(t *Tensor, ct string, apply bool, where string) error {
	switch ct {
	case ContentNumpy:
		return nil // a plain tensor: CheckInputs checked it
	case ContentPandas:
		return invalidf("%s: content type pd applies to a whole request (each input a column), not to one input; set it in the request's parameters", where)
	}
	if t.Datatype != oip.BYTES {
		return invalidf("%s: content type %s takes datatype BYTES, got %s", where, ct, t.Datatype)
	}
	switch ct {
	case ContentStr:
		for i, b := range t.Bytes {
			if !utf8.Valid(b) {
				return invalidf("%s: element %d is not valid UTF-8, which content type str requires", where, i)
			}
		}
	case ContentDatetime:
		for i, b := range t.Bytes {
			if err := checkISO8601(string(b)); err != nil {
				return invalidf("%s: element %d (%q) is not an ISO 8601 date or date-time, which content type datetime requires: %v; send YYYY-MM-DD or YYYY-MM-DDThh:mm[:ss[.fff]] with an optional Z or ±hh:mm", where, i, truncate(string(b)), err)
			}
		}
	case ContentBase64:
		var out [][]byte
		if apply {
			out = make([][]byte, len(t.Bytes))
		}
		for i, b := range t.Bytes {
			dec := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
			n, err := base64.StdEncoding.Strict().Decode(dec, b)
			if i := bytes.IndexAny(b, "\r\n"); err == nil && i >= 0 {
				// Go's decoder skips line breaks; MLServer's (Python's
				// b64decode(validate=True)) refuses them.
				err = base64.CorruptInputError(i)
			}
			if err != nil {
				return invalidf("%s: element %d is not valid base64 (standard alphabet, with padding), which content type base64 requires: %v", where, i, err)
			}
			if apply {
				out[i] = dec[:n:n]
			}
		}
		if apply {
			t.Bytes = out
		}
	}
	return nil
}

// EncodeResponse puts content types on a response as MLServer's encoders
// do: each output gets parameters.content_type, "str" for BYTES and "np"
// for the other datatypes, or the one the model put on it, or what the
// request asked for that output (base64 encodes a BYTES output's
// elements; a content type the output already has is not applied again
// unless the request asks for it); a request whose content
// type was pd is answered as a table too (response content_type "pd").
// An output whose requested content type does not fit its datatype is
// Invalid.
func EncodeResponse(r *Request, resp *Response) error {
	if r != nil && r.RequestContentType() == ContentPandas {
		if resp.Parameters == nil {
			resp.Parameters = Parameters{}
		}
		resp.Parameters[ParamContentType] = ContentPandas
	}
	for _, t := range resp.Outputs {
		ct := ContentNumpy
		if t.Datatype == oip.BYTES {
			ct = ContentStr
		}
		if own, ok := t.Parameters[ParamContentType].(string); ok && own != "" {
			ct = own // the model's own (a custom runtime's codec)
		}
		requested := false
		if r != nil {
			for _, o := range r.Outputs {
				if s, ok := o.Parameters[ParamContentType].(string); ok && o.Name == t.Name && s != "" {
					ct, requested = s, true
				}
			}
		}
		switch {
		case ct == ContentBase64 && t.Datatype == oip.BYTES && requested:
			enc := make([][]byte, len(t.Bytes))
			for i, b := range t.Bytes {
				enc[i] = base64.StdEncoding.AppendEncode(nil, b)
			}
			t.Bytes = enc
		case (ct == ContentStr || ct == ContentBase64) && t.Datatype != oip.BYTES:
			return invalidf("output %q has datatype %s; content type %s takes BYTES (ask for np, or no content type)", t.Name, t.Datatype, ct)
		}
		if t.Parameters == nil {
			t.Parameters = Parameters{}
		}
		t.Parameters[ParamContentType] = ct
	}
	return nil
}

// collapseColumn turns a pd column of an LLM's scalar input (the same
// value on every row) into one element; different values are Invalid.
func collapseColumn(t *Tensor) error {
	n := t.Len()
	if n <= 1 || t.Name == "stop" {
		return nil
	}
	if t.Datatype == oip.BYTES {
		for i := 1; i < n; i++ {
			if string(t.Bytes[i]) != string(t.Bytes[0]) {
				return invalidf("input %q: the request's content type is pd and this column has different values on rows 0 and %d; the model applies one value to the whole request, so send one value (or one request per value)", t.Name, i)
			}
		}
		t.Bytes, t.Shape = t.Bytes[:1], []int64{1}
		return nil
	}
	size := t.Datatype.Size()
	for i := 1; i < n; i++ {
		if string(t.Raw[i*size:(i+1)*size]) != string(t.Raw[:size]) {
			return invalidf("input %q: the request's content type is pd and this column has different values on rows 0 and %d; the model applies one value to the whole request, so send one value (or one request per value)", t.Name, i)
		}
	}
	t.Raw, t.Shape = t.Raw[:size], []int64{1}
	return nil
}

// checkISO8601 accepts the ISO 8601 forms Python's datetime.fromisoformat
// reads (MLServer's DatetimeCodec decodes with it), in the extended
// format: a date YYYY-MM-DD, optionally followed by "T" or a space and a
// time hh, hh:mm, hh:mm:ss or hh:mm:ss with a fraction of 1 to 9 digits
// (after "." or ","), optionally followed by "Z" or an offset ±hh:mm
// (±hh:mm:ss, ±hhmm, ±hh also). Fields are range-checked, the day against
// its month (leap years included).
func checkISO8601(s string) error {
	if len(s) < 10 {
		return fmt.Errorf("too short for a date")
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	if !ok1 || !ok2 || !ok3 || s[4] != '-' || s[7] != '-' {
		return fmt.Errorf("the date is not YYYY-MM-DD")
	}
	if year < 1 {
		return fmt.Errorf("year 0 is out of range")
	}
	if month < 1 || month > 12 {
		return fmt.Errorf("month %d is out of range", month)
	}
	if day < 1 || day > daysIn(year, month) {
		return fmt.Errorf("day %d is out of range for %04d-%02d", day, year, month)
	}
	rest := s[10:]
	if rest == "" {
		return nil
	}
	if rest[0] != 'T' && rest[0] != 't' && rest[0] != ' ' {
		return fmt.Errorf("the date is followed by %q; a time starts with T", truncate(rest[:1]))
	}
	rest = rest[1:]
	// The time: hh[:mm[:ss[.f]]].
	limits := []int{23, 59, 59}
	for i, limit := range limits {
		if len(rest) < 2 {
			return fmt.Errorf("the time is cut short")
		}
		v, ok := digits(rest[:2])
		if !ok {
			return fmt.Errorf("the time is not hh:mm:ss")
		}
		if v > limit {
			return fmt.Errorf("%s %d is out of range", []string{"hour", "minute", "second"}[i], v)
		}
		rest = rest[2:]
		if i == 2 || rest == "" || rest[0] != ':' {
			break
		}
		rest = rest[1:]
	}
	if rest != "" && (rest[0] == '.' || rest[0] == ',') {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return fmt.Errorf("the fraction of a second needs 1 to 9 digits")
		}
		rest = rest[n:]
	}
	switch {
	case rest == "":
		return nil
	case rest == "Z" || rest == "z":
		return nil
	case rest[0] == '+' || rest[0] == '-':
		off := rest[1:]
		var parts []string
		switch len(off) {
		case 2:
			parts = []string{off}
		case 4:
			parts = []string{off[:2], off[2:]}
		case 5:
			if off[2] != ':' {
				return fmt.Errorf("the offset is not ±hh:mm")
			}
			parts = []string{off[:2], off[3:]}
		case 8:
			if off[2] != ':' || off[5] != ':' {
				return fmt.Errorf("the offset is not ±hh:mm:ss")
			}
			parts = []string{off[:2], off[3:5], off[6:]}
		default:
			return fmt.Errorf("the offset is not ±hh:mm")
		}
		for i, p := range parts {
			v, ok := digits(p)
			if !ok || v > []int{23, 59, 59}[i] {
				return fmt.Errorf("the offset is not ±hh:mm")
			}
		}
		return nil
	}
	return fmt.Errorf("unexpected %q after the time", truncate(rest))
}

func digits(s string) (int, bool) {
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, len(s) > 0
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

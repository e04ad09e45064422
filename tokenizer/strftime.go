package tokenizer

import (
	"strconv"
	"strings"
	"time"
)

// strftime formats t as C's strftime does in the C locale, which is what
// transformers' strftime_now(format) calls. It covers the directives chat
// templates use (dates like "%d %b %Y" or "%Y-%m-%d") and the rest of the
// common ones, with glibc's "-" flag for no padding ("%-d"). An unknown
// directive is written as it stands, as glibc does.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		if layout, ok := strftimeLayouts[format[i]]; ok {
			b.WriteString(t.Format(layout))
			continue
		}
		if n, ok := strftimeNumbers[format[i]]; ok {
			s := strconv.Itoa(n.of(t))
			if pad {
				for range n.width - len(s) {
					b.WriteByte('0')
				}
			}
			b.WriteString(s)
			continue
		}
		switch format[i] {
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'e':
			if pad && t.Day() < 10 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Itoa(t.Day()))
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if !pad {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// strftimeLayouts are the directives that are a Go layout.
var strftimeLayouts = map[byte]string{
	'c': "Mon Jan _2 15:04:05 2006",
	'D': "01/02/06",
	'F': "2006-01-02",
	'p': "PM",
	'R': "15:04",
	'T': "15:04:05",
	'x': "01/02/06",
	'X': "15:04:05",
	'z': "-0700",
	'Z': "MST",
}

// strftimeNumbers are the directives that are a number, padded with zeros
// to width unless the "-" flag says otherwise.
var strftimeNumbers = map[byte]struct {
	width int
	of    func(time.Time) int
}{
	'C': {2, func(t time.Time) int { return t.Year() / 100 }},
	'd': {2, time.Time.Day},
	'H': {2, time.Time.Hour},
	'I': {2, func(t time.Time) int { return (t.Hour()+11)%12 + 1 }},
	'j': {3, time.Time.YearDay},
	'm': {2, func(t time.Time) int { return int(t.Month()) }},
	'M': {2, time.Time.Minute},
	'S': {2, time.Time.Second},
	'u': {1, func(t time.Time) int { return (int(t.Weekday())+6)%7 + 1 }},
	'w': {1, func(t time.Time) int { return int(t.Weekday()) }},
	'y': {2, func(t time.Time) int { return t.Year() % 100 }},
	'Y': {1, time.Time.Year},
}

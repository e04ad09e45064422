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
		num := func(n, width int) {
			s := strconv.Itoa(n)
			if pad {
				for range width - len(s) {
					b.WriteByte('0')
				}
			}
			b.WriteString(s)
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
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'C':
			num(t.Year()/100, 2)
		case 'd':
			num(t.Day(), 2)
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'e':
			if pad && t.Day() < 10 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Itoa(t.Day()))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num((t.Hour()+11)%12+1, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'n':
			b.WriteByte('\n')
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'R':
			b.WriteString(t.Format("15:04"))
		case 'S':
			num(t.Second(), 2)
		case 't':
			b.WriteByte('\t')
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'u':
			num((int(t.Weekday())+6)%7+1, 1)
		case 'w':
			num(int(t.Weekday()), 1)
		case 'x':
			b.WriteString(t.Format("01/02/06"))
		case 'X':
			b.WriteString(t.Format("15:04:05"))
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			num(t.Year(), 1)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
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

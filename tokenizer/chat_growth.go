package tokenizer

import (
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Some filters and string methods build a result far larger than their
// input (s.replace('x', s), [s] * n | join, s | indent(w), '{0}{0}'.format
// (s)). A client's template could use them to ask for more memory than
// the process has, which Go cannot recover from, so their result size is
// estimated before they run and refused past maxRenderBytes, and integer
// arguments (widths, counts) are capped at maxIntArg.

// maxIntArg bounds integer arguments of filters and methods; chat
// templates use widths and counts of a few dozen.
const maxIntArg = 1 << 16

// argText returns the i-th positional argument or the keyword one.
func argText(params *exec.VarArgs, i int, name string) (*exec.Value, bool) {
	if v, ok := params.KwArgs[name]; ok {
		return v, true
	}
	if i < len(params.Args) {
		return params.Args[i], true
	}
	return nil, false
}

// replaceSize is the size of s.replace(old, new, count).
func replaceSize(s, old, new string, count int) int {
	n := len(s) + 1 // an empty old matches between every character
	if old != "" {
		n = strings.Count(s, old)
	}
	if count >= 0 && count < n {
		n = count
	}
	return len(s) + n*max(len(new)-len(old), 0)
}

// joinSize is the size of sep.join(items).
func joinSize(items *exec.Value, sep int) int {
	if !items.IsList() {
		return len(items.String())
	}
	total := 0
	for i := range items.Len() {
		total += len(items.Index(i).String()) + sep
		if total > maxRenderBytes {
			break
		}
	}
	return total
}

// argsSize is the total size of the arguments as text.
func argsSize(params *exec.VarArgs) int {
	total := 0
	for _, a := range params.Args {
		total += len(a.String())
	}
	for _, a := range params.KwArgs {
		total += len(a.String())
	}
	return total
}

// filterGrowth estimates a filter's result size; 0 when it cannot grow
// beyond its input.
func filterGrowth(name string, in *exec.Value, params *exec.VarArgs) int {
	switch name {
	case "replace":
		old, _ := argText(params, 0, "old")
		new, _ := argText(params, 1, "new")
		count := -1
		if c, ok := argText(params, 2, "count"); ok && c.IsInteger() {
			count = c.Integer()
		}
		if old == nil || new == nil {
			return 0
		}
		return replaceSize(in.String(), old.String(), new.String(), count)
	case "join":
		sep := 0
		if d, ok := argText(params, 0, "d"); ok {
			sep = len(d.String())
		}
		return joinSize(in, sep)
	case "indent":
		width := 4
		if w, ok := argText(params, 0, "width"); ok {
			if w.IsInteger() {
				width = w.Integer()
			} else {
				width = len(w.String())
			}
		}
		s := in.String()
		return len(s) + (strings.Count(s, "\n")+1)*max(width, 0)
	case "format":
		s := in.String()
		return len(s) + strings.Count(s, "%")*argsSize(params)
	}
	return 0
}

// methodGrowth estimates a string method's result size; 0 when it cannot
// grow beyond its input.
func methodGrowth(name, self string, args *exec.VarArgs) int {
	switch name {
	case "join":
		if len(args.Args) == 1 {
			return joinSize(args.Args[0], len(self))
		}
	case "format", "format_map":
		return len(self) + strings.Count(self, "{")*argsSize(args)
	case "expandtabs":
		size := 8
		if t, ok := argText(args, 0, "tabsize"); ok && t.IsInteger() {
			size = t.Integer()
		}
		return len(self) + strings.Count(self, "\t")*max(size, 0)
	}
	return 0
}

package benchio

import (
	"encoding/json"
	"fmt"
	"io"
)

// PrintReport writes a report to out: indented JSON, or its text table.
func PrintReport(out io.Writer, rep interface{ WriteText(io.Writer) error }, asJSON bool) error {
	var err error
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(out)
	}
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

package benchio

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The result files: bench and bench agent write one JSON report a run
// (--output-file), which bench table, bench plot and bench agent table read
// back.

// WriteJSONFile writes rep to path as indented JSON.
func WriteJSONFile(path string, rep any) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// ResultFiles lists the result files paths name: a directory stands for
// the *.json files in it.
func ResultFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		m, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	return files, nil
}

// ReadResult decodes the result file at path into rep and returns its
// bytes; a file that is not JSON of rep's shape is "PATH: not a bench
// result".
func ReadResult(path string, rep any) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, rep); err != nil {
		return nil, fmt.Errorf("%s: not a bench result: %w", path, err)
	}
	return b, nil
}

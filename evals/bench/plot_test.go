package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// plotFiles are result files of two servers at concurrency 1, 4 and 16.
var plotFiles = []string{
	"testdata/plot/llmserve-c1.json", "testdata/plot/llmserve-c4.json", "testdata/plot/llmserve-c16.json",
	"testdata/plot/llamacpp-c1.json", "testdata/plot/llamacpp-c4.json", "testdata/plot/llamacpp-c16.json",
}

func runPlotCommand(t *testing.T, args ...string) error {
	t.Helper()
	cmd := NewCommand()
	cmd.SetOut(new(bytes.Buffer))
	cmd.SetErr(new(bytes.Buffer))
	cmd.SetArgs(append([]string{"plot"}, args...))
	return cmd.Execute()
}

func TestPlotCommand(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		args  []string
		check func(t *testing.T, out []byte)
	}{
		{
			name: "svg with both series",
			file: "out.svg",
			check: func(t *testing.T, out []byte) {
				svg := string(out)
				if !strings.Contains(svg, "<svg") || !strings.HasSuffix(strings.TrimSpace(svg), "</svg>") {
					t.Fatalf("not an SVG document: %.200s", svg)
				}
				// The legend names both series, the axes what is plotted, and
				// each measured concurrency has a tick.
				for _, want := range []string{">llmserve<", ">llama.cpp<", "output throughput (tok/s)", "max concurrency", ">1<", ">4<", ">16<"} {
					if !strings.Contains(svg, want) {
						t.Errorf("SVG lacks %q", want)
					}
				}
			},
		},
		{
			name: "png",
			file: "out.png",
			check: func(t *testing.T, out []byte) {
				if !bytes.HasPrefix(out, []byte("\x89PNG\r\n\x1a\n")) {
					t.Errorf("not a PNG: % x", out[:min(8, len(out))])
				}
			},
		},
		{
			name: "series by base URL, another metric",
			file: "out.svg",
			args: []string{"--series", "base-url", "--metric", "median_ttft_ms", "--title", "TTFT"},
			check: func(t *testing.T, out []byte) {
				for _, want := range []string{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8081/v1", ">median_ttft_ms<", ">TTFT<"} {
					if !bytes.Contains(out, []byte(want)) {
						t.Errorf("SVG lacks %q", want)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), tt.file)
			if err := runPlotCommand(t, append(append([]string{"-o", out}, tt.args...), plotFiles...)...); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, b)
		})
	}
}

func TestPlotCommandErrors(t *testing.T) {
	dir := t.TempDir()
	paced := filepath.Join(dir, "paced.json")
	if err := os.WriteFile(paced, []byte(`{"label":"x","num_prompts":8,"request_rate":2,"max_concurrency":null,"output_throughput":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(notJSON, []byte("Serving Benchmark Result"), 0o644); err != nil {
		t.Fatal(err)
	}
	svg := filepath.Join(dir, "out.svg")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no output", []string{plotFiles[0]}, `"output" not set`},
		{"no files", []string{"-o", svg}, "requires at least 1 arg"},
		{"unknown format", []string{"-o", filepath.Join(dir, "out.gif"), plotFiles[0]}, `plot format "gif"`},
		{"missing file", []string{"-o", svg, filepath.Join(dir, "absent.json")}, "no such file"},
		{"not a result", []string{"-o", svg, notJSON}, "not a bench result"},
		{"unknown metric", []string{"-o", svg, "--metric", "speed", plotFiles[0]}, `no number "speed"`},
		{"non-numeric metric", []string{"-o", svg, "--metric", "label", plotFiles[0]}, `no number "label"`},
		{"unknown series rule", []string{"-o", svg, "--series", "color", plotFiles[0]}, "unknown series rule"},
		{"unknown concurrency", []string{"-o", svg, paced}, "concurrency is unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runPlotCommand(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := os.Stat(svg); !os.IsNotExist(err) {
		t.Errorf("a failed plot left %s behind (%v)", svg, err)
	}
}

func TestSeriesRuleName(t *testing.T) {
	rep := &Report{Label: "llmserve:c8:run2", BaseURL: "http://h:1/v1", ModelID: "m"}
	unlabelled := &Report{BaseURL: "http://h:1/v1"}
	tests := []struct {
		rule SeriesRule
		rep  *Report
		want string
	}{
		{SeriesLabel, rep, "llmserve"},
		{SeriesLabel, &Report{Label: "no colon"}, "no colon"},
		{SeriesLabel, unlabelled, "http://h:1/v1"},
		{SeriesBaseURL, rep, "http://h:1/v1"},
		{SeriesModel, rep, "m"},
	}
	for _, tt := range tests {
		if got := tt.rule.name(tt.rep); got != tt.want {
			t.Errorf("%s of %+v = %q, want %q", tt.rule, tt.rep, got, tt.want)
		}
	}
}

func TestGroupRuns(t *testing.T) {
	names := []string{"b", "a", "b", "b", "a"}
	points := []plotPoint{{8, 80}, {1, 10}, {2, 20}, {8, 100}, {4, 40}}
	got := groupRuns(names, points)
	want := []plotSeries{
		{"b", []plotPoint{{2, 20}, {8, 90}}}, // first seen first; runs at 8 averaged
		{"a", []plotPoint{{1, 10}, {4, 40}}},
	}
	if !slices.EqualFunc(got, want, func(x, y plotSeries) bool { return x.name == y.name && slices.Equal(x.points, y.points) }) {
		t.Errorf("groupRuns = %v, want %v", got, want)
	}
}

func TestPlotUncappedRun(t *testing.T) {
	// Without max_concurrency and at rate inf, all num_prompts are in
	// flight; one concurrency alone still gets a drawable axis.
	dir := t.TempDir()
	run := filepath.Join(dir, "all.json")
	if err := os.WriteFile(run, []byte(`{"label":"x:all","num_prompts":32,"request_rate":"inf","max_concurrency":null,"output_throughput":5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cfg := DefaultPlotConfig()
	cfg.Files = []string{run}
	if err := Plot(&buf, "svg", cfg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), ">32<") {
		t.Error("no tick at concurrency 32")
	}
}

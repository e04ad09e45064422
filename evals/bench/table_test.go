package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeResult writes a minimal result file of one server and rep.
func writeResult(t *testing.T, dir, server string, seed int64, c int, tps float64, edit func(*Report)) {
	t.Helper()
	rep := Report{Label: server + ":c" + string(rune('0'+c)), ModelID: "m", DatasetName: DatasetRandom,
		RandomInputLen: 128, RandomOutputLen: 64, Seed: seed, MaxConcurrency: &c, NumPrompts: 8}
	rep.Completed, rep.OutputThroughput, rep.MedianTTFTMs, rep.P99TTFTMs, rep.MedianITLMs, rep.P99ITLMs = 8, tps, 10, 20, 1, 2
	if edit != nil {
		edit(&rep)
	}
	b, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, rep.Label+"-"+string(rune('0'+seed))+".json")
	if err := os.WriteFile(strings.ReplaceAll(name, ":", "-"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTableMarkdown(t *testing.T) {
	dir := t.TempDir()
	mem := func(r *Report) {
		r.RSSStartBytes, r.RSSPeakBytes, r.RSSEndBytes = ptr(int64(100<<20)), ptr(int64(300<<20)), ptr(int64(120<<20))
		r.RunningPeak, r.KVCommittedPeakBytes, r.KVCommittedEndBytes = ptr(4), ptr(int64(5<<20)), ptr(int64(0))
	}
	for seed, tps := range map[int64][2]float64{1: {110, 100}, 2: {120, 100}, 3: {90, 100}} {
		writeResult(t, dir, "llmserve", seed, 4, tps[0], mem)
		writeResult(t, dir, "llama-kvu", seed, 4, tps[1], func(r *Report) { r.RunningPeak = ptr(4) })
	}
	writeResult(t, dir, "llama-kvu", 1, 1, 50, nil) // a concurrency with no llmserve run
	var out bytes.Buffer
	if err := Table(&out, TableConfig{Files: []string{dir}}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"**m, random: input 128 words, output 64**",
		"| c | server | reps | output tok/s | llmserve ÷ server, per rep |",
		"| 1 | llama-kvu | 1 | 50.0 | — | 10.0 / 20.0 | 1.0 / 2.0 |  /  |  /  /  |  | 0 |",
		"| 4 | llmserve | 3 | 110.0 | — | 10.0 / 20.0 | 1.0 / 2.0 | 5.0 / 0.0 | 100 / 300 / 120 | 4 | 0 |",
		"| 4 | llama-kvu | 3 | 100.0 | **1.10** (1.10, 1.20, 0.90) | 10.0 / 20.0 | 1.0 / 2.0 |  /  |  /  /  | 4 | 0 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "| 1 | llama-kvu") > strings.Index(got, "| 4 | llmserve") {
		t.Errorf("rows not sorted by concurrency:\n%s", got)
	}
	if strings.Contains(got, "Mixed load") {
		t.Errorf("a mixed table without mixed runs:\n%s", got)
	}
}

func TestTableMixedAndCSV(t *testing.T) {
	dir := t.TempDir()
	mixed := func(long float64) func(*Report) {
		return func(r *Report) {
			r.DatasetName, r.RandomInputLen, r.RandomOutputLen = DatasetMixed, 0, 0
			r.MixedLongClients, r.MixedLongPrompts, r.MixedLongInputLen, r.MixedShortInputLen, r.MixedOutputLen = 1, 1, 600, 12, 8
			r.MixedLong = &Metrics{MedianTTFTMs: long, P99TTFTMs: long, OutputThroughput: 1}
			r.MixedShort = &Metrics{MedianTTFTMs: 5, P99TTFTMs: 9, MedianITLMs: 2, P99ITLMs: 7, OutputThroughput: 30}
		}
	}
	writeResult(t, dir, "llmserve", 1, 4, 31, mixed(900))
	writeResult(t, dir, "llama-slots", 1, 4, 25, mixed(1200))
	var out bytes.Buffer
	if err := Table(&out, TableConfig{Files: []string{dir}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**m, mixed: 1 clients send 1 prompts of 600 words, 3 send the rest of 12 words, output 8**",
		"| m | 4 | llmserve | 900.0 / 900.0 | 1.0 | 5.0 / 9.0 | 2.0 / 7.0 | 30.0 |",
		"| 4 | llama-slots | 1 | 25.0 | **1.24** (1.24) |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := Table(&out, TableConfig{Files: []string{dir}, Format: "csv"}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(rows) != 3 || len(rows[1]) != len(csvColumns) {
		t.Fatalf("csv: %v, %d rows: %v", err, len(rows), rows)
	}
	col := func(row []string, name string) string {
		for i, c := range csvColumns {
			if c == name {
				return row[i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	for _, row := range rows[1:] {
		if col(row, "short_p99_itl_ms") != "7" || col(row, "server_rss_peak_bytes") != "" || col(row, "max_concurrency") != "4" {
			t.Errorf("csv row %v", row)
		}
	}
}

func TestTableErrors(t *testing.T) {
	dir := t.TempDir()
	if err := Table(&bytes.Buffer{}, TableConfig{Files: []string{dir}}); err == nil {
		t.Error("an empty directory gave a table")
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Table(&bytes.Buffer{}, TableConfig{Files: []string{bad}}); err == nil || !strings.Contains(err.Error(), "not a bench result") {
		t.Errorf("bad file: %v", err)
	}
	writeResult(t, dir, "llmserve", 1, 1, 1, nil)
	if err := Table(&bytes.Buffer{}, TableConfig{Files: []string{filepath.Join(dir, "llmserve-c1-1.json")}, Format: "html"}); err == nil {
		t.Error("format html was accepted")
	}
}

func TestTableCommand(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "llmserve", 1, 2, 10, nil)
	cmd := NewCommand()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"table", "--format", "csv", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "file,server,label,") || !strings.Contains(stdout.String(), ",llmserve,llmserve:c2,") {
		t.Errorf("output %q", stdout.String())
	}
}

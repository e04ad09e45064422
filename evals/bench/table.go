package bench

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// TableConfig says what `llmserve bench table` prints.
type TableConfig struct {
	// Files are result files (--output-file) or directories, whose *.json
	// files are read.
	Files []string
	// Ref is the server the per-rep throughput ratios divide by the
	// others: ref ÷ server. "" means llmserve.
	Ref string
	// Format is "markdown" (medians over reps, one row per server and
	// workload) or "csv" (one row per result file, every figure).
	Format string
}

// tableRun is one result file.
type tableRun struct {
	path   string
	server string // the label up to its first ':'
	rep    Report
}

// workloadKey tells runs of one workload apart: what was sent, at what
// concurrency, to which model.
func (r *tableRun) workloadKey() string {
	return r.rep.ModelID + "\x00" + r.rep.describeDataset() + "\x00" + strconv.Itoa(r.concurrency())
}

func (r *tableRun) concurrency() int {
	if r.rep.MaxConcurrency != nil {
		return *r.rep.MaxConcurrency
	}
	return r.rep.NumPrompts
}

// Table reads result files and writes them as cfg.Format says.
func Table(w io.Writer, cfg TableConfig) error {
	runs, err := readTableRuns(cfg.Files)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("bench table: no result files in %v", cfg.Files)
	}
	switch cfg.Format {
	case "", "markdown", "md":
		return writeMarkdownTable(w, runs, cmp.Or(cfg.Ref, "llmserve"))
	case "csv":
		return writeCSVTable(w, runs)
	}
	return fmt.Errorf("bench table: format %q: want markdown or csv", cfg.Format)
}

func readTableRuns(paths []string) ([]tableRun, error) {
	files, err := benchio.ResultFiles(paths)
	if err != nil {
		return nil, fmt.Errorf("bench table: %w", err)
	}
	runs := make([]tableRun, 0, len(files))
	for _, path := range files {
		var rep Report
		if _, err := benchio.ReadResult(path, &rep); err != nil {
			return nil, fmt.Errorf("bench table: %w", err)
		}
		runs = append(runs, tableRun{path: path, server: SeriesLabel.name(&rep), rep: rep})
	}
	return runs, nil
}

// tableGroup is the runs of one server on one workload.
type tableGroup struct {
	server string
	runs   []*tableRun
}

// tableWorkload is the groups of one workload, the reference server first,
// then the others in the order they first appear.
type tableWorkload struct {
	first  *tableRun
	groups []*tableGroup
}

func groupTableRuns(runs []tableRun, ref string) []*tableWorkload {
	var out []*tableWorkload
	byKey := map[string]*tableWorkload{}
	for i := range runs {
		r := &runs[i]
		wl := byKey[r.workloadKey()]
		if wl == nil {
			wl = &tableWorkload{first: r}
			byKey[r.workloadKey()] = wl
			out = append(out, wl)
		}
		k := slices.IndexFunc(wl.groups, func(g *tableGroup) bool { return g.server == r.server })
		if k < 0 {
			wl.groups = append(wl.groups, &tableGroup{server: r.server})
			k = len(wl.groups) - 1
		}
		wl.groups[k].runs = append(wl.groups[k].runs, r)
	}
	for _, wl := range out {
		slices.SortStableFunc(wl.groups, func(a, b *tableGroup) int {
			return cmp.Compare(b2i(a.server != ref), b2i(b.server != ref))
		})
		for _, g := range wl.groups {
			slices.SortStableFunc(g.runs, func(a, b *tableRun) int { return cmp.Compare(a.rep.Seed, b.rep.Seed) })
		}
	}
	slices.SortStableFunc(out, func(a, b *tableWorkload) int {
		return cmp.Or(cmp.Compare(a.first.rep.ModelID, b.first.rep.ModelID),
			cmp.Compare(a.first.rep.describeDataset(), b.first.rep.describeDataset()),
			cmp.Compare(a.first.concurrency(), b.first.concurrency()))
	})
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeMarkdownTable writes, per model and dataset, one row per
// concurrency and server: medians over the reps, and the reference
// server's throughput divided by this one's, rep by rep (reps are paired
// by seed).
func writeMarkdownTable(w io.Writer, runs []tableRun, ref string) error {
	var b strings.Builder
	workloads := groupTableRuns(runs, ref)
	title := ""
	for _, wl := range workloads {
		if t := fmt.Sprintf("%s, %s", wl.first.rep.ModelID, wl.first.rep.describeDataset()); t != title {
			if title != "" {
				b.WriteString("\n")
			}
			title = t
			fmt.Fprintf(&b, "**%s** (medians over reps; MiB = 2^20 bytes)\n\n", t)
			fmt.Fprintf(&b, "| c | server | reps | output tok/s | %s ÷ server, per rep | TTFT p50 / p99 ms | ITL p50 / p99 ms | KV MiB peak / end | RSS MiB start / peak / end | running peak | failed |\n", ref)
			b.WriteString("|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n")
		}
		var refRuns []*tableRun
		if wl.groups[0].server == ref {
			refRuns = wl.groups[0].runs
		}
		for _, g := range wl.groups {
			med := func(f func(*Report) *float64) *float64 { return medianOf(g.runs, f) }
			failed := 0
			for _, r := range g.runs {
				failed += r.rep.Failed
			}
			fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s / %s | %s / %s | %s / %s | %s / %s / %s | %s | %d |\n",
				wl.first.concurrency(), g.server, len(g.runs),
				fmtNum(med(func(r *Report) *float64 { return &r.OutputThroughput }), 1),
				ratios(refRuns, g, ref),
				fmtNum(med(func(r *Report) *float64 { return &r.MedianTTFTMs }), 1),
				fmtNum(med(func(r *Report) *float64 { return &r.P99TTFTMs }), 1),
				fmtNum(med(func(r *Report) *float64 { return &r.MedianITLMs }), 1),
				fmtNum(med(func(r *Report) *float64 { return &r.P99ITLMs }), 1),
				fmtMiB(med(func(r *Report) *float64 { return bytesOf(r.KVCommittedPeakBytes) })),
				fmtMiB(med(func(r *Report) *float64 { return bytesOf(r.KVCommittedEndBytes) })),
				fmtMiB(med(func(r *Report) *float64 { return bytesOf(r.RSSStartBytes) })),
				fmtMiB(med(func(r *Report) *float64 { return bytesOf(r.RSSPeakBytes) })),
				fmtMiB(med(func(r *Report) *float64 { return bytesOf(r.RSSEndBytes) })),
				fmtNum(med(func(r *Report) *float64 {
					if r.RunningPeak == nil {
						return nil
					}
					return ptr(float64(*r.RunningPeak))
				}), 0),
				failed)
		}
	}
	writeMixedTable(&b, workloads)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMixedTable adds, for mixed workloads, the long and short requests
// apart.
func writeMixedTable(b *strings.Builder, workloads []*tableWorkload) {
	header := false
	for _, wl := range workloads {
		if wl.first.rep.DatasetName != DatasetMixed {
			continue
		}
		if !header {
			header = true
			b.WriteString("\n**Mixed load, long and short requests apart** (medians over reps)\n\n")
			b.WriteString("| model | c | server | long TTFT p50 / p99 ms | long tok/s | short TTFT p50 / p99 ms | short ITL p50 / p99 ms | short tok/s |\n")
			b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|\n")
		}
		for _, g := range wl.groups {
			cls := func(long bool, f func(*Metrics) float64) string {
				return fmtNum(medianOf(g.runs, func(r *Report) *float64 {
					m := r.MixedShort
					if long {
						m = r.MixedLong
					}
					if m == nil {
						return nil
					}
					return ptr(f(m))
				}), 1)
			}
			fmt.Fprintf(b, "| %s | %d | %s | %s / %s | %s | %s / %s | %s / %s | %s |\n",
				wl.first.rep.ModelID, wl.first.concurrency(), g.server,
				cls(true, func(m *Metrics) float64 { return m.MedianTTFTMs }), cls(true, func(m *Metrics) float64 { return m.P99TTFTMs }),
				cls(true, func(m *Metrics) float64 { return m.OutputThroughput }),
				cls(false, func(m *Metrics) float64 { return m.MedianTTFTMs }), cls(false, func(m *Metrics) float64 { return m.P99TTFTMs }),
				cls(false, func(m *Metrics) float64 { return m.MedianITLMs }), cls(false, func(m *Metrics) float64 { return m.P99ITLMs }),
				cls(false, func(m *Metrics) float64 { return m.OutputThroughput }))
		}
	}
}

// ratios is "median (r1 r2 ...)" of the reference server's output
// throughput over g's, rep by rep (paired by seed); "—" for the reference
// itself or without reference runs.
func ratios(refRuns []*tableRun, g *tableGroup, ref string) string {
	if g.server == ref || len(refRuns) == 0 {
		return "—"
	}
	var rs []float64
	var parts []string
	for _, r := range g.runs {
		k := slices.IndexFunc(refRuns, func(x *tableRun) bool { return x.rep.Seed == r.rep.Seed })
		if k < 0 || r.rep.OutputThroughput == 0 {
			continue
		}
		v := refRuns[k].rep.OutputThroughput / r.rep.OutputThroughput
		rs = append(rs, v)
		parts = append(parts, strconv.FormatFloat(v, 'f', 2, 64))
	}
	if len(rs) == 0 {
		return "—"
	}
	return fmt.Sprintf("**%.2f** (%s)", benchio.Median(rs), strings.Join(parts, ", "))
}

// medianOf is the median of f over runs, leaving out runs where f is nil;
// nil when every run is.
func medianOf(runs []*tableRun, f func(*Report) *float64) *float64 {
	var xs []float64
	for _, r := range runs {
		if v := f(&r.rep); v != nil {
			xs = append(xs, *v)
		}
	}
	if len(xs) == 0 {
		return nil
	}
	return ptr(benchio.Median(xs))
}

func bytesOf(b *int64) *float64 {
	if b == nil {
		return nil
	}
	return ptr(float64(*b))
}

// fmtNum writes v with the given decimals, "" for nil.
func fmtNum(v *float64, decimals int) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', decimals, 64)
}

// fmtMiB writes bytes as MiB: one decimal under 10 MiB, none above.
func fmtMiB(v *float64) string {
	if v == nil {
		return ""
	}
	mib := *v / (1 << 20)
	if mib < 10 {
		return strconv.FormatFloat(mib, 'f', 1, 64)
	}
	return strconv.FormatFloat(mib, 'f', 0, 64)
}

// csvColumns are the columns of `bench table --format csv`, one row per
// result file.
var csvColumns = []string{"file", "server", "label", "model", "dataset", "max_concurrency", "seed", "num_prompts",
	"completed", "failed", "textless", "duration_s", "output_throughput", "median_ttft_ms", "p99_ttft_ms",
	"median_tpot_ms", "median_itl_ms", "p99_itl_ms", "server_rss_start_bytes", "server_rss_peak_bytes",
	"server_rss_peak_since", "server_rss_max_sampled_bytes", "server_rss_end_bytes", "server_running_peak",
	"server_running_source", "kv_committed_start_bytes", "kv_committed_peak_bytes", "kv_committed_end_bytes",
	"long_median_ttft_ms", "long_p99_ttft_ms", "short_median_ttft_ms", "short_p99_ttft_ms", "short_median_itl_ms",
	"short_p99_itl_ms"}

func writeCSVTable(w io.Writer, runs []tableRun) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvColumns); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	i64 := func(v *int64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatInt(*v, 10)
	}
	cls := func(m *Metrics, get func(*Metrics) float64) string {
		if m == nil {
			return ""
		}
		return f(get(m))
	}
	for _, r := range runs {
		rep := &r.rep
		running := ""
		if rep.RunningPeak != nil {
			running = strconv.Itoa(*rep.RunningPeak)
		}
		row := []string{r.path, r.server, rep.Label, rep.ModelID, rep.describeDataset(), strconv.Itoa(r.concurrency()),
			strconv.FormatInt(rep.Seed, 10), strconv.Itoa(rep.NumPrompts), strconv.Itoa(rep.Completed), strconv.Itoa(rep.Failed),
			strconv.Itoa(rep.TextlessRequests), f(rep.Duration), f(rep.OutputThroughput), f(rep.MedianTTFTMs), f(rep.P99TTFTMs),
			f(rep.MedianTPOTMs), f(rep.MedianITLMs), f(rep.P99ITLMs), i64(rep.RSSStartBytes), i64(rep.RSSPeakBytes),
			rep.RSSPeakSince, i64(rep.RSSMaxSampledBytes), i64(rep.RSSEndBytes), running, rep.RunningSource,
			i64(rep.KVCommittedStartBytes), i64(rep.KVCommittedPeakBytes), i64(rep.KVCommittedEndBytes),
			cls(rep.MixedLong, func(m *Metrics) float64 { return m.MedianTTFTMs }), cls(rep.MixedLong, func(m *Metrics) float64 { return m.P99TTFTMs }),
			cls(rep.MixedShort, func(m *Metrics) float64 { return m.MedianTTFTMs }), cls(rep.MixedShort, func(m *Metrics) float64 { return m.P99TTFTMs }),
			cls(rep.MixedShort, func(m *Metrics) float64 { return m.MedianITLMs }), cls(rep.MixedShort, func(m *Metrics) float64 { return m.P99ITLMs }),
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func newTableCommand() *cobra.Command {
	var cfg TableConfig
	cmd := &cobra.Command{
		Use:   "table RESULT.json|DIR...",
		Short: "Tabulate bench results: Markdown medians over reps with per-rep throughput ratios, or CSV",
		Long: `Read result files written by "llmserve bench --output-file" (or every *.json in
the directories given) and print them as a table.

--format markdown (default): per model and dataset, one row per concurrency
and server (the run's --label up to the first ':'), with the median over the
reps of output tok/s, TTFT and ITL p50 / p99, and, where the run had
--monitor-pid / --monitor-url, the server's committed KV bytes (peak and
end), resident memory (at the start, peak VmHWM and at the end) and peak of
running sequences. The column "REF ÷ server" divides the --ref server's
output tok/s by this one's rep by rep, reps paired by --seed: label runs
SERVER:anything and give each rep its own seed. Mixed workloads get a
second table with their long and short requests apart.

--format csv: one row per result file with every figure, bytes in bytes.`,
		Args:         cobra.MinimumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Files = args
			return Table(cmd.OutOrStdout(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Ref, "ref", "llmserve", "server whose throughput the ratios divide by each other server's")
	f.StringVar(&cfg.Format, "format", "markdown", "markdown (medians over reps) or csv (one row per result file)")
	return cmd
}

package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// SeriesRule says how `bench plot` groups runs into lines.
type SeriesRule string

const (
	// SeriesLabel groups runs by their label up to the first ':', so that
	// "llmserve:c8" and "llmserve:c16" are two points of the line
	// "llmserve". A run without a label goes by its base URL.
	SeriesLabel SeriesRule = "label"
	// SeriesBaseURL groups runs by the server they measured.
	SeriesBaseURL SeriesRule = "base-url"
	// SeriesModel groups runs by the model they sent.
	SeriesModel SeriesRule = "model"
)

// ParseSeriesRule accepts "label", "base-url" and "model".
func ParseSeriesRule(s string) (SeriesRule, error) {
	switch r := SeriesRule(strings.ToLower(strings.TrimSpace(s))); r {
	case SeriesLabel, SeriesBaseURL, SeriesModel:
		return r, nil
	case "base_url":
		return SeriesBaseURL, nil
	}
	return "", fmt.Errorf("unknown series rule %q: use label, base-url or model", s)
}

// name is the series a run belongs to under rule r.
func (r SeriesRule) name(rep *Report) string {
	switch r {
	case SeriesBaseURL:
		return rep.BaseURL
	case SeriesModel:
		return rep.ModelID
	}
	if rep.Label == "" {
		return rep.BaseURL
	}
	name, _, _ := strings.Cut(rep.Label, ":")
	return name
}

// PlotConfig describes one `bench plot`.
type PlotConfig struct {
	// Files are result JSON files written by --output-file (or --json).
	Files []string
	// Series groups the runs into lines.
	Series SeriesRule
	// Metric is the result-JSON key plotted on the y axis, a number such as
	// output_throughput (the default) or median_ttft_ms.
	Metric string
	// Title is written above the plot; empty means "<metric> vs max
	// concurrency".
	Title string
}

// DefaultPlotConfig plots output throughput, one line per label.
func DefaultPlotConfig() PlotConfig {
	return PlotConfig{Series: SeriesLabel, Metric: "output_throughput"}
}

// plotFormats are the output formats `bench plot` writes, by file
// extension; gonum/plot draws them all from one plot.
var plotFormats = []string{"svg", "png", "pdf"}

// metricLabels names the y axis for the common metrics; other keys are
// shown as they are.
var metricLabels = map[string]string{
	"output_throughput":       "output throughput (tok/s)",
	"total_token_throughput":  "total token throughput (tok/s)",
	"request_throughput":      "request throughput (req/s)",
	"max_output_tokens_per_s": "peak output throughput (tok/s)",
}

// plotPoint is one run: its concurrency and the plotted figure.
type plotPoint struct {
	concurrency, value float64
}

// plotSeries is one line: the runs of one series, by concurrency.
type plotSeries struct {
	name   string
	points []plotPoint
}

// readRun reads one result file and returns its series name under rule and
// its point.
func readRun(path string, rule SeriesRule, metric string) (string, plotPoint, error) {
	var rep Report
	b, err := benchio.ReadResult(path, &rep)
	if err != nil {
		return "", plotPoint{}, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return "", plotPoint{}, fmt.Errorf("%s: not a bench result: %w", path, err)
	}
	var value float64
	if raw, ok := fields[metric]; !ok || json.Unmarshal(raw, &value) != nil {
		return "", plotPoint{}, fmt.Errorf("%s: no number %q (choose --metric among the result's numeric fields)", path, metric)
	}

	// A run without a cap that sends everything at once has num_prompts
	// requests in flight; with paced arrivals its concurrency is unknown.
	var c float64
	switch {
	case rep.MaxConcurrency != nil:
		c = float64(*rep.MaxConcurrency)
	case math.IsInf(float64(rep.RequestRate), 1):
		c = float64(rep.NumPrompts)
	default:
		return "", plotPoint{}, fmt.Errorf("%s: no max_concurrency and a finite request rate: its concurrency is unknown", path)
	}
	if c < 1 {
		return "", plotPoint{}, fmt.Errorf("%s: concurrency %v: want at least 1", path, c)
	}
	return rule.name(&rep), plotPoint{concurrency: c, value: value}, nil
}

// groupRuns makes one series per name, in the order the names first
// appear, with points sorted by concurrency; runs of one series at the same
// concurrency are averaged.
func groupRuns(names []string, points []plotPoint) []plotSeries {
	var out []plotSeries
	for i, name := range names {
		k := slices.IndexFunc(out, func(s plotSeries) bool { return s.name == name })
		if k < 0 {
			out = append(out, plotSeries{name: name})
			k = len(out) - 1
		}
		out[k].points = append(out[k].points, points[i])
	}
	for k := range out {
		pts := out[k].points
		slices.SortStableFunc(pts, func(a, b plotPoint) int { return cmp.Compare(a.concurrency, b.concurrency) })
		var merged []plotPoint
		for i := 0; i < len(pts); {
			j, sum := i, 0.0
			for ; j < len(pts) && pts[j].concurrency == pts[i].concurrency; j++ {
				sum += pts[j].value
			}
			merged = append(merged, plotPoint{concurrency: pts[i].concurrency, value: sum / float64(j-i)})
			i = j
		}
		out[k].points = merged
	}
	return out
}

// Plot reads cfg.Files and writes the plot of cfg.Metric against max
// concurrency in format ("svg", "png" or "pdf") to w. The x axis is
// logarithmic, with a tick at each concurrency measured.
func Plot(w io.Writer, format string, cfg PlotConfig) error {
	if !slices.Contains(plotFormats, format) {
		return fmt.Errorf("plot format %q: use %s", format, strings.Join(plotFormats, ", "))
	}
	if len(cfg.Files) == 0 {
		return errors.New("plot: no result files")
	}
	names := make([]string, len(cfg.Files))
	points := make([]plotPoint, len(cfg.Files))
	for i, path := range cfg.Files {
		var err error
		if names[i], points[i], err = readRun(path, cfg.Series, cfg.Metric); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	wt, err := drawPlot(groupRuns(names, points), cfg, format)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}

// drawPlot lays out the series and renders them in format.
func drawPlot(series []plotSeries, cfg PlotConfig, format string) (io.WriterTo, error) {
	p := plot.New()
	p.Title.Text = cfg.Title
	if p.Title.Text == "" {
		p.Title.Text = cfg.Metric + " vs max concurrency"
		if l, ok := metricLabels[cfg.Metric]; ok {
			p.Title.Text = l + " vs max concurrency"
		}
	}
	p.X.Label.Text = "max concurrency (requests in flight)"
	p.Y.Label.Text = cfg.Metric
	if l, ok := metricLabels[cfg.Metric]; ok {
		p.Y.Label.Text = l
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	var xs []float64
	maxY := 0.0
	for i, s := range series {
		xys := make(plotter.XYs, len(s.points))
		for j, pt := range s.points {
			xys[j] = plotter.XY{X: pt.concurrency, Y: pt.value}
			xs = append(xs, pt.concurrency)
			maxY = max(maxY, pt.value)
		}
		line, dots, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.name, err)
		}
		line.Color, dots.Color = plotutil.Color(i), plotutil.Color(i)
		dots.Shape = plotutil.Shape(i)
		p.Add(line, dots)
		p.Legend.Add(s.name, line, dots)
	}

	// Concurrencies are usually powers of two: a log axis spaces them
	// evenly, and a tick at each one labels what was measured.
	slices.Sort(xs)
	xs = slices.Compact(xs)
	p.X.Scale = plot.LogScale{}
	var ticks plot.ConstantTicks
	for _, x := range xs {
		ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)})
	}
	p.X.Tick.Marker = ticks
	p.X.Min, p.X.Max = xs[0]/1.25, xs[len(xs)-1]*1.25
	p.Y.Min, p.Y.Max = 0, maxY*1.1
	if maxY <= 0 || math.IsNaN(maxY) {
		p.Y.Max = 1
	}
	return p.WriterTo(16*vg.Centimeter, 10*vg.Centimeter, format)
}

// newPlotCommand returns `bench plot`.
func newPlotCommand() *cobra.Command {
	cfg := DefaultPlotConfig()
	var (
		output string
		series = string(cfg.Series)
	)
	cmd := &cobra.Command{
		Use:   "plot -o OUT.svg RESULT.json...",
		Short: "Plot bench results: a figure (output tok/s) against max concurrency, one line per server",
		Long: `Read result files written by "llmserve bench --output-file" and draw one figure
(--metric, output tokens/s by default) against max concurrency, on a log
axis, one line per series. The format follows the extension of -o: .svg,
.png or .pdf.

Series (--series):
  label     the run's --label up to the first ':' (default); a run without
            a label goes by its base URL. Label runs "SERVER:anything", e.g.
            --label llmserve:c8, to put them on the line "SERVER".
  base-url  the server URL the run measured.
  model     the model id the run sent.

Runs of one series at the same concurrency are averaged. A run without
--max-concurrency counts as num_prompts in flight when its request rate is
inf, and is rejected otherwise. A sweep:

  W="--num-prompts 64 --random-input-len 512 --random-output-len 128 --seed 1 --warmup 4"
  for c in 1 2 4 8 16; do
    llmserve bench $W --max-concurrency $c --base-url http://127.0.0.1:8080/v1 --label llmserve:c$c --output-file llmserve-c$c.json
    llmserve bench $W --max-concurrency $c --base-url http://127.0.0.1:8081/v1 --label llama.cpp:c$c --output-file llamacpp-c$c.json
  done
  llmserve bench plot -o throughput.svg llmserve-c*.json llamacpp-c*.json`,
		Args:         cobra.MinimumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if cfg.Series, err = ParseSeriesRule(series); err != nil {
				return err
			}
			cfg.Files = args
			format := strings.TrimPrefix(strings.ToLower(filepath.Ext(output)), ".")
			// Draw into memory first: a failed plot leaves no file behind.
			var buf bytes.Buffer
			if err := Plot(&buf, format, cfg); err != nil {
				return err
			}
			if err := os.WriteFile(output, buf.Bytes(), 0o644); err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "bench plot: wrote %s from %d runs\n", output, len(args))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "file to write; its extension picks the format: .svg, .png or .pdf (required)")
	f.StringVar(&series, "series", series, "how runs are grouped into lines: label (the label up to the first ':'), base-url or model")
	f.StringVar(&cfg.Metric, "metric", cfg.Metric, "result-JSON field on the y axis, e.g. output_throughput, total_token_throughput, median_ttft_ms, p99_tpot_ms")
	f.StringVar(&cfg.Title, "title", "", "plot title (default: \"<metric> vs max concurrency\")")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

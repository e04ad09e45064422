package agent

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// NewCommand returns `bench agent` and its `table`, which the caller adds
// under `bench`.
func NewCommand() *cobra.Command {
	cfg := DefaultConfig()
	var (
		apis       = []string{"messages", "responses", "chat"}
		asJSON     bool
		outputFile string
		quiet      bool
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Benchmark agent sessions: a long system-plus-tools prefix, then turns that re-send the transcript",
		Long: `Run agent sessions as Claude Code and Codex CLI make them against a server and
report each turn's time to first token (TTFT) and cached prompt tokens.

A session has a system prompt and tool definitions of --prefix-len words in
all (about one token each; a quarter of them the --tools tools'
descriptions), then --turns turns. Turn 1 sends a user message; every later
turn re-sends the whole transcript plus the previous turn's tool call (the
same scripted call for every server, whatever the model generated), its
tool result (--tool-result-len words) and a new user message (--user-len
words), streamed, with max tokens --output-len. A server with a prefix cache
answers turns 2 on in a fraction of turn 1's time; the report gives each
turn's TTFT against turn 1's.

--api picks the request shapes, run one after another: messages (POST
/messages, Anthropic's Messages: tool_use and tool_result blocks), responses
(POST /responses: function_call and function_call_output items) and chat
(POST /chat/completions: tool_calls and tool messages). Every session of
every API has a prefix of its own, so no session finds an earlier one's in
the cache. Cached tokens are the API's own figure (cache_read_input_tokens,
cached_tokens) or, from llama-server's chat, timings.cache_n; n/a when the
server gives neither. Turns run one at a time, each on a new connection.

  llmserve bench agent --base-url http://127.0.0.1:8080/v1 --output-file llmserve.json

"llmserve bench agent table FILES" prints result files as Markdown.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.APIs = nil
			for _, a := range apis {
				for part := range strings.SplitSeq(a, ",") {
					api, err := ParseAPI(part)
					if err != nil {
						return err
					}
					cfg.APIs = append(cfg.APIs, api)
				}
			}
			var logger *slog.Logger
			if !quiet {
				logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			rep, err := Run(ctx, cfg, logger)
			if err != nil {
				return err
			}
			if outputFile != "" {
				if err := benchio.WriteJSONFile(outputFile, rep); err != nil {
					return err
				}
			}
			if err := benchio.PrintReport(cmd.OutOrStdout(), rep, asJSON); err != nil {
				return err
			}
			for _, s := range rep.Summaries {
				if s.Failed > 0 {
					return fmt.Errorf("bench agent: %d %s sessions failed", s.Failed, s.API)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.BaseURL, "base-url", cfg.BaseURL, "API root of the server, including /v1")
	f.StringVar(&cfg.APIKey, "api-key", "", "API key, sent as \"Authorization: Bearer <key>\" and x-api-key (optional)")
	f.StringVar(&cfg.Model, "model", "", "model name to send (default: the first id from GET <base-url>/models)")
	f.StringSliceVar(&apis, "api", apis, "request shapes to run, in order: messages, responses, chat (repeat or comma-separate)")
	f.IntVar(&cfg.PrefixWords, "prefix-len", cfg.PrefixWords, "words of the system prompt plus the tools' descriptions (about one token each)")
	f.IntVar(&cfg.Tools, "tools", cfg.Tools, "tool definitions in every request")
	f.IntVar(&cfg.Turns, "turns", cfg.Turns, "turns per session")
	f.IntVar(&cfg.UserWords, "user-len", cfg.UserWords, "words of each user message")
	f.IntVar(&cfg.ToolResultWords, "tool-result-len", cfg.ToolResultWords, "words of each tool result")
	f.IntVar(&cfg.OutputLen, "output-len", cfg.OutputLen, "max tokens each turn may generate (max_tokens, max_output_tokens)")
	f.IntVar(&cfg.Sessions, "sessions", cfg.Sessions, "sessions per API, each with a prefix of its own")
	f.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the transcripts: the same seed sends the same requests")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "limit for each turn, from sending it to the end of its stream")
	f.StringVar(&cfg.Label, "label", "", "label stored in the report (the table groups by the label up to its first ':')")
	f.BoolVar(&asJSON, "json", false, "write the report to stdout as JSON instead of a table")
	f.StringVar(&outputFile, "output-file", "", "also write the JSON report to this file")
	f.BoolVarP(&quiet, "quiet", "q", false, "do not log each turn to stderr")
	cmd.AddCommand(newAgentTableCommand())
	return cmd
}

func newAgentTableCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "table FILES|DIRS",
		Short: "Print agent result files as a Markdown table of medians over the reps",
		Long: `Read result files of "llmserve bench agent" (--output-file; a directory means
its *.json files) and print, per server (the label up to its first ':') and
API, the medians over the files of: turn 1's prompt tokens and TTFT, the
pooled TTFT of turns 2 on, their ratio to turn 1's, and the share of turns
2 on's prompt tokens the server took from its cache.`,
		Args:         cobra.MinimumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return Table(cmd.OutOrStdout(), args)
		},
	}
}

// Table writes `bench agent table` for the given files or directories.
func Table(w io.Writer, paths []string) error {
	type row struct {
		server                                  string
		api                                     API
		first, later, ratio, cachedShare, input []float64
		failed                                  int
	}
	var rows []*row
	files, err := benchio.ResultFiles(paths)
	if err != nil {
		return fmt.Errorf("bench agent table: %w", err)
	}
	for _, path := range files {
		var rep Report
		if _, err := benchio.ReadResult(path, &rep); err != nil {
			return fmt.Errorf("bench agent table: %w", err)
		}
		server, _, _ := strings.Cut(rep.Label, ":")
		if server == "" {
			server = rep.BaseURL
		}
		for _, s := range rep.Summaries {
			i := slices.IndexFunc(rows, func(r *row) bool { return r.server == server && r.api == s.API })
			if i < 0 {
				rows = append(rows, &row{server: server, api: s.API})
				i = len(rows) - 1
			}
			r := rows[i]
			r.failed += s.Failed
			if s.Completed == 0 {
				continue
			}
			r.first = append(r.first, s.TTFTMs[0])
			r.input = append(r.input, s.InputTokens[0])
			if len(s.TTFTMs) > 1 {
				r.later = append(r.later, s.LaterTTFTMs)
				r.ratio = append(r.ratio, s.LaterOverFirst)
				var in, cached float64
				known := true
				for k := 1; k < len(s.TTFTMs); k++ {
					in += s.InputTokens[k]
					cached += s.CachedTokens[k]
					known = known && s.CachedTokens[k] >= 0
				}
				if known && in > 0 {
					r.cachedShare = append(r.cachedShare, cached/in)
				}
			}
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("bench agent table: no results in %v", paths)
	}
	slices.SortStableFunc(rows, func(a, b *row) int { return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.api, b.api)) })
	var b strings.Builder
	b.WriteString("| server | API | reps | turn 1 prompt tokens | turn 1 TTFT ms | turns 2+ TTFT ms | turns 2+ / turn 1 | turns 2+ cached share | failed sessions |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		if len(r.first) == 0 {
			fmt.Fprintf(&b, "| %s | %s | 0 | | | | | | %d |\n", r.server, r.api, r.failed)
			continue
		}
		share := "n/a"
		if len(r.cachedShare) > 0 {
			share = fmt.Sprintf("%.3f", benchio.Median(r.cachedShare))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %s | %s | %s | %s | %d |\n", r.server, r.api, len(r.first),
			benchio.Median(r.input), cell(r.first, "%.0f"), cell(r.later, "%.0f"), cell(r.ratio, "%.3f"), share, r.failed)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// cell is the median of xs in format, and every value when there are
// several (reps); "n/a" when there is none (sessions of one turn have no
// turns 2+).
func cell(xs []float64, format string) string {
	if len(xs) == 0 {
		return "n/a"
	}
	return fmt.Sprintf(format, benchio.Median(xs)) + reps(xs, format)
}

// reps formats each rep's value, " (a, b, c)", or "" for fewer than two.
func reps(xs []float64, format string) string {
	if len(xs) < 2 {
		return ""
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

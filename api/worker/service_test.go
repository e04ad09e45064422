package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/head/workercodec"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/proto/workerpb"
)

// node is a model behind the worker service on loopback.
type node struct {
	g      *models.Generative
	srv    *Server
	gs     *grpc.Server
	addr   string
	client workerpb.WorkerClient
	reg    *prometheus.Registry
}

func startNode(t *testing.T, role workerpb.Role) *node {
	t.Helper()
	return startNodeWith(t, role, nil)
}

func startNodeWith(t *testing.T, role workerpb.Role, mutate func(*models.GenerativeConfig)) *node {
	t.Helper()
	cfg := models.GenerativeConfig{
		CacheDir: t.TempDir(), MaxNumSeqs: 4, Threads: 1, MaxModelLen: 256, PrefixCacheBytes: 64 << 20,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := models.LoadGenerative(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := New(Options{Model: func() (*models.Generative, error) { return g, nil }, Role: role, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv.Register(gs)
	go gs.Serve(ln)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	n := &node{g: g, srv: srv, gs: gs, addr: ln.Addr().String(), client: workerpb.NewWorkerClient(conn), reg: reg}
	t.Cleanup(func() {
		conn.Close()
		srv.Close()
		gs.Stop()
		g.Close()
	})
	return n
}

// eventually polls cond until it holds, failing the test after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		// A poll, bounded by the deadline: these tests watch a worker
		// with a real model from outside, through its Stats call (as the
		// head does) or its model's published stats, which signal no
		// change.
		time.Sleep(5 * time.Millisecond)
	}
}

func tokens(t *testing.T, g *models.Generative, text string) []int32 {
	t.Helper()
	toks, err := g.Tokenizer().Encode(text, true)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

const story = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, she saw a big red ball"

// generate runs a request to its end: choice 0's tokens and the final
// message.
func generate(t *testing.T, c workerpb.WorkerClient, req *workerpb.Request) ([]int32, *workerpb.Final) {
	t.Helper()
	s, err := c.Generate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_Request{Request: req}}); err != nil {
		t.Fatal(err)
	}
	var out []int32
	for {
		msg, err := s.Recv()
		if err != nil {
			t.Fatalf("generate: %v", err)
		}
		if f := msg.GetFinal(); f != nil {
			if _, err := s.Recv(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the final message: %v", err)
			}
			return out, f
		}
		o := msg.GetOutput()
		if o.Error != nil {
			t.Fatalf("output error %v", o.Error)
		}
		if o.Choice == 0 {
			out = append(out, o.Tokens...)
		}
	}
}

func TestInfoAndVocabulary(t *testing.T) {
	n := startNode(t, workerpb.Role_ROLE_PREFILL)
	ctx := context.Background()
	info, err := n.client.Info(ctx, &workerpb.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.ModelName != n.g.Name() || info.MaxModelLen != 256 || info.Role != workerpb.Role_ROLE_PREFILL ||
		info.KvBlockSize != models.BlockSize || len(info.EosTokens) == 0 || info.KvBytesPerPosition <= 0 || !info.PrefixCaching ||
		info.ReasoningParser != "" {
		t.Fatalf("info %v", info)
	}
	s, err := n.client.Vocabulary(ctx, &workerpb.VocabularyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Offset != int64(buf.Len()) || c.Total != info.VocabularySize {
			t.Fatalf("chunk at %d of %d, have %d of %d", c.Offset, c.Total, buf.Len(), info.VocabularySize)
		}
		buf.Write(c.Data)
	}
	if sum := sha256.Sum256(buf.Bytes()); int64(buf.Len()) != info.VocabularySize || !bytes.Equal(sum[:], info.VocabularySha256) {
		t.Fatal("the vocabulary does not match Info's size and hash")
	}
	if st, _ := os.Stat(n.g.Path()); int64(buf.Len()) >= st.Size() {
		t.Fatalf("the vocabulary (%d bytes) is not smaller than the model (%d)", buf.Len(), st.Size())
	}
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := llamacpp.Load(path, llamacpp.ModelParams{VocabOnly: true})
	if err != nil {
		t.Fatalf("load the vocabulary-only GGUF: %v", err)
	}
	defer m.Close()
	got, err := m.Tokenize(story, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := tokens(t, n.g, story); !slices.Equal(got, want) {
		t.Fatalf("the head tokenizes %v, the worker %v", got, want)
	}
	// A vocabulary-only model has no Info().ChatTemplate: the head reads
	// the key itself.
	if m.Meta(chatTemplateKey) != n.g.Info().ChatTemplate {
		t.Fatal("the chat template differs")
	}
}

// TestTransferExact: a prefill on one node, the decode on another pulling
// its KV, give the same greedy tokens as one node computing everything;
// the bytes moved are the sequence's KV size; the prefill's KV is released
// by the pull.
func TestTransferExact(t *testing.T) {
	p := startNode(t, workerpb.Role_ROLE_PREFILL)
	d := startNode(t, workerpb.Role_ROLE_DECODE)
	ctx := context.Background()
	prompt := tokens(t, p.g, story)
	want, _ := generate(t, p.client, &workerpb.Request{Prompt: prompt, MaxTokens: 24})

	pre, err := p.client.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: prompt, MaxTokens: 24}})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := p.client.Info(ctx, &workerpb.InfoRequest{})
	if pre.FirstToken != want[0] || pre.Positions != int32(len(prompt)) || pre.KvBytes != int64(len(prompt))*info.KvBytesPerPosition {
		t.Fatalf("prefill %v; want first token %d, %d positions of %d bytes", pre, want[0], len(prompt), info.KvBytesPerPosition)
	}
	if len(pre.BlockHashes) != len(prompt)/models.BlockSize {
		t.Fatalf("%d block hashes for %d tokens", len(pre.BlockHashes), len(prompt))
	}
	for i, h := range kvcache.BlockHashes(prompt, "", models.BlockSize) {
		if !bytes.Equal(pre.BlockHashes[i], h[:]) {
			t.Fatalf("block hash %d differs from kvcache.BlockHashes", i)
		}
	}
	got, final := generate(t, d.client, &workerpb.Request{
		Prompt: prompt, MaxTokens: 24, KvSource: &workerpb.KVSource{Address: p.addr, TransferId: pre.TransferId},
	})
	if !slices.Equal(got, want) {
		t.Fatalf("after the transfer %v, want %v", got, want)
	}
	rep := final.KvTransfer
	if rep == nil || rep.Recomputed || rep.BytesReceived != pre.KvBytes || rep.Positions != pre.Positions {
		t.Fatalf("transfer report %v, want %d bytes", rep, pre.KvBytes)
	}
	if final.Usage.CachedTokens != int32(len(prompt)-1) {
		t.Fatalf("cached %d tokens, want %d (all but the last)", final.Usage.CachedTokens, len(prompt)-1)
	}
	if v := testutil.ToFloat64(p.srv.m.bytes.WithLabelValues("sent")); v != float64(pre.KvBytes) {
		t.Fatalf("sent %v bytes, want %d", v, pre.KvBytes)
	}
	if v := testutil.ToFloat64(d.srv.m.bytes.WithLabelValues("received")); v != float64(pre.KvBytes) {
		t.Fatalf("received %v bytes, want %d", v, pre.KvBytes)
	}
	// The pull released the lease.
	if st, _ := p.client.Stats(ctx, &workerpb.StatsRequest{}); st.Leases != 0 || st.LeaseBytes != 0 {
		t.Fatalf("after the pull: %d leases, %d bytes", st.Leases, st.LeaseBytes)
	}
	if _, err := p.client.ReleaseKV(ctx, &workerpb.ReleaseKVRequest{TransferId: pre.TransferId}); err != nil {
		t.Fatal(err)
	}
	s, err := p.client.PullKV(ctx, &workerpb.PullKVRequest{TransferId: pre.TransferId})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("a second pull: %v, want NOT_FOUND", err)
	}
}

// TestTransferPeerDead: the prefill node is gone before the decode pulls:
// the decode computes the prompt itself, completes with the same output,
// and counts it.
func TestTransferPeerDead(t *testing.T) {
	p := startNode(t, workerpb.Role_ROLE_BOTH)
	d := startNode(t, workerpb.Role_ROLE_DECODE)
	ctx := context.Background()
	prompt := tokens(t, p.g, story)
	want, _ := generate(t, d.client, &workerpb.Request{Prompt: prompt, MaxTokens: 16, CacheSalt: "ref"})
	pre, err := p.client.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: prompt, MaxTokens: 16}})
	if err != nil {
		t.Fatal(err)
	}
	p.gs.Stop()
	for _, src := range []*workerpb.KVSource{
		{Address: p.addr, TransferId: pre.TransferId, TimeoutMs: 5000},
		{Address: d.addr, TransferId: "kvx-unknown"}, // a live peer without the lease
	} {
		got, final := generate(t, d.client, &workerpb.Request{Prompt: prompt, MaxTokens: 16, KvSource: src})
		if !slices.Equal(got, want) {
			t.Fatalf("recomputed %v, want %v", got, want)
		}
		if rep := final.KvTransfer; rep == nil || !rep.Recomputed || rep.Error == "" || rep.BytesReceived != 0 {
			t.Fatalf("report %v, want recomputed", rep)
		}
	}
	if v := testutil.ToFloat64(d.srv.m.recomputed); v != 2 {
		t.Fatalf("recomputed counter %v, want 2", v)
	}
	if v := testutil.ToFloat64(d.srv.m.failures); v != 2 {
		t.Fatalf("failure counter %v, want 2", v)
	}
}

// TestLeaseExpiresUnpulled: KV nobody pulls is freed when its lease ends.
func TestLeaseExpiresUnpulled(t *testing.T) {
	p := startNode(t, workerpb.Role_ROLE_PREFILL)
	ctx := context.Background()
	prompt := tokens(t, p.g, story)
	pre, err := p.client.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: prompt, MaxTokens: 8}, LeaseMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := p.client.Stats(ctx, &workerpb.StatsRequest{})
	if st.Leases != 1 || st.LeaseBytes != pre.KvBytes {
		t.Fatalf("holding %d leases, %d bytes; want 1, %d", st.Leases, st.LeaseBytes, pre.KvBytes)
	}
	eventually(t, "the lease's end", func() bool {
		st, _ = p.client.Stats(ctx, &workerpb.StatsRequest{})
		return st.Leases == 0
	})
	if st.LeaseBytes != 0 || p.g.Core().LeasesExpired() != 1 {
		t.Fatalf("after the lease: %d bytes held, %d expired", st.LeaseBytes, p.g.Core().LeasesExpired())
	}
	if got, err := testutil.GatherAndCount(p.reg, "llmserve_kv_leases_expired_total"); err != nil || got != 1 {
		t.Fatalf("lease metric: %d %v", got, err)
	}
}

func TestGenerateControls(t *testing.T) {
	n := startNode(t, workerpb.Role_ROLE_BOTH)
	prompt := tokens(t, n.g, story)
	ctx := context.Background()

	// stop_choice ends choice 1 early with STOP; choice 0 runs to its
	// length. The model is fast: on a loaded machine choice 1 may reach its
	// length before the control arrives, so a few tries are allowed.
	stopChoice := func() map[int32]workerpb.FinishReason {
		s, err := n.client.Generate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_Request{Request: &workerpb.Request{
			Prompt: prompt, MaxTokens: 200, N: 2, IgnoreEos: true, Sampling: &workerpb.Sampling{Temperature: 1, Seed: 7},
		}}})
		finish := map[int32]workerpb.FinishReason{}
		stopped := false
		for {
			msg, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if msg.GetFinal() != nil {
				return finish
			}
			o := msg.GetOutput()
			if o.FinishReason != workerpb.FinishReason_FINISH_REASON_NONE {
				finish[o.Choice] = o.FinishReason
			}
			if !stopped && o.Choice == 1 {
				stopped = true
				s.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_StopChoice{StopChoice: &workerpb.StopChoice{Choice: 1}}})
			}
		}
	}
	for try := 1; ; try++ {
		finish := stopChoice()
		if finish[0] != workerpb.FinishReason_FINISH_REASON_LENGTH {
			t.Fatalf("choice 0 finished %v", finish[0])
		}
		if finish[1] == workerpb.FinishReason_FINISH_REASON_STOP {
			break
		}
		if try == 5 {
			t.Fatalf("choice 1 finished %v five times, never stopped", finish[1])
		}
	}

	// Cancelling the call ends the request and frees its slot.
	cctx, cancel := context.WithCancel(ctx)
	s, err := n.client.Generate(cctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_Request{Request: &workerpb.Request{Prompt: prompt, MaxTokens: 200, IgnoreEos: true}}})
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	eventually(t, "the cancelled request's end", func() bool {
		st, err := n.client.Stats(ctx, &workerpb.StatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return st.Running == 0 && st.Waiting == 0
	})
}

func TestWatchKVEvents(t *testing.T) {
	n := startNode(t, workerpb.Role_ROLE_BOTH)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prompt := tokens(t, n.g, story)
	generate(t, n.client, &workerpb.Request{Prompt: prompt, MaxTokens: 4})
	eventually(t, "a cached block", func() bool { return n.g.Stats().KV.CachedBlocks > 0 })
	w, err := n.client.WatchKVEvents(ctx, &workerpb.WatchKVEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	var seq uint64
	recv := func() *workerpb.KVEvent {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if seq++; ev.Sequence != seq {
			t.Fatalf("sequence %d, want %d", ev.Sequence, seq)
		}
		return ev
	}
	for ev := recv(); ev.Kind != workerpb.KVEventKind_KV_EVENT_KIND_SNAPSHOT_END; ev = recv() {
		if ev.Kind != workerpb.KVEventKind_KV_EVENT_KIND_STORED {
			t.Fatalf("snapshot event %v", ev)
		}
		if ev.Depth > 0 && !known[string(ev.Parent)] {
			t.Fatal("a snapshot block before its parent")
		}
		known[string(ev.Hash)] = true
	}
	first := kvcache.BlockHashes(prompt, "", models.BlockSize)[0]
	if !known[string(first[:])] {
		t.Fatal("the snapshot lacks the prompt's first block")
	}
	other := tokens(t, n.g, "The sun was hot and the dog ran to the big tree to find some shade and a bone")
	generate(t, n.client, &workerpb.Request{Prompt: other, MaxTokens: 4})
	want := kvcache.BlockHashes(other, "", models.BlockSize)[0]
	for !known[string(want[:])] {
		if ev := recv(); ev.Kind == workerpb.KVEventKind_KV_EVENT_KIND_STORED {
			known[string(ev.Hash)] = true
		}
	}
}

// TestBadInput: bad input to every RPC is INVALID_ARGUMENT naming the
// field, never a crash.
func TestBadInput(t *testing.T) {
	n := startNode(t, workerpb.Role_ROLE_BOTH)
	d := startNode(t, workerpb.Role_ROLE_DECODE)
	ctx := context.Background()
	ok := []int32{1, 2, 3}
	bad := func(r *workerpb.Request) *workerpb.Request { return r }
	one := float32(1)
	lp := int32(2)
	neg := int32(-1)
	cases := []struct {
		name  string
		req   *workerpb.Request
		param string
	}{
		{"no request", nil, "request"},
		{"empty prompt", bad(&workerpb.Request{MaxTokens: 1}), "prompt"},
		{"token out of vocabulary", bad(&workerpb.Request{Prompt: []int32{1, 1 << 30}, MaxTokens: 1}), "prompt[1]"},
		{"negative token", bad(&workerpb.Request{Prompt: []int32{-5}, MaxTokens: 1}), "prompt[0]"},
		{"no max_tokens", bad(&workerpb.Request{Prompt: ok}), "max_tokens"},
		{"min over max", bad(&workerpb.Request{Prompt: ok, MaxTokens: 2, MinTokens: 3}), "min_tokens"},
		{"negative n", bad(&workerpb.Request{Prompt: ok, MaxTokens: 2, N: -1}), "n"},
		{"too long", bad(&workerpb.Request{Prompt: ok, MaxTokens: 1000}), "max_tokens"},
		{"stop token out of vocabulary", bad(&workerpb.Request{Prompt: ok, MaxTokens: 1, StopTokens: []int32{-1}}), "stop_tokens[0]"},
		{"empty bad word", bad(&workerpb.Request{Prompt: ok, MaxTokens: 1, BadWords: []*workerpb.TokenSequence{{}}}), "bad_words[0]"},
		{"temperature", bad(&workerpb.Request{Prompt: ok, MaxTokens: 1, Sampling: &workerpb.Sampling{Temperature: -1}}), "sampling.temperature"},
		{"top_p", bad(&workerpb.Request{Prompt: ok, MaxTokens: 1, Sampling: &workerpb.Sampling{TopP: &one, Temperature: 1, TopK: -3}}), "sampling.top_k"},
		{"grammar", bad(&workerpb.Request{Prompt: ok, MaxTokens: 1, Sampling: &workerpb.Sampling{Grammar: "root ::= ("}}), "sampling.grammar"},
		{"prompt logprobs", bad(&workerpb.Request{Prompt: ok, MaxTokens: 1, PromptLogprobs: &neg}), "prompt_logprobs"},
		{"kv source without address", bad(&workerpb.Request{Prompt: ok, MaxTokens: 1, KvSource: &workerpb.KVSource{TransferId: "x"}}), "kv_source"},
	}
	for _, tc := range cases {
		t.Run("Generate/"+tc.name, func(t *testing.T) {
			s, err := n.client.Generate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			msg := &workerpb.GenerateRequest{}
			if tc.req != nil {
				msg.Msg = &workerpb.GenerateRequest_Request{Request: tc.req}
			} else {
				msg.Msg = &workerpb.GenerateRequest_StopChoice{StopChoice: &workerpb.StopChoice{}}
			}
			s.Send(msg)
			_, err = s.Recv()
			checkInvalid(t, err, tc.param)
		})
		t.Run("Prefill/"+tc.name, func(t *testing.T) {
			if tc.req != nil {
				tc.param = "request." + tc.param
			}
			_, err := n.client.Prefill(ctx, &workerpb.PrefillRequest{Request: tc.req})
			if tc.param == "request.max_tokens" || tc.param == "request.min_tokens" {
				// A prefill generates one token whatever max_tokens says.
				if err != nil && status.Code(err) != codes.InvalidArgument {
					t.Fatal(err)
				}
				return
			}
			checkInvalid(t, err, tc.param)
		})
	}
	_, err := n.client.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: ok, MaxTokens: 1, N: 2}})
	checkInvalid(t, err, "request.n")
	_, err = n.client.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: ok, MaxTokens: 1, PromptLogprobs: &lp}})
	checkInvalid(t, err, "request.prompt_logprobs")
	_, err = n.client.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: ok, MaxTokens: 1}, LeaseMs: -1})
	checkInvalid(t, err, "lease_ms")
	if _, err = d.client.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: ok, MaxTokens: 1}}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("prefill on a decode worker: %v", err)
	}
	_, err = n.client.ReleaseKV(ctx, &workerpb.ReleaseKVRequest{})
	checkInvalid(t, err, "transfer_id")
	for _, req := range []*workerpb.PullKVRequest{{}, {TransferId: "x", ChunkBytes: -1}, {TransferId: "x", ChunkBytes: 1 << 30}} {
		s, err := n.client.PullKV(ctx, req)
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("PullKV(%v): %v", req, err)
		}
	}
	// A Generate whose first message is a control, and one with no message.
	s, _ := n.client.Generate(ctx)
	s.CloseSend()
	if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty Generate: %v", err)
	}
	// The worker still serves.
	if got, _ := generate(t, n.client, &workerpb.Request{Prompt: ok, MaxTokens: 2}); len(got) == 0 {
		t.Fatal("no output after bad input")
	}
}

func checkInvalid(t *testing.T, err error, param string) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want INVALID_ARGUMENT", err)
	}
	e := workercodec.ErrorDetail(err)
	if e == nil || !strings.HasPrefix(e.Param, param) {
		t.Fatalf("error detail %v, want param %q", e, param)
	}
}

// TestTransferConcurrent: 16 requests prefilled on one node and decoded on
// another at once each give the output one node gives, with every KV byte
// accounted for and no lease left behind.
func TestTransferConcurrent(t *testing.T) {
	p := startNode(t, workerpb.Role_ROLE_PREFILL)
	d := startNode(t, workerpb.Role_ROLE_DECODE)
	ctx := context.Background()
	const n = 16
	prompts := make([][]int32, n)
	want := make([][]int32, n)
	for i := range n {
		prompts[i] = tokens(t, p.g, fmt.Sprintf("%s number %d went to the", story, i))
		want[i], _ = generate(t, p.client, &workerpb.Request{Prompt: prompts[i], MaxTokens: 12, CacheSalt: "ref"})
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var total atomic.Int64
	for i := range n {
		wg.Go(func() {
			pre, err := p.client.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: prompts[i], MaxTokens: 12}})
			if err != nil {
				errs <- err
				return
			}
			s, err := d.client.Generate(ctx)
			if err != nil {
				errs <- err
				return
			}
			s.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_Request{Request: &workerpb.Request{
				Prompt: prompts[i], MaxTokens: 12, KvSource: &workerpb.KVSource{Address: p.addr, TransferId: pre.TransferId},
			}}})
			var got []int32
			for {
				msg, err := s.Recv()
				if err != nil {
					errs <- err
					return
				}
				if f := msg.GetFinal(); f != nil {
					if f.KvTransfer.Recomputed || f.KvTransfer.BytesReceived != pre.KvBytes {
						errs <- fmt.Errorf("request %d: report %v, prefill kept %d bytes", i, f.KvTransfer, pre.KvBytes)
					}
					total.Add(pre.KvBytes)
					break
				}
				got = append(got, msg.GetOutput().GetTokens()...)
			}
			if !slices.Equal(got, want[i]) {
				errs <- fmt.Errorf("request %d: %v, want %v", i, got, want[i])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v := testutil.ToFloat64(d.srv.m.bytes.WithLabelValues("received")); v != float64(total.Load()) {
		t.Fatalf("received %v bytes, the prefills kept %d", v, total.Load())
	}
	if st, _ := p.client.Stats(ctx, &workerpb.StatsRequest{}); st.Leases != 0 || st.LeaseBytes != 0 {
		t.Fatalf("leases left: %v", st)
	}
}

// badPeer serves PullKV from a real transfer's KV, spoiled as told.
type badPeer struct {
	workerpb.UnimplementedWorkerServer
	data   []byte
	layout *workerpb.KVLayout
	tokens []int32
	salt   string
	spoil  string
}

func (b *badPeer) PullKV(in *workerpb.PullKVRequest, s grpc.ServerStreamingServer[workerpb.PullKVResponse]) error {
	data := bytes.Clone(b.data)
	crc := crc32.Checksum(data, castagnoli)
	total, tokens, layout := int64(len(data)), b.tokens, b.layout
	switch b.spoil {
	case "checksum":
		data[len(data)/2] ^= 1 // the chunk's CRC is of the good bytes
	case "total":
		total++
	case "tokens":
		tokens = slices.Clone(tokens)
		tokens[1]++
	case "layout":
		layout = &workerpb.KVLayout{Sections: []*workerpb.KVSection{{Groups: 1, Unit: int32(len(data) / len(tokens))}}}
	case "salt":
		b.salt += "x"
	case "stall":
		<-s.Context().Done()
		return s.Context().Err()
	case "no trailer":
		return s.Send(&workerpb.PullKVResponse{Msg: &workerpb.PullKVResponse_Chunk{Chunk: &workerpb.KVChunk{Data: data, Crc32C: crc}}})
	}
	if err := s.Send(&workerpb.PullKVResponse{Msg: &workerpb.PullKVResponse_Chunk{Chunk: &workerpb.KVChunk{Data: data, Crc32C: crc32.Checksum(b.data, castagnoli)}}}); err != nil {
		return err
	}
	return s.Send(&workerpb.PullKVResponse{Msg: &workerpb.PullKVResponse_Trailer{Trailer: &workerpb.KVTrailer{
		TotalBytes: total, Positions: int32(len(tokens)), Layout: layout, Tokens: tokens, CacheSalt: b.salt, Crc32C: crc,
	}}})
}

// TestTransferBadPeer: KV that fails a check (a chunk's checksum, the
// total, tokens that are not the prompt's, another layout, no trailer, a
// peer that never answers within the timeout) is never used: the decode
// computes the prompt itself and answers as one node does.
func TestTransferBadPeer(t *testing.T) {
	p := startNode(t, workerpb.Role_ROLE_PREFILL)
	d := startNode(t, workerpb.Role_ROLE_DECODE)
	ctx := context.Background()
	prompt := tokens(t, p.g, story)
	want, _ := generate(t, d.client, &workerpb.Request{Prompt: prompt, MaxTokens: 10, CacheSalt: "ref"})
	pre, err := p.client.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: prompt, MaxTokens: 10}})
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := Pull(ctx, p.addr, pre.TransferId, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	layout := &workerpb.KVLayout{}
	for _, s := range pulled.KV.Layout.Sections {
		layout.Sections = append(layout.Sections, &workerpb.KVSection{Groups: int32(s.Groups), Unit: int32(s.Unit)})
	}
	for i, spoil := range []string{"checksum", "total", "tokens", "layout", "stall", "no trailer", "salt"} {
		t.Run(spoil, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			gs := grpc.NewServer()
			workerpb.RegisterWorkerServer(gs, &badPeer{data: pulled.KV.Data, layout: layout, tokens: pulled.Tokens, salt: fmt.Sprint(i), spoil: spoil})
			go gs.Serve(ln)
			defer gs.Stop()
			got, final := generate(t, d.client, &workerpb.Request{
				Prompt: prompt, MaxTokens: 10, CacheSalt: fmt.Sprint(i), // no help from the cache
				KvSource: &workerpb.KVSource{Address: ln.Addr().String(), TransferId: "x", TimeoutMs: 300},
			})
			if !slices.Equal(got, want) {
				t.Fatalf("%v, want %v", got, want)
			}
			if rep := final.KvTransfer; !rep.Recomputed || rep.BytesReceived != 0 {
				t.Fatalf("report %v", rep)
			}
			t.Log(final.KvTransfer.Error)
		})
	}
}

// TestVocabularyChatTemplate: a worker's --chat-template travels in the
// vocabulary, so the head renders chats as the worker does.
func TestVocabularyChatTemplate(t *testing.T) {
	tmpl := "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
	g, err := models.LoadGenerative(models.GenerativeConfig{CacheDir: t.TempDir(), Threads: 1, MaxModelLen: 64, ChatTemplate: tmpl}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv, err := New(Options{Model: func() (*models.Generative, error) { return g, nil }})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := srv.vocabulary(g)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := llamacpp.Load(path, llamacpp.ModelParams{VocabOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.Meta(chatTemplateKey); got != tmpl {
		t.Fatalf("the vocabulary's chat template is %q, want the worker's %q", got, tmpl)
	}
	if _, err := vocabGGUF(filepath.Join(t.TempDir(), "missing.gguf"), ""); err == nil {
		t.Fatal("a missing file gave a vocabulary")
	}
	notGGUF := filepath.Join(t.TempDir(), "x.gguf")
	os.WriteFile(notGGUF, []byte("GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\xff"), 0o600)
	if _, err := vocabGGUF(notGGUF, ""); err == nil {
		t.Fatal("a truncated GGUF gave a vocabulary")
	}
}

// TestQueueFull: a worker whose queue is full answers RESOURCE_EXHAUSTED
// with ERROR_CODE_QUEUE_FULL and a retry hint, as the OpenAI layer answers
// 429 with Retry-After.
func TestQueueFull(t *testing.T) {
	n := startNodeWith(t, workerpb.Role_ROLE_BOTH, func(c *models.GenerativeConfig) {
		c.MaxNumSeqs, c.MaxWaiting, c.MaxModelLen = 1, 1, 512
	})
	long := &workerpb.Request{Prompt: []int32{1, 2, 3}, MaxTokens: 500, IgnoreEos: true}
	// One runs, one waits (Stats shows it), the next finds the queue
	// full. The model is fast: when the running one ends before the third
	// is sent, try again.
	for try := 1; ; try++ {
		if try > 20 {
			t.Fatal("the queue was never full")
		}
		ctx, cancel := context.WithCancel(context.Background())
		open := func() workerpb.Worker_GenerateClient {
			s, err := n.client.Generate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_Request{Request: long}})
			return s
		}
		running := open()
		if _, err := running.Recv(); err != nil {
			t.Fatal(err)
		}
		open()
		eventually(t, "a waiting request", func() bool {
			st, err := n.client.Stats(ctx, &workerpb.StatsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			return st.Waiting == 1 || st.Running == 0
		})
		_, err := open().Recv()
		cancel()
		if err == nil {
			continue // the running one ended first
		}
		e := workercodec.ErrorDetail(err)
		if status.Code(err) != codes.ResourceExhausted || e == nil || e.Code != workerpb.ErrorCode_ERROR_CODE_QUEUE_FULL || e.RetryAfterMs <= 0 {
			t.Fatalf("got %v (%v), want RESOURCE_EXHAUSTED with QUEUE_FULL and a retry hint", err, e)
		}
		return
	}
}

// TestEmbed: Embed returns the model's own Embed vectors with the token
// count, Info reports the pooling, bad input is INVALID_ARGUMENT naming
// the input, and a worker without pooling refuses Embed.
func TestEmbed(t *testing.T) {
	n := startNode(t, workerpb.Role_ROLE_BOTH)
	ctx := context.Background()
	info, err := n.client.Info(ctx, &workerpb.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Pooling != n.g.Pooling() || info.Pooling == "none" || int(info.MaxEmbedTokens) != n.g.MaxEmbedTokens() || info.Task != n.g.Task() {
		t.Fatalf("Info pooling %q, max_embed_tokens %d, task %q; the model's %q, %d, %q",
			info.Pooling, info.MaxEmbedTokens, info.Task, n.g.Pooling(), n.g.MaxEmbedTokens(), n.g.Task())
	}
	inputs := [][]int32{tokens(t, n.g, story), tokens(t, n.g, "The dog ran."), {1, 2, 3}}
	want, err := n.g.Embed(ctx, inputs)
	if err != nil {
		t.Fatal(err)
	}
	req := &workerpb.EmbedRequest{RequestId: "e1"}
	total := 0
	for _, in := range inputs {
		req.Inputs = append(req.Inputs, &workerpb.TokenSequence{Tokens: in})
		total += len(in)
	}
	resp, err := n.client.Embed(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Embeddings) != len(inputs) || int(resp.PromptTokens) != total {
		t.Fatalf("%d embeddings, %d tokens; want %d, %d", len(resp.Embeddings), resp.PromptTokens, len(inputs), total)
	}
	for i, e := range resp.Embeddings {
		if !slices.Equal(e.Values, want[i]) {
			t.Errorf("input %d: the RPC's vector differs from the model's Embed", i)
		}
	}

	long := make([]int32, n.g.MaxEmbedTokens()+1)
	for i := range long {
		long[i] = 1
	}
	seqs := func(in ...[]int32) *workerpb.EmbedRequest {
		r := &workerpb.EmbedRequest{}
		for _, s := range in {
			r.Inputs = append(r.Inputs, &workerpb.TokenSequence{Tokens: s})
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		req   *workerpb.EmbedRequest
		param string
	}{
		{"no inputs", seqs(), "inputs"},
		{"empty input", seqs([]int32{1}, nil), "inputs[1]"},
		{"token out of vocabulary", seqs([]int32{1, 1 << 30}), "inputs[0][1]"},
		{"negative token", seqs([]int32{1}, []int32{2, -1}), "inputs[1][1]"},
		{"too long", seqs(long), "inputs[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.client.Embed(ctx, tc.req)
			checkInvalid(t, err, tc.param)
			if e := workercodec.ErrorDetail(err); e.Code != workerpb.ErrorCode_ERROR_CODE_INVALID {
				t.Errorf("code %v, want ERROR_CODE_INVALID", e.Code)
			}
		})
	}
	// The worker still embeds after bad input.
	if _, err := n.client.Embed(ctx, seqs([]int32{1, 2})); err != nil {
		t.Fatal(err)
	}

	none := startNodeWith(t, workerpb.Role_ROLE_BOTH, func(c *models.GenerativeConfig) { c.Pooling = "none" })
	if info, err := none.client.Info(ctx, &workerpb.InfoRequest{}); err != nil || info.Pooling != "none" {
		t.Fatalf("Info of a worker without pooling: %v %v", info, err)
	}
	_, err = none.client.Embed(ctx, seqs([]int32{1, 2}))
	checkInvalid(t, err, "")
}

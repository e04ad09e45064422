package tests

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/head/workercodec"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/proto/workerpb"
)

// TestHeadImageChat runs TestImageChat's image chat through a head: a
// worker serving the vision model with its projector, and one serving the
// same model without it, behind one head. The answers are llama-server's
// (the same prompt token count, image positions included, and the same
// text), alone and 4 at once: the head has the projector's worker encode
// the image (PrepareMedia) and sends the rows with the request, which
// either worker runs. The worker without a projector runs a request whose
// rows another worker encoded, with the same tokens. A head whose only
// worker has no projector answers a 400 naming the part.
func TestHeadImageChat(t *testing.T) {
	t.Parallel()
	text, mm := visionFiles(t)
	tmpl := filepath.Join(t.TempDir(), "chatml.jinja")
	if err := os.WriteFile(tmpl, []byte(chatmlTemplate), 0o600); err != nil {
		t.Fatal(err)
	}
	vision := startWorkerProc(t, "both", "--model", text, "--mmproj", mm, "--chat-template", tmpl)
	plain := startWorkerProc(t, "both", "--model", text, "--chat-template", tmpl)
	h := startHeadProc(t, []*headWorker{vision, plain})

	png, err := os.ReadFile("../evals/synth/testdata/mmproj/gradient-64.png")
	if err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	msgs := []map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "image_url", "image_url": map[string]any{"url": url}},
		{"type": "text", "text": "Describe"},
	}}}
	const wantPrompt, wantAnswer = 98, "\"Momeape-eapy?\"\n\"" // llama-server's (TestImageChat)
	headWait(t, "both workers healthy", func() bool {
		return h.metric(t, "llmserve_router_workers", `state="healthy"`) == 2
	})
	req := map[string]any{"model": servedModel(t, h), "messages": msgs, "max_tokens": 16, "temperature": 0}
	check := func(label string) {
		code, body := h.post(t, "/v1/chat/completions", req)
		var resp struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &resp) != nil {
			t.Errorf("%s: status %d: %s", label, code, body)
			return
		}
		if got := answerText(t, body); resp.Usage.PromptTokens != wantPrompt || got != wantAnswer {
			t.Errorf("%s: %d prompt tokens, %q; llama-server: %d, %q", label, resp.Usage.PromptTokens, got, wantPrompt, wantAnswer)
		}
	}
	check("alone")
	concurrently(4, func(i int) { check(fmt.Sprintf("concurrent %d", i)) })
	for _, w := range []*headWorker{vision, plain} {
		t.Logf("worker %s ran %v of the requests", w.addr, h.metric(t, "llmserve_router_requests_total", `worker="`+w.addr+`"`))
	}

	// The rows travel with the request: the worker without a projector
	// generates what the projector's worker does from the same prompt and
	// spans.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(w *headWorker) workerpb.WorkerClient {
		conn, err := grpc.NewClient(w.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return workerpb.NewWorkerClient(conn)
	}
	vc, pc := client(vision), client(plain)
	prompt := "<|im_start|>user\n<__media__>Describe<|im_end|>\n<|im_start|>assistant\n"
	items := []*workerpb.MediaItem{{Kind: "image", Data: png, Param: "messages[0].content[0]"}}
	prep, err := vc.PrepareMedia(ctx, &workerpb.PrepareMediaRequest{Prompt: prompt, AddSpecial: true, Items: items})
	if err != nil || len(prep.Prompt) < wantPrompt-8 || len(prep.Media) == 0 {
		t.Fatalf("PrepareMedia: %v, %d tokens", err, len(prep.GetPrompt()))
	}
	_, err = pc.PrepareMedia(ctx, &workerpb.PrepareMediaRequest{Prompt: prompt, Items: items})
	if e := workercodec.ErrorDetail(err); status.Code(err) != codes.InvalidArgument || e.GetParam() != "messages[0].content[0]" || e.GetMessage() != media.ErrNoProjector.Error() {
		t.Errorf("PrepareMedia on a worker without a projector: %v; want INVALID_ARGUMENT naming the item, media.ErrNoProjector", err)
	}
	generate := func(c workerpb.WorkerClient) []int32 {
		call, err := c.Generate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wreq := &workerpb.Request{RequestId: "direct", Prompt: prep.Prompt, Media: prep.Media, MaxTokens: 16, IgnoreEos: true, Sampling: &workerpb.Sampling{}}
		if err := call.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_Request{Request: wreq}}); err != nil {
			t.Fatal(err)
		}
		var toks []int32
		for {
			msg, err := call.Recv()
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if msg.GetFinal() != nil {
				return toks
			}
			toks = append(toks, msg.GetOutput().GetTokens()...)
		}
	}
	if a, b := generate(vc), generate(pc); len(a) != 16 || !slices.Equal(a, b) {
		t.Errorf("the projector's worker generated %v, the other from the same rows %v", a, b)
	}

	// A head whose worker has no projector: a 400 naming the image part.
	h2 := startHeadProc(t, []*headWorker{plain})
	code, body := h2.post(t, "/v1/chat/completions", map[string]any{"model": servedModel(t, h2), "messages": msgs, "max_tokens": 4})
	var e struct {
		Error struct {
			Param string `json:"param"`
		} `json:"error"`
	}
	if code != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error.Param != "messages[0].content[0]" {
		t.Errorf("no projector behind the head: %d %s; want a 400 naming messages[0].content[0]", code, body)
	}
}

// TestHeadImagePrefillDecode: an image chat split over a prefill worker
// with the projector and a decode worker without one: the prefill worker
// encodes the image and computes the prompt with its rows, the decode
// worker pulls that KV (its request carries the same rows) and continues;
// the answer is llama-server's, with no recomputation.
func TestHeadImagePrefillDecode(t *testing.T) {
	t.Parallel()
	text, mm := visionFiles(t)
	tmpl := filepath.Join(t.TempDir(), "chatml.jinja")
	if err := os.WriteFile(tmpl, []byte(chatmlTemplate), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startWorkerProc(t, "prefill", "--model", text, "--mmproj", mm, "--chat-template", tmpl)
	d := startWorkerProc(t, "decode", "--model", text, "--chat-template", tmpl)
	h := startHeadProc(t, []*headWorker{p, d}, "--pd-min-prefill-tokens", "1")
	png, err := os.ReadFile("../evals/synth/testdata/mmproj/gradient-64.png")
	if err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	headWait(t, "both workers healthy", func() bool {
		return h.metric(t, "llmserve_router_workers", `state="healthy"`) == 2
	})
	req := map[string]any{"model": servedModel(t, h), "max_tokens": 16, "temperature": 0, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "image_url", "image_url": map[string]any{"url": url}},
		{"type": "text", "text": "Describe"},
	}}}}
	code, body := h.post(t, "/v1/chat/completions", req)
	if got := answerText(t, body); code != http.StatusOK || got != "\"Momeape-eapy?\"\n\"" {
		t.Fatalf("P/D image chat: %d %s; llama-server answers %q", code, body, "\"Momeape-eapy?\"\n\"")
	}
	if n := d.metric(t, "llmserve_kv_transfer_bytes_total", `direction="received"`); n == 0 {
		t.Error("the decode worker pulled no KV")
	}
	if n := d.metric(t, "llmserve_kv_transfer_recomputed_total", ""); n != 0 {
		t.Errorf("%v transfers were recomputed", n)
	}
}

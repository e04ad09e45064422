package openai

import (
	"context"
	"net"
	"net/http"
	"strconv"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/scheduler"
)

// KVTransfer is what the server offers for vLLM's disaggregated prefill
// contract (kv_transfer_params), so that an external router (vLLM's proxy,
// llm-d's sidecar) can drive plain serve processes as prefill and decode
// instances. api/worker's Server implements it: the KV moves over the
// internal worker service on the server's gRPC port.
type KVTransfer interface {
	// SubmitPrefill submits r (one choice) to model and keeps its prompt's
	// KV for a remote decode. After the stream ended, params returns the
	// kv_transfer_params of the response (do_remote_prefill true and where
	// to pull from), or an error when the KV could not be kept.
	SubmitPrefill(ctx context.Context, model string, r *scheduler.Request) (_ *core.Stream, params func(context.Context) (map[string]any, error), _ error)
	// SubmitRemote pulls r's prompt KV of transfer transferID from the
	// server at host:port and submits r with it; when the pull fails it
	// submits r alone (the prompt is computed here).
	SubmitRemote(ctx context.Context, model string, r *scheduler.Request, addr, transferID string) (*core.Stream, error)
}

// kvTransferParams is vLLM's kv_transfer_params in a request. The fields
// of a decode request are those a prefill's response carried; unknown ones
// are ignored.
type kvTransferParams struct {
	DoRemoteDecode  bool    `json:"do_remote_decode"`
	DoRemotePrefill bool    `json:"do_remote_prefill"`
	RemoteEngineID  *string `json:"remote_engine_id"`
	RemoteHost      *string `json:"remote_host"`
	RemotePort      *int    `json:"remote_port"`
	// TransferID is ours: the id of the KV kept on the prefill server.
	TransferID *string `json:"transfer_id"`
}

// check validates the params; stream and n are the request's.
func (k *kvTransferParams) check(stream bool, n int) error {
	const param = "kv_transfer_params"
	switch {
	case k.DoRemoteDecode && k.DoRemotePrefill:
		return invalid(param, "do_remote_decode (this server prefills) and do_remote_prefill (this server decodes) cannot both be true.")
	case k.DoRemoteDecode && stream:
		return invalid(param+".do_remote_decode", "A prefill for a remote decode answers once: set stream to false.")
	case k.DoRemoteDecode && n != 1:
		return invalid(param+".do_remote_decode", "A prefill for a remote decode has one choice: set n to 1.")
	case !k.DoRemotePrefill:
		return nil
	case k.RemoteHost == nil || *k.RemoteHost == "":
		return invalid(param+".remote_host", "do_remote_prefill needs remote_host, as the prefill's response gave it.")
	case k.RemotePort == nil || *k.RemotePort < 1 || *k.RemotePort > 65535:
		return invalid(param+".remote_port", "do_remote_prefill needs remote_port (1 to 65535), as the prefill's response gave it.")
	case k.TransferID == nil || *k.TransferID == "":
		return invalid(param+".transfer_id", "do_remote_prefill needs transfer_id, as the prefill's response gave it.")
	}
	return nil
}

// addr is the decode side's peer address.
func (k *kvTransferParams) addr() string {
	return net.JoinHostPort(*k.RemoteHost, strconv.Itoa(*k.RemotePort))
}

// active reports whether the params ask for anything.
func (k *kvTransferParams) active() bool { return k != nil && (k.DoRemoteDecode || k.DoRemotePrefill) }

// transferFailed logs a prefill whose KV could not be kept for its remote
// decode; the answer then has no kv_transfer_params.
func (h *handler) transferFailed(r *http.Request) func(error) {
	return func(err error) {
		h.log.Warn("the prefill's KV could not be kept for the remote decode; answering without kv_transfer_params", "path", r.URL.Path, "err", err)
	}
}

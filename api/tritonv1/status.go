package tritonv1

import (
	"net/http"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/api/v2/infer"
	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

// requestIDs numbers every request the v1 API answers (HTTP and gRPC), for
// RequestStatus.request_id; 0 means unknown, so the first is 1.
var requestIDs atomic.Uint64

// outcome is how the v1 API reports an error: its RequestStatusCode, the
// HTTP status that goes with it, and the message.
type outcome struct {
	code pb.RequestStatusCode
	http int
	msg  string
}

// outcomeOf maps an error to the v1 API's status. It is the one place that
// does so, for HTTP and gRPC alike: infer's kinds become INVALID_ARG (400),
// NOT_FOUND (404), UNAVAILABLE (503: not ready, shutting down, the queue
// full; 504 past the deadline), UNKNOWN (a client that went away) and
// INTERNAL (500). nil is SUCCESS.
func outcomeOf(err error) outcome {
	if err == nil {
		return outcome{code: pb.RequestStatusCode_SUCCESS, http: http.StatusOK}
	}
	e := infer.AsError(err)
	o := outcome{code: pb.RequestStatusCode_INTERNAL, http: http.StatusInternalServerError, msg: e.Msg}
	switch e.Code {
	case infer.Invalid:
		o.code, o.http = pb.RequestStatusCode_INVALID_ARG, http.StatusBadRequest
	case infer.NotFound:
		o.code, o.http = pb.RequestStatusCode_NOT_FOUND, http.StatusNotFound
	case infer.Unavailable, infer.Exhausted:
		o.code, o.http = pb.RequestStatusCode_UNAVAILABLE, http.StatusServiceUnavailable
	case infer.Deadline:
		o.code, o.http = pb.RequestStatusCode_UNAVAILABLE, http.StatusGatewayTimeout
	case infer.Canceled:
		o.code, o.http = pb.RequestStatusCode_UNKNOWN, 499
	}
	return o
}

// requestStatus is the RequestStatus of one answer.
func requestStatus(err error) *pb.RequestStatus {
	o := outcomeOf(err)
	return &pb.RequestStatus{Code: o.code, Msg: o.msg, ServerId: infer.ServerName, RequestId: requestIDs.Add(1)}
}

// headerText is m as one line of text protobuf for an HTTP header:
// ASCII only (other bytes escaped), no newlines, readable by the reference
// parsers (marshalText).
func headerText(m proto.Message) string { return string(marshalText(m, true)) }

package workercodec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// Invalid is an INVALID_ARGUMENT status naming the field param, with an
// ERROR_CODE_INVALID detail.
func Invalid(param, format string, args ...any) error {
	return Status(codes.InvalidArgument, &workerpb.Error{
		Code: workerpb.ErrorCode_ERROR_CODE_INVALID, Message: fmt.Sprintf(format, args...), Param: param,
	})
}

// Status is a status of code with e as its detail.
func Status(code codes.Code, e *workerpb.Error) error {
	st := status.New(code, e.Message)
	if d, err := st.WithDetails(e); err == nil {
		st = d
	}
	return st.Err()
}

// ErrorDetail returns the typed error a worker attached to a status, or
// nil. The head maps it back with DecodeError.
func ErrorDetail(err error) *workerpb.Error {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if e, ok := d.(*workerpb.Error); ok {
			return e
		}
	}
	return nil
}

// PrefixParam prefixes the param of err's detail (the fields of a nested
// message: "request." for PrefillRequest.request).
func PrefixParam(err error, prefix string) error {
	e := ErrorDetail(err)
	if e == nil || e.Param == "" {
		return err
	}
	e.Param = prefix + e.Param
	return Status(status.Code(err), e)
}

// schedulerParams are the wire names of scheduler.Request's fields.
var schedulerParams = map[scheduler.Field]string{
	scheduler.FieldPrompt: "prompt", scheduler.FieldN: "n", scheduler.FieldMaxTokens: "max_tokens",
	scheduler.FieldMinTokens: "min_tokens", scheduler.FieldRequests: "request", scheduler.FieldThinking: "thinking",
}

// errorCodes pairs each typed error code with its gRPC code and the
// scheduler's (or core's) sentinel errors it stands for: EncodeError
// gives a code to an error that is one of its sentinels (base or also, in
// this order), DecodeError gives base back (scheduler.ErrEngine where
// base is nil). ERROR_CODE_QUEUE_FULL carries the Retry-After of a
// *scheduler.QueueFullError; any other error is ERROR_CODE_ENGINE,
// INTERNAL.
var errorCodes = []errorCode{
	{workerpb.ErrorCode_ERROR_CODE_QUEUE_FULL, codes.ResourceExhausted, scheduler.ErrQueueFull, nil},
	{workerpb.ErrorCode_ERROR_CODE_TOO_LONG, codes.InvalidArgument, scheduler.ErrTooLong, nil},
	{workerpb.ErrorCode_ERROR_CODE_LIMIT, codes.InvalidArgument, scheduler.ErrLimit, nil},
	// The engine's refusal of an input, as the scheduler's.
	{workerpb.ErrorCode_ERROR_CODE_INVALID, codes.InvalidArgument, scheduler.ErrInvalid, []error{engine.ErrInvalidBatch, core.ErrCannotEmbed}},
	{workerpb.ErrorCode_ERROR_CODE_CLOSED, codes.Unavailable, scheduler.ErrClosed, nil},
	{workerpb.ErrorCode_ERROR_CODE_DEADLINE, codes.DeadlineExceeded, scheduler.ErrDeadline, nil},
	// A KV lease, which only PullKV and ReleaseKV look up (between
	// workers): the head never decodes it.
	{workerpb.ErrorCode_ERROR_CODE_NOT_FOUND, codes.NotFound, nil, []error{core.ErrNoLease}},
	// A worker's refusal of an RPC its role does not serve; no sentinel.
	{workerpb.ErrorCode_ERROR_CODE_ROLE, codes.FailedPrecondition, nil, nil},
}

type errorCode struct {
	code   workerpb.ErrorCode
	status codes.Code
	base   error
	also   []error
}

// matches reports whether err is one of c's sentinels.
func (c *errorCode) matches(err error) bool {
	if c.base != nil && errors.Is(err, c.base) {
		return true
	}
	for _, s := range c.also {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// EncodeError is the wire form of an error that ended a request or kept
// it from starting: its ErrorCode by errorCodes, a
// *scheduler.RequestError's numbers in request, a
// *scheduler.QueueFullError's Retry-After.
func EncodeError(err error) *workerpb.Error {
	e := &workerpb.Error{Message: err.Error(), Code: workerpb.ErrorCode_ERROR_CODE_ENGINE}
	var re *scheduler.RequestError
	if errors.As(err, &re) {
		e.Param = schedulerParams[re.Field]
		e.Request = &workerpb.RequestLimit{Field: string(re.Field), Value: int32(re.Value), Limit: int32(re.Limit),
			PromptTokens: int32(re.PromptTokens), MaxTokens: int32(re.MaxTokens)}
	}
	var qf *scheduler.QueueFullError
	if errors.As(err, &qf) {
		e.RetryAfterMs = qf.RetryAfter.Milliseconds()
	}
	for i := range errorCodes {
		if errorCodes[i].matches(err) {
			e.Code = errorCodes[i].code
			break
		}
	}
	return e
}

// StatusCode is the gRPC code of a typed error.
func StatusCode(c workerpb.ErrorCode) codes.Code {
	for _, ec := range errorCodes {
		if ec.code == c {
			return ec.status
		}
	}
	return codes.Internal
}

// SubmitStatus is the status of an error from a submission: EncodeError's
// detail under StatusCode's code.
func SubmitStatus(err error) error {
	e := EncodeError(err)
	return Status(StatusCode(e.Code), e)
}

// DecodeError maps a worker's typed error to the scheduler error the API
// layer maps to HTTP, as it would for the same failure locally (the
// inverse of EncodeError).
func DecodeError(e *workerpb.Error) error {
	if e.Code == workerpb.ErrorCode_ERROR_CODE_QUEUE_FULL {
		ra := time.Duration(e.GetRetryAfterMs()) * time.Millisecond
		return fmt.Errorf("%w: %s", &scheduler.QueueFullError{RetryAfter: max(ra, time.Second)}, e.Message)
	}
	base := scheduler.ErrEngine
	for _, c := range errorCodes {
		if c.code == e.Code && c.base != nil {
			base = c.base
		}
	}
	if rl := e.GetRequest(); rl != nil && (errors.Is(base, scheduler.ErrTooLong) || errors.Is(base, scheduler.ErrLimit) || errors.Is(base, scheduler.ErrInvalid)) {
		// The scheduler's own error: the API layer words it (token counts,
		// its field names) as serve does.
		return &scheduler.RequestError{Field: scheduler.Field(rl.Field), Err: base, Value: int(rl.Value), Limit: int(rl.Limit),
			PromptTokens: int(rl.PromptTokens), MaxTokens: int(rl.MaxTokens)}
	}
	if e.Param != "" {
		return fmt.Errorf("%w: %s (%s)", base, e.Message, e.Param)
	}
	return fmt.Errorf("%w: %s", base, e.Message)
}

// MediaStatus is the status of a PrepareMedia failure: a *media.Error (an
// item the model cannot read, or no projector) is INVALID_ARGUMENT naming
// the item, with the message of its Err alone, so that DecodeMediaError
// rebuilds the same *media.Error on the head.
func MediaStatus(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	var me *media.Error
	if errors.As(err, &me) {
		return Invalid(me.Param, "%s", me.Err.Error())
	}
	return Status(codes.Internal, &workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_ENGINE, Message: err.Error()})
}

// DecodeMediaError maps PrepareMedia's typed error back: INVALID_ARGUMENT
// naming an item is the *media.Error the worker's model returned (with
// media.ErrNoProjector when that was its message); the rest as
// DecodeError.
func DecodeMediaError(e *workerpb.Error) error {
	if e.GetCode() != workerpb.ErrorCode_ERROR_CODE_INVALID || e.GetParam() == "" {
		return DecodeError(e)
	}
	err := errors.New(e.GetMessage())
	if e.GetMessage() == media.ErrNoProjector.Error() {
		err = media.ErrNoProjector
	}
	return &media.Error{Param: e.GetParam(), Err: err}
}

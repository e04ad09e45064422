package core

import (
	"time"

	"github.com/llmserve/llmserve/scheduler"
)

// Observer receives what the engine core measures. Implementations must be
// fast and safe for concurrent use; the metrics package provides one.
type Observer interface {
	// StepDone reports one executed step, after the scheduler applied it
	// and before its outputs reach their streams.
	StepDone(s StepInfo)
	// FirstToken reports a request's time to first token.
	FirstToken(ttft time.Duration)
	// RequestDone reports a finished request.
	RequestDone(r RequestInfo)
	// EngineRestarted reports that the executor failed and was replaced.
	EngineRestarted()
}

// StepInfo describes one executed step.
type StepInfo struct {
	Duration time.Duration
	// Tokens decoded in the step; Prefill and Decode split them by kind.
	Tokens, PrefillTokens, DecodeTokens int
	// Generated is the number of tokens sampled (accepted draft tokens
	// included); Failures the sequences the engine failed.
	Generated, Failures int
	// DecodeSamples has, for each sequence that decoded, the tokens it got
	// in the step: 1, or more with speculative decoding (the accepted draft
	// tokens and the sampled one), which all waited the step's duration.
	DecodeSamples []int
	// BlocksStored and BlocksRemoved count the prefix cache's events of the
	// step (the KV manager's outbox is drained every step).
	BlocksStored, BlocksRemoved int
	// Paced is what the long-prefill limit did in the step: how many
	// tokens long prompts computed beside decoding sequences, and the
	// most they could (Limit 0: none were paced).
	Paced scheduler.Pacing
	Stats scheduler.Stats
}

// RequestInfo describes a finished request.
type RequestInfo struct {
	E2E    time.Duration
	Usage  scheduler.Usage
	Reason scheduler.FinishReason
	// PromptChunks is how many steps its prompt took
	// (scheduler.RequestOutput.PromptChunks); 0 when none of it was
	// computed.
	PromptChunks int
}

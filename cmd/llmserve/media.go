package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/llmserve/llmserve/api/openai"
)

// mediaFlags bound the images and audio of chat requests (serve, worker
// and head share them).
type mediaFlags struct {
	maxPerPrompt   int
	maxBytes       int64
	allowedDomains []string
}

func addMediaFlags(fl *pflag.FlagSet, f *mediaFlags) {
	fl.IntVar(&f.maxPerPrompt, "max-media-per-prompt", openai.DefaultMaxMediaPerPrompt, "most images and audio clips one chat request may carry (0: none accepted)")
	fl.Int64Var(&f.maxBytes, "max-media-bytes", openai.DefaultMaxMediaBytes, "largest image or audio clip, in bytes after base64 decoding or fetching; with --max-body-bytes 0 the OpenAI routes' body limit grows to hold one in base64")
	fl.StringSliceVar(&f.allowedDomains, "allowed-media-domains", nil, "host names whose http(s) image URLs the server fetches (comma-separated or repeated, as vLLM's flag); default: none (only data: URLs and base64)")
}

// validate checks the flags at start-up.
func (f *mediaFlags) validate() error {
	return firstFailed(
		flagCheck{f.maxPerPrompt < 0, fmt.Errorf("--max-media-per-prompt: %d is negative (0 accepts no media)", f.maxPerPrompt)},
		flagCheck{f.maxBytes < 1, fmt.Errorf("--max-media-bytes: %d: at least 1", f.maxBytes)},
	)
}

// options are the flags as api/openai takes them.
func (f *mediaFlags) options() openai.MediaOptions {
	o := openai.MediaOptions{MaxPerPrompt: f.maxPerPrompt, MaxBytes: f.maxBytes, AllowedDomains: f.allowedDomains}
	if o.MaxPerPrompt == 0 {
		o.MaxPerPrompt = -1 // MediaOptions' 0 is the default
	}
	return o
}

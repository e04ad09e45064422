package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"

	"github.com/llmserve/llmserve/api/openai"
)

// TestMediaFlags checks the media flags' defaults and how they reach
// api/openai: --max-media-per-prompt 0 refuses media (MediaOptions' 0 is
// its default).
func TestMediaFlags(t *testing.T) {
	fl := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	var f mediaFlags
	addMediaFlags(fl, &f)
	if err := fl.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o := f.options(); o.MaxPerPrompt != openai.DefaultMaxMediaPerPrompt || o.MaxBytes != openai.DefaultMaxMediaBytes || len(o.AllowedDomains) != 0 {
		t.Errorf("defaults %+v", o)
	}
	if err := fl.Parse([]string{"--max-media-per-prompt", "0", "--max-media-bytes", "1024", "--allowed-media-domains", "a.example,b.example", "--allowed-media-domains", "c.example"}); err != nil {
		t.Fatal(err)
	}
	if err := f.validate(); err != nil {
		t.Fatal(err)
	}
	if o := f.options(); o.MaxPerPrompt >= 0 || o.MaxBytes != 1024 || !slices.Equal(o.AllowedDomains, []string{"a.example", "b.example", "c.example"}) {
		t.Errorf("options %+v", o)
	}
}

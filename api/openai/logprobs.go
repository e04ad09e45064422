package openai

import (
	"strconv"
	"unicode/utf8"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/tokenizer"
)

// Logprob formatting. Token text comes from Tokenizer.TokenText (so a lone
// byte-fallback token reads "bytes:\xe2"); "bytes" are the token's raw bytes
// as the vocabulary has them. Stop tokens are not listed: they are not part
// of the text (they are counted in usage).

// tokenNames renders tokens in logprob listings: their text, or
// "token_id:<id>" when the client asked for return_tokens_as_token_ids
// (vLLM's extension for clients that need exact ids).
type tokenNames struct {
	tok   *tokenizer.Tokenizer
	asIDs bool
}

func (n tokenNames) TokenText(t int32) string {
	if n.asIDs {
		return "token_id:" + strconv.Itoa(int(t))
	}
	return n.tok.TokenText(t)
}

func (n tokenNames) Vocab() tokenizer.Vocab { return n.tok.Vocab() }

func (n tokenNames) NewDecoder() *tokenizer.Decoder { return n.tok.NewDecoder() }

// chatLogprobsOf formats entries in the chat form.
func chatLogprobsOf(tok tokenNames, entries []tokenLogprob) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatTokenLogprob, len(entries))}
	for i, e := range entries {
		top := make([]chatTopEntry, len(e.lp.Top))
		for j, t := range e.lp.Top {
			top[j] = chatEntryOf(tok, t)
		}
		out.Content[i] = chatTokenLogprob{chatTopEntry: chatEntryOf(tok, e.lp.Chosen), TopLogprobs: top}
	}
	return out
}

// chatEntryOf is t's entry in the chat form, chosen or alternative.
func chatEntryOf(tok tokenNames, t engine.TokenLogprob) chatTopEntry {
	return chatTopEntry{Token: tok.TokenText(t.Token), Logprob: logprob(t.Logprob), Bytes: tokenBytes(tok, t.Token)}
}

func tokenBytes(tok tokenNames, t int32) []int {
	piece := tok.Vocab().Piece(t, true)
	b := make([]int, len(piece))
	for i, c := range piece {
		b[i] = int(c)
	}
	return b
}

// completionLogprobsBuilder accumulates the legacy (completions) form.
type completionLogprobsBuilder struct {
	tok tokenNames
	lp  completionLogprobs
}

func newCompletionLogprobs(tok tokenNames) *completionLogprobsBuilder {
	return &completionLogprobsBuilder{tok: tok, lp: completionLogprobs{
		Tokens: []string{}, TokenLogprobs: []*logprob{}, TopLogprobs: []topLogprob{}, TextOffset: []int{},
	}}
}

// addPrompt lists an echoed prompt: its first token has null logprobs (no
// model predicted it), the others those in lps (lps[k] is for token k+1;
// missing entries are null too). Offsets count characters of the prompt
// as its tokens decode.
func (b *completionLogprobsBuilder) addPrompt(toks []int32, lps []engine.Logprobs) {
	dec := b.tok.NewDecoder()
	offset := 0
	for k, t := range toks {
		b.lp.Tokens = append(b.lp.Tokens, b.tok.TokenText(t))
		b.lp.TextOffset = append(b.lp.TextOffset, offset)
		offset += utf8.RuneCountInString(dec.Add(t))
		if k == 0 || k-1 >= len(lps) {
			b.lp.TokenLogprobs = append(b.lp.TokenLogprobs, nil)
			b.lp.TopLogprobs = append(b.lp.TopLogprobs, nil)
			continue
		}
		b.addPosition(lps[k-1])
	}
}

// addGenerated lists generated tokens; base is the character offset of the
// generated text in the choice's text (the echoed prompt's length).
func (b *completionLogprobsBuilder) addGenerated(entries []tokenLogprob, base int) {
	for _, e := range entries {
		b.lp.Tokens = append(b.lp.Tokens, b.tok.TokenText(e.lp.Chosen.Token))
		b.lp.TextOffset = append(b.lp.TextOffset, base+e.offset)
		b.addPosition(e.lp)
	}
}

// addPosition appends the chosen token's logprob and the {token: logprob}
// map of the alternatives, with the chosen token added when it is not among
// them (as OpenAI and vLLM list it).
func (b *completionLogprobsBuilder) addPosition(l engine.Logprobs) {
	v := logprob(l.Chosen.Logprob)
	b.lp.TokenLogprobs = append(b.lp.TokenLogprobs, &v)
	top := make(topLogprob, 0, len(l.Top)+1)
	chosenListed := false
	for _, t := range l.Top {
		top = append(top, topEntry{token: b.tok.TokenText(t.Token), lp: logprob(t.Logprob)})
		chosenListed = chosenListed || t.Token == l.Chosen.Token
	}
	if !chosenListed {
		top = append(top, topEntry{token: b.tok.TokenText(l.Chosen.Token), lp: v})
	}
	b.lp.TopLogprobs = append(b.lp.TopLogprobs, top)
}

func (b *completionLogprobsBuilder) result() *completionLogprobs { return &b.lp }

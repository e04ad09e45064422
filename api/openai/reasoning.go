package openai

// Reasoning models (serve --reasoning-parser) write their reasoning between
// <think> and </think>. With a parser set, the chat endpoint returns it as
// message.reasoning_content (delta.reasoning_content when streaming) and
// only the rest as content, as vLLM does; the tags never reach the client
// and reasoning never leaks into content (tokenizer.ReasoningParser holds
// back what may still become a tag). The split is the output processor's
// (frontend.Output, as on V2 generate): chat, Messages and Responses turn it
// on with generation.split; the completions endpoint returns the
// raw text.

// chatMessageOf is the answer message of a choice: its text as content,
// its thinking (split by the output processor when the model has a
// reasoning parser) as reasoning_content.
func chatMessageOf(reasoning, text string) chatMessage {
	msg := chatMessage{Role: "assistant", Content: contentOf(text)}
	if reasoning != "" {
		msg.ReasoningContent = &reasoning
	}
	return msg
}

// setChatDelta fills a chunk's delta with what a choice settled: its
// reasoning, and its content (also when empty, if the chunk carries
// logprobs and no reasoning). It reports whether the delta says anything.
func setChatDelta(d *chatDelta, reasoning, content string, hasLogprobs bool) bool {
	if reasoning != "" {
		d.ReasoningContent = &reasoning
	}
	if content != "" || (hasLogprobs && reasoning == "") {
		d.Content = contentOf(content)
	}
	return d.ReasoningContent != nil || d.Content != nil
}

package catalog

import (
	"net/http"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/media"
)

// Codex CLI learns a model's metadata (context window, reasoning levels,
// the tools it offers, its base instructions) from a model catalog. For a
// custom provider it fetches one only when the provider names it
// (model_providers.<id>.model_catalog_url, with [features]
// api_key_model_discovery = true), as GET <url>?client_version=<version>,
// and reads {"models": [ModelInfo, ...]}; a model missing from the catalog
// runs on fallback metadata with a warning ("Model metadata for ... not
// found"). GET /v1/models with a client_version parameter therefore adds
// that list beside OpenAI's data: model_catalog_url can be this server's
// /v1/models. Without the parameter the answer is OpenAI's list alone.

// codexModel is one ModelInfo of Codex's catalog, with the fields Codex
// 0.171 requires and those this server can say.
type codexModel struct {
	Slug                       string             `json:"slug"`
	DisplayName                string             `json:"display_name"`
	Description                string             `json:"description"`
	ContextWindow              int                `json:"context_window"`
	DefaultReasoningLevel      *string            `json:"default_reasoning_level,omitempty"`
	SupportedReasoningLevels   []codexEffort      `json:"supported_reasoning_levels"`
	ShellType                  string             `json:"shell_type"`
	Visibility                 string             `json:"visibility"`
	SupportedInAPI             bool               `json:"supported_in_api"`
	Priority                   int                `json:"priority"`
	ModelMessages              codexModelMessages `json:"model_messages"`
	SupportsReasoningSummaries bool               `json:"supports_reasoning_summaries"`
	SupportVerbosity           bool               `json:"support_verbosity"`
	ApplyPatchToolType         string             `json:"apply_patch_tool_type"`
	TruncationPolicy           codexTruncation    `json:"truncation_policy"`
	SupportsParallelToolCalls  bool               `json:"supports_parallel_tool_calls"`
	ExperimentalSupportedTools []string           `json:"experimental_supported_tools"`
	InputModalities            []string           `json:"input_modalities"`
}

type codexEffort struct {
	Effort      string `json:"effort"`
	Description string `json:"description"`
}

type codexModelMessages struct {
	InstructionsTemplate string `json:"instructions_template"`
}

type codexTruncation struct {
	Mode  string `json:"mode"`
	Limit int    `json:"limit"`
}

// codexInstructions are the base instructions the catalog gives Codex for
// every model (Codex requires some; its own are written for its models).
const codexInstructions = `You are a coding agent running in the Codex CLI, working in the user's workspace.
Use the tools you are given to read files, run commands and edit code. Prefer small, verifiable steps: look before you change, and check what you changed.
Keep changes to what the user asked for, and say plainly what you did and what is left.
When you are done, end your turn with a short answer to the user.`

// codexModelOf is m's catalog entry. The context window is the model's
// max_model_len; a model with a reasoning parser offers low, medium and
// high effort (the thinking budget, docs/API.md); apply_patch is offered
// as a freeform (custom, grammar-constrained) tool.
func codexModelOf(m openai.Model) codexModel {
	c := codexModel{
		Slug: m.Name(), DisplayName: m.Name(), Description: "Served by llmserve.",
		ContextWindow: m.MaxModelLen(), SupportedReasoningLevels: []codexEffort{},
		ShellType: "shell_command", Visibility: "list", SupportedInAPI: true,
		ModelMessages:      codexModelMessages{InstructionsTemplate: codexInstructions},
		ApplyPatchToolType: "freeform", TruncationPolicy: codexTruncation{Mode: "tokens", Limit: 10000},
		SupportsParallelToolCalls: true, ExperimentalSupportedTools: []string{}, InputModalities: []string{"text"},
	}
	if frontend.ReasoningParserOf(m) != "" {
		medium := "medium"
		c.DefaultReasoningLevel = &medium
		c.SupportedReasoningLevels = []codexEffort{
			{Effort: "low", Description: "Short thinking (a quarter of max_output_tokens, or 1024 tokens)"},
			{Effort: "medium", Description: "Medium thinking (half of max_output_tokens, or 4096 tokens)"},
			{Effort: "high", Description: "Long thinking (three quarters of max_output_tokens, or 16384 tokens)"},
		}
	}
	if mm, ok := m.(openai.MediaModel); ok && mm.ReadsMedia(media.Image) {
		c.InputModalities = append(c.InputModalities, "image")
	}
	return c
}

// codexCatalog is GET /v1/models?client_version=...: OpenAI's list and
// Codex's catalog of the same models.
type codexCatalog struct {
	modelList
	Models []codexModel `json:"models"`
}

// wantsCodexCatalog reports whether a GET /v1/models is Codex's catalog
// request.
func wantsCodexCatalog(r *http.Request) bool {
	return r.URL.Query().Has("client_version")
}

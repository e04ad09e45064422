package benchio

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// FirstModel returns the first model id listed by GET {base}/models, sent
// through client with apiKey (when set) as a bearer token and bounded by
// timeout.
func FirstModel(ctx context.Context, client *http.Client, base, apiKey string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	if apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("list models: HTTP %d: %s (pass --model to skip this lookup)", resp.StatusCode, OrUnknown(ErrorBody(body)))
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return "", fmt.Errorf("list models: decode %s: %w", base+"/models", err)
	}
	for _, m := range list.Data {
		if m.ID != "" {
			return m.ID, nil
		}
	}
	return "", fmt.Errorf("list models: %s lists no model; pass --model", base+"/models")
}

package openai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
)

// fetch reads an image URL (an http or https URL, checked by
// checkImageURL) from a host of --allowed-media-domains, with the
// request's context, the fetch timeout, redirects only to allowed hosts,
// and the byte limit enforced while reading. Every failure but the
// client's going away is a 400 naming param.
func (c *mediaConfig) fetch(ctx context.Context, rawURL, param string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, invalid(param, "%s is not a valid URL: %v.", param, err)
	}
	if len(c.allowed) == 0 {
		return nil, invalid(param, "%s: this server fetches no image URLs; send the image inline as a data: URL (data:image/png;base64,...), or start the server with --allowed-media-domains naming the hosts it may fetch from.", param)
	}
	if err := c.checkURL(u); err != nil {
		return nil, invalid(param, "%s: %v; the server fetches images only from the hosts it was started with (--allowed-media-domains).", param, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, invalid(param, "%s: %v.", param, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return nil, invalid(param, "%s: %s did not answer within %s.", param, u.Redacted(), c.client.Timeout)
		}
		if errors.Is(err, errMediaHost) {
			return nil, invalid(param, "%s: %v; the server follows redirects only to the hosts of --allowed-media-domains.", param, unwrapURLError(err))
		}
		return nil, invalid(param, "%s: the image could not be fetched: %v.", param, unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, invalid(param, "%s: fetching %s answered %s.", param, u.Redacted(), resp.Status)
	}
	if resp.ContentLength > c.maxBytes {
		return nil, c.res.TooLarge(param, resp.ContentLength)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, invalid(param, "%s: reading the image from %s failed: %v.", param, u.Redacted(), err)
	}
	if int64(len(data)) > c.maxBytes {
		return nil, invalid(param, "%s: the image at %s has more than the limit of %d bytes per image or audio clip (--max-media-bytes).", param, u.Redacted(), c.maxBytes)
	}
	return data, nil
}

// unwrapURLError drops *url.Error's "Get \"...\": " prefix.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

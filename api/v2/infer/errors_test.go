package infer

import "testing"

func TestCodeHTTPStatus(t *testing.T) {
	for c, want := range map[Code]int{Invalid: 400, NotFound: 404, Unavailable: 503, Exhausted: 429, Deadline: 504, Canceled: 499, Internal: 500, 0: 500, Internal + 1: 500} {
		if got := c.HTTPStatus(); got != want {
			t.Errorf("Code(%d).HTTPStatus() = %d, want %d", c, got, want)
		}
	}
}

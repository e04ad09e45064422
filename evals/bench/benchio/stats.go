package benchio

import (
	"slices"
	"time"
)

// ErrorSample is one distinct failure message and how often it occurred.
type ErrorSample struct {
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// maxErrorSamples bounds the distinct messages kept for a report.
const maxErrorSamples = 5

// AddErrorSample counts msg in samples: one more of a message already
// there, or a new sample while there are fewer than five.
func AddErrorSample(samples []ErrorSample, msg string) []ErrorSample {
	for i := range samples {
		if samples[i].Message == msg {
			samples[i].Count++
			return samples
		}
	}
	if len(samples) < maxErrorSamples {
		samples = append(samples, ErrorSample{Message: msg, Count: 1})
	}
	return samples
}

// Median returns the median of xs (the mean of the middle two for an even
// count); xs must not be empty. xs is not reordered.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Millis converts a duration to float milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

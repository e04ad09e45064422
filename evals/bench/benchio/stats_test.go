package benchio

import "testing"

func TestErrorSamplesBounded(t *testing.T) {
	var samples []ErrorSample
	for i := range 20 {
		samples = AddErrorSample(samples, string(rune('a'+i%8)))
	}
	if len(samples) != maxErrorSamples {
		t.Fatalf("kept %d samples, want %d", len(samples), maxErrorSamples)
	}
	if samples[0] != (ErrorSample{"a", 3}) {
		t.Errorf("first sample = %v, want {a 3}", samples[0])
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{3, 1, 2, 10}
	if got := Median(xs); got != 2.5 {
		t.Errorf("Median(%v) = %v, want 2.5", xs, got)
	}
	if xs[0] != 3 {
		t.Errorf("Median reordered its argument: %v", xs)
	}
	if got := Median([]float64{7, 1, 4}); got != 4 {
		t.Errorf("Median of three = %v, want 4", got)
	}
}

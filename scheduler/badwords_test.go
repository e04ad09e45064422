package scheduler

import (
	"slices"
	"testing"
)

func TestBadWordBans(t *testing.T) {
	words := [][]int32{{7}, {3, 4}, {1, 2, 5}, {}}
	tests := []struct {
		output []int32
		want   []int32
	}{
		{nil, []int32{9, 7}},
		{[]int32{3}, []int32{9, 7, 4}},
		{[]int32{8, 1, 2}, []int32{9, 7, 5}},
		{[]int32{1, 2, 3}, []int32{9, 7, 4}},
		{[]int32{2}, []int32{9, 7}},
	}
	base := []int32{9}
	for _, tt := range tests {
		got := badWordBans(base, words, tt.output)
		if !slices.Equal(got, tt.want) {
			t.Errorf("output %v: bans %v, want %v", tt.output, got, tt.want)
		}
		if !slices.Equal(base, []int32{9}) {
			t.Fatalf("the base ban list changed: %v", base)
		}
	}
}

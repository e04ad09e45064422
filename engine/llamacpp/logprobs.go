package llamacpp

import (
	"math"
	"sort"

	"github.com/llmserve/llmserve/engine"
)

// logSumExp returns log(sum(exp(x))) computed stably; logprob(i) is
// x[i] - logSumExp(x).
func logSumExp(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	if math.IsInf(float64(m), -1) {
		return m
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v - m))
	}
	return m + float32(math.Log(sum))
}

// topLogprobs returns the k most likely tokens of x, most likely first; ties
// go to the lower token id.
func topLogprobs(x []float32, k int, lse float32) []engine.TokenLogprob {
	if k <= 0 {
		return nil
	}
	k = min(k, len(x))
	// A bounded insertion list: k is at most 20 in practice.
	top := make([]engine.TokenLogprob, 0, k+1)
	for i, v := range x {
		if len(top) == k && v <= top[k-1].Logprob {
			continue
		}
		j := sort.Search(len(top), func(j int) bool { return top[j].Logprob < v })
		top = append(top, engine.TokenLogprob{})
		copy(top[j+1:], top[j:])
		top[j] = engine.TokenLogprob{Token: int32(i), Logprob: v}
		if len(top) > k {
			top = top[:k]
		}
	}
	for i := range top {
		top[i].Logprob -= lse
	}
	return top
}

// logprobsOf describes position x with target as the chosen token.
func logprobsOf(x []float32, target int32, k int) engine.Logprobs {
	lse := logSumExp(x)
	lp := engine.Logprobs{Top: topLogprobs(x, k, lse)}
	lp.Chosen.Token = target
	if target >= 0 && int(target) < len(x) {
		lp.Chosen.Logprob = x[target] - lse
		lp.Rank = 1
		for _, v := range x {
			if v > x[target] {
				lp.Rank++
			}
		}
	}
	return lp
}

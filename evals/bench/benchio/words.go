package benchio

import (
	"math/rand/v2"
	"strings"
)

// words is the fixed vocabulary prompts are drawn from: common, short,
// lowercase English words. Preceded by a space, each is a single token in the
// BPE vocabularies of the common model families (Llama, Mistral, Qwen, GPT-2
// style), so a prompt of n words is close to n tokens there. Small or unusual
// vocabularies split them further. Changing this list changes every prompt:
// results from different lists are not comparable.
var words = [...]string{
	"the", "of", "and", "to", "in", "is", "you", "that", "it", "he",
	"was", "for", "on", "are", "as", "with", "his", "they", "at", "be",
	"this", "have", "from", "or", "one", "had", "by", "word", "but", "not",
	"what", "all", "were", "we", "when", "your", "can", "said", "there", "use",
	"an", "each", "which", "she", "do", "how", "their", "if", "will", "up",
	"other", "about", "out", "many", "then", "them", "these", "so", "some", "her",
	"would", "make", "like", "him", "into", "time", "has", "look", "two", "more",
	"write", "go", "see", "number", "no", "way", "could", "people", "my", "than",
	"first", "water", "been", "call", "who", "its", "now", "find", "long", "down",
	"day", "did", "get", "come", "made", "may", "part", "over", "new", "sound",
	"take", "only", "little", "work", "know", "place", "year", "live", "me", "back",
	"give", "most", "very", "after", "thing", "our", "just", "name", "good", "man",
	"think", "say", "great", "where", "help", "through", "much", "before", "line", "right",
	"too", "mean", "old", "any", "same", "tell", "boy", "follow", "came", "want",
	"show", "also", "around", "form", "three", "small", "set", "put", "end", "does",
	"another", "well", "large", "must", "big", "even", "such", "because", "turn", "here",
	"why", "ask", "went", "men", "read", "need", "land", "different", "home", "us",
	"move", "try", "kind", "hand", "picture", "again", "change", "off", "play", "spell",
	"air", "away", "animal", "house", "point", "page", "letter", "mother", "answer", "found",
	"study", "still", "learn", "should", "world", "high", "every", "near", "add", "food",
	"between", "own", "below", "country", "plant", "last", "school", "father", "keep", "tree",
	"never", "start", "city", "earth", "eye", "light", "thought", "head", "under", "story",
	"saw", "left", "few", "while", "along", "might", "close", "something", "seem", "next",
	"hard", "open", "example", "begin", "life", "always", "those", "both", "paper", "together",
	"got", "group", "often", "run", "important", "until", "children", "side", "feet", "car",
	"mile", "night", "walk", "white", "sea", "began", "grow", "took", "river", "four",
}

// Intn returns a number in [0, n) (n > 0). The modulo bias is below 2^-50
// for the sizes used here.
func Intn(r *rand.Rand, n int) int { return int(r.Uint64() % uint64(n)) }

// AppendWords appends n random words of the vocabulary, space separated,
// to b, drawing each with Intn.
func AppendWords(b *strings.Builder, r *rand.Rand, n int) {
	for range n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[Intn(r, len(words))])
	}
}

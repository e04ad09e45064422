// Package stories260k embeds the default model, Andrej Karpathy's
// TinyStories stories260K (MIT, see LICENSE and README.md), and llama.cpp's
// reference greedy output for it.
//
// llama.cpp loads models from files, so File writes the embedded bytes once
// to a content-addressed file in the user cache dir and returns its path.
package stories260k
